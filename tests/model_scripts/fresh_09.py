# request: Review everything; for files that are ok return just the name, for the others the list of their warning and error messages.
import asyncio
from typing import Any

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

ok_files: list[str] = []
needs_work: dict[str, list[str]] = {}
for p, r in zip(files, reviews):
    if r["verdict"] == "ok":
        ok_files.append(p)
    else:
        needs_work[p] = [
            f"line {f['line']} ({f['severity']}): {f['message']}"
            for f in r["findings"]
            if f["severity"] in ("warning", "error")
        ]
result: dict[str, Any] = {"ok": ok_files, "needs_work": needs_work}
result
