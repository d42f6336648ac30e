"""A stored run as plain data, for `harness show --json`, `harness trace` and the studio's JSON API alike
(no rich or Starlette in it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._records import CallRecord, RunRow, SpanDict, cost_of, progress_dropped, progress_entries
from .._store import RunStore, Turn
from .._tracing._names import ATTR_SEQ


def exceptions_by_seq(spans: Iterable[SpanDict]) -> dict[int, list[dict[str, str]]]:
    """The exceptions each call's span recorded (a callee's real error), by the call's `seq`."""
    found: dict[int, list[dict[str, str]]] = {}
    for span in spans:
        seq = (span.get('attributes') or {}).get(ATTR_SEQ)
        if span.get('exceptions') and isinstance(seq, int):
            found.setdefault(seq, []).extend(span.get('exceptions') or [])
    return found


def trace_spans(db: RunStore, run: RunRow) -> list[SpanDict]:
    """What `harness trace RUN` draws: the run's stored spans and, when `ask`/`chat`/the studio stored them,
    those of the orchestrator's agent runs of its turn (their model requests with their tokens, the tool
    executions; one more agent run each time the turn continued after approvals), so the tree has the
    orchestrator at its root as an OpenTelemetry backend shows it. None without the run's."""
    own = db.spans(run.run_id)
    if not own or not run.orchestrator_run_id:
        return own
    return [*db.orchestrator_spans(run.orchestrator_run_id), *own]


def call_json(call: CallRecord, exceptions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        'seq': call.seq,
        'callee': call.callee,
        'arguments': call.arguments,
        'line': call.line,
        'status': call.status,
        'result': call.result,
        'error': call.error,
        'started': call.started,
        'duration': call.duration,
        'attempt': call.attempt,
        'source': call.source,
        'side_effect': call.side_effect,
        'cost_usd': call.cost_usd,
        'exceptions': exceptions or [],
    }


def show_json(
    run: RunRow, calls: Sequence[CallRecord], spans: Sequence[SpanDict], usage: dict[str, Any] | None, turn: Turn | None
) -> dict[str, Any]:
    exceptions = exceptions_by_seq(spans)
    return {
        'run_id': run.run_id,
        'status': run.status,
        'created': run.created,
        'duration': run.duration,
        'prompt': run.prompt,
        'script': run.script,
        'inputs': run.inputs,
        'value': run.value,
        'error': run.error,
        'parent_run_id': run.parent_run_id,
        'fork_at': run.fork_at,
        'orchestrator_run_id': run.orchestrator_run_id,
        'usage': usage,
        'cost_usd': cost_of(calls),
        'turn': None
        if turn is None
        else {
            'conversation_id': turn.conversation_id,
            'turn': turn.turn,
            'prompt': turn.prompt,
            'answer': turn.answer,
            'status': turn.status,
            'usage': turn.usage,
            'trace_id': turn.trace_id,
        },
        'calls': [call_json(c, exceptions.get(c.seq)) for c in calls],
        'progress': progress_entries(calls),
        'progress_dropped': progress_dropped(calls),
    }


def runs_of_turn(db: RunStore, agent_run_ids: Iterable[str | None]) -> list[RunRow]:
    """The workflow runs of one orchestrator turn, oldest first: the scripts of each of its agent runs (one more
    agent run each time the turn went on after approvals; its scripts carry that run's id)."""
    found = {
        r.run_id: r
        for agent_run_id in dict.fromkeys(a for a in agent_run_ids if a)
        for r in db.list_runs(1_000, orchestrator_run_id=agent_run_id)
    }
    return sorted(found.values(), key=lambda r: r.created)


def turn_of(db: RunStore, run: RunRow) -> Turn | None:
    """The orchestrator turn a workflow run belongs to (None for a run made by `exec` or the API)."""
    return next(iter(db.turns(agent_run_id=run.orchestrator_run_id)), None) if run.orchestrator_run_id else None


def turn_agent_runs(turn: Turn) -> list[str]:
    """Every agent run of a turn, its first one first."""
    return [a for a in dict.fromkeys([turn.agent_run_id, *turn.agent_run_ids]) if a]


def siblings_of(db: RunStore, run: RunRow, turn: Turn | None) -> list[RunRow]:
    """The runs of the turn `run` belongs to (itself included), oldest first."""
    if turn is not None:
        return runs_of_turn(db, turn_agent_runs(turn))
    return runs_of_turn(db, [run.orchestrator_run_id])
