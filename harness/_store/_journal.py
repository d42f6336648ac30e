"""The journal: what a run writes to the store, in write-ahead order.

Invariants, relied on by resume and replay:
- a call is journaled (`running`) before it is dispatched;
- its result is journaled durably before the sandbox sees it;
- a snapshot is stored only after every call it lists as pending has been journaled.
Rows are collected as calls change (`add`) and written at the points the invariants name
(`write`), batched per pause of the interpreter (one transaction for all calls a gather started,
one for all results delivered together), so durability costs per pause, not per call.

A write is made on the event loop when it can be made at once (`RunStore.at_once`: the store is
free) and writes to this store are quick; otherwise on a worker thread, so a store locked by another
process holds up only the run that writes, never the event loop and the other workflows on it (the store's
threads, never the default executor that blocking callees fill; the lease is renewed apart, `_leases`). A
write that took longer than `QUICK_WRITE` (a slow disk) sends the store's next `SLOW_STREAK` writes
to the thread. The hop to a thread costs about 70 µs, a quick write less than that.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .._records import CallRecord, Checkpoint, Owner, RunRow, RunStatus
from .._sandbox._values import jsonable
from ._connection import WouldWait
from ._leases import renewer
from ._sqlite import RunStore

T = TypeVar('T')

Snapshot = Callable[[], Checkpoint]
"""Produces the paused interpreter's checkpoint, only when the journal asks (with a store)."""

QUICK_WRITE = 0.005
"""Seconds: a write on the event loop that takes longer marks the store slow."""
SLOW_STREAK = 100
"""How many writes go to a worker thread after a slow one, before the event loop tries again."""
_slow: weakref.WeakKeyDictionary[RunStore, int] = weakref.WeakKeyDictionary()
"""Per store: writes left to send to a worker thread."""
_WRITERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix='harness-store')
"""The threads journal writes wait on: not the event loop's default executor, which blocking sync callees can
fill (a write queued behind them would hold up the result it journals)."""


async def store_write(store: RunStore, method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Call the store method `method`: on the event loop if the store is free and quick, else on a thread."""
    streak = _slow.get(store, 0)
    if streak:
        _slow[store] = streak - 1
    else:
        started = time.perf_counter()
        try:
            result = store.at_once(method, *args, **kwargs)
        except WouldWait:
            pass
        else:
            if time.perf_counter() - started > QUICK_WRITE:
                _slow[store] = SLOW_STREAK
            return result
    return await on_thread(method, *args, **kwargs)


async def on_thread(method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread` on the store's own threads (`_WRITERS`), never behind callees in the default executor."""
    call = functools.partial(contextvars.copy_context().run, method, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_WRITERS, call)


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

        self.rows: list[CallRecord] = []
        """Rows changed since the last write."""

    async def begin(self, run: RunRow) -> None:
        store, owner = self.store, self.owner
        if store is None:
            return
        await store_write(store, store.create_run, run, owner=owner)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncGenerator[None]:
        """Renew the run's lease while the block runs (a process that stops renewing loses it)."""
        if self.store is None or self.owner is None:
            yield
            return
        leases = renewer(self.store)  # on a thread of its own: never queued behind blocking callees
        leases.hold(self.run_id, self.owner)
        try:
            yield
        finally:
            leases.drop(self.run_id, self.owner)

    def add(self, records: Iterable[CallRecord]) -> None:
        """Note call rows (started, finished or decided) for the next `write`."""
        if self.store is not None:
            self.rows.extend(records)

    async def write(self, *, snapshot: Snapshot | None = None, only_running: bool = False) -> None:
        """Write the noted rows, then the snapshot if given, in one transaction, durably (`only_running`:
        over rows still `running` only)."""
        store = self.store
        if store is None:
            return
        # A row changed twice since the last write is written once (the store seals one version of each seq per write).
        rows, self.rows = list({row.seq: row for row in self.rows}.values()), []
        checkpoint = snapshot() if snapshot is not None else None  # the interpreter is dumped here, not in the thread
        if rows or checkpoint is not None:
            await store_write(
                store,
                store.put_calls,
                self.run_id,
                rows,
                snapshot=checkpoint,
                expect_owner=self.owner,
                only_running=only_running,
            )

    async def end(self, status: RunStatus, *, value: Any = None, error: str | None = None) -> None:
        store = self.store
        if store is None:
            return
        await self.write()
        await store_write(
            store,
            store.update_run,
            self.run_id,
            status=status,
            value=jsonable(value),
            error=error,
            duration=time.time() - self.started_at,
            expect_owner=self.owner,
        )
