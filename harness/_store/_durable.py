"""Resume, replay and fork: a stored run, prepared to run again with its calls answered from the journal.

Each function reads the store and returns a `Plan`: the script, a `History` that answers journaled
calls instead of running them, and optionally a verified snapshot to start from instead of the
first line. The Harness runs a plan like any other run; nothing here runs a script or a callee.

- resume: same run id; from the newest snapshot; journaled results answered, in-flight calls re-run
  (side-effecting ones only with permission); the run continues live from there. Its plan is read
  without writing; `take` claims the run once the Harness has admitted the plan.
- replay: from the start (or the snapshot at call K); every call must match the journal and is
  answered from it; no callee runs; nothing is written; the final value must equal the stored one.
- fork: a new run linked to its parent; calls before K answered from the parent's journal, call K
  answered with the given result, later calls live.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._dispatch._history import History, HistoryMode
from .._errors import ReplayDivergence, SnapshotError, WorkflowError
from .._records import CallRecord, CallSource, Decision, Owner, RunRow, WorkflowResult, is_progress, new_run_id
from .._sandbox._runner import RestorePoint
from .._sandbox._values import jsonable
from ._connection import StoreFull
from ._freshness import Rollback, refusal
from ._snapshots import SnapshotRow
from ._sqlite import RunStore


@dataclass
class Plan:
    """A stored run, ready to run again."""

    mode: HistoryMode
    run: RunRow
    """The stored run the plan was made from (for a fork: the parent)."""
    run_id: str
    """The run that executes: the same id, or a new one for a fork."""
    history: History
    calls: list[CallRecord] = field(default_factory=list)
    """The stored run's journal, as read."""
    restore: RestorePoint | None = None
    prefill: list[CallRecord] = field(default_factory=list)
    """Calls made before the snapshot: they are in the run's records and spent budget once."""
    decisions: dict[int, Decision] = field(default_factory=dict)
    """A person's decisions on the run's calls that need approval."""
    spent: list[CallRecord] = field(default_factory=list)
    """Calls of the same orchestrator run's other scripts: they count against its budget."""
    prefill_source: CallSource | None = None
    """How the prefilled calls are shown (`replayed` in a replay); None: as journaled."""
    begin: RunRow | None = None
    """The run row to create (a fork)."""
    journaled: bool = True
    """Whether the run writes to the store (a replay writes nothing)."""
    done: WorkflowResult | None = None
    """Set when there is nothing to run: resuming a run that already completed."""


def plan_resume(
    store: RunStore, run_id: str, *, retry_unknown: bool = False, answers: dict[int, Any] | None = None
) -> Plan:
    """Continue from the newest snapshot. Reading the plan writes nothing: the run is taken (`take`) only
    once its catalog and the answers given are admitted."""
    run = trusted_run(store, run_id, resuming=True)
    calls = store.calls(run.run_id)
    history = History(
        mode='resume', calls={c.seq: c for c in calls}, answers=dict(answers or {}), retry_unknown=retry_unknown
    )
    plan = Plan(mode='resume', run=run, run_id=run.run_id, history=history, calls=calls)
    if run.status == 'completed':
        plan.done = WorkflowResult(value=run.value, run_id=run.run_id, status=run.status, calls=calls)
        return plan
    start_from(plan, store.latest_snapshot(run.run_id), calls)
    plan.decisions = store.decisions(run.run_id)
    if run.orchestrator_run_id:  # the orchestrator run's budget continues from what its other scripts spent
        plan.spent = [
            c
            for other in store.runs_of_orchestrator(run.orchestrator_run_id)
            if other != run.run_id
            for c in store.calls(other)
        ]
    return plan


def take(store: RunStore, plan: Plan, owner: Owner) -> None:
    """Claim a resumed run for `owner` (`RunBusy` if another live holder has it) and mark it `running`
    again: the first write of a resume, made once nothing can refuse it any more."""
    try:
        store.claim(plan.run_id, owner, unchanged_since=plan.run.updated)  # not finished by another since it was read
        store.update_run(plan.run_id, status='running', error=None, expect_owner=owner)
    except StoreFull:
        raise WorkflowError(
            f"The run store's disk is full, so run {plan.run_id} was not resumed (nothing ran): free space, then "
            f'resume it (`harness resume {plan.run_id}`).',
            run_id=plan.run_id,
        ) from None


