"""The sandbox loop: drives one paused interpreter from the first pause to the final value.

Every pause of the interpreter comes through `ScriptLoop.run`, the one place where calls are
handed to the dispatcher, OS requests are refused or granted, and (when a checkpointer is set) the
paused interpreter is snapshotted together with the ledger of pending calls.

Protocol (pydantic-monty 1.4.0, async pool): a call pauses as `AsyncFunctionSnapshot` the moment it
is made; it is always answered with a future, and its result is delivered later at an
`AsyncFutureSnapshot`, which lists the calls every sandbox task is blocked on. Answering with a
value at once would break the script's `await`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import pydantic_monty as monty

from .dispatch import Dispatcher, Outcome, ScriptCall

SCRIPT_FEED = '<python-input-1>'
"""Monty names feeds in order; feed 0 defines the join helpers, feed 1 is the script."""


class Checkpointer(Protocol):
    """Called at every pause where calls are pending, before the loop waits on any of them."""

    async def __call__(self, snapshot: monty.AsyncFutureSnapshot, pending: dict[int, ScriptCall]) -> None: ...


OsHandler = Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Outcome | None]]


class ScriptLoop:
    """Answers pauses until the script completes; the calls in flight are `futures` by Monty call id."""

    def __init__(
        self,
        source: str,
        dispatcher: Dispatcher,
        *,
        checkpoint: Checkpointer | None = None,
        os_handler: OsHandler | None = None,
    ) -> None:
        self.source = source.encode()
        self.dispatcher = dispatcher
        self.checkpoint = checkpoint
        self.os_handler = os_handler
        self.futures: dict[int, asyncio.Future[Outcome]] = {}
        self.ledger: dict[int, ScriptCall] = {}

    async def run(self, snap: monty.AsyncSnapshot) -> Any:
        try:
            while not isinstance(snap, monty.MontyComplete):
                snap = await self.step(snap)
            return snap.output
        finally:
            # A gather that failed abandons its other calls; nothing may outlive the script.
            for future in self.futures.values():
                future.cancel()

    async def step(self, snap: monty.AsyncSnapshot) -> monty.AsyncSnapshot:
        if isinstance(snap, monty.AsyncFunctionSnapshot):
            if snap.is_os_function:
                return await self.answer_os(snap)
            call = ScriptCall(
                call_id=snap.call_id,
                name=str(snap.function_name),
                args=tuple(snap.args),
                kwargs=dict(snap.kwargs),
                line=self.line_of(snap.position),
            )
            try:
                future = self.dispatcher.start(call)
            except (NameError, TypeError) as exc:  # wrong as written: raise at the call site
                return await snap.resume({'exception': exc})
            self.ledger[call.call_id] = call
            self.futures[call.call_id] = future
            return await snap.resume({'future': ...})
        if isinstance(snap, monty.AsyncFutureSnapshot):
            return await self.deliver(snap)
        assert isinstance(snap, monty.AsyncNameLookupSnapshot)
        return await snap.resume()  # an unknown name is a NameError in the script

    async def deliver(self, snap: monty.AsyncFutureSnapshot) -> monty.AsyncSnapshot:
        pending = [cid for cid in snap.pending_call_ids if cid in self.futures]
        if self.checkpoint is not None:
            await self.checkpoint(snap, {cid: self.ledger[cid] for cid in pending if cid in self.ledger})
        waiting = [self.futures[cid] for cid in pending]
        if not any(f.done() for f in waiting):
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        results: dict[int, Any] = {}
        for cid in pending:
            if self.futures[cid].done():
                results[cid] = self.futures.pop(cid).result()
                self.ledger.pop(cid, None)
        return await snap.resume(results)

    async def answer_os(self, snap: monty.AsyncFunctionSnapshot) -> monty.AsyncSnapshot:
        name = str(snap.function_name)
        if self.os_handler is not None:
            outcome = await self.os_handler(name, tuple(snap.args), dict(snap.kwargs))
            if outcome is not None:
                return await snap.resume(outcome)  # type: ignore[arg-type]
        return await snap.resume({'exception': PermissionError(
            f'{name} is not available in a workflow script: there is no filesystem, network, environment, '
            'clock or OS randomness. Pass what you need as inputs or get it from a registered tool.'
        )})

    def line_of(self, position: monty.SourceRange) -> int | None:
        if position.filename != SCRIPT_FEED:
            return None
        return self.source[: position.start].count(b'\n') + 1


def clean_traceback(text: str) -> str:
    """Name the script and the helpers as a reader knows them, not by Monty's feed numbers."""
    return text.replace(SCRIPT_FEED, 'workflow.py').replace('<python-input-0>', '<join helpers>')
