"""Runs one script: check -> sandbox loop -> final value, and turns every failure into a `WorkflowError`.

This is the only module that knows how Monty reports failures; everything above it sees
`WorkflowError` subclasses with messages written for the model.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pydantic_monty as monty
from opentelemetry.trace import Status, StatusCode

from .._check._checker import Checker, CheckReport
from .._dispatch._dispatcher import Dispatcher
from .._errors import (
    BudgetExceeded,
    PolicyViolation,
    SandboxCrashed,
    WorkflowError,
    WorkflowRuntimeError,
    WorkflowTypeError,
)
from .._records import PendingCall, is_progress
from .._tracing._names import ATTR_ERRORS, SPAN_CHECK
from .._tracing._setup import TRACER
from ._loop import OsHandler, ScriptLoop, clean_traceback
from ._pool import SandboxPool

PRINT_LIMIT = 64_000


class PrintCapture:
    """Collects what the script prints, bounded so a print flood cannot fill the host's memory."""

    def __init__(self, limit: int = PRINT_LIMIT) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def __call__(self, stream: str, text: str) -> None:
        room = self.limit - self.size
        if room <= 0:
            self.dropped += len(text)
            return
        kept = text[:room]
        self.parts.append(kept)
        self.size += len(kept)
        self.dropped += len(text) - len(kept)

    @property
    def text(self) -> str:
        joined = ''.join(self.parts)
        if self.dropped:
            joined += f'\n[... {self.dropped} more characters of output dropped]\n'
        return joined


@dataclass
class ScriptRun:
    """One script to run: what to run it against, and the hooks of the run that owns it."""

    code: str
    stubs: str
    dispatcher: Dispatcher
    inputs: dict[str, Any] | None = None
    type_check: bool = True
    rule_errors: list[str] = field(default_factory=list)
    """What the static analysis found against the rules, when they must fail the check (`strict=True`)."""
    os_handler: OsHandler | None = None
    restore: RestorePoint | None = None
    """Start from a stored snapshot instead of the beginning (resume, replay --from)."""
    renamed: list[Any] = field(default_factory=list)
    """The final value's dict keys that became strings, as JSON makes them (the result says so)."""


@dataclass
class RestorePoint:
    """A verified Monty dump and the calls it was waiting on."""

    dump: bytes
    ledger: list[PendingCall]


async def run_script(pool: SandboxPool, checker: Checker, job: ScriptRun, printed: PrintCapture) -> Any:
    """The script's final value; raises `WorkflowError` (with completed calls and output attached)."""
    try:
        return await _run(pool, checker, job, printed)
    except WorkflowError as exc:
        exc.run_id = job.dispatcher.run_id
        exc.completed = [r for r in job.dispatcher.calls if r.status == 'ok' and not is_progress(r)]
        exc.printed = printed.text
        raise


async def _run(pool: SandboxPool, checker: Checker, job: ScriptRun, printed: PrintCapture) -> Any:
    if job.type_check:  # a resumed or replayed script too: it runs against today's stubs
        await check_or_raise(checker, job)
    if job.restore is not None:
        return await _run_restored(pool, job, job.restore, printed)
    async with pool.session(stubs=None, print_callback=printed) as session:
        loop = ScriptLoop(job.code, job.dispatcher, os_handler=job.os_handler, renamed=job.renamed)
        try:
            first = await session.feed_start(job.code, inputs=job.inputs, print_callback=printed)
            return await loop.run(first)
        except BaseException as exc:
            raise translate(exc, job.dispatcher) from None


async def check_or_raise(checker: Checker, job: ScriptRun) -> None:
    """The `check` span: nothing runs unless the script type-checks against the stubs."""
    with TRACER.start_as_current_span(SPAN_CHECK, attributes={ATTR_ERRORS: 0}) as span:
        report = await type_check(checker, job.stubs, job.code)
        if not report.ok:
            span.set_attribute(ATTR_ERRORS, len(report.diagnostics) or 1)
            span.set_status(Status(StatusCode.ERROR, 'type check failed'))
            raise type_error(report.errors, report.diagnostics)
        if job.rule_errors:
            span.set_attribute(ATTR_ERRORS, len(job.rule_errors))
            span.set_status(Status(StatusCode.ERROR, 'refused by strict mode'))
            raise WorkflowTypeError(  # a rule some path breaks, an incomplete analysis, an unguarded callee reached
                'The script is refused by strict mode, so nothing ran (fix each line):\n'
                + '\n'.join(f'workflow.py:{error}' for error in job.rule_errors)
            )


