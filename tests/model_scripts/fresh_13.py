# request: Review each file with focus "style" and focus "bugs" separately and tell me which focus found more issues overall.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])

style_reviews, bug_reviews = await asyncio.gather(
    asyncio.gather(*[reviewer(path=p, source=s, focus="style") for p, s in zip(files, sources)]),
    asyncio.gather(*[reviewer(path=p, source=s, focus="bugs") for p, s in zip(files, sources)]),
)

style_total = sum(len(r["findings"]) for r in style_reviews)
bugs_total = sum(len(r["findings"]) for r in bug_reviews)
per_file = {
    p: {"style": len(sr["findings"]), "bugs": len(br["findings"])}
    for p, sr, br in zip(files, style_reviews, bug_reviews)
}
if style_total > bugs_total:
    winner = "style"
elif bugs_total > style_total:
    winner = "bugs"
else:
    winner = "tie"
{"style_total": style_total, "bugs_total": bugs_total, "winner": winner, "per_file": per_file}
