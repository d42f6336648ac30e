"""Best of N: draft three answers in parallel, score each with a critic, refine the winner.

    python examples/best_of_n.py                # offline demo: a scripted planner sends WORKFLOW
    HARNESS_MODEL=openai:gpt-4.1-mini python examples/best_of_n.py   # a real model writes its own

The workflow asks `drafter` for three drafts in different tones (a gather), grades each against the
request with `critic` (another gather), picks the best score in plain Python and has `editor` apply
the critic's reasons to it.
"""

from __future__ import annotations

import argparse
import json
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

REQUEST = (
    'Write an email to the team about the 2.0 release: resumable runs, replay from the journal, '
    'fork at any call, and a live trace view in the terminal.'
)

PROMPT = (
    f'{REQUEST}\n\nDraft three versions in different tones (concise, thorough, friendly), score each one '
    "against the request with the critic, then have the editor improve the best one using the critic's "
    'reasons. Tell me the three scores and which tone won.'
)

# The centrepiece: the script the orchestrator's model sends to `run_workflow`, type-checked against
# the catalog and run in the Monty sandbox. `REQUEST` is pasted in as a string literal.
WORKFLOW = f'''\
import asyncio

request = {json.dumps(REQUEST)}
tones = ["concise", "thorough", "friendly"]

# N drafts in parallel, then N grades in parallel: two fan-outs, each joined by gather.
drafts = await asyncio.gather(*[drafter(task=f"{{request}} (tone: {{tone}})") for tone in tones])
scores = await asyncio.gather(*[critic(question=request, answer=draft) for draft in drafts])

# Pick the winner in plain Python (a Score is a dict with "score" and "reasons"): the highest
# score, and on a tie the shorter draft.
best = max(range(len(drafts)), key=lambda i: (scores[i]["score"], -len(drafts[i])))
feedback = "; ".join(scores[best]["reasons"]) or "polish it"
final = await editor(draft=drafts[best], feedback=feedback)

{{"scores": {{tone: s["score"] for tone, s in zip(tones, scores)}}, "winner": tones[best], "answer": final}}
'''


def report(value: Any) -> str:
    """The offline planner's answer, written from the script's value."""
    if not isinstance(value, dict) or 'scores' not in value:
        return f'The workflow returned: {value}'
    scores = ', '.join(f'{tone} {score}/10' for tone, score in value['scores'].items())
    winner = f'Winner: {value["winner"]} (best score; a tie goes to the shorter draft).'
    return f'Scores: {scores}. {winner}\n\n{value["answer"]}'


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
    parser = argparse.ArgumentParser(description='Best of N: draft, score, refine.')
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
        live = LiveCalls(console)
        orchestrator = h.orchestrator(offline_planner() if choice.demo else choice.model, on_event=live)
        result = orchestrator.run_sync(PROMPT)

    console.print()
    console.print(result.output, markup=False)
    for run_id in live.run_ids:
        console.print(f'[dim]run {run_id} (see it with: harness show {run_id} --store {args.store})[/dim]')


if __name__ == '__main__':
    main()
