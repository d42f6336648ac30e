# request: Give me a markdown checklist of all warning findings, formatted "- [ ] file:line message".
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

items = []
for p, r in zip(files, reviews):
    for f in sorted(r["findings"], key=lambda f: f["line"]):
        if f["severity"] == "warning":
            items.append(f"- [ ] {p}:{f['line']} {f['message']}")
checklist = "\n".join(items) if items else "(no warnings)"
checklist
