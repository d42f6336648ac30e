# request: Return a dict mapping each file to the first line of its source.
import asyncio

paths = await list_files(pattern="**/*")
texts = await asyncio.gather(*[read_file(path=p) for p in paths])
{p: (t.splitlines()[0] if t.splitlines() else "") for p, t in zip(paths, texts)}
