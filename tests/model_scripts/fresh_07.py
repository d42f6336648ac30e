# request: Find the three longest lines in the whole project, with file and line number.
import asyncio

files = await list_files(pattern="**/*")
results = await settle_all(*[read_file(path=p) for p in files])

entries: list[tuple[int, str, int, str]] = []
for p, res in zip(files, results):
    if not res["ok"]:
        continue
    text = res["value"]
    for i, line in enumerate(text.splitlines(), 1):
        entries.append((len(line), p, i, line))

entries.sort(key=lambda e: e[0], reverse=True)
[{"path": p, "line": n, "length": length, "text": text} for length, p, n, text in entries[:3]]
