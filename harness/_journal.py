"""The journal: what a run writes to the store, in write-ahead order.

Invariants, relied on by resume and replay:
- a call is journaled (`running`) before it is dispatched;
- its result is journaled durably before the sandbox sees it;
- a snapshot is stored only after every call it lists as pending has been journaled.
Writes are batched per pause of the interpreter (one transaction for all calls a gather started,
one for all results delivered together), so durability costs per pause, not per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

from ._records import CallRecord, RunStatus
from ._store import LEASE_SECONDS, Checkpoint, Owner, RunRow, RunStore
from ._values import jsonable

Snapshot = Callable[[], Checkpoint]
"""Produces the paused interpreter's checkpoint, only when the journal asks (with a store)."""


class Journal:
    """Writes one run's rows. With no store (`store=None`, or a replay), every method is a no-op.

    With an `owner`, every write is made only while that process holds the run's lease (a stale
    process can never overwrite a run another one took over), and `held()` keeps the lease fresh.
    """

    def __init__(self, store: RunStore | None, run_id: str, owner: Owner | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.owner = owner if store is not None else None
        self.started_at = time.time()

    def begin(self, run: RunRow) -> None:
        if self.store is not None:
            self.store.create_run(run)
            if self.owner is not None:
                self.store.claim(self.run_id, self.owner)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncGenerator[None]:
        """Renew the run's lease while the block runs (a process that stops renewing loses it)."""
        if self.store is None or self.owner is None:
            yield
            return
        store, owner = self.store, self.owner

        async def renew() -> None:
            while True:
                await asyncio.sleep(LEASE_SECONDS / 3)
                await asyncio.to_thread(store.renew, self.run_id, owner)

        task = asyncio.ensure_future(renew())
        try:
            yield
        finally:
            task.cancel()

    def calls(self, records: Iterable[CallRecord], *, snapshot: Snapshot | None = None) -> None:
        """Write call rows (started or finished), then the snapshot if given, in one transaction."""
        if self.store is None:
            return
        rows = list(records)
        checkpoint = snapshot() if snapshot is not None else None
        if rows or checkpoint is not None:
            self.store.put_calls(self.run_id, rows, snapshot=checkpoint, expect_owner=self.owner)

    def end(self, status: RunStatus, *, value: Any = None, error: str | None = None) -> None:
        if self.store is None:
            return
        self.store.update_run(
            self.run_id, status=status, value=jsonable(value), error=error, duration=time.time() - self.started_at,
            expect_owner=self.owner,
        )
