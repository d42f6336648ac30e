# request: Is there any file with no findings at all? If so name it, otherwise say which has the fewest.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

counts = {p: len(r["findings"]) for p, r in zip(files, reviews)}
clean = [p for p, n in counts.items() if n == 0]
if clean:
    answer = "Files with no findings: " + ", ".join(clean)
else:
    fewest = min(counts.values())
    best = [p for p, n in counts.items() if n == fewest]
    answer = f"No file is free of findings; fewest ({fewest}): " + ", ".join(best)
print(counts)
answer
