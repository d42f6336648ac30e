# request: Produce a dict from severity to the average line number of findings with that severity.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

lines_by_sev: dict[str, list[int]] = {}
for r in reviews:
    for f in r["findings"]:
        lines_by_sev.setdefault(f["severity"], []).append(f["line"])

averages = {sev: round(sum(ls) / len(ls), 2) for sev, ls in lines_by_sev.items()}
averages
