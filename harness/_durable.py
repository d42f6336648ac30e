"""Resume, replay and fork: running a stored script again, answering calls from its journal.

All three build the same thing: a dispatcher whose `History` answers journaled calls instead of
running them, optionally starting from a stored snapshot rather than from the first line.
- resume: same run id; from the newest snapshot; journaled results answered, in-flight calls re-run
  (side-effecting ones only with permission); the run continues live from there.
- replay: from the start (or the snapshot at call K); every call must match the journal and is
  answered from it; no callee runs; the final value must equal the stored one.
- fork: a new run linked to its parent; calls before K answered from the parent's journal, call K
  answered with the given result, later calls live.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from ._budget import Budget
from ._dispatch import History
from ._errors import ReplayDivergence, WorkflowError
from ._events import EventHandler
from ._journal import Journal
from ._result import CallRecord, CallSource, WorkflowResult
from ._runner import RestorePoint, ScriptRun
from ._store import CallRow, RunRow, RunStore

if TYPE_CHECKING:
    from ._engine import Harness


def require_store(h: Harness) -> RunStore:
    if h.store is None:
        raise WorkflowError(
            'This Harness has no run store (store=None): nothing was recorded to resume, replay or fork.'
        )
    return h.store


def require_run(store: RunStore, run_id: str) -> RunRow:
    run = store.get_run(run_id)
    if run is None:
        raise WorkflowError(f'No stored run {run_id!r}; `harness runs` lists them.')
    return run


def record_of(row: CallRow) -> CallRecord:
    return CallRecord(
        seq=row.seq,
        callee=row.callee,
        arguments=row.arguments,
        line=row.line,
        status=row.status,
        result=row.result,
        error=row.error,
        started=row.started,
        duration=row.duration,
        attempt=row.attempt,
        source=row.source,
    )


def stored_result(run: RunRow, rows: list[CallRow]) -> WorkflowResult:
    return WorkflowResult(value=run.value, run_id=run.run_id, status=run.status, calls=[record_of(r) for r in rows])


async def resume(
    h: Harness,
    run_id: str,
    *,
    retry_unknown: bool = False,
    answers: dict[int, Any] | None = None,
    on_event: EventHandler | None = None,
) -> WorkflowResult:
    store = require_store(h)
    run = require_run(store, run_id)
    rows = store.calls(run.run_id)
    if run.status == 'completed':
        return stored_result(run, rows)
    snapshot = store.latest_snapshot(run.run_id)
    scope = h.new_scope()
    history = History(
        mode='resume', rows={r.seq: r for r in rows}, answers=dict(answers or {}), retry_unknown=retry_unknown
    )
    journal = Journal(store, run.run_id)
    store.update_run(run.run_id, status='running', error=None)
    dispatcher = h.dispatcher(run.run_id, scope, on_event, journal=journal, history=history)
    restore = None
    if snapshot is not None:
        restore = RestorePoint(snapshot.dump, snapshot.ledger)
        prefill(dispatcher.calls, rows, upto=snapshot.after_seq, budget=scope.budget, h=h)
    job = ScriptRun(
        code=run.script, stubs=h.stubs(), dispatcher=dispatcher, inputs=run.inputs, type_check=False, restore=restore
    )
    return await h.execute(job, journal, mode='resume', traceparent=run.trace_context)


def prefill(
    calls: list[CallRecord],
    rows: list[CallRow],
    *,
    upto: int,
    budget: Budget,
    h: Harness,
    source: CallSource | None = None,
) -> None:
    """The calls made before a snapshot: in the run's records and counted against the budget again."""
    for row in rows:
        if row.seq > upto:
            break
        record = record_of(row)
        if source is not None:
            record.source = source
        calls.append(record)
        callee = h.callees.get(row.callee)
        if callee is not None and row.source != 'reused':
            budget.count(callee)


async def replay(
    h: Harness, run_id: str, *, from_seq: int | None = None, on_event: EventHandler | None = None
) -> WorkflowResult:
    store = require_store(h)
    run = require_run(store, run_id)
    rows = store.calls(run.run_id)
    scope = h.new_scope()
    history = History(mode='replay', rows={r.seq: r for r in rows})
    dispatcher = h.dispatcher(run.run_id, scope, on_event, journal=Journal(None, run.run_id), history=history)
    restore = None
    if from_seq is not None:
        snapshot = store.snapshot_after(run.run_id, from_seq)
        if snapshot is None:
            raise WorkflowError(
                f'Run {run.run_id} has no snapshot at or before call {from_seq}; replay from the start.'
            )
        restore = RestorePoint(snapshot.dump, snapshot.ledger)
        prefill(dispatcher.calls, rows, upto=snapshot.after_seq, budget=scope.budget, h=h, source='replayed')
    job = ScriptRun(
        code=run.script, stubs=h.stubs(), dispatcher=dispatcher, inputs=run.inputs, type_check=False, restore=restore
    )
    result = await h.execute(job, Journal(None, run.run_id), mode='replay', traceparent=run.trace_context)
    if run.status == 'completed' and plain(result.value) != plain(run.value):
        raise ReplayDivergence(
            f'the replay of {run.run_id} ended with a different value than the recorded run: '
            f'{json.dumps(plain(result.value))[:200]} instead of {json.dumps(run.value)[:200]}'
        )
    return result


async def fork(
    h: Harness, run_id: str, *, at: int, result: Any, on_event: EventHandler | None = None
) -> WorkflowResult:
    store = require_store(h)
    parent = require_run(store, run_id)
    rows = store.calls(parent.run_id)
    if not 1 <= at <= max(len(rows), 1) or at > len(rows):
        raise WorkflowError(f'Run {parent.run_id} made {len(rows)} call(s); fork at a call between 1 and {len(rows)}.')
    from ._engine import new_run_id

    new_id = new_run_id()
    journal = Journal(store, new_id)
    row = RunRow(
        run_id=new_id,
        script=parent.script,
        stubs_digest=parent.stubs_digest,
        inputs=parent.inputs,
        prompt=parent.prompt,
        parent_run_id=parent.run_id,
        fork_at=at,
    )
    history = History(mode='fork', rows={r.seq: r for r in rows if r.seq < at}, answers={at: plain(result)}, fork_at=at)
    dispatcher = h.dispatcher(new_id, h.new_scope(), on_event, journal=journal, history=history)
    job = ScriptRun(code=parent.script, stubs=h.stubs(), dispatcher=dispatcher, inputs=parent.inputs, type_check=False)
    return await h.execute(job, journal, mode='fork', begin=row)


def plain(value: Any) -> Any:
    return to_jsonable_python(value, fallback=lambda v: f'<{type(v).__name__}>')
