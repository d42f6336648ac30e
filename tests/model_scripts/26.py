# request: Count how many findings of each severity there are across the whole project.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

counts = {"info": 0, "warning": 0, "error": 0}
for r in reviews:
    for f in r["findings"]:
        counts[f["severity"]] += 1
counts["total"] = sum(counts.values())
counts
