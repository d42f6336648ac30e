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

from ._records import CallRecord, RunStatus
from ._store import Checkpoint, RunRow, RunStore
from ._values import jsonable

Snapshot = Callable[[], Checkpoint]
"""Produces the paused interpreter's checkpoint, only when the journal asks (with a store)."""


class Journal:
    """Writes one run's rows. With no store (`store=None`, or a replay), every method is a no-op."""

    def __init__(self, store: RunStore | None, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.started_at = time.time()

    def begin(self, run: RunRow) -> None:
        if self.store is not None:
            self.store.create_run(run)

    def calls(self, records: Iterable[CallRecord], *, snapshot: Snapshot | None = None) -> None:
        """Write call rows (started or finished), then the snapshot if given, in one transaction."""
        if self.store is None:
            return
        rows = list(records)
        checkpoint = snapshot() if snapshot is not None else None
        if rows or checkpoint is not None:
            self.store.put_calls(self.run_id, rows, snapshot=checkpoint)

    def end(self, status: RunStatus, *, value: Any = None, error: str | None = None) -> None:
        if self.store is None:
            return
        self.store.update_run(
            self.run_id, status=status, value=jsonable(value), error=error, duration=time.time() - self.started_at
        )
