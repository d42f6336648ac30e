# request: Review every file, then return the paths sorted by number of findings descending.
import asyncio


async def main():
    paths = await list_files(pattern="**/*.py")
    sources = await asyncio.gather(*[read_file(path=p) for p in paths])
    reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])
    ordered = sorted(reviews, key=lambda r: len(r["findings"]), reverse=True)
    return [r["path"] for r in ordered]


await main()
