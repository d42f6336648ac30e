# request: Find the longest file and review it.
import asyncio

paths = await list_files(pattern="**/*.py")
texts = await asyncio.gather(*[read_file(path=p) for p in paths])
line_counts = [len(t.splitlines()) for t in texts]
idx = max(range(len(paths)), key=lambda i: line_counts[i])
longest, source = paths[idx], texts[idx]

review = await reviewer(path=longest, source=source)
{"file": longest, "lines": line_counts[idx], "review": review}
