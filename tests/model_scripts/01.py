# request: Review every Python file in the project for bugs and tell me which ones need work.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(
    *[reviewer(path=p, source=s, focus="bugs") for p, s in zip(paths, sources)]
)

needs_work = [r["path"] for r in reviews if r["verdict"] == "needs_work"]
{
    "needs_work": needs_work,
    "reviews": [
        {"path": r["path"], "verdict": r["verdict"], "summary": r["summary"]}
        for r in reviews
    ],
}
