"""Code review fan-out with a join: review every file of a project in parallel, then report.

    python examples/review_fanout.py                # offline demo: a scripted planner sends WORKFLOW
    HARNESS_MODEL=openai:gpt-4.1-mini python examples/review_fanout.py   # a real model writes its own

The workflow lists the Python files under `sample_project/` with the workspace tools, fans the
`reviewer` sub-agent out over them, keeps the reviews that succeeded (`settle_all`), joins them in
plain Python (counts by severity, the worst file) and has `summarizer` write the summary.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from rich.console import Console

from harness import Harness
from harness.live import LiveCalls
from harness.models import choose_model
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
WORKFLOW = '''\
import asyncio
import json

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

summary = await summarizer(task="Summarise this code review for the team:\\n" + json.dumps(reviews))
{"files": len(files), "reviewed": len(reviews), "failed": failed, "counts": counts,
 "worst_file": worst, "errors": errors, "summary": summary}
'''


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


def offline_planner() -> FunctionModel:
    """Plays the orchestrator's model offline: sends WORKFLOW to `run_workflow`, answers from its value."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, RetryPromptPart):  # the script failed its check or raised
                return ModelResponse(parts=[TextPart(f'The workflow failed:\n{part.model_response()}')])
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(report(part.content))])
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': WORKFLOW})])

    return FunctionModel(respond, model_name='offline-planner')


def main() -> None:
    parser = argparse.ArgumentParser(description='Code review fan-out with a join.')
    parser.add_argument('--store', default='.harness/runs.db', help='run store (default: %(default)s)')
    args = parser.parse_args()

    console = Console(highlight=False, soft_wrap=True)
    choice = choose_model()  # HARNESS_MODEL, HARNESS_BASE_URL or a provider key; else the offline demo
    if choice.demo:
        console.print('[yellow]Offline demo: no model configured, so a scripted planner sends WORKFLOW '
                      'and the sub-agents answer by rule (set HARNESS_MODEL to use a real model).[/yellow]')
    else:
        console.print(f'[dim]model: {choice.label}[/dim]')

    with Harness(store=args.store) as h:
        register_builtins(h, model=None if choice.demo else choice.model)
        register_workspace_tools(h, WORKSPACE)
        live = LiveCalls(console)
        orchestrator = h.orchestrator(offline_planner() if choice.demo else choice.model, on_event=live)
        result = orchestrator.run_sync(PROMPT)

    console.print()
    console.print(result.output, markup=False)
    for run_id in live.run_ids:
        console.print(f'[dim]run {run_id} (see it with: harness show {run_id} --store {args.store})[/dim]')


if __name__ == '__main__':
    main()
