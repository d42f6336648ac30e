"""Dispatch: turns one call a script made into one run of a callee, under the run's policies.

`start` is synchronous: lookup, argument validation, the journal's answer (replay, resume, fork),
reuse of an identical earlier result, and the budget reservation all happen in call order with no
`await` in between. That makes budgets exact and sequence numbers deterministic, which the journal
and replay rely on. Live calls are staged, then `launch` journals them (write-ahead) and starts
them; `settle` journals results before the loop hands them to the sandbox.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel, ValidationError
from pydantic_ai.exceptions import UsageLimitExceeded

from ._budget import Budget
from ._catalog import Callee
from ._context import CallContext, RunScope
from ._errors import NeedsDecision, ReplayDivergence
from ._events import CallEvent, EventHandler, EventKind
from ._journal import Journal, Snapshot
from ._result import CallRecord, CallSource
from ._store import CallRow
from ._tracing import TRACER, json_attr
from ._values import NotPlainData, preview, to_plain

Outcome = dict[str, Any]
"""What the sandbox is answered with: `{'return_value': v}` or `{'exception': exc}`."""

# Exceptions whose message is written for the caller and holds nothing of the host.
SAFE_MESSAGE_TYPES: tuple[type[BaseException], ...] = (UsageLimitExceeded,)


@dataclass(frozen=True)
class ScriptCall:
    """A call the paused interpreter is waiting on."""

    call_id: int
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    line: int | None


@dataclass
class History:
    """What the journal already knows, and how to use it: answer calls instead of running them.

    - `replay`: every call must be in the journal, in order, and is answered from it.
    - `resume`: journaled results are answered; calls that were in flight run again (a
      side-effecting one only with `retry_unknown` or an explicit answer).
    - `fork`: calls before `fork_at` are answered from the parent's journal; `fork_at` is answered
      with `answers[fork_at]`; later calls run live.
    """

    mode: Literal['replay', 'resume', 'fork']
    rows: dict[int, CallRow]
    answers: dict[int, Any] = field(default_factory=dict)
    retry_unknown: bool = False
    fork_at: int | None = None

    @property
    def source(self) -> CallSource:
        return {'replay': 'replayed', 'resume': 'resumed', 'fork': 'forked'}[self.mode]


@dataclass
class Staged:
    callee: Callee
    arguments: BaseModel
    record: CallRecord
    future: asyncio.Future[Outcome]


class Dispatcher:
    """Runs the calls of one script and keeps their records (`calls`, in call order)."""

    def __init__(
        self,
        *,
        run_id: str,
        callees: Mapping[str, Callee],
        budget: Budget,
        scope: RunScope,
        semaphore: asyncio.Semaphore | None,
        on_event: EventHandler | None,
        journal: Journal | None = None,
        history: History | None = None,
        reuse: bool = False,
        trace_values: bool = True,
    ) -> None:
        self.run_id = run_id
        self.callees = callees
        self.budget = budget
        self.scope = scope
        self.semaphore = semaphore
        self.on_event = on_event
        self.journal = journal or Journal(None, run_id)
        self.history = history
        self.reuse = reuse
        self.trace_values = trace_values
        self.calls: list[CallRecord] = []
        self.staged: list[Staged] = []
        self.answered: list[CallRecord] = []
        self.t0 = time.perf_counter()

    # -- the synchronous half: admit the call, in call order -------------------------------------

    def start(self, call: ScriptCall, *, seq: int | None = None) -> asyncio.Future[Outcome]:
        """Admit a call and return the future the sandbox will be answered from.

        Raises `NameError`/`TypeError` for a call that is wrong as written (as Python would, at the
        call site) and `ReplayDivergence`/`NeedsDecision` when the journal cannot be followed; a
        refused budget is an exception delivered at the `await`. `seq` is given only when a
        restored snapshot's pending call is re-admitted.
        """
        callee, arguments = self.resolve(call)
        record = CallRecord(
            seq=seq or len(self.calls) + 1,
            callee=callee.name,
            arguments=arguments.model_dump(mode='json'),
            line=call.line,
            started=time.perf_counter() - self.t0,
        )
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        answer = self.from_history(callee, record)
        if answer is None and self.reuse and self.history is None:
            answer = self.from_earlier_script(record)
        if answer is None or record.source != 'reused':
            try:
                self.budget.reserve(callee)
            except Exception as exc:
                future.set_result({'exception': exc})
                return future
        self.add_record(record)
        if answer is not None:
            self.answered.append(record)
            with self.call_span(record):
                pass
            self.emit('started', record)
            self.emit('finished' if record.status == 'ok' else 'failed', record)
            future.set_result(answer)
        else:
            self.staged.append(Staged(callee, arguments, record, future))
        return future

    def add_record(self, record: CallRecord) -> None:
        if record.seq <= len(self.calls):
            self.calls[record.seq - 1] = record
        else:
            self.calls.append(record)

    def resolve(self, call: ScriptCall) -> tuple[Callee, BaseModel]:
        """The callee and its validated arguments, or the exception the script should see."""
        callee = self.callees.get(call.name)
        if callee is None:
            known = ', '.join(sorted(self.callees)) or 'none'
            raise NameError(f'name {call.name!r} is not defined; the callable functions are: {known}')
        if call.args:
            raise TypeError(
                f'{call.name}() takes keyword arguments only: write {call.name}(name=value, ...) as in its stub'
            )
        return callee, validate_arguments(callee, call.kwargs)

    def from_history(self, callee: Callee, record: CallRecord) -> Outcome | None:
        """The journal's answer for this call, None to run it live; raises when the journal disagrees."""
        history = self.history
        if history is None:
            return None
        seq = record.seq
        if history.mode == 'fork' and history.fork_at is not None:
            if seq == history.fork_at:
                return self.answer(record, 'answered', result=history.answers[seq])
            if seq > history.fork_at:
                return None
        row = history.rows.get(seq)
        if row is None:
            if history.mode == 'replay':
                raise ReplayDivergence(
                    f'call #{seq} {describe(record.callee, record.arguments)} is not in the journal: '
                    'the script now makes more calls than the recorded run did.'
                )
            return None
        if row.callee != record.callee or row.arguments != record.arguments:
            raise ReplayDivergence(
                f'call #{seq} diverges from the journal: the script now calls '
                f'{describe(record.callee, record.arguments)}, the recorded run called '
                f'{describe(row.callee, row.arguments)}.'
            )
        if seq in history.answers:
            return self.answer(record, 'answered', result=history.answers[seq])
        record.attempt = row.attempt
        if row.status == 'ok':
            return self.answer(record, history.source, result=row.result)
        if row.status == 'error':
            return self.answer(record, history.source, error=row.error or f'{row.callee} failed')
        # In flight when the recorded run stopped: its outcome is unknown.
        if history.mode == 'replay':
            raise ReplayDivergence(f'call #{seq} {row.callee} never finished in the recorded run; resume it instead.')
        if (callee.side_effect or row.side_effect) and not history.retry_unknown:
            raise NeedsDecision(
                f'call #{seq} {describe(row.callee, row.arguments)} has side effects and was in flight when the '
                'run stopped, so its outcome is unknown. Resume with --retry-unknown to run it again, or '
                f'--answer {seq}=JSON to supply its result.',
                seq=seq,
            )
        record.attempt = row.attempt + 1
        return None

    def from_earlier_script(self, record: CallRecord) -> Outcome | None:
        """Reuse an identical call that completed in an earlier script of the same orchestrator run."""
        earlier = self.scope.reusable.get(reuse_key(record.callee, record.arguments))
        if earlier is None:
            return None
        return self.answer(record, 'reused', result=earlier)

    def answer(
        self, record: CallRecord, source: CallSource, *, result: Any = None, error: str | None = None
    ) -> Outcome:
        record.source = source
        record.duration = 0.0
        if error is not None:
            record.status, record.error = 'error', error
            return {'exception': RuntimeError(error)}
        record.status, record.result = 'ok', result
        return {'return_value': result}

    def host_value(
        self,
        name: str,
        arguments: dict[str, Any],
        produce: Callable[[], Any],
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
    ) -> Outcome:
        """A value of the host's world (the time, entropy) granted to the script, journaled like a call."""
        record = CallRecord(seq=len(self.calls) + 1, callee=name, arguments=arguments, line=None,
                            started=time.perf_counter() - self.t0, duration=0.0)
        history = self.history
        row = history.rows.get(record.seq) if history is not None else None
        if row is not None and history is not None and (history.fork_at is None or record.seq < history.fork_at):
            if row.callee != name:
                raise ReplayDivergence(
                    f'call #{record.seq} diverges from the journal: the script now asks the host for {name}, '
                    f'the recorded run called {describe(row.callee, row.arguments)}.'
                )
            value, record.source, record.result = decode(row.result), history.source, row.result
        elif history is not None and history.mode == 'replay':
            raise ReplayDivergence(f'call #{record.seq} ({name}) is not in the journal.')
        else:
            value = produce()
            record.result = encode(value)
        record.status = 'ok'
        self.add_record(record)
        self.journal.calls([(record, False)])
        return {'return_value': value}

    # -- the journal and the asynchronous half ----------------------------------------------------

    def launch(self, snapshot: Snapshot | None = None) -> int:
        """Journal the staged calls (and answered ones), with a snapshot of the paused interpreter
        when there were any, then start the staged calls. Returns how many calls were new."""
        staged, self.staged = self.staged, []
        answered, self.answered = self.answered, []
        if not staged and not answered:
            return 0
        self.journal.calls(
            [(r, r.callee in self.callees and self.callees[r.callee].side_effect) for r in answered]
            + [(s.record, s.callee.side_effect) for s in staged],
            snapshot=snapshot,
        )
        for item in staged:
            self.emit('started', item.record)
            task = asyncio.ensure_future(self.execute(item.callee, item.arguments, item.record))
            task.add_done_callback(lambda t, f=item.future: transfer(t, f))
            item.future.add_done_callback(lambda f, t=task: t.cancel() if f.cancelled() else None)
        return len(staged) + len(answered)

    def settle(self, records: list[CallRecord]) -> None:
        """Journal finished calls durably; the loop calls this before resuming the sandbox with them."""
        live = [r for r in records if r.source == 'live']
        self.journal.calls([(r, self.callees[r.callee].side_effect) for r in live if r.callee in self.callees])
        for record in live:
            if record.status == 'ok':
                self.scope.reusable.setdefault(reuse_key(record.callee, record.arguments), record.result)

    async def execute(self, callee: Callee, arguments: BaseModel, record: CallRecord) -> Outcome:
        if self.semaphore is None:
            return await self.run_one(callee, arguments, record)
        async with self.semaphore:
            return await self.run_one(callee, arguments, record)

    async def run_one(self, callee: Callee, arguments: BaseModel, record: CallRecord) -> Outcome:
        ctx = CallContext(run_id=self.run_id, seq=record.seq, callee=callee.name, attempt=record.attempt,
                          deps=self.scope.deps)
        started = time.perf_counter()
        with self.call_span(record):
            try:
                plain = to_plain(await callee.invoke(arguments, ctx, self.scope), callee.returns.dump)
            except asyncio.CancelledError:
                record.status = 'cancelled'
                record.duration = time.perf_counter() - started
                raise
            except NotPlainData as exc:
                return self.fail(record, started, RuntimeError(
                    f'{callee.name} returned a value of type {exc.type_name}, which cannot cross into the sandbox'
                ))
            except Exception as exc:
                return self.fail(record, started, RuntimeError(callee_error_message(callee, exc)))
            record.status = 'ok'
            record.result = plain
            record.duration = time.perf_counter() - started
        self.emit('finished', record)
        return {'return_value': plain}

    @contextmanager
    def call_span(self, record: CallRecord) -> Generator[None]:
        """One `call {callee}` span; a sub-agent's own spans nest inside it."""
        attributes: dict[str, Any] = {
            'harness.run_id': self.run_id, 'harness.callee': record.callee, 'harness.seq': record.seq,
            'harness.attempt': record.attempt, 'harness.source': record.source,
        }
        if record.line is not None:
            attributes['harness.line'] = record.line
        if self.trace_values:
            attributes['harness.arguments'] = json_attr(record.arguments)
        with TRACER.start_as_current_span(f'call {record.callee}', attributes=attributes) as span:
            try:
                yield
            finally:
                span.set_attribute('harness.status', record.status)
                if record.status == 'error':
                    span.set_status(Status(StatusCode.ERROR, record.error or 'failed'))
                elif self.trace_values and record.status == 'ok':
                    span.set_attribute('harness.result_preview', preview(record.result, 300))

    def fail(self, record: CallRecord, started: float, error: Exception) -> Outcome:
        record.status = 'error'
        record.error = str(error)
        record.duration = time.perf_counter() - started
        self.emit('failed', record)
        return {'exception': error}

    def emit(self, kind: EventKind, record: CallRecord) -> None:
        if self.on_event is None:
            return
        self.on_event(CallEvent(
            kind=kind,
            run_id=self.run_id,
            seq=record.seq,
            callee=record.callee,
            arguments=record.arguments,
            line=record.line,
            source=record.source,
            elapsed=record.duration if kind != 'started' else None,
            error=record.error,
            result=record.result,
        ))


