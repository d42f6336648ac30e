# request: Return the set of all distinct verdicts across files along with how many files got each.
import asyncio
from collections import Counter

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

counts = Counter(r["verdict"] for r in reviews)
dict(counts)
