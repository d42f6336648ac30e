# request: Review only the files whose name contains "order", focusing on bugs, and summarize all their findings together.
import asyncio

all_files = await list_files(pattern="**/*")
files = [p for p in all_files if "order" in p.split("/")[-1]]
if not files:
    result = "No files whose name contains 'order'."
else:
    sources = await asyncio.gather(*[read_file(path=p) for p in files])
    reviews = await asyncio.gather(*[reviewer(path=p, source=s, focus="bugs") for p, s in zip(files, sources)])
    lines = []
    for p, r in zip(files, reviews):
        for f in r["findings"]:
            lines.append(f"{p}:{f['line']} [{f['severity']}] {f['message']}")
    if lines:
        summary = await summarizer(task="Summarize these bug findings from a code review of the order-related files:\n" + "\n".join(lines))
    else:
        summary = "The reviewer found no bugs in: " + ", ".join(files)
    result = {"files": files, "findings": lines, "summary": summary}
result
