"""What the operator sees of a run while it runs: its token and cost totals, and cancel requests.

`observed` wraps the body of one run (inside its `run_workflow` span): it counts the sub-agent runs the
script's calls start (`_usage.collecting`), puts the totals on the run span (`harness.usage.*`) and in the
store, and, for a run in a store file, watches for `harness cancel RUN` from another process: the
request cancels the run's task, exactly as Ctrl-C in its own process would (the run ends `interrupted`
and can be resumed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from .._store import RunStore, StoreError
from ._usage import Totals, collecting

T = TypeVar('T')

CANCEL_POLL_SECONDS = 0.2
"""How often a running run looks for a cancel request (one indexed read of the store)."""


class CancelRequested(asyncio.CancelledError):
    """The run was cancelled by `harness cancel` (a `CancelledError`, so it unwinds as Ctrl-C does)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f'run {run_id} was cancelled by `harness cancel`')
        self.run_id = run_id


async def observed(span: Any, store: RunStore | None, run_id: str, work: Awaitable[T]) -> T:
    """Await `work` (the run's body) with its totals collected and cancel requests watched."""
    requested = False
    target = asyncio.current_task()
    watch_cancel = store is not None and store.path != ':memory:' and target is not None

    async def watch() -> None:
        nonlocal requested
        assert store is not None and target is not None
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            try:
                if await asyncio.to_thread(store.cancel_requested, run_id):  # off the loop, as journal writes are
                    requested = True
                    target.cancel('harness cancel')
                    return
            except StoreError:  # the store went away (closed): nothing to watch any more
                return

    with collecting() as totals:
        watcher = asyncio.create_task(watch()) if watch_cancel else None
        try:
            return await work
        except asyncio.CancelledError:
            if requested:
                raise CancelRequested(run_id) from None
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            finish(span, store, run_id, totals, cancelled=requested)


def finish(span: Any, store: RunStore | None, run_id: str, totals: Totals, *, cancelled: bool) -> None:
    if not totals.empty:
        span.set_attributes(totals.span_attributes())
    if store is None:
        return
    with contextlib.suppress(StoreError):
        if not totals.empty:
            store.set_usage(run_id, totals.as_json())
        if cancelled:
            store.clear_cancel(run_id)
