"""Approvals: the calls and the plans that wait for a person, and a person's decisions on them, recorded in the
store from any process. The `Harness` facade is an `Approvals`; a run reads the decisions when it resumes.

A plan (`Harness(review=...)`, `_check._plan`) waits as a run stored `waiting` with no call, its plan in its sealed
`access`; the decision on it is a decision row at `PLAN_SEQ`. A rejected plan ends its run `failed` at once.
Grants (`grant`) are kept by this Harness, not the store: their `when` is host code, which a store can neither
hold nor be trusted to give back; a process that restarts has none, so the calls they would approve wait again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import getpass
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic_ai.exceptions import UserError

from .._catalog._callees import Callee
from .._catalog._rules import Access
from .._check._plan import PLAN_SEQ, ReviewPlan, plan_refusal
from .._dispatch._sources import Grant
from .._errors import PlanRejected, WorkflowError
from .._records import CallRecord, Decision, Pending, RunRow, WorkflowResult, one_execution
from ._durable import Plan, require_run, require_store
from ._sqlite import RunStore


class Approvals:
    """`pending`, `approve`, `reject` and `grant` over the store of a Harness."""

    _callees: dict[str, Callee]

    @property
    def store(self) -> RunStore | None:
        """The run store: declared here, defined by the Harness this is part of."""
        raise TypeError('Approvals is a part of a Harness, which defines its store')

    def pending(self, run_id: str | None = None) -> list[Pending]:
        """The calls that wait for a person's approval (of one run, or of every waiting run)."""
        return pending_calls(require_store(self.store), run_id)

    def approve(self, run_id: str, seq: int | None = None, *, by: str | None = None) -> list[int]:
        """Approve a waiting call (every waiting call of the run when `seq` is None, and its plan when it waits
        for one: `PLAN_SEQ`, 0), from any process; `resume` then runs it. Returns the seqs approved."""
        return self._decide(run_id, seq, Decision(True, None, by or _who()))

    def reject(self, run_id: str, seq: int | None = None, *, reason: str, by: str | None = None) -> list[int]:
        """Reject a waiting call: when the run resumes, the script gets `PermissionError(reason)` there. Without
        `seq`, the plan of a run that waits for one: the run ends `failed` with the reason, nothing having run."""
        return self._decide(run_id, seq, Decision(False, reason, by or _who()))

    def grant(
        self,
        run_id: str,
        callee: str,
        *,
        max_calls: int | None = None,
        when: Callable[[dict[str, Any]], bool] | None = None,
        by: str | None = None,
    ) -> Grant:
        """Approve, once, the calls of `callee` (one that needs approval) in this run that `when(arguments)`
        accepts, up to `max_calls` of them: each runs without a decision of its own (traced as the grant's);
        others still wait. Held by this Harness (see the module docstring); give it before `resume`."""
        run = require_run(require_store(self.store), run_id)
        found = self._callees.get(callee)
        if found is None or not found.approval:
            raise UserError(f'grant() is for a callee registered with approval=True; {callee!r} is not one.')
        if max_calls is not None and max_calls < 1:
            raise UserError('grant(max_calls=...) must be at least 1 (None: no limit).')
        given = Grant(callee, max_calls, when, by or _who())
        self.grants_of(run.run_id).append(given)
        return given

    def grants_of(self, run_id: str) -> list[Grant]:
        """The grants this Harness was given for a run."""
        return vars(self).setdefault('_grants', {}).setdefault(run_id, [])

    def _review_plan(self, code: str, access: Access | None = None) -> ReviewPlan:
        """Declared here, defined by the Harness this is part of (`Review`)."""
        raise TypeError('Approvals is a part of a Harness, which defines _review_plan')

    def plan_held(self, plan: Plan) -> WorkflowResult | None:
        """A resume of a run whose plan is not approved: it still waits (nothing taken, nothing run), or a
        `WorkflowError` for a rejected plan; None when the run may go on."""
        access = Access.from_json(plan.run.access)
        decision = plan.decisions.get(PLAN_SEQ)
        if access.plan is None or plan.calls or (decision is not None and decision.approved):
            return None  # no plan to decide, or the run went past it (its calls were made under it)
        if decision is not None:
            raise PlanRejected(plan_refusal(plan.run_id, decision), run_id=plan.run_id)
        shown = self._review_plan(plan.run.script, access)
        return WorkflowResult(value=None, run_id=plan.run_id, status='waiting', plan=shown)

    async def hold_plan(self, row: RunRow, plan: ReviewPlan, access: Access) -> WorkflowResult:
        """Store a new run as waiting for a person's approval of its plan: no call made, no worker held."""
        row.access = dataclasses.replace(access, plan=plan.stored()).to_json()
        row.status = 'waiting'
        await asyncio.to_thread(require_store(self.store).create_run, row)
        return WorkflowResult(value=None, run_id=row.run_id, status='waiting', plan=plan)

    def _decide(self, run_id: str, seq: int | None, decision: Decision) -> list[int]:
        store = require_store(self.store)
        run = require_run(store, run_id)
        if seq is None and awaits_plan(run, store.decisions(run.run_id)):
            return self._decide_plan(store, run, decision)
        if seq is None and not decision.approved:
            raise WorkflowError(f'run {run.run_id} does not wait for its plan: name the call to reject.')
        waiting = {p.seq for p in self.pending(run.run_id)}
        if seq is not None and seq not in waiting:
            shown = ', '.join(f'#{s}' for s in sorted(waiting)) or 'none'
            raise WorkflowError(f'call #{seq} of run {run.run_id} is not waiting for approval (waiting: {shown}).')
        seqs = [seq] if seq is not None else sorted(waiting)
        owner = one_execution()  # its own hold: releasing it never frees one a run of this process has
        store.claim(run.run_id, owner)  # one holder at a time decides on, resumes or finishes a run
        try:
            for each in seqs:
                store.decide(run.run_id, each, decision)
        finally:
            store.release(run.run_id, owner)
        self._signal_decided(run.run_id, seqs, decision)
        return seqs

    def _signal_decided(self, run_id: str, seqs: list[int], decision: Decision) -> None:
        """Wake a run that waits for these decisions elsewhere (the Temporal engine); the store holds them."""

    def _decide_plan(self, store: RunStore, run: RunRow, decision: Decision) -> list[int]:
        """Record the decision on a run's plan; a rejection ends the run, as nothing of it ran."""
        owner = one_execution()
        store.claim(run.run_id, owner)
        try:
            store.decide(run.run_id, PLAN_SEQ, decision)
            if not decision.approved:
                store.update_run(
                    run.run_id, status='failed', error=plan_refusal(run.run_id, decision), expect_owner=owner
                )
        finally:
            store.release(run.run_id, owner)
        self._signal_decided(run.run_id, [PLAN_SEQ], decision)  # a run held on Temporal waits for the signal
        return [PLAN_SEQ]


