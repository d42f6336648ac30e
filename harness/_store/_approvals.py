"""Approvals: the calls that wait for a person, and a person's decisions on them, recorded in the store from any
process. The `Harness` facade is an `Approvals`; a run reads the decisions when it resumes."""

from __future__ import annotations

import getpass
from collections.abc import Iterable, Mapping

from .._errors import WorkflowError
from .._records import CallRecord, Decision, Pending, one_execution
from ._durable import require_run, require_store
from ._sqlite import RunStore


class Approvals:
    """`pending`, `approve` and `reject` over the store of a Harness."""

    @property
    def store(self) -> RunStore | None:
        """The run store: declared here, defined by the Harness this is part of."""
        raise TypeError('Approvals is a part of a Harness, which defines its store')

    def pending(self, run_id: str | None = None) -> list[Pending]:
        """The calls that wait for a person's approval (of one run, or of every waiting run)."""
        return pending_calls(require_store(self.store), run_id)

    def approve(self, run_id: str, seq: int | None = None, *, by: str | None = None) -> list[int]:
        """Approve a waiting call (every waiting call of the run when `seq` is None), from any process;
        `resume` then runs it. Returns the seqs approved."""
        return self._decide(run_id, seq, Decision(True, None, by or _who()))

    def reject(self, run_id: str, seq: int, *, reason: str, by: str | None = None) -> list[int]:
        """Reject a waiting call: when the run resumes, the script gets `PermissionError(reason)` there."""
        return self._decide(run_id, seq, Decision(False, reason, by or _who()))

    def _decide(self, run_id: str, seq: int | None, decision: Decision) -> list[int]:
        store = require_store(self.store)
        run = require_run(store, run_id)
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
