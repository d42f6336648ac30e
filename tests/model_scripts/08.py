# request: Draft a status report about the code review results (review all files first), then edit it to be shorter.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

facts = []
for r in reviews:
    facts.append(f"- {r['path']}: {r['verdict']}, {len(r['findings'])} findings. {r['summary']}")

draft = await drafter(
    task="Write a status report on the code review of our Python project. Cover the overall state, "
    "which files need work and the main issues. Facts:\n" + "\n".join(facts)
)
short = await editor(draft=draft, feedback="shorter")
short
