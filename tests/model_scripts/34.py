# request: Find the most common finding message across all reviews.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

counts: dict[str, int] = {}
for r in reviews:
    for f in r["findings"]:
        msg = f["message"].strip()
        counts[msg] = counts.get(msg, 0) + 1

if counts:
    top = max(counts, key=lambda k: counts[k])
    result = {"message": top, "count": counts[top],
              "top5": sorted(counts.items(), key=lambda kv: kv[1], reverse=True)[:5]}
else:
    result = {"message": None, "count": 0}
result
