# request: Produce a JSON string summarizing the review of all files.
import asyncio
import json

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

summary = {
    "files_reviewed": len(reviews),
    "needs_work": [r["path"] for r in reviews if r["verdict"] == "needs_work"],
    "total_findings": sum(len(r["findings"]) for r in reviews),
    "files": [
        {
            "path": r["path"],
            "verdict": r["verdict"],
            "findings": len(r["findings"]),
            "errors": sum(1 for f in r["findings"] if f["severity"] == "error"),
            "warnings": sum(1 for f in r["findings"] if f["severity"] == "warning"),
            "summary": r["summary"],
        }
        for r in reviews
    ],
}
json.dumps(summary, indent=2)
