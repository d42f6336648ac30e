# request: Rank the files by how risky they look: errors count triple, warnings double, info once.
import asyncio
from typing import Any

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

weights = {"error": 3, "warning": 2, "info": 1}
ranking: list[dict[str, Any]] = []
for p, r in zip(files, reviews):
    counts = {"error": 0, "warning": 0, "info": 0}
    for f in r["findings"]:
        counts[f["severity"]] += 1
    risk = sum(weights[sev] * n for sev, n in counts.items())
    ranking.append({"path": p, "risk": risk, "errors": counts["error"], "warnings": counts["warning"], "info": counts["info"]})

ranking.sort(key=lambda x: x["risk"], reverse=True)
for i, row in enumerate(ranking, 1):
    print(f"{i}. {row['path']}: risk {row['risk']} ({row['errors']} errors, {row['warnings']} warnings, {row['info']} info)")
ranking
