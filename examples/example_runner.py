"""What every example does around its workflow: pick a model, run the orchestrator with a live view
of the calls, print the answer and the run id.

With a model configured (`HARNESS_MODEL`, `HARNESS_BASE_URL` or a provider key), the orchestrator
runs on it and writes its own script from the example's PROMPT. Offline, a scripted planner (a
pydantic-ai `FunctionModel`) sends the example's WORKFLOW to `run_workflow` and answers from the
value with the example's `report`; the engine underneath (check, sandbox, dispatch, store, traces)
is the real one either way.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from rich.console import Console

from harness import Harness
from harness._cli._live import LiveCalls
from harness._ui._models import choose_model


def scripted_planner(workflow: str, report: Callable[[Any], str]) -> FunctionModel:
    """Plays the orchestrator's model offline: sends `workflow` to `run_workflow`, answers from its value."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart) and getattr(part, 'outcome', None) == 'retried':
                return ModelResponse(parts=[TextPart(f'The workflow failed:\n{part.content}')])
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(report(part.content))])
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': workflow})])

    return FunctionModel(respond, model_name='offline-planner')


def run_example(
    *,
    description: str,
    prompt: str,
    workflow: str,
    report: Callable[[Any], str],
    register: Callable[[Harness, Any], None],
    epilogue: Callable[[Console], None] | None = None,
) -> None:
    """Parse `--store`, build the Harness (`register(h, model)`; model is None offline), run one turn."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--store', default='.harness/runs.db', help='run store (default: %(default)s)')
    args = parser.parse_args()

    console = Console(highlight=False, soft_wrap=True)
    choice = choose_model()
    if choice.demo:
        console.print(
            '[yellow]Offline demo: no model configured, so a scripted planner sends WORKFLOW '
            'to the real engine (set HARNESS_MODEL to use a real model).[/yellow]'
        )
    else:
        console.print(f'[dim]model: {choice.label}[/dim]')

    with Harness(store=args.store) as h:
        register(h, None if choice.demo else choice.model)
        live = LiveCalls(console)
        model = scripted_planner(workflow, report) if choice.demo else choice.model
        result = h.orchestrator(model, on_event=live).run_sync(prompt)

    console.print()
    console.print(result.output, markup=False)
    if epilogue is not None:
        epilogue(console)
    for run_id in live.run_ids:
        console.print(f'[dim]run {run_id} (see it with: harness show {run_id} --store {args.store})[/dim]')
