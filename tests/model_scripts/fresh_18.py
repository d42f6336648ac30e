# request: Compare the two largest files (by characters): review both and tell me which one the reviewer liked better.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
sized = sorted(zip(files, sources), key=lambda t: len(t[1]), reverse=True)[:2]

reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in sized])

weights = {"error": 3, "warning": 2, "info": 1}
def badness(r):
    return sum(weights[f["severity"]] for f in r["findings"])

info = []
for (p, s), r in zip(sized, reviews):
    info.append({"path": p, "chars": len(s), "verdict": r["verdict"], "findings": len(r["findings"]), "badness": badness(r), "summary": r["summary"]})

a, b = info[0], info[1]
ra, rb = reviews[0], reviews[1]
if ra["verdict"] != rb["verdict"]:
    better = a["path"] if ra["verdict"] == "ok" else b["path"]
elif badness(ra) != badness(rb):
    better = a["path"] if badness(ra) < badness(rb) else b["path"]
else:
    better = "tie"
{"better": better, "files": info}
