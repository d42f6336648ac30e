# request: List all the files and their sizes in lines.
import asyncio

paths = await list_files(pattern="**/*")
texts = await asyncio.gather(*[read_file(path=p) for p in paths])
sizes = {p: len(t.splitlines()) for p, t in zip(paths, texts)}
for p, n in sizes.items():
    print(f"{p}: {n} lines")
sizes
