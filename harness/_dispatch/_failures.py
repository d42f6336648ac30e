"""A callee's failure, as the script and the operator see it: whatever it raised, never raw.

A callee is code the harness does not control: it can raise anything (`SystemExit` from argparse,
`KeyboardInterrupt`, a `CancelledError` of its own, `GeneratorExit`, an exception whose `__str__` raises). Every
`BaseException` but the host's own cancellation of the call (`cancelled_by_host`) becomes the callee's failure:
the script gets `RuntimeError('<callee> failed with <Type>')`, catchable, its message only with `expose_errors=True`
(or for a type whose message is written for the caller), and a message that cannot be read is left out, the type
named alone. The operator's record is the exception on the call span, or, when it cannot be recorded as it is, a
stand-in naming its type.
"""

from __future__ import annotations

import asyncio

from pydantic_ai.exceptions import UsageLimitExceeded

from .._catalog._callees import Callee
from .._tracing._setup import record_exception

SAFE_MESSAGE_TYPES: tuple[type[BaseException], ...] = (UsageLimitExceeded,)
"""Exceptions whose message is written for the caller and holds nothing of the host."""


def cancelled_by_host() -> bool:
    """Whether the running task was cancelled by the host (the script ended, a join dropped the call, the run was
    cancelled), as against a `CancelledError` the callee raised of its own accord."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def type_name(exc: BaseException) -> str:
    name = getattr(type(exc), '__name__', None)
    return name if isinstance(name, str) else 'an exception'


def message_of(exc: BaseException) -> str | None:
    """`str(exc)`, or None when its `__str__` raises (or returns something that is not a string)."""
    try:
        text = str(exc)
    except BaseException:
        return None
    return text if isinstance(text, str) else None


def callee_error_message(callee: Callee, exc: BaseException) -> str:
    """What the script sees of a callee's failure: the callee and the error type, not the message."""
    message = f'{callee.name} failed with {type_name(exc)}'
    if callee.expose_errors or isinstance(exc, SAFE_MESSAGE_TYPES):
        text = message_of(exc)
        message += f': {text}' if text is not None else ' (its message could not be read)'
    return message


def record_failure(exc: BaseException) -> None:
    """The operator's record of a callee's exception (type, message, stack trace) on the current span; one whose
    message cannot be read is recorded by its type."""
    if message_of(exc) is None:
        exc = RuntimeError(f'{type_name(exc)} (its message could not be read)')
    try:
        record_exception(exc)
    except Exception:
        return
