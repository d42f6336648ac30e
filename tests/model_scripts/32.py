# request: Check whether any file is longer than 100 lines and review only those.
import asyncio

paths = await list_files(pattern="**/*.py")
texts = await asyncio.gather(*[read_file(path=p) for p in paths])
long_files = [(p, t) for p, t in zip(paths, texts) if len(t.splitlines()) > 100]

if not long_files:
    result = {"long_files": [], "message": "No file is longer than 100 lines."}
else:
    reviews = await asyncio.gather(*[reviewer(path=p, source=t) for p, t in long_files])
    result = {
        "long_files": [p for p, _ in long_files],
        "reviews": reviews,
    }
result