def awaits_plan(run: RunRow, decided: Mapping[int, Decision]) -> bool:
    """Whether the run waits for a person's decision on its plan (`Harness(review=...)`)."""
    held = run.status == 'waiting' and run.calls_count == 0  # a plan is decided before any call is made
    return held and PLAN_SEQ not in decided and Access.from_json(run.access).plan is not None


def plans_waiting(store: RunStore, run_id: str | None = None) -> list[RunRow]:
    """The runs that wait for a decision on their plan, of one run or all, oldest first."""
    runs = [require_run(store, run_id).run_id] if run_id else store.waiting_runs()
    found = [store.get_run(rid) for rid in runs]
    return [run for run in found if run is not None and awaits_plan(run, store.decisions(run.run_id))]


def undecided(calls: Iterable[CallRecord], decided: Mapping[int, Decision]) -> list[CallRecord]:
    """The calls that wait for a person and have no decision yet: what every view of "pending" shows."""
    return [c for c in calls if c.status == 'waiting' and c.seq not in decided]


def pending_calls(store: RunStore, run_id: str | None = None) -> list[Pending]:
    """The calls that wait for a person's approval, of one run or of every waiting run."""
    runs = [require_run(store, run_id).run_id] if run_id else store.waiting_runs()
    return [
        Pending(c.seq, c.callee, c.arguments, rid)
        for rid in runs
        for c in undecided(store.calls(rid), store.decisions(rid))
    ]


def _who() -> str:
    """Who decides, when the caller does not say: the user running this process."""
    try:
        return getpass.getuser()
    except Exception:
        return 'unknown'
