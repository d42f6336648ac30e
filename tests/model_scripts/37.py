# request: Search for "except:" (bare except) and review the files that have one.
import asyncio

matches = await search_text(pattern=r"^\s*except\s*:", glob="**/*.py")
files = sorted({m["path"] for m in matches})


async def review(path: str) -> Review:
    return await reviewer(path=path, source=await read_file(path=path), focus="bugs")


reviews = await asyncio.gather(*[review(p) for p in files])
{
    "bare_excepts": [f"{m['path']}:{m['line']}" for m in matches],
    "reviews": {r["path"]: {"verdict": r["verdict"], "summary": r["summary"], "findings": r["findings"]} for r in reviews},
}