def transfer(task: asyncio.Task[Outcome], future: asyncio.Future[Outcome]) -> None:
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif (exc := task.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(task.result())


def reuse_key(callee: str, arguments: dict[str, Any]) -> str:
    import json

    return callee + json.dumps(arguments, sort_keys=True, separators=(',', ':'))


def describe(callee: str, arguments: dict[str, Any]) -> str:
    return f'{callee}({preview(arguments, 120)})'


def validate_arguments(callee: Callee, kwargs: dict[str, Any]) -> BaseModel:
    """Validate keyword arguments against the callee's declared types, as a `TypeError` the script can read."""
    try:
        return callee.params.model_validate(kwargs)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False)[:5]:
            where = '.'.join(str(part) for part in err['loc']) or 'arguments'
            if err['type'] == 'extra_forbidden':
                problems.append(f'unexpected keyword argument {where!r}')
            elif err['type'] == 'missing':
                problems.append(f'missing keyword argument {where!r}')
            else:
                problems.append(f'argument {where!r}: {err["msg"]}')
        raise TypeError(f'{callee.name}(): ' + '; '.join(problems)) from None


def callee_error_message(callee: Callee, exc: BaseException) -> str:
    """What the script sees of a callee's failure: the callee and the error type, not the message."""
    message = f'{callee.name} failed with {type(exc).__name__}'
    if callee.expose_errors or isinstance(exc, SAFE_MESSAGE_TYPES):
        message += f': {exc}'
    return message
