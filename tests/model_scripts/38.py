# request: Summarize the findings of each file separately, in parallel, then join the summaries.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])


async def summarize(r: Review) -> str:
    if not r["findings"]:
        return "No findings."
    lines = "\n".join(f"line {f['line']} [{f['severity']}]: {f['message']}" for f in r["findings"])
    return await summarizer(task=f"Summarize these code review findings for {r['path']}:\n{lines}")


summaries = await asyncio.gather(*[summarize(r) for r in reviews])
"\n\n".join(f"## {r['path']} ({r['verdict']})\n{s}" for r, s in zip(reviews, summaries))
