# request: Which files import os? Read them and tell me which ones actually use it.
import asyncio
import re

matches = await search_text(pattern=r"^\s*(import os\b|from os\b|import .*\bos\b)", glob="**/*.py")
importers = sorted({m["path"] for m in matches})
sources = await asyncio.gather(*[read_file(path=p) for p in importers])

result = {}
for path, src in zip(importers, sources):
    body = [
        line for line in src.splitlines()
        if not re.match(r"\s*(import|from)\s", line)
    ]
    uses = any(re.search(r"\bos\.", line) for line in body)
    result[path] = "uses os" if uses else "imports os but does not use it"
{"importers": importers, "usage": result}
