# request: For every file that needs work, draft a one-paragraph fix plan, all in parallel.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

to_fix = [r for r in reviews if r["verdict"] == "needs_work"]


def plan_task(r: Review) -> str:
    findings = "\n".join(f"- line {f['line']} ({f['severity']}): {f['message']}" for f in r["findings"])
    return (
        f"Write a one-paragraph plan to fix the problems found in {r['path']}. "
        f"Review summary: {r['summary']}\nFindings:\n{findings}"
    )


plans = await asyncio.gather(*[drafter(task=plan_task(r)) for r in to_fix])
{r["path"]: plan for r, plan in zip(to_fix, plans)}
