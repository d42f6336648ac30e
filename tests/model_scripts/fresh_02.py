# request: Give me, per severity, the list of files that have at least one finding of that severity.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

by_severity: dict[str, list[str]] = {"error": [], "warning": [], "info": []}
for p, r in zip(files, reviews):
    severities = {f["severity"] for f in r["findings"]}
    for sev in severities:
        by_severity[sev].append(p)
for sev in by_severity:
    by_severity[sev].sort()
by_severity