async def _run_restored(pool: SandboxPool, job: ScriptRun, restore: RestorePoint, printed: PrintCapture) -> Any:
    async with pool.session(stubs=None, print_callback=printed, helpers=False) as session:
        loop = ScriptLoop(job.code, job.dispatcher, os_handler=job.os_handler, renamed=job.renamed)
        try:
            first = await session.load_snapshot(restore.dump, print_callback=printed)
            for call in restore.ledger:
                loop.admit(call)
            loop.joins.rearm()
            return await loop.run(first)
        except BaseException as exc:
            raise translate(exc, job.dispatcher) from None


def translate(exc: BaseException, dispatcher: Dispatcher) -> BaseException:
    """A Monty failure as the `WorkflowError` the model reads; anything else unchanged."""
    if isinstance(exc, (WorkflowError, asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)):
        return exc
    if isinstance(exc, monty.MontyRuntimeError):
        return runtime_error(exc, dispatcher)
    if isinstance(exc, monty.MontyCrashedError):
        return SandboxCrashed(
            'The sandbox worker running the script died (it was killed or ran out of resources). '
            'The completed calls are listed; retry, reusing their results.'
        )
    if isinstance(exc, monty.MontyError):
        return WorkflowRuntimeError(f'The sandbox refused the script: {clean_traceback(str(exc))}')
    if type(exc).__module__.startswith(('pydantic_monty', 'pyo3')) or 'Panic' in type(exc).__name__:
        return SandboxCrashed(
            'The sandbox failed internally while running the script. Retry; the completed calls are listed.'
        )
    return exc


async def type_check(checker: Checker, stubs: str, code: str) -> CheckReport:
    """ty's report on `code` against `stubs`; the checker's own failure is a `SandboxCrashed` (a retry)."""
    try:
        return await checker.check(stubs, code)
    except monty.MontyError as exc:
        raise SandboxCrashed(f'The type checker failed internally ({type(exc).__name__}); retry.') from None


def type_error(errors: str, diagnostics: list[Any], *, run_id: str | None = None) -> WorkflowTypeError:
    return WorkflowTypeError(
        f'The script failed the type check against the stubs, so nothing ran:\n{errors}',
        diagnostics=diagnostics,
        run_id=run_id,
    )


def runtime_error(exc: monty.MontyRuntimeError, dispatcher: Dispatcher) -> WorkflowError:
    inner = exc.exception()
    detail = clean_traceback(exc.display()).strip()
    budget = dispatcher.budget
    if budget.exhausted:
        return BudgetExceeded(
            f'The script stopped because a call budget ran out ({budget.summary()}). '
            f'Do not retry the same fan-out; answer with the completed results.\n{detail}'
        )
    if 'exceptions can only be called with zero or one string argument' in detail:
        return WorkflowRuntimeError(
            'The script raised an exception whose argument is not one string (like ValueError(42)): in the '
            'sandbox an exception takes at most one string argument. Write ValueError(str(x)).'
        )
    if isinstance(inner, PermissionError) and str(inner) in dispatcher.refusals:
        return PolicyViolation(
            f'The script stopped because a rule refused a call (it did not run): {inner}\n{detail}\n'
            'Call what the rule requires first, or catch PermissionError and finish without that call.'
        )
    if isinstance(inner, TimeoutError) and 'limit' in str(inner):
        return WorkflowRuntimeError(
            f'The script ran past its sandbox time limit ({exc.display("msg")}). Time spent waiting on '
            'calls does not count, so look for an endless loop or heavy computation in the script itself.'
        )
    if isinstance(inner, MemoryError):
        return WorkflowRuntimeError(
            f'The script ran past its sandbox memory limit ({exc.display("msg")}). Build smaller values.'
        )
    if 'suspension' in str(inner).lower():
        return WorkflowRuntimeError(f'The script made too many calls for the sandbox limits: {exc.display("msg")}')
    return WorkflowRuntimeError(f'The script raised an error:\n{detail}')
