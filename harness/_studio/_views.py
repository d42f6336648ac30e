"""The studio's JSON: what `GET /api/runs`, `GET /api/runs/{id}` and the conversation endpoints answer.

Plain data in (rows read from the run store), JSON-ready dicts out; the shapes are the studio's documented
API (README, "The studio"), so a field is added, never renamed or dropped. Nothing here imports Starlette,
pydantic-ai or the engine: the server calls these from a worker thread while a chat streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic_ai.usage import UsageLimits

from .._catalog._callees import Callee
from .._catalog._rules import Access
from .._check._analysis import analyze
from .._check._estimate import estimate
from .._check._plan import plan_text
from .._records import (
    CallRecord,
    Decision,
    RunRow,
    SpanDict,
    cost_of,
    progress_dropped,
    progress_entries,
    progress_kind,
)
from .._store import RunStore, Turn
from .._store._approvals import awaits_plan, undecided
from .._tracing._tree import Node, build_tree, duration_of, span_label
from .._ui._runs import call_json, exceptions_by_seq, runs_of_turn, siblings_of, trace_spans, turn_agent_runs, turn_of
from .._ui._text import RESULT_CHARS, call_text, cut, literal

API_VERSION = 1
RUN_STATUSES = ('running', 'completed', 'failed', 'interrupted', 'needs_decision', 'waiting')
RESUMABLE = frozenset({'interrupted', 'needs_decision', 'waiting'})
"""Statuses a run can be resumed from (a completed run has nothing left; a failed one failed in its script)."""


def title(run: RunRow) -> str:
    """One line naming a run: its prompt's first line, else its script's first line past imports and comments."""
    if run.prompt:
        return prompt_line(run.prompt)
    lines = [line for line in run.script.splitlines() if line.strip()]
    telling = [line for line in lines if not line.lstrip().startswith(('import ', 'from ', '#'))]
    return prompt_line((telling or lines or [''])[0])


def prompt_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0][:200] if text else ''


def usage_json(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run's stored token and cost totals, with the sum of tokens the listing shows."""
    if not usage:
        return None
    return {**usage, 'tokens': int(usage.get('input_tokens') or 0) + int(usage.get('output_tokens') or 0)}


def run_summary(run: RunRow, short: dict[str, str], usage: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        'run_id': run.run_id,
        'short_id': short.get(run.run_id, run.run_id),
        'status': run.status,
        'created': run.created,
        'updated': run.updated,
        'duration': run.duration,
        'calls': run.calls_count,
        'title': title(run),
        'prompt': run.prompt,
        'error': run.error,
        'parent_run_id': run.parent_run_id,
        'fork_at': run.fork_at,
        'orchestrator_run_id': run.orchestrator_run_id,
        'usage': usage_json(usage.get(run.run_id)),
    }


def runs_page(db: RunStore, *, statuses: Sequence[str] | None, limit: int) -> dict[str, Any]:
    """`GET /api/runs`: the newest runs (of some statuses), and how many runs have each status."""
    rows = db.list_runs(limit, status=list(statuses) if statuses else None)
    ids = [r.run_id for r in rows]
    short, usage = db.short_ids(ids), db.usage(ids)
    counts = db.status_counts()
    # A script the orchestrator wrote is named by the prompt of its turn (a chat turn's runs carry none of their own).
    prompts = {
        agent_run_id: turn.prompt
        for agent_run_id in {r.orchestrator_run_id for r in rows if not r.prompt}
        if agent_run_id
        for turn in db.turns(agent_run_id=agent_run_id)[:1]
    }
    return {
        'runs': [
            {**run_summary(r, short, usage), 'title': prompt_line(prompts[r.orchestrator_run_id])}
            if r.orchestrator_run_id in prompts
            else run_summary(r, short, usage)
            for r in rows
        ],
        'counts': {status: counts.get(status, 0) for status in RUN_STATUSES},
        'total': sum(counts.values()),
    }


def decision_json(decision: Decision) -> dict[str, Any]:
    return {
        'approved': decision.approved,
        'reason': decision.reason,
        'decided_by': decision.decided_by,
        'decided_at': decision.decided_at,
    }


def plan_json(run: RunRow, decided: dict[int, Decision]) -> dict[str, Any] | None:
    """The plan a run waits for a decision on (`Harness(review=...)`): as stored, with the text `harness pending`
    prints; None when it waits for none."""
    if not awaits_plan(run, decided):
        return None
    stored = dict(Access.from_json(run.access).plan or {})
    return {**stored, 'text': plan_text(stored, run.script, lines=0)}


