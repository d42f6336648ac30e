"""A research loop that survives a flaky source: retry each failed lookup, then summarise.

    python examples/research_loop.py                # offline demo: a scripted planner sends WORKFLOW
    HARNESS_MODEL=openai:gpt-4.1-mini python examples/research_loop.py   # a real model writes its own

`lookup` is a custom sub-agent over a small set of notes, behind a search backend that fails on the
first attempts for some queries (deterministically, so every run shows the same thing). The workflow
runs one retry loop per question (`for` + `try`/`except`, up to 3 attempts), all questions in
parallel, then has `summarizer` join what it found.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from example_runner import run_example

from harness import Harness
from subagents import register_builtins

# -- the flaky source ------------------------------------------------------------------------------

NOTES = [
    'A snapshot is the paused Monty interpreter at a call, a few KB, stored with the run after every pause.',
    'The journal records every call of a run, its arguments and its result, before the script continues.',
    'Resume restarts an interrupted run from its newest snapshot; calls already in the journal are not repeated.',
    'Replay runs a stored script again and answers every call from the journal, so nothing external is called.',
    'Fork starts a new run from a stored one: calls before the fork point are replayed, the fork call gets the '
    'result you give, and later calls run live.',
    'A side-effecting tool that was in flight at a crash is not re-run on resume unless you allow it, and it '
    'can deduplicate with the idempotency key of its CallContext.',
]

# How many times the backend fails a query before answering it. Queries not listed here: every other
# one (by length) fails once. 3 or more failures means the script's 3 attempts all fail.
FAILURES = {'what is in a snapshot': 1, 'how does replay work': 2, 'how do forks work': 3}
ATTEMPTS: dict[str, int] = {}  # query -> attempts so far


STOPWORDS = {'what', 'does', 'work', 'kept', 'with', 'from', 'that', 'this', 'there', 'when', 'every'}


def best_notes(query: str, top: int = 2) -> list[str]:
    """The notes sharing the most words (crudely stemmed) with the query."""

    def stems(text: str) -> set[str]:
        return {w[:5] for w in re.findall(r'[a-z]+', text.lower()) if len(w) > 3 and w not in STOPWORDS}

    wanted = stems(query)
    scored = sorted(NOTES, key=lambda note: -len(wanted & stems(note)))
    return [note for note in scored[:top] if wanted & stems(note)]


async def lookup(*, query: str) -> str:
    """Search the project notes for `query`; returns the most relevant ones. Flaky: retry on failure."""
    ATTEMPTS[query] = ATTEMPTS.get(query, 0) + 1
    await asyncio.sleep(0.05)  # the network
    if ATTEMPTS[query] <= FAILURES.get(query, len(query) % 2):
        raise TimeoutError('search backend timed out')
    return ' '.join(best_notes(query)) or f'no notes match {query!r}'


# -- the workflow ----------------------------------------------------------------------------------

PROMPT = (
    'Research how this harness makes runs durable: what is in a snapshot, how resume, replay and forks '
    'work, and how side effects are kept safe. Use lookup (it is flaky: retry each failed lookup up to 3 '
    'times), then summarise the findings and say which questions got no answer.'
)

# The centrepiece: the script the orchestrator's model sends to `run_workflow`, type-checked against
# the catalog and run in the Monty sandbox. A failed call raises RuntimeError in the script.
WORKFLOW = """\
import asyncio

questions = [
    "what is in a snapshot",
    "how does resume work",
    "how does replay work",
    "how do forks work",
    "how are side effects kept safe",
]


async def lookup_with_retries(query: str) -> str | None:
    for attempt in range(1, 4):
        try:
            return await lookup(query=query)
        except RuntimeError as error:
            print(f"{query!r}: attempt {attempt} failed: {error}")
    return None  # three strikes: give up on this question, keep the others


# One retry loop per question, all questions at once.
found = await asyncio.gather(*[lookup_with_retries(q) for q in questions])
findings = [notes for notes in found if notes is not None]
unanswered = [q for q, notes in zip(questions, found) if notes is None]

summary = await summarizer(task="Summarise these research notes on durable runs:\\n" + "\\n".join(findings))
{"answered": len(findings), "unanswered": unanswered, "summary": summary}
"""


def report(value: Any) -> str:
    """The offline planner's answer, written from the tool result: the script's value and its printed log."""
    printed = value.get('output', '') if isinstance(value, dict) else ''
    value = value.get('result', value) if isinstance(value, dict) else value
    if not isinstance(value, dict) or 'summary' not in value:
        return f'The workflow returned: {value}'
    lines = [f'Retries:\n{printed.rstrip()}', ''] if printed else []
    unanswered = ', '.join(value['unanswered']) or 'none'
    lines.append(f'Answered {value["answered"]} questions; no answer for: {unanswered}.')
    return '\n'.join([*lines, '', f'Summary: {value["summary"]}'])


def register(h: Harness, model: Any) -> None:
    """The catalog this example's orchestrator sees (`model` is None offline: the built-ins' stand-ins)."""
    register_builtins(h, model)
    # As if `lookup` were decorated with @h.subagent(expose_errors=True): a sub-agent (it counts
    # against max_agent_calls) whose failures reach the script with their message, not only their type.
    h.subagent(expose_errors=True)(lookup)


def main() -> None:
    run_example(
        description='A research loop with retries.', prompt=PROMPT, workflow=WORKFLOW, report=report, register=register
    )


if __name__ == '__main__':
    main()
