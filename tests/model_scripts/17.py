# request: Review all files; if any review fails, still give me the others.
paths = await list_files(pattern="**/*.py")


async def review(path: str) -> Review:
    src = await read_file(path=path)
    return await reviewer(path=path, source=src)


outcomes = await settle_all(*[review(p) for p in paths])

reviews = []
failures = {}
for path, o in zip(paths, outcomes):
    if o["ok"]:
        reviews.append(o["value"])
    else:
        failures[path] = o["error"]

{
    "reviews": [
        {"path": r["path"], "verdict": r["verdict"], "findings": len(r["findings"]), "summary": r["summary"]}
        for r in reviews
    ],
    "failed": failures,
}
