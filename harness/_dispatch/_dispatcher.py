"""Dispatch: turns one call a script made into one run of a callee, under the run's policies.

`start` is synchronous: lookup, argument validation, the counters that stop a stuck script (`_counters`), the
rules, the answer sources (`_sources`: the journal, a side effect an earlier script made, an earlier identical
result, an eval's baseline, a person's decision) and the reservations of the call and dollar budgets (`_cost`)
all happen in call order with no `await` in between. That makes budgets exact and sequence numbers
deterministic, which the journal and replay rely on. Live calls are staged, then `launch` journals them
(write-ahead) and starts them; `settle` journals results before the loop hands them to the sandbox. Deciding
how a call is answered without running is the sources' job; charging, journaling and running it is this
module's; where a journaled call runs (a task here, or a Temporal activity) is the `Starter` handed in.

A call budget's refusal is withheld while calls admitted before it may still finish here (`live`): the sandbox
gets it once they have, so under any fan-out exactly the budget's worth of calls runs to its end, in call
order, before the script sees the refusal (other answers decided without running are delivered at once; see
`ScriptLoop.deliver`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from typing import Any

from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel

from .._agent._usage import collecting_call
from .._catalog._callees import Callee, WrongReturn, validate_arguments
from .._catalog._rules import SUPPLIED, Ledger, Policy, refusal
from .._errors import BudgetExceeded, ReplayDivergence
from .._records import (
    CallEvent,
    CallRecord,
    CallSource,
    CallStatus,
    Decision,
    EventHandler,
    EventKind,
    Outcome,
    preview,
)
from .._sandbox._values import NotPlainData, to_plain
from .._store._journal import Journal, Snapshot
from .._tracing._names import (
    ATTR_ARGUMENTS,
    ATTR_ATTEMPT,
    ATTR_CALLEE,
    ATTR_LINE,
    ATTR_RESULT_PREVIEW,
    ATTR_RUN_ID,
    ATTR_SEQ,
    ATTR_SOURCE,
    ATTR_STATUS,
    call_span_name,
)
from .._tracing._setup import TRACER
from ._budget import BudgetSpent
from ._context import CallContext, RunScope
from ._cost import CostSpent, call_cost
from ._counters import Counters
from ._failures import callee_error_message, cancelled_by_host, record_failure
from ._history import History, answered, charged
from ._recorded import current as recorded_calls
from ._sources import Grant, Hold, answer_sources, ask, remember
from ._starters import LocalTasks, Staged, Starter

MAX_WITHHELD = 1_000
"""Budget refusals one fan-out may make; past that the script is stopped once the calls within the budget
finish. Each refused call still costs the sandbox a pause: a gather of 100,000 past a budget of 50 would
otherwise spend half a minute being refused."""


class Dispatcher:
    """Runs the calls of one script and keeps their records (`calls`, in call order)."""

    def __init__(
        self,
        *,
        run_id: str,
        callees: Mapping[str, Callee],
        scope: RunScope,
        policy: Policy,
        on_event: EventHandler | None,
        journal: Journal,
        history: History | None = None,
        reuse: bool = False,
        trace_values: bool = True,
        decisions: Mapping[int, Decision] | None = None,
        grants: Sequence[Grant] = (),
        starter: Starter | None = None,
    ) -> None:
        self.run_id = run_id
        self.callees = callees
        self.scope = scope
        self.budget = scope.budget
        self.policy = policy
        self.semaphore = asyncio.Semaphore(policy.max_concurrency) if policy.max_concurrency else None
        self.callee_semaphores = {name: asyncio.Semaphore(n) for name, n in policy.call_concurrency.items()}
        self.ledger = Ledger()
        self.counters = Counters(policy.max_repeats)
        """What stops a stuck script: repeated calls, repeated failures, refusals (`_counters`)."""
        self.refusals = self.counters.refusals
        self.on_event = on_event
        self.journal = journal
        self.history = history
        self.sources = answer_sources(
            run_id=run_id,
            callees=callees,
            history=history,
            scope=scope,
            reuse=reuse,
            recorded=recorded_calls(),
            decisions=dict(decisions or {}),
            grants=grants,
        )
        """Asked in order for each call's answer (`_sources`); the baseline is an eval case's (`reuse_calls`), set
        around the case's orchestrator run."""
        self.trace_values = trace_values
        self.calls: list[CallRecord] = []
        self.staged: list[Staged] = []
        """Admitted live calls not started yet: they start at the next pause that waits on them."""
        self.answered: list[CallRecord] = []
        """Calls answered without running (journal, reuse, refusal) and not journaled yet."""
        self.running: dict[int, tuple[asyncio.Task[Outcome], Callee]] = {}
        """Started calls, by seq, until their result is journaled (`settle`) or the script ends."""
        self.finished: dict[int, int] = {}
        """The order in which live calls finished on the host, by seq (the joins rank by it)."""
        self.futures: dict[int, asyncio.Future[Outcome]] = {}
        """The sandbox's future of each live call, by seq (a join may answer it before it ends)."""
        self.held: dict[int, asyncio.Future[Outcome]] = {}
        """Calls waiting for approval, or (status `running`) for another worker to run them, by seq: never
        answered in this process; the run stops for them."""
        self.starter = starter or LocalTasks()
        """Where journaled calls run (`_starters`): tasks here by default; Temporal's leaves them to activities."""
        self.charged: set[int] = set()
        """Seqs whose budget a restored run already counted (`preload`): not counted again."""
        self.withheld: dict[asyncio.Future[Outcome], Outcome] = {}
        """Budget refusals not delivered yet, in call order: released once nothing is `live`."""
        self.unfinished = 0
        """Started calls whose task has not ended (a count, so `live` costs nothing per result)."""
        self.burst = 0
        """Budget refusals since the sandbox was last handed results: one fan-out past the budget (`reserve`)."""
        self.t0 = time.perf_counter()

    # -- the synchronous half: admit the call, in call order -------------------------------------

    def start(
        self, name: str, kwargs: dict[str, Any], line: int | None, *, seq: int | None = None
    ) -> tuple[asyncio.Future[Outcome], int | None]:
        """Admit a call; return the future the sandbox will be answered from and the call's `seq`
        (None when it was refused before it got one).

        Raises `NameError`/`TypeError` for a call that is wrong as written (as Python would, at the
        call site) and `ReplayDivergence`/`NeedsDecision` when the journal cannot be followed; a
        refused budget is an exception delivered at the `await`. `seq` is given only when a
        restored snapshot's pending call is re-admitted.
        """
        callee, arguments = self.resolve(name, kwargs)
        record = CallRecord(
            seq=seq or len(self.calls) + 1,
            callee=callee.name,
            arguments=arguments.model_dump(mode='json'),
            line=line,
            started=time.perf_counter() - self.t0,
            side_effect=callee.side_effect,
        )
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self.counters.call(record)
        why = refusal(
            callee.name,
            record.arguments,
            callee.requires,
            self.policy.access,
            self.ledger,
            side_effect=callee.side_effect,
            seq=record.seq,
        )
        if why is not None:
            self.refusals.append(why)
            self.counters.refusal(why, record.seq)
            self.refuse(record, why, future)
            return future, record.seq
        # A replay charges the budget before it asks the journal: a call the budget refused has no record
        # there, and would be taken for the journal's next call. (It charges what the recorded run did.)
        replaying = self.history is not None and self.history.mode == 'replay'
        if replaying and self.history.spent(record) and not self.charge(record, callee, future):
            return future, record.seq or None
        answer = ask(self.sources, callee, record)
        if isinstance(answer, Hold):
            self.hold(record, future)
            return future, record.seq
        if not replaying and not self.charge(record, callee, future):
            return future, record.seq or None  # a dollar budget's refusal is journaled; a call budget's is not
        self.add_record(record)
        if answer is not None:
            self.scope.cost.answered(self.run_id, record, self.history, self.budget)
            self.answered.append(record)
            self.finish_answered(record)
            future.set_result(answer)
        elif self.history is not None and self.history.in_flight(record.seq):
            self.held[record.seq] = future  # journaled and handed to an activity already: wait for its result
            self.futures[record.seq] = future  # (a join may still answer it: a deadline, a race lost)
        else:
            self.staged.append(Staged(callee, arguments, record, future))
            self.futures[record.seq] = future
        return future, record.seq

    def charge(self, record: CallRecord, callee: Callee, future: asyncio.Future[Outcome]) -> bool:
        """Whether the call may go on: reused or already counted (`preload`), or within the budget."""
        counted = record.seq in self.charged  # (a call in flight at a crash still reserves its re-run's cost)
        if record.source == 'reused' or (counted and not self.scope.cost.lost(self.run_id, record.seq)):
            return True
        return self.reserve(record, callee, future)

    def reserve(self, record: CallRecord, callee: Callee, future: asyncio.Future[Outcome]) -> bool:
        """Count the call against the budget; or answer `future` with the budget's refusal and return False.

        Refusals made before the sandbox is next handed results (`burst`) are one fan-out past the budget: they
        count once towards `MAX_REFUSALS`, the guard against a script retrying refused calls, and past
        `MAX_WITHHELD` of them the script is stopped. Both depend only on the order of the script's calls, so a
        replay or a resume ends the same way. While calls admitted earlier are `live`, the refusal is withheld
        until they have finished, so the budget's worth of calls runs to its end first."""
        try:
            if record.seq not in self.charged:  # (else a re-run of a call in flight at a crash: only its dollars)
                self.budget.reserve(callee.name, callee.kind)
            self.scope.cost.admit(self.run_id, record, callee, self.history, self.budget)  # its dollar ceiling
        except (BudgetSpent, CostSpent) as exc:
            # A dollar budget's refusal is journaled, as a rule's is: what was left then could not be replayed.
            self.show_refusal(record, exc) if isinstance(exc, BudgetSpent) else self.refuse(record, str(exc), future)
            self.burst += 1
            if self.burst == 1:
                self.counters.refusal(exc.budget)
            if self.burst > MAX_WITHHELD:
                raise BudgetExceeded(
                    f'The script stopped: one fan-out asked for more than {MAX_WITHHELD:,} calls past its budget '
                    f'({self.budget.summary()}). The calls within the budget ran; answer with the completed '
                    'results, and do not fan out past the budget.'
                ) from None
            if isinstance(exc, CostSpent):
                return False
            if self.live():
                self.withheld[future] = {'exception': exc}
            else:
                future.set_result({'exception': exc})
            return False
        return True

    def live(self) -> bool:
        """Whether an admitted call may still finish: staged, running here, or held `running` by another worker."""
        if self.staged or self.unfinished:
            return True
        return any(self.calls[seq - 1].status == 'running' and not f.done() for seq, f in self.held.items())

    def release(self) -> None:
        """Deliver the withheld budget refusals once no call they wait behind can still finish."""
        if not self.withheld or self.live():
            return
        withheld, self.withheld = self.withheld, {}
        for future, outcome in withheld.items():
            if not future.done():
                future.set_result(outcome)

    def ended(self, _task: asyncio.Task[Outcome]) -> None:
        self.unfinished -= 1
        self.release()

    def add_record(self, record: CallRecord) -> None:
        if record.seq <= len(self.calls):
            self.calls[record.seq - 1] = record
        else:
            self.calls.append(record)
        self.ledger.add(record)

    def preload(self, records: list[CallRecord], source: CallSource | None = None) -> None:
        """Calls the run made before the snapshot it restarts from: in the records (shown as `source`; a
        supplied answer stays one), seen by the rules with what they consumed, and counted against the budget
        and the stuck counters once (a call still pending in the snapshot is not counted again when the
        restored interpreter re-admits it)."""
        for record in records:
            callee = self.callees.get(record.callee)
            if self.count(record, callee, self.run_id):
                self.charged.add(record.seq)
            if callee is not None:
                self.counters.restore(record)
                self.ledger.restore(record, callee.requires, callee.side_effect)
            if source is not None and record.source not in SUPPLIED:
                record.source = source
            self.add_record(record)

    def spend(self, records: list[CallRecord]) -> None:
        """Count calls the orchestrator run's other scripts made against its (shared) budget."""
        for record in records:
            self.count(record, self.callees.get(record.callee))

    def count(self, record: CallRecord, callee: Callee | None, run_id: str | None = None) -> bool:
        """Count an earlier call against the call and dollar budgets (`run_id`: this run's); False: it spent nothing."""
        if callee is None or not charged(record):
            return False
        self.budget.count(callee.name, callee.kind)
        self.scope.cost.count(record, callee, run_id)
        return True

    def finish_answered(self, record: CallRecord) -> None:
        """A call answered without running (from the journal, reused, or refused): span and events
        (a refused call never started: one `refused` event)."""
        with self.call_span(record):
            pass
        if record.status == 'refused':
            self.emit('refused', record)
            return
        self.emit('started', record)
        self.emit('finished' if record.status == 'ok' else 'failed', record)

    def refuse(self, record: CallRecord, why: str, future: asyncio.Future[Outcome]) -> None:
        """A call refused before it ran (a rule, a dollar budget): journaled `refused`, a `PermissionError`."""
        future.set_result(answered(record, 'live', error=why, refused=True))
        self.add_record(record)
        self.answered.append(record)
        self.finish_answered(record)

    def show_refusal(self, record: CallRecord, exc: BudgetSpent) -> None:
        """A call a budget refused: it gets no journal position and spent nothing, so it is not a call of
        the run; only the live view hears of it (a `refused` event whose record has seq 0)."""
        record.seq, record.status, record.error, record.duration = 0, 'refused', str(exc), 0.0
        self.emit('refused', record)

    def hold(self, record: CallRecord, future: asyncio.Future[Outcome]) -> None:
        """A call that needs a person's approval and has none: journaled `waiting`, never run here."""
        record.status = 'waiting'
        self.add_record(record)
        self.answered.append(record)  # journaled with the next pause (and its snapshot)
        self.held[record.seq] = future

    def resolve(self, name: str, kwargs: dict[str, Any]) -> tuple[Callee, BaseModel]:
        """The callee and its validated arguments, or the exception the script should see."""
        callee = self.callees.get(name)
        if callee is None:
            known = ', '.join(sorted(self.callees)) or 'none'
            raise NameError(f'name {name!r} is not defined; the callable functions are: {known}')
        return callee, validate_arguments(callee, kwargs)

    def host_value(
        self,
        name: str,
        arguments: dict[str, Any],
        produce: Callable[[], Any],
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
    ) -> Outcome:
        """A value of the host's world (the time, entropy) granted to the script, journaled like a call."""
        record = CallRecord(
            seq=len(self.calls) + 1,
            callee=name,
            arguments=arguments,
            line=None,
            started=time.perf_counter() - self.t0,
            duration=0.0,
            status='ok',
        )
        known, encoded = self.history.host_value(record) if self.history is not None else (False, None)
        if known:
            assert self.history is not None
            value, record.source, record.result = decode(encoded), self.history.source, encoded
        else:
            value = produce()
            record.result = encode(value)
        self.add_record(record)
        self.journal.add([record])  # written before the sandbox sees the value (the loop writes first)
        return {'return_value': value}

    # -- the journal and the asynchronous half ----------------------------------------------------

    async def launch(self, snapshot: Snapshot | None = None) -> int:
        """Journal the staged calls (and answered ones), with a snapshot of the paused interpreter
        when there were any, then start the staged calls. Returns how many calls were new."""
        staged, self.staged = self.staged, []
        answered_now, self.answered = self.answered, []
        if not staged and not answered_now:
            return 0
        if staged and self.history is not None and self.history.mode == 'replay':
            first = staged[0].record
            raise ReplayDivergence(
                f'call #{first.seq} {first.callee} never ran in the recorded run, but the replay needs its result.'
            )
        self.journal.add([*answered_now, *(s.record for s in staged)])
        await self.journal.write(snapshot=snapshot)
        self.remember(answered_now)
        for item in staged:
            self.emit('started', item.record)
            self.starter.start(self, item)
        return len(staged) + len(answered_now)

    async def flush(self) -> None:
        """Journal the calls answered without running that are not journaled yet."""
        answered_now, self.answered = self.answered, []
        self.journal.add(answered_now)
        await self.journal.write()
        self.remember(answered_now)

    async def settle(self, seqs: list[int]) -> None:
        """Journal finished calls durably; the loop calls this before resuming the sandbox with them."""
        self.burst = 0  # the script sees results: a refusal after this is a new attempt, not the same fan-out
        for seq in sorted(seqs):  # what the script is handed, in call order
            if self.calls[seq - 1].callee in self.callees:
                self.counters.outcome(self.calls[seq - 1])
        finished = [self.calls[seq - 1] for seq in sorted(seqs) if self.running.pop(seq, None) is not None]
        self.journal.add(finished)
        await self.journal.write()
        self.remember(finished)

    def remember(self, records: list[CallRecord]) -> None:
        """Results later calls of this orchestrator run may be answered from, once journaled (`_sources.remember`)."""
        remember(self.scope, self.run_id, records)

    async def drain(self) -> None:
        """The script is stopped with calls admitted within the budget (a fan-out far past it): they still run to
        their end and are journaled, as they would have had the script waited for them, where the starter runs
        them (on Temporal their activities are not waited for: `wind_down` cancels them)."""
        self.withheld = {}
        await self.starter.drain(self)

    async def wind_down(self, *, pausing: bool = False) -> None:
        """The script ended (or failed) with calls it did not wait for: none may outlive it, and how
        each ended is journaled. Calls not started yet are `skipped` and give their budget back;
        running ones are cancelled, except a blocking host tool, which cannot be and is awaited.
        `pausing`: the run stops to wait (`RunWaiting`) and keeps the held calls it waits on. A withheld
        budget refusal is dropped: a restored interpreter makes that call again and is refused again."""
        self.withheld = {}
        skipped, self.staged = self.staged, []
        for item in skipped:
            self.skip(item.record, item.callee)
            item.future.cancel()
        running = list(self.running.items())
        self.running = {}
        for _, (task, callee) in running:
            if not callee.blocking:
                task.cancel()
        await asyncio.gather(*(task for _, (task, _) in running), return_exceptions=True)
        for seq, (_task, callee) in running:
            record = self.calls[seq - 1]
            if record.status == 'running':  # cancelled before its first step: it never started
                self.skip(record, callee)
            elif record.status == 'cancelled':
                self.emit('failed', record)
        ended = [self.calls[seq - 1] for seq, _ in running]
        if not pausing:  # held `running` by another worker, which the script no longer waits for: not wanted
            for seq in self.held:
                record = self.calls[seq - 1]
                if record.status == 'running':
                    record.status, record.error = 'cancelled', 'cancelled: the script ended without waiting for it'
                    ended.append(record)
        self.journal.add([*self.answered, *(item.record for item in skipped), *ended])
        self.answered = []
        await self.journal.write()

    def drop(self, seq: int, status: CallStatus, error: BaseException) -> None:
        """A join no longer needs this call (`lost`), or its deadline passed (`timed_out`): the script
        gets `error` in its place at once, the call is cancelled (a blocking tool runs on; its result
        is kept) and the decision is journaled. A call that already finished is left as it is."""
        record = self.calls[seq - 1]
        if record.status != 'running':
            return
        record.status, record.error = status, str(error)
        staged = next((item for item in self.staged if item.record.seq == seq), None)
        if staged is not None:  # never started: gives its budget back
            self.staged.remove(staged)
            self.budget.release(staged.callee.name, staged.callee.kind)
            self.scope.cost.release(self.run_id, seq)
        else:
            record.duration = time.perf_counter() - self.t0 - record.started
            running = self.running.pop(seq, None)
            if running is not None and not running[1].blocking:
                running[0].cancel()
        future = self.futures.get(seq)
        if future is not None and not future.done():
            future.set_result({'exception': error})
        self.emit('failed', record)
        self.journal.add([record])  # written before the sandbox sees the exception (the loop writes first)
        self.release()

    def skip(self, record: CallRecord, callee: Callee) -> None:
        record.status, record.error = 'skipped', 'the script ended before this call started'
        self.budget.release(callee.name, callee.kind)
        self.scope.cost.release(self.run_id, record.seq)
        self.emit('skipped', record)

    async def execute(self, callee: Callee, arguments: BaseModel, record: CallRecord) -> Outcome:
        try:
            async with AsyncExitStack() as limits:  # the run's cap, then the callee's
                for semaphore in (self.semaphore, self.callee_semaphores.get(callee.name)):
                    if semaphore is not None:
                        await limits.enter_async_context(semaphore)
                return await self.run_one(callee, arguments, record)
        except GeneratorExit as exc:  # a future the callee awaited held one: the task throws it in here (`_failures`)
            error = RuntimeError(callee_error_message(callee, exc))
            if record.status == 'error':  # `run_one`, closed on the way, failed it with the close's own GeneratorExit
                record.error = str(error)
                return {'exception': error}
            return self.fail(record, time.perf_counter(), error)

    async def run_one(self, callee: Callee, arguments: BaseModel, record: CallRecord) -> Outcome:
        ctx = CallContext(
            run_id=self.run_id, seq=record.seq, callee=callee.name, attempt=record.attempt, deps=self.scope.deps
        )
        started = time.perf_counter()
        with self.call_span(record), collecting_call() as used:
            try:
                value = callee.returns.check(await callee.invoke(arguments, ctx, self.scope))
                plain = to_plain(value, callee.returns.dump)
            except asyncio.CancelledError as exc:
                if not cancelled_by_host():  # the callee's own: its failure, like any other exception
                    record_failure(exc)
                    return self.fail(record, started, RuntimeError(callee_error_message(callee, exc)))
                if record.status == 'running':  # not dropped by a join, which set its own status
                    record.status, record.error = 'cancelled', 'cancelled: the script ended without waiting for it'
                    record.duration = time.perf_counter() - started
                raise
            except WrongReturn as exc:
                return self.fail(record, started, TypeError(callee.wrong_return(exc)))
            except NotPlainData as exc:
                return self.fail(
                    record,
                    started,
                    RuntimeError(
                        f'{callee.name} returned {exc.type_name}, which cannot cross into the sandbox as plain data'
                    ),
                )
            except BaseException as exc:  # SystemExit (argparse), KeyboardInterrupt, GeneratorExit too (`_failures`)
                record_failure(exc)  # the operator's record: type, message, stack trace (the script gets none)
                return self.fail(record, started, RuntimeError(callee_error_message(callee, exc)))
            finally:  # what the call cost settles its dollar reservation, before its result is journaled
                self.scope.cost.ended(self.run_id, record, call_cost(callee, used))
            record.result = plain
            self.finished[record.seq] = len(self.finished)
            if record.status == 'running':  # a blocking tool a join dropped keeps that status, and its result
                record.status = 'ok'
                record.duration = time.perf_counter() - started
        self.emit('finished', record)
        return {'return_value': plain}

    @contextmanager
    def call_span(self, record: CallRecord) -> Generator[None]:
        """One `call {callee}` span; a sub-agent's own spans nest inside it."""
        attributes: dict[str, Any] = {
            ATTR_RUN_ID: self.run_id,
            ATTR_CALLEE: record.callee,
            ATTR_SEQ: record.seq,
            ATTR_ATTEMPT: record.attempt,
            ATTR_SOURCE: record.source,
        }
        if record.line is not None:
            attributes[ATTR_LINE] = record.line
        if self.trace_values:
            attributes[ATTR_ARGUMENTS] = preview(record.arguments, 2_000)
        with TRACER.start_as_current_span(call_span_name(record.callee), attributes=attributes) as span:
            try:
                yield
            finally:
                span.set_attribute(ATTR_STATUS, record.status)
                if record.status in ('error', 'refused'):
                    span.set_status(Status(StatusCode.ERROR, record.error or 'failed'))
                elif self.trace_values and record.status == 'ok':
                    span.set_attribute(ATTR_RESULT_PREVIEW, preview(record.result, 300))

    def fail(self, record: CallRecord, started: float, error: Exception) -> Outcome:
        record.status = 'error'
        record.error = str(error)
        record.duration = time.perf_counter() - started
        self.emit('failed', record)
        return {'exception': error}

    def emit(self, kind: EventKind, record: CallRecord) -> None:
        if self.on_event is None:
            return
        cost = self.scope.cost  # the run's dollars at this moment (`started` after its reservation, `finished` settled)
        if not cost.active:
            self.on_event(CallEvent(kind, self.run_id, record))
            return
        self.on_event(CallEvent(kind, self.run_id, record, cost.spent, cost.held, cost.totals()))
