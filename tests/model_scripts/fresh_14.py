# request: Summarize the project in one paragraph using the summarizer on the concatenated first 20 lines of each file.
import asyncio

files = await list_files(pattern="**/*")
results = await settle_all(*[read_file(path=p) for p in files])

parts = []
for p, res in zip(files, results):
    if res["ok"]:
        head = "\n".join(res["value"].splitlines()[:20])
        parts.append(f"=== {p} ===\n{head}")

summary = await summarizer(task="Summarize this Python project in one paragraph, based on the first 20 lines of each of its files:\n" + "\n\n".join(parts))
summary
