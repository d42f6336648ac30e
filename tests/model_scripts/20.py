# request: Compute the average number of findings per file across the project.
import asyncio


async def count_findings(path: str) -> int:
    source = await read_file(path=path)
    r = await reviewer(path=path, source=source)
    return len(r["findings"])


paths = await list_files(pattern="**/*.py")
counts = await asyncio.gather(*[count_findings(p) for p in paths])
average = sum(counts) / len(counts) if counts else 0.0
{"per_file": dict(zip(paths, counts)), "total": sum(counts), "average": round(average, 2)}
