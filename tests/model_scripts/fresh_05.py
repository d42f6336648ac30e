# request: For each file, how many lines are comments (starting with #)? Return the percentage per file, rounded to one decimal.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])

result: dict[str, float] = {}
for p, src in zip(files, sources):
    lines = src.splitlines()
    comments = sum(1 for line in lines if line.strip().startswith("#"))
    result[p] = round(100 * comments / len(lines), 1) if lines else 0.0
result
