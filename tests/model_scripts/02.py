# request: Which file has the most findings? Give me the counts per file too.
import asyncio


async def review_file(path: str) -> Review:
    source = await read_file(path=path)
    return await reviewer(path=path, source=source)


paths = await list_files(pattern="**/*.py")
reviews = await asyncio.gather(*[review_file(p) for p in paths])

counts = {r["path"]: len(r["findings"]) for r in reviews}
top = max(counts, key=lambda p: counts[p])
{"most_findings": top, "count": counts[top], "counts": counts}
