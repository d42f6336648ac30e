# request: Check whether the number of imports per file (lines starting with import or from) correlates with number of findings: return both numbers per file.
import asyncio
import math

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

rows = []
xs: list[float] = []
ys: list[float] = []
for p, src, r in zip(files, sources, reviews):
    imports = sum(1 for line in src.splitlines() if line.startswith("import ") or line.startswith("from "))
    findings = len(r["findings"])
    rows.append({"path": p, "imports": imports, "findings": findings})
    xs.append(float(imports))
    ys.append(float(findings))

n = len(xs)
mx = sum(xs) / n
my = sum(ys) / n
cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
vx = sum((x - mx) ** 2 for x in xs)
vy = sum((y - my) ** 2 for y in ys)
corr = cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else None
{"per_file": rows, "pearson_r": round(corr, 3) if corr is not None else None}
