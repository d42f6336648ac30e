# request: Draft an email to the team about the review results and have the editor make it more formal and add a title, one after the other.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

lines = []
for p, r in zip(files, reviews):
    lines.append(f"{p}: verdict {r['verdict']}, {len(r['findings'])} findings. {r['summary']}")
    for f in r["findings"]:
        if f["severity"] in ("warning", "error"):
            lines.append(f"  - line {f['line']} [{f['severity']}] {f['message']}")

draft = await drafter(task=(
    "Write an email to the development team reporting the results of a code review of the project. "
    "Cover the overall picture, which files need work and the main problems. Review results:\n" + "\n".join(lines)
))
formal = await editor(draft=draft, feedback="more formal")
final = await editor(draft=formal, feedback="add a title")
final
