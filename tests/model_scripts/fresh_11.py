# request: Build a word frequency table of identifiers (words made of letters and underscores, 4+ chars) across all files and return the top 10.
import asyncio
import re
from collections import Counter

files = await list_files(pattern="**/*")
results = await settle_all(*[read_file(path=p) for p in files])

counter: Counter[str] = Counter()
for res in results:
    if res["ok"]:
        counter.update(re.findall(r"[A-Za-z_]{4,}", res["value"]))

counter.most_common(10)
