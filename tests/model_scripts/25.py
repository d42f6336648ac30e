# request: Get all findings with severity warning or error, then ask the summarizer for the top 3 issues to fix.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

serious = [
    f"{r['path']}:{f['line']} [{f['severity']}] {f['message']}"
    for r in reviews
    for f in r["findings"]
    if f["severity"] in ("warning", "error")
]

if serious:
    top3 = await summarizer(
        task="From these code review findings, pick the top 3 issues to fix first and explain why briefly:\n"
        + "\n".join(serious)
    )
else:
    top3 = "No warning or error findings."

{"findings": serious, "top_3": top3}
