"""The sandbox loop: drives one paused interpreter from a pause to the final value.

Every pause of the interpreter comes through `ScriptLoop.step`: calls are handed to the dispatcher,
OS requests are refused (or granted), and at each pause where calls are pending the journal gets,
in this order, the calls just made, a snapshot of the paused interpreter with the ledger of pending
calls, and (after the wait) the results, before the sandbox sees them.

Protocol (pydantic-monty 1.4.0, async pool): a call pauses as `AsyncFunctionSnapshot` the moment it
is made; it is answered with a future, and its result is delivered later at an
`AsyncFutureSnapshot`, which lists the calls the sandbox is blocked on. Answering with a value at
once would break the script's `await`; the one host function the sandbox does not await, `__progress__`
(`log`/`phase`, `_progress`), is answered with its value at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pydantic_monty as monty

from .._dispatch._dispatcher import Dispatcher
from .._errors import BudgetExceeded, RunWaiting, WorkflowRuntimeError
from .._records import Checkpoint, Outcome, Pending, PendingCall
from ._joins import HOST_FUNCTIONS, JoinMisuse, Joins, internal_call
from ._progress import PROGRESS_FUNCTION, Progress
from ._values import NotPlainData, plain

SCRIPT_FEED = '<python-input-1>'
"""Monty names feeds in order; feed 0 defines the script helpers (joins, `log`, `phase`), feed 1 is the script."""

OsHandler = Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Outcome | None]]


class ScriptLoop:
    """Answers pauses until the script completes.

    `futures` and `pending` hold the calls made and not yet delivered, by Monty call id. A restored
    snapshot is resumed by admitting its ledger's calls again first (`admit`).
    """

    def __init__(
        self,
        source: str,
        dispatcher: Dispatcher,
        *,
        os_handler: OsHandler | None = None,
        renamed: list[Any] | None = None,
    ) -> None:
        self.source = source.encode()
        self.dispatcher = dispatcher
        self.os_handler = os_handler
        self.renamed = [] if renamed is None else renamed
        """The final value's dict keys that became strings (`plain`), for the result to say so."""
        self.futures: dict[int, asyncio.Future[Outcome]] = {}
        self.pending: dict[int, PendingCall] = {}
        # Call ids whose result is ready, filled by done-callbacks: a delivery costs what is ready,
        # not what is pending (a 10,000-way gather would otherwise rescan every call per result).
        self.ready: set[int] = set()
        self.wakeup: asyncio.Event | None = None
        self.joins = Joins(dispatcher, seq_of=lambda call_id: self.pending.get(call_id, {}).get('seq'))
        self.progress = Progress(dispatcher)

    async def run(self, snap: monty.AsyncSnapshot) -> Any:
        try:
            while not isinstance(snap, monty.MontyComplete):
                snap = await self.step(snap)
            await self.dispatcher.wind_down()
            try:
                return plain(snap.output, self.renamed)
            except NotPlainData as exc:
                raise WorkflowRuntimeError(
                    f"The script's final value holds {exc.type_name}, which is not plain data: end the script "
                    'with dicts, lists, str, int, float, bool or None (a @dataclass instance becomes a dict).'
                ) from None
        except BaseException as exc:
            # A gather that failed abandons its other calls; nothing may outlive the script. A run that
            # stops to wait keeps the calls it waits on; one stopped past its budget lets the calls within it end.
            if isinstance(exc, BudgetExceeded):
                await self.dispatcher.drain()
            await self.dispatcher.wind_down(pausing=isinstance(exc, RunWaiting))
            raise
        finally:
            self.joins.close()
            for future in self.futures.values():
                future.cancel()

    async def step(self, snap: monty.AsyncSnapshot) -> monty.AsyncSnapshot:
        if isinstance(snap, monty.AsyncFunctionSnapshot):
            if snap.is_os_function:
                return await self.answer_os(snap)
            name = str(snap.function_name)
            if name == PROGRESS_FUNCTION:  # log()/phase(): synchronous, so answered with the value itself
                return await snap.resume(self.progress.answer(dict(snap.kwargs)))
            if name in HOST_FUNCTIONS:  # the join helpers asking the host
                if snap.position.filename == SCRIPT_FEED:  # the script itself, not a helper: refused by name
                    return await snap.resume({'exception': internal_call(name)})
                kwargs = dict(snap.kwargs)
                try:
                    outcome = self.joins.answer(name, kwargs)
                except JoinMisuse as exc:  # a helper's internal called with what the helpers never pass
                    return await snap.resume({'exception': exc})
                seq = len(self.dispatcher.calls)  # the journal record it just wrote
                self.answered(
                    PendingCall(call_id=snap.call_id, seq=seq, callee=name, arguments=kwargs, line=None), outcome
                )
                return await snap.resume({'future': ...})
            try:
                call = PendingCall(
                    call_id=snap.call_id,
                    seq=None,
                    callee=name,
                    arguments=arguments_of(name, snap),
                    line=self.line_of(snap.position),
                )
                if snap.args:
                    raise TypeError(
                        f'{name}() takes keyword arguments only: write {name}(name=value, ...) as in its stub'
                    )
                self.admit(call)
            except (NameError, TypeError) as exc:  # wrong as written: raise at the call site
                return await snap.resume({'exception': exc})
            return await snap.resume({'future': ...})
        if isinstance(snap, monty.AsyncFutureSnapshot):
            return await self.deliver(snap)
        assert isinstance(snap, monty.AsyncNameLookupSnapshot)
        name = str(snap.variable_name)
        if snap.object_id is None and name in self.dispatcher.callees:
            # A callee used as a value (`f = reviewer`): bound to a host function of the same name, so a
            # call through the alias pauses like a direct one (and survives a snapshot).
            return await snap.resume(value=callee_handle(name))
        return await snap.resume()  # an unknown name is a NameError in the script

    def admit(self, call: PendingCall) -> None:
        """Hand a call to the dispatcher; `call['seq']` is set only for a restored snapshot's calls."""
        if call['callee'] in HOST_FUNCTIONS and call['seq'] is not None:  # restored: answered from its record
            self.answered(call, {'return_value': self.dispatcher.calls[call['seq'] - 1].result})
            return
        future, seq = self.dispatcher.start(call['callee'], call['arguments'], call['line'], seq=call['seq'])
        future.add_done_callback(lambda _, cid=call['call_id']: self.on_done(cid))
        self.futures[call['call_id']] = future
        self.pending[call['call_id']] = {**call, 'seq': seq}

    def answered(self, call: PendingCall, outcome: Outcome) -> None:
        """A join helper's host call, answered at once (its journal record is at `call['seq']`)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        future.set_result(outcome)
        future.add_done_callback(lambda _, cid=call['call_id']: self.on_done(cid))
        self.futures[call['call_id']] = future
        self.pending[call['call_id']] = call

    def on_done(self, call_id: int) -> None:
        self.ready.add(call_id)
        if self.wakeup is not None:
            self.wakeup.set()

    async def deliver(self, snap: monty.AsyncFutureSnapshot) -> monty.AsyncSnapshot:
        """Journal what was just called, wait until a result the sandbox waits on is ready, deliver
        every such result at once (journaled first).

        Answers decided without running (a rule's refusal, the journal's) go in first, before any
        call of the same pause starts: a script that fails on one then never starts the others, the
        same way on every run, and they are skipped, not charged. A budget's refusal is not among
        them: the dispatcher withholds it until the calls admitted before it have finished.
        """
        pending = set(snap.pending_call_ids)
        if pending.isdisjoint(self.futures):
            raise WorkflowRuntimeError('The sandbox is waiting on calls the harness does not know; retry the script.')
        decided = {cid for cid in pending if cid in self.futures and self.futures[cid].done()}
        if decided and self.dispatcher.staged:
            await self.dispatcher.flush()
            return await self.hand_over(snap, decided)
        await self.dispatcher.launch(snapshot=lambda: self.checkpoint(snap))
        waiting = self.waiting_for_people(pending)
        if waiting:
            await self.dispatcher.journal.write(snapshot=lambda: self.checkpoint(snap))
            raise RunWaiting(waiting)
        if self.wakeup is None:
            self.wakeup = asyncio.Event()
        while not (done := self.ready & pending):
            self.wakeup.clear()
            await self.wakeup.wait()
        if len(done) < len(pending):
            await asyncio.sleep(0)  # let results finishing in this same tick join the delivery
            done = self.ready & pending
        return await self.hand_over(snap, done)

    def waiting_for_people(self, pending: set[int]) -> list[Pending]:
        """The calls the run stops for, when every call the sandbox waits on is held (for a person's
        approval, or by the Temporal starter for an activity): nothing in this process can answer them.

        A withheld budget refusal waits behind the calls admitted before it; when those are held
        elsewhere too, the run stops for them (they need not be among the calls awaited here)."""
        dispatcher = self.dispatcher
        futures = [self.futures.get(cid) for cid in pending]
        if any(future is None or future.done() for future in futures):
            return []  # something to deliver first
        held: dict[int, Pending] = {}
        for call in map(self.pending.__getitem__, pending):
            if call['seq'] is not None and call['seq'] in dispatcher.held:
                held[call['seq']] = Pending(call['seq'], call['callee'], call['arguments'], dispatcher.run_id)
        withheld = sum(1 for future in futures if future in dispatcher.withheld)
        if len(held) + withheld < len(pending):
            return []
        if withheld:
            if dispatcher.staged or dispatcher.unfinished:
                return []  # they finish here, and then the refusal is delivered
            for seq in dispatcher.held:
                record = dispatcher.calls[seq - 1]
                if record.status == 'running':
                    held.setdefault(seq, Pending(seq, record.callee, record.arguments, dispatcher.run_id))
        return [held[seq] for seq in sorted(held)]

    async def hand_over(self, snap: monty.AsyncFutureSnapshot, done: set[int]) -> monty.AsyncSnapshot:
        """Journal these results (write-ahead), then resume the sandbox with them."""
        self.ready -= done
        calls = [self.pending.pop(cid) for cid in done]
        await self.dispatcher.settle([c['seq'] for c in calls if c['seq'] is not None])
        return await snap.resume({cid: self.futures.pop(cid).result() for cid in done})

    def checkpoint(self, snap: monty.AsyncFutureSnapshot) -> Checkpoint:
        """The paused interpreter with every undelivered call (a restored snapshot knows only ids)."""
        self.progress.seal()
        return Checkpoint(len(self.dispatcher.calls), snap.dump(), list(self.pending.values()))

    async def answer_os(self, snap: monty.AsyncFunctionSnapshot) -> monty.AsyncSnapshot:
        name = str(snap.function_name)
        if self.os_handler is not None:
            outcome = await self.os_handler(name, tuple(snap.args), dict(snap.kwargs))
            if outcome is not None:
                await self.dispatcher.journal.write()  # the granted value is journaled before the script sees it
                return await snap.resume(cast(Any, outcome))
        return await snap.resume(
            {
                'exception': PermissionError(
                    f'{name} is not available in a workflow script: there is no filesystem, network, environment, '
                    'clock or OS randomness. Pass what you need as inputs or get it from a registered tool.'
                )
            }
        )

    def line_of(self, position: monty.SourceRange) -> int | None:
        if position.filename != SCRIPT_FEED:
            return None
        return self.source[: position.start].count(b'\n') + 1


def callee_handle(name: str) -> Callable[..., Awaitable[Any]]:
    """What a callee's name is bound to when the script uses it as a value; calling it pauses the
    interpreter like any external call, so this body never runs."""

    async def handle(**kwargs: Any) -> Any:
        raise RuntimeError(f'{name} is dispatched by the harness')

    handle.__name__ = handle.__qualname__ = name
    return handle


def arguments_of(name: str, snap: monty.AsyncFunctionSnapshot) -> dict[str, Any]:
    """A call's keyword arguments as plain data, or the `TypeError` the script sees at the call."""
    try:
        return cast(dict[str, Any], plain(dict(snap.kwargs)))
    except NotPlainData as exc:
        raise TypeError(
            f'{name}(): an argument holds {exc.type_name}, which is not plain data: pass dicts, lists, str, int, '
            'float, bool or None (a @dataclass instance is passed as a dict)'
        ) from None


def clean_traceback(text: str) -> str:
    """Name the script and the helpers as a reader knows them, not by Monty's feed numbers."""
    return text.replace(SCRIPT_FEED, 'workflow.py').replace('<python-input-0>', '<helpers>')