def pending_of(calls: Iterable[CallRecord], decided: dict[int, Decision]) -> list[dict[str, Any]]:
    """Calls that wait for a person and have no decision yet."""
    return [{'seq': c.seq, 'callee': c.callee, 'arguments': c.arguments} for c in undecided(calls, decided)]


def span_json(node: Node) -> dict[str, Any]:
    """A span and its children, with the one-line label `harness trace` prints (values cut as it cuts them; the
    attributes hold them whole)."""
    span = node.span
    return {
        'name': span.get('name'),
        'span_id': span.get('span_id'),
        'start': span.get('start'),
        'duration': duration_of(span),
        'status': span.get('status'),
        'error': span.get('error'),
        'label': span_label(span).plain,
        'attributes': span.get('attributes') or {},
        'exceptions': span.get('exceptions') or [],
        'children': [span_json(child) for child in node.children],
    }


def graph_json(run: RunRow, callees: Iterable[str], calls: Sequence[CallRecord]) -> dict[str, Any]:
    """The run's script's possible calls as nodes and edges (the page lays them out), the path the run took,
    and the same graph as Mermaid text (`harness trace RUN --mermaid` prints it).

    A call is a node only if its name is a callee: those of the catalog the run ran on (its stored manifest),
    of `callees` (today's, for a run stored without one) and those it called. A branch not taken made no call,
    so only the run's own catalog names its callees when today's lacks them (`--agents` not given)."""
    ran_on = (run.catalog or {}).get('callees') or {}
    try:
        analysis = analyze(run.script, set(callees) | set(ran_on) | {c.callee for c in calls})
    except SyntaxError as exc:
        return {
            'nodes': [],
            'edges': [],
            'mermaid': '',
            'dynamic': [],
            'error': f'the script does not parse (line {exc.lineno}): nothing to draw',
        }
    taken = [(c.callee, c.line) for c in calls]
    path = analysis.path(taken)
    visited = {node for edge in path for node in edge}
    return {
        'nodes': [
            {
                'id': f'n{i}',
                'callee': site.callee,
                'line': site.line,
                'in_loop': site.in_loop,
                'in_gather': site.in_gather,
                'in_except': site.in_except,
                'taken': f'n{i}' in visited,
            }
            for i, site in enumerate(analysis.nodes)
        ],
        'edges': [
            {'from': src, 'to': dst, 'kind': kind, 'taken': (src, dst) in path} for src, dst, kind in analysis.flow
        ],  # the flow as written (not the over-approximation)
        'dynamic': [{'callee': site.callee, 'line': site.line} for site in analysis.dynamic],
        'mermaid': analysis.mermaid(taken=taken),
        'error': None,
    }


def estimate_json(run: RunRow, callees: Iterable[str], limits: UsageLimits | None) -> dict[str, Any] | None:
    """The run's script's worst case against today's catalog (`Harness.estimate`, under the run's allow/deny): per
    callee the most calls and USD, unbounded and unpriced said so; None without the catalog's callees (names only)
    or for a script that does not parse."""
    if not isinstance(callees, Mapping):
        return None
    catalog: Mapping[str, Callee] = callees
    access = Access.from_json(run.access)
    try:
        found = estimate(analyze(run.script, set(catalog)), catalog, limits, access)
    except SyntaxError:
        return None
    return {
        'worst_case': found.worst_case,
        'cost_usd': found.cost_usd,
        'unpriced': found.unpriced,
        'callees': [
            {
                'callee': part.callee,
                'calls': part.calls,
                'per_call': part.per_call,
                'cost_usd': part.cost_usd,
                'source': part.source,
                'unpriced': part.unpriced,
            }
            for part in found.per_callee.values()
        ],
        'reasons': found.reasons,
        'text': found.text(),
    }


def turn_json(turn: Turn | None) -> dict[str, Any] | None:
    if turn is None:
        return None
    return {
        'conversation_id': turn.conversation_id,
        'turn': turn.turn,
        'agent_run_id': turn.agent_run_id,
        'prompt': turn.prompt,
        'answer': turn.answer,
        'status': turn.status,
        'error': turn.error,
        'usage': turn.usage,
        'trace_id': turn.trace_id,
        'created': turn.created,
    }


