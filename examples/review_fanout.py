"""Code review fan-out with a join: review every file of a project in parallel, then report.

    python examples/review_fanout.py                # offline demo: a scripted planner sends WORKFLOW
    HARNESS_MODEL=openai:gpt-4.1-mini python examples/review_fanout.py   # a real model writes its own

The workflow lists the Python files under `sample_project/` with the workspace tools, fans the
`reviewer` sub-agent out over them, keeps the reviews that succeeded (`settle_all`), joins them in
plain Python (counts by severity, the worst file) and has `summarizer` write the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from example_runner import run_example

from harness import Harness
from subagents import register_builtins
from tools.workspace import register_workspace_tools

WORKSPACE = Path(__file__).resolve().parent  # the scripts may read files under examples/, nothing else

PROMPT = (
    'Review every Python file under sample_project/ in parallel. Report how many findings there are of '
    'each severity, which file is worst, every error with its file and line, and a short summary.'
)

# The centrepiece: the script the orchestrator's model sends to `run_workflow`. It is type-checked
# against the catalog (`h.stubs()`), then runs in the Monty sandbox; every `await` is a call the
# harness dispatches, journals and shows live.
WORKFLOW = """\
import asyncio

files = await list_files(pattern="sample_project/**/*.py")
sources = await asyncio.gather(*[read_file(path=f) for f in files])

# Fan out: one review per file, all in flight at once. settle_all never raises, so one failed
# review does not cancel the others: each outcome is {"ok": True, "value": ...} or {"ok": False, ...}.
outcomes = await settle_all(*[reviewer(path=f, source=s) for f, s in zip(files, sources)])
reviews = [o["value"] for o in outcomes if o["ok"]]
failed = [f for f, o in zip(files, outcomes) if not o["ok"]]

# Join: plain Python over typed results (a Review is a dict with "path", "verdict", "findings").
counts = {"error": 0, "warning": 0, "info": 0}
weight = {"error": 10, "warning": 3, "info": 1}
badness = {}
errors = []
for review in reviews:
    badness[review["path"]] = 0
    for finding in review["findings"]:
        counts[finding["severity"]] += 1
        badness[review["path"]] += weight[finding["severity"]]
        if finding["severity"] == "error":
            errors.append(f"{review['path']}:{finding['line']} {finding['message']}")
worst = max(badness, key=lambda path: badness[path]) if badness else None

digest = "\\n".join(review["path"] + ": " + review["summary"] for review in reviews)
summary = await summarizer(task="Summarise this code review for the team:\\n" + digest)
{"files": len(files), "reviewed": len(reviews), "failed": failed, "counts": counts,
 "worst_file": worst, "errors": errors, "summary": summary}
"""


def report(value: Any) -> str:
    """The offline planner's answer, written from the script's value."""
    if not isinstance(value, dict) or 'counts' not in value:
        return f'The workflow returned: {value}'
    counts = ', '.join(f'{n} {severity}' for severity, n in value['counts'].items())
    lines = [
        f'Reviewed {value["reviewed"]} of {value["files"]} files: {counts}.',
        f'Worst file: {value["worst_file"]}.',
        *(f'- {error}' for error in value['errors']),
    ]
    if value['failed']:
        lines.append(f'Could not review: {", ".join(value["failed"])}')
    return '\n'.join([*lines, '', value['summary']])


def register(h: Harness, model: Any) -> None:
    """The catalog this example's orchestrator sees (`model` is None offline: the built-ins' stand-ins)."""
    register_builtins(h, model)
    register_workspace_tools(h, WORKSPACE)


def main() -> None:
    run_example(
        description='Code review fan-out with a join.',
        prompt=PROMPT,
        workflow=WORKFLOW,
        report=report,
        register=register,
    )


if __name__ == '__main__':
    main()
