"""Dispatch: turns one call a script made into one run of a callee, under the run's policies.

`start` is synchronous up to the moment the callee is scheduled: lookup, argument validation and
the budget reservation happen in call order with no `await` in between, which is what makes budgets
exact and sequence numbers deterministic (the journal and replay rely on both). A refused call
costs nothing and comes back to the script as an exception it can catch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_ai.exceptions import UsageLimitExceeded

from .budget import Budget
from .catalog import Callee
from .context import CallContext, RunScope
from .events import CallEvent, EventHandler
from .result import CallRecord
from .values import NotPlainData, preview, to_plain

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
    ) -> None:
        self.run_id = run_id
        self.callees = callees
        self.budget = budget
        self.scope = scope
        self.semaphore = semaphore
        self.on_event = on_event
        self.calls: list[CallRecord] = []
        self.t0 = time.perf_counter()

    # -- the synchronous half: admit the call, in call order -------------------------------------

    def start(self, call: ScriptCall) -> asyncio.Future[Outcome]:
        """Schedule the call. Raises `NameError`/`TypeError` for a call that is wrong as written
        (as Python would, at the call site); a refused budget is an exception at the `await`."""
        callee, arguments = self.resolve(call)
        try:
            self.budget.reserve(callee)
        except Exception as exc:
            refused: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
            refused.set_result({'exception': exc})
            return refused
        record = CallRecord(
            seq=len(self.calls) + 1,
            callee=callee.name,
            arguments=arguments.model_dump(mode='json'),
            line=call.line,
            started=time.perf_counter() - self.t0,
        )
        self.calls.append(record)
        self.emit('started', record)
        return asyncio.ensure_future(self.execute(callee, arguments, record))

    def resolve(self, call: ScriptCall) -> tuple[Callee, BaseModel]:
        """The callee and its validated arguments, or the exception the script should see."""
        callee = self.callees.get(call.name)
        if callee is None:
            known = ', '.join(sorted(self.callees)) or 'none'
            raise NameError(f'name {call.name!r} is not defined; the callable functions are: {known}')
        if call.args:
            raise TypeError(
                f'{call.name}() takes keyword arguments only: write {call.name}(name=value, ...) '
                'as in its stub'
            )
        return callee, validate_arguments(callee, call.kwargs)

    # -- the asynchronous half: run it ------------------------------------------------------------

    async def execute(self, callee: Callee, arguments: BaseModel, record: CallRecord) -> Outcome:
        ctx = CallContext(run_id=self.run_id, seq=record.seq, callee=callee.name, attempt=record.attempt,
                          deps=self.scope.deps)
        started = time.perf_counter()
        try:
            if self.semaphore is None:
                value = await callee.invoke(arguments, ctx, self.scope)
            else:
                async with self.semaphore:
                    started = time.perf_counter()
                    value = await callee.invoke(arguments, ctx, self.scope)
            plain = to_plain(value, callee.returns)
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

    def fail(self, record: CallRecord, started: float, error: Exception) -> Outcome:
        record.status = 'error'
        record.error = str(error)
        record.duration = time.perf_counter() - started
        self.emit('failed', record)
        return {'exception': error}

    def emit(self, kind: str, record: CallRecord) -> None:
        if self.on_event is None:
            return
        self.on_event(CallEvent(
            kind=kind,  # type: ignore[arg-type]
            run_id=self.run_id,
            seq=record.seq,
            callee=record.callee,
            arguments=record.arguments,
            line=record.line,
            source=record.source,
            elapsed=record.duration,
            error=record.error,
            result=record.result,
        ))


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


def result_preview(record: CallRecord, limit: int = 300) -> str:
    return preview(record.result, limit) if record.status == 'ok' else f'error: {record.error}'
