"""The edge of the command line: what reaches the user when a command did not say what went wrong.

Every command turns the failures it expects into one line naming the fix (`fail`). `Edge`, the typer group
the `app` is, is the net under them: an argument or a `HARNESS_*` variable that is not UTF-8 text is refused
before any command runs (a run id, a prompt or a secret is text), and an exception no command caught is
still one line, `error: TYPE: message`, with exit 1; `HARNESS_DEBUG=1` prints its traceback after it.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from .._errors import StoreError, WorkflowError
from ._safe_text import SafeConsole, visible

DEBUG_VARIABLE = 'HARNESS_DEBUG'


def describe(exc: BaseException) -> str:
    """`TYPE: message` on one line; an exception whose `__str__` raises is named by its type."""
    try:
        message = str(exc)
    except Exception:
        message = ''
    if isinstance(exc, OSError) and exc.strerror:
        message = exc.strerror + (f': {exc.filename}' if exc.filename is not None else '')
    text = f'{type(exc).__name__}: {message}' if message else type(exc).__name__
    return ' '.join(visible(text).split())[:2_000]


def unforeseen(exc: BaseException) -> str:
    """The one line for an exception no command expected, with what to do about the common kinds; the store's and
    a run's own errors are worded for the user already (a write to a read-only store, a run's refusal)."""
    if isinstance(exc, StoreError | WorkflowError):
        text = exc.message if isinstance(exc, WorkflowError) else describe(exc).removeprefix('StoreError: ')
        return ' '.join(visible(text).split())
    if isinstance(exc, RecursionError):
        hint = 'the input is nested too deeply for harness to handle: split it into smaller steps'
    elif isinstance(exc, MemoryError):
        hint = 'harness ran out of memory on this input: make it smaller'
    elif isinstance(exc, OSError):
        hint = 'the operating system refused it'
    else:
        hint = 'an error harness did not expect here'
    return f'{describe(exc)} ({hint}; {DEBUG_VARIABLE}=1 shows its traceback)'


def not_text(args: Sequence[str]) -> str | None:
    """Why the command line cannot be used, if an argument or a `HARNESS_*` variable is not UTF-8 text."""
    for name, value in os.environ.items():
        if name.startswith('HARNESS_') and not is_text(value):
            return f'${name} is not UTF-8 text: set it to text (e.g. export {name}=...)'
    for arg in args:
        if not is_text(arg):
            shown = visible(os.fsencode(arg).decode('utf-8', 'backslashreplace'))
            return f'the argument "{shown}" is not UTF-8 text: harness takes its arguments as text'
    return None


def is_text(value: str) -> bool:
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:  # surrogates: bytes Python could not decode as UTF-8
        return False
    return True


class Edge(TyperGroup):
    """The `harness` group: a command line that is not text is refused, and no exception leaves as a traceback."""

    def main(self, args: Sequence[str] | None = None, *pargs: Any, **kwargs: Any) -> Any:
        argv = list(args) if args is not None else sys.argv[1:]
        problem = not_text(argv)
        err = SafeConsole(stderr=True, highlight=False)
        if problem is not None:
            err.print(f'[red]error:[/red] {escape(problem)}', soft_wrap=True)
            sys.exit(1)
        try:
            return super().main(argv, *pargs, **kwargs)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # the last resort: one line, never a traceback (unless asked for)
            report(err, exc)
            sys.exit(1)


def report(err: Console, exc: BaseException) -> None:
    err.print(f'[red]error:[/red] {escape(unforeseen(exc))}', soft_wrap=True)
    if os.environ.get(DEBUG_VARIABLE, '').strip().lower() not in ('', '0', 'false', 'no', 'off'):
        print(''.join(traceback.format_exception(exc)), end='', file=sys.stderr)