def run_page(db: RunStore, run: RunRow, callees: Iterable[str], limits: UsageLimits | None = None) -> dict[str, Any]:
    """`GET /api/runs/{id}`: everything the run page shows (`callees`: the catalog, by name or with its callees, which
    the estimate needs; `limits`: the sub-agents' usage limits it prices them under)."""
    calls = db.calls(run.run_id)
    spans: list[SpanDict] = trace_spans(db, run)  # the tree `harness trace` draws
    decided = db.decisions(run.run_id)
    exceptions = exceptions_by_seq(spans)
    turn = turn_of(db, run)
    siblings = siblings_of(db, run, turn)
    forks = db.forks_of(run.run_id)
    related = [run, *siblings, *forks] + (
        [parent] if run.parent_run_id and (parent := db.get_run(run.parent_run_id)) else []
    )
    ids = list(dict.fromkeys(r.run_id for r in related))
    short, usage = db.short_ids(ids), db.usage(ids)
    pending = pending_of(calls, decided)
    plan = plan_json(run, decided)
    return {
        **run_summary(run, short, usage),
        'script': run.script,
        'inputs': run.inputs,
        'value': run.value,
        'access': run.access,
        'parent_short_id': short.get(run.parent_run_id) if run.parent_run_id else None,
        'calls_count': run.calls_count,
        'calls': [
            {
                **call_json(c, exceptions.get(c.seq)),
                'decision': decision_json(decided[c.seq]) if c.seq in decided else None,
            }
            for c in calls
        ],
        'progress': progress_entries(calls),
        'progress_dropped': progress_dropped(calls),
        'pending': pending,
        'plan': plan,
        'spans': [span_json(root) for root in build_tree(spans)],
        'graph': graph_json(run, callees, calls),
        'estimate': estimate_json(run, callees, limits),
        'cost_usd': cost_of(calls),
        'turn': turn_json(turn),
        'siblings': [
            run_summary(r, short, usage) for r in sorted(siblings, key=lambda r: r.created) if r.run_id != run.run_id
        ],
        'forks': [run_summary(r, short, usage) for r in forks],
        'snapshots': db.snapshot_positions(run.run_id),
        'actions': {
            'replay': run.status != 'running',
            'resume': run.status in RESUMABLE and not pending and plan is None,
            'fork': run.status != 'running' and bool(calls),
            'decide': (bool(pending) and run.status != 'running') or plan is not None,  # a running run cannot be yet
        },
    }


def call_line(call: CallRecord) -> dict[str, Any]:
    """A call as the chat shows it live: the call as the script wrote it and its result, each cut as the
    terminal cuts them (the run page has them whole); a `log`/`phase` row has its `progress`."""
    return {
        'seq': call.seq,
        'callee': call.callee,
        'text': call_text(call.callee, call.arguments),
        'status': call.status,
        'duration': call.duration,
        'source': call.source,
        'error': call.error,
        'result': cut(literal(call.result), RESULT_CHARS) if call.status == 'ok' else None,
        'progress': progress_json(call),
        'cost_usd': call.cost_usd,
    }


def progress_json(call: CallRecord) -> dict[str, Any] | None:
    """`{'kind': 'log' | 'phase', 'text'}` for a kept `log`/`phase` row, else None (a call, or the count past the
    cap)."""
    kind = progress_kind(call)
    return None if kind is None else {'kind': kind, 'text': call.arguments.get('text')}


def run_entry(db: RunStore, run: RunRow, short: dict[str, str], usage: dict[str, dict[str, Any]]) -> dict[str, Any]:
    calls = db.calls(run.run_id)
    return {
        **run_summary(run, short, usage),
        'script': run.script,
        'calls_made': [call_line(c) for c in calls],
        'pending': pending_of(calls, db.decisions(run.run_id)) if run.status == 'waiting' else [],
    }


def conversation_page(db: RunStore, conversation: dict[str, Any], turns: Sequence[Turn]) -> dict[str, Any]:
    """`GET /api/conversations/{id}`: each turn with the scripts its orchestrator run wrote, their calls and
    where they ended, so a stored conversation reads as it did live."""
    out = []
    for turn in turns:
        runs = runs_of_turn(db, turn_agent_runs(turn))
        ids = [r.run_id for r in runs]
        short, usage = db.short_ids(ids), db.usage(ids)
        out.append({**(turn_json(turn) or {}), 'runs': [run_entry(db, r, short, usage) for r in runs]})
    return {**conversation, 'turns': out}
