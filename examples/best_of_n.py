"""Best of N: draft three answers in parallel, score each with a critic, refine the winner.

    python examples/best_of_n.py                # offline demo: a scripted planner sends WORKFLOW
    HARNESS_MODEL=openai:gpt-4.1-mini python examples/best_of_n.py   # a real model writes its own

The workflow asks `drafter` for three drafts in different tones (a gather), grades each against the
request with `critic` (another gather), picks the best score in plain Python and has `editor` apply
the critic's reasons to it.
"""

from __future__ import annotations

import json
from typing import Any

from example_runner import run_example

from harness import Harness
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
WORKFLOW = f"""\
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
"""


def report(value: Any) -> str:
    """The offline planner's answer, written from the script's value."""
    if not isinstance(value, dict) or 'scores' not in value:
        return f'The workflow returned: {value}'
    scores = ', '.join(f'{tone} {score}/10' for tone, score in value['scores'].items())
    winner = f'Winner: {value["winner"]} (best score; a tie goes to the shorter draft).'
    return f'Scores: {scores}. {winner}\n\n{value["answer"]}'


def register(h: Harness, model: Any) -> None:
    """The catalog this example's orchestrator sees (`model` is None offline: the built-ins' stand-ins)."""
    register_builtins(h, model)


def main() -> None:
    run_example(
        description='Best of N: draft, score, refine.',
        prompt=PROMPT,
        workflow=WORKFLOW,
        report=report,
        register=register,
    )


if __name__ == '__main__':
    main()
