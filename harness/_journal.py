"""The journal: what a run writes to the store, in write-ahead order.

Invariants, relied on by resume and replay:
- a call is journaled (`running`) before it is dispatched;
- its result is journaled durably before the sandbox sees it;
- a snapshot is stored only after every call it lists as pending has been journaled.
Writes are batched per pause of the interpreter (one transaction for all calls a gather started,
one for all results delivered together), so durability costs per pause, not per call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from pydantic_core import to_jsonable_python

from ._result import CallRecord, RunStatus
from ._store import CallRow, PendingSnapshot, RunRow, RunStore

Snapshot = Callable[[], tuple[int, bytes, list[dict[str, Any]]]]
"""Produces (calls journaled so far, Monty dump, ledger of pending calls) when the journal asks."""


def call_row(run_id: str, record: CallRecord, *, side_effect: bool = False) -> CallRow:
    status = record.status if record.status != 'running' else 'running'
    return CallRow(
        run_id=run_id,
        seq=record.seq,
        callee=record.callee,
        arguments=record.arguments,
        line=record.line,
        status=status,
        result=record.result if record.status == 'ok' else None,
        error=record.error,
        started=record.started,
        duration=record.duration,
        attempt=record.attempt,
        source=record.source,
        side_effect=side_effect,
    )


class Journal:
    """Writes one run's rows. With no store, every method is a no-op."""

    def __init__(self, store: RunStore | None, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.started_at = time.time()

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def begin(self, run: RunRow) -> None:
        if self.store is not None:
            self.store.create_run(run)

    def calls(self, records: Iterable[tuple[CallRecord, bool]], *, snapshot: Snapshot | None = None) -> None:
        """Write call rows (started or finished), then the snapshot if given, in one transaction.

        `bool` is the side-effect flag. `snapshot` is called only now, so the interpreter is dumped
        only when there is a store to keep it.
        """
        if self.store is None:
            return
        rows = [call_row(self.run_id, record, side_effect=side_effect) for record, side_effect in records]
        pending = None
        if snapshot is not None:
            after_seq, dump, ledger = snapshot()
            pending = PendingSnapshot(self.run_id, after_seq, dump, ledger)
        if rows or pending is not None:
            self.store.put_calls(rows, snapshot=pending)

    def end(self, status: RunStatus, *, value: Any = None, error: str | None = None) -> None:
        if self.store is None:
            return
        self.store.update_run(
            self.run_id,
            status=status,
            value=to_jsonable_python(value, fallback=lambda v: f'<{type(v).__name__}>'),
            error=error,
            duration=time.time() - self.started_at,
        )