def plan_replay(store: RunStore, run_id: str, *, from_seq: int | None = None) -> Plan:
    """Answer every call from the journal, from the start or from the snapshot at call `from_seq`."""
    run = trusted_run(store, run_id)
    calls = store.calls(run.run_id)
    history = History(mode='replay', calls={c.seq: c for c in calls})
    plan = Plan(mode='replay', run=run, run_id=run.run_id, history=history, calls=calls, journaled=False)
    if run.orchestrator_run_id:  # the orchestrator run's budget, as the scripts before this one left it
        earlier = store.runs_of_orchestrator(run.orchestrator_run_id)
        plan.spent = [c for other in earlier[: earlier.index(run.run_id)] for c in store.calls(other)]
    if from_seq is not None:
        snapshot = store.snapshot_after(run.run_id, from_seq)
        if snapshot is None:
            raise WorkflowError(
                f'Run {run.run_id} has no snapshot at or before call {from_seq}; replay from the start.'
            )
        start_from(plan, snapshot, calls, source='replayed')
    return plan


def plan_fork(store: RunStore, run_id: str, *, at: int, result: Any) -> Plan:
    """A new run: calls before `at` from the parent's journal, call `at` answered with `result`."""
    parent = trusted_run(store, run_id)
    calls = store.calls(parent.run_id)
    if not 1 <= at <= len(calls):
        raise WorkflowError(
            f'Run {parent.run_id} made {len(calls)} call(s); fork at a call between 1 and {len(calls)}.'
        )
    if is_progress(calls[at - 1]):  # nothing to answer: the script's own log/phase
        raise WorkflowError(
            f'#{at} of run {parent.run_id} is a log()/phase() entry of the script, not a call: fork at '
            'the seq of a call.'
        )
    new_id = new_run_id()
    begin = RunRow(
        run_id=new_id,
        script=parent.script,
        inputs=parent.inputs,
        prompt=parent.prompt,
        parent_run_id=parent.run_id,
        fork_at=at,
        access=parent.access,
        budget_key=parent.budget_key,
    )
    history = History(mode='fork', calls={c.seq: c for c in calls if c.seq < at}, answers={at: result}, fork_at=at)
    return Plan(mode='fork', run=parent, run_id=new_id, history=history, calls=calls, begin=begin)


def check_replay(plan: Plan, result: WorkflowResult) -> None:
    """A replay of a completed run must end with the value the run recorded."""
    expected = plan.run
    if expected.status == 'completed' and jsonable(result.value) != jsonable(expected.value):
        raise ReplayDivergence(
            f'the replay of {expected.run_id} ended with a different value than the recorded run: '
            f'{json.dumps(jsonable(result.value))[:200]} instead of {json.dumps(expected.value)[:200]}'
        )


def start_from(
    plan: Plan, snapshot: SnapshotRow | None, calls: list[CallRecord], *, source: CallSource | None = None
) -> None:
    if snapshot is None:
        return
    plan.restore = RestorePoint(snapshot.dump, snapshot.ledger)
    plan.prefill = [call for call in calls if call.seq <= snapshot.after_seq]
    plan.prefill_source = source


def require_store(store: RunStore | None) -> RunStore:
    if store is None:
        raise WorkflowError(
            'This Harness has no run store (store=None): nothing was recorded to resume, replay or fork.'
        )
    return store


def require_run(store: RunStore, run_id: str) -> RunRow:
    run = store.get_run(run_id)
    if run is None:
        raise WorkflowError(f'No stored run {run_id!r}; `harness runs` lists them.')
    return run


def trusted_run(store: RunStore, run_id: str, *, resuming: bool = False) -> RunRow:
    """A stored run whose record, journal and seals verify: only such a run is resumed, replayed or forked. One older
    than this machine saw it (put back from a backup or a copy) is not resumed (`StoreRolledBack`): going on could
    repeat calls it made since; a replay runs nothing and a fork is asked for, so they may start from it."""
    run = require_run(store, run_id)
    problems = store.verify(run.run_id)
    if problems and isinstance(problems[0], Rollback):
        if resuming:
            raise refusal(problems[0], run.run_id)
    elif problems:
        raise SnapshotError(f'Run {run.run_id} cannot be trusted, so nothing ran: {problems[0]}.', run_id=run.run_id)
    return run
