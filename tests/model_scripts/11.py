# request: Review all files focusing on bugs; list only the error-severity findings sorted by file and line.
import asyncio


async def review(path: str) -> Review:
    src = await read_file(path=path)
    return await reviewer(path=path, source=src, focus="bugs")


paths = await list_files(pattern="**/*.py")
reviews = await asyncio.gather(*[review(p) for p in paths])

errors = [
    {"path": r["path"], "line": f["line"], "message": f["message"]}
    for r in reviews
    for f in r["findings"]
    if f["severity"] == "error"
]
errors.sort(key=lambda e: (e["path"], e["line"]))
errors
