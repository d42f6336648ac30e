# request: Tell me how many files there are and how many total lines of code.
import asyncio

paths = await list_files(pattern="**/*")
texts = await asyncio.gather(*[read_file(path=p) for p in paths])
per_file = {p: len(t.splitlines()) for p, t in zip(paths, texts)}
total = sum(per_file.values())
print(f"{len(paths)} files, {total} lines in total")
{"files": len(paths), "total_lines": total, "per_file": per_file}
