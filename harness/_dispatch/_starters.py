"""Starters: how the dispatcher starts a call once it is journaled, handed in as httpx's `transport=` is.

The dispatcher decides everything about a call (rules, answer sources, budget) and journals it; a
`Starter` only says where it runs. `LocalTasks`, the default, runs each as an asyncio task of this
process. The Temporal engine hands in its own (`harness._temporal`), which leaves each call to an
activity: the call stays held (`Dispatcher.held`) and the run stops at the pause until a later step
finds its result in the journal. The dispatcher has no branch on which engine it serves.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel

from .._catalog._callees import Callee
from .._records import CallRecord, Outcome


@dataclass
class Staged:
    """A call admitted and journaled, for a starter to start: the sandbox's future of it is `future`."""

    callee: Callee
    arguments: BaseModel
    record: CallRecord
    future: asyncio.Future[Outcome]


class DispatcherView(Protocol):
    """What a starter uses of the dispatcher it starts calls for (`_dispatcher.Dispatcher`)."""

    running: dict[int, tuple[asyncio.Task[Outcome], Callee]]
    held: dict[int, asyncio.Future[Outcome]]
    unfinished: int

    async def execute(self, callee: Callee, arguments: BaseModel, record: CallRecord) -> Outcome: ...
    def ended(self, task: asyncio.Task[Outcome], /) -> None: ...
    async def launch(self) -> int: ...
    async def settle(self, seqs: list[int]) -> None: ...


class Starter(Protocol):
    """Where the journaled calls of one dispatcher run."""

    def start(self, dispatcher: DispatcherView, item: Staged) -> None:
        """Start a call that was just journaled `running` (write-ahead): here (`dispatcher.running`), or held
        (`dispatcher.held`) for another worker to run."""
        ...

    async def drain(self, dispatcher: DispatcherView) -> None:
        """The script is stopped with calls admitted within the budget: let those this starter runs end and be
        journaled, as they would have had the script waited for them."""
        ...


class LocalTasks:
    """The embedded engine: every call runs here, as an asyncio task, until its result is journaled
    (`Dispatcher.settle`) or the script ends (`Dispatcher.wind_down` cancels it)."""

    def start(self, dispatcher: DispatcherView, item: Staged) -> None:
        task = asyncio.ensure_future(dispatcher.execute(item.callee, item.arguments, item.record))
        task.add_done_callback(lambda t, f=item.future: transfer(t, f))
        task.add_done_callback(dispatcher.ended)  # after `transfer`: a refusal never overtakes the result
        dispatcher.unfinished += 1
        dispatcher.running[item.record.seq] = (task, item.callee)

    async def drain(self, dispatcher: DispatcherView) -> None:
        """Start the staged calls too, and journal every call running here once it ends."""
        await dispatcher.launch()
        running = list(dispatcher.running)
        await asyncio.gather(*(task for task, _ in dispatcher.running.values()), return_exceptions=True)
        await dispatcher.settle(running)


def transfer(task: asyncio.Task[Outcome], future: asyncio.Future[Outcome]) -> None:
    """The task's ending, as the sandbox's future of the call (unless a join answered it first)."""
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif (exc := task.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(task.result())
