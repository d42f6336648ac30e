"""The type check: a script against the catalog's stubs, with Monty's built-in ty.

A script is checked before it runs, and never runs when the check fails. The check itself runs
nothing: the script is fed to a checking session wrapped in an `async def` that is never called,
so ty checks its body while the interpreter only defines a function (long string literals go with
their text blanked: ty would parse it, see `blank_long_strings`). That lets one warm checking
session serve many checks (ty's first check in a session costs ~100 ms, later ones a few ms).
Outcomes are cached by (stubs, script): a retried or repeated script is checked once, and
identical scripts started together wait for one check instead of each paying for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import io
import itertools
import re
import textwrap
import threading
import tokenize
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_monty as monty

from .._sandbox._pool import SandboxPool
from ._hints import DIAGNOSTIC, lint, stub_functions, unsupported_syntax, with_hints

if TYPE_CHECKING:  # the estimate prices with pydantic-ai; the checker itself does not need it loaded
    from ._estimate import Estimate


@dataclass(frozen=True)
class Diagnostic:
    """One message from the checker."""

    line: int
    column: int
    rule: str
    message: str
    severity: str = 'error'

    def __str__(self) -> str:
        return f'line {self.line}:{self.column}: {self.severity}[{self.rule}] {self.message}'


@dataclass(frozen=True)
class CheckReport:
    """`ok` and, when not, ty's messages as text (`errors`) and parsed (`diagnostics`).

    `warnings`: what the analysis finds (`Analysis.findings`): rules of the catalog some path of the script can
    break (enforced at run time), side effects it can repeat without bound, and what it could not follow. With
    `Harness(strict=True)` they are errors instead and `ok` is False, and so is an unguarded irreversible callee
    the script can reach. `estimate`: the script's worst case (`Harness.estimate`), on a report that is ok.
    """

    ok: bool
    errors: str = ''
    diagnostics: list[Diagnostic] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    estimate: Estimate | None = None


def parse_diagnostics(text: str) -> list[Diagnostic]:
    found = []
    for line in text.splitlines():  # hint lines do not match
        m = DIAGNOSTIC.match(line.strip())
        if m:
            found.append(Diagnostic(int(m['line']), int(m['col']), m['rule'], m['message'], m['severity']))
    return found


def failed_report(text: str) -> CheckReport:
    text = text.strip()
    return CheckReport(ok=False, errors=text, diagnostics=parse_diagnostics(text))


class CheckCache:
    """Single-flight memo of check outcomes, safe across event loops and threads."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._done: OrderedDict[str, CheckReport] = OrderedDict()
        self._running: dict[str, concurrent.futures.Future[CheckReport | None]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(stubs: str, code: str) -> str:
        return hashlib.sha256(f'{len(stubs)}:{stubs}\0{code}'.encode()).hexdigest()

    async def claim(self, key: str) -> CheckReport | None:
        """The known outcome, waiting for a check in flight; None means: the caller checks, then `settle`s."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
            running = self._running.get(key)
            if running is None:
                self._running[key] = concurrent.futures.Future()
                return None
        # None: that check never finished (a crashed worker); the caller checks on its own feed.
        return await asyncio.wrap_future(running)

    def settle(self, key: str, report: CheckReport | None) -> None:
        """Record the outcome (None: the check could not finish, e.g. the worker crashed)."""
        with self._lock:
            running = self._running.pop(key, None)
            if report is not None:
                self._done[key] = report
                while len(self._done) > self.size:
                    self._done.popitem(last=False)
        if running is not None:
            running.set_result(report)


WRAPPER = 'async def __harness_check__():\n'
INDENT = '    '
LOCATION = re.compile(r'^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+):', re.MULTILINE)
PARSER_REFUSAL = re.compile(r'(?:\A|\n)SyntaxError: [^\n]*\s*\Z')
"""The last line of Monty's parser refusing a script (see `script_messages`)."""
SESSION_USES = 64
"""A checking session is replaced after this many checks: ty's context grows with each one."""
MAX_CHECKERS = 2
"""Checking sessions per stubs text; checks beyond that wait (ty is CPU-bound: more would not help)."""
TIMED_OUT = re.compile(r'request timeout of (?P<secs>[\d.]+ ?s)')
"""The pool killing a worker that ran past its request timeout (pydantic-monty 1.4.0's message)."""
CRASHED = 'workflow.py:1:1: error[check-failed] the type checker stopped'
"""A report's errors when the checker's worker died under the script twice (not cached: it may not recur)."""


OUT_OF_MEMORY = 'exceeded its memory limit and was terminated'
"""The worker's end when ty ran out of its memory (pydantic-monty 1.4.0's message, as a runtime error)."""


def too_big() -> str:
    """The report of a check that ran out of the checking worker's memory."""
    return (
        'workflow.py:1:1: error[check-memory] the type check of this script ran out of memory, so nothing ran: '
        'deeply nested expressions (calls inside calls, such as dict(dict(...))) make the checker grow; give '
        'inner parts names'
    )


def timed_out(message: str) -> str:
    """The report of a check that ran past the pool's request timeout (ty is slow on some nestings)."""
    m = TIMED_OUT.search(message)
    took = f' in {m["secs"]}' if m else ''
    return (
        f'workflow.py:1:1: error[check-timeout] the type check of this script did not finish{took}, so nothing ran: '
        'deeply nested code (functions inside functions, calls or lists inside each other) makes the checker slow; '
        'give inner parts names and build large values in loops'
    )


LONG_STRING = 100
"""A plain string literal this long or longer is blanked for the checker (see `blank_long_strings`)."""
ESCAPE_OR_TEXT = re.compile(
    r'(?P<escape>\\(?:N\{[^}\n]*\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.|\n))|[^\\\n]+'
)


def wrap(code: str) -> str:
    """The script as the body of a function that is defined but never called."""
    return WRAPPER + textwrap.indent(blank_long_strings(code), INDENT, lambda line: True)


def blank_long_strings(code: str) -> str:
    """The script with the text of each long plain string literal replaced by dots, for the checker.

    The checker parses a string literal's text as Python (as it would an annotation) and refuses
    one nested past ~200 levels ("Source is too deeply nested"): a pasted Markdown list of `- x`
    lines is one. Dots keep the literal a `str` of the same lines and columns (escapes and line
    breaks stay as written), so every message keeps its place. f-strings, whose `{...}` are
    checked, and bytes are not parsed that way and stay as written. What runs is the script as written.
    """
    if len(code) < LONG_STRING:
        return code
    lines = io.StringIO(code).readlines()
    starts = [0, *itertools.accumulate(len(line) for line in lines)]
    try:
        tokens = [t for t in tokenize.generate_tokens(iter(lines).__next__) if t.type == tokenize.STRING]
    except (tokenize.TokenError, SyntaxError):
        return code  # the checker reports it
    out, done = [], 0
    for token in tokens:
        prefix = token.string[: len(token.string) - len(token.string.lstrip('bBfFrRuU'))]
        quotes = 3 if token.string[len(prefix) :].startswith(('"""', "'''")) else 1
        body = token.string[len(prefix) + quotes : -quotes]
        if len(body) < LONG_STRING or set(prefix.lower()) & {'f', 'b'}:
            continue
        start = starts[token.start[0] - 1] + token.start[1] + len(prefix) + quotes
        out += [code[done:start], ESCAPE_OR_TEXT.sub(lambda m: m['escape'] or '.' * len(m[0]), body)]
        done = start + len(body)
    return ''.join(out) + code[done:]


def unwrap_locations(text: str) -> str:
    """Map ty's line:column in the wrapped script back to the script as written."""

    def shift(m: re.Match[str]) -> str:
        line, col = int(m['line']), int(m['col'])
        return f'{m["file"]}:{max(line - 1, 1)}:{max(col - len(INDENT), 1)}:'

    return LOCATION.sub(shift, text)


def script_messages(display: str) -> str:
    """The checker's messages on the script's lines.

    Monty's parser refusing the script (e.g. "Source is too deeply nested") shows a Python `SyntaxError`,
    a traceback or one line, whose last line names the reason: it becomes one invalid-syntax message.
    Anything else is ty's (one `file:line:col: severity[rule] message` a line): messages with no place
    (ty writes `severity[rule] message`, or `file: ...`, for one with no span, such as a panic or a file
    it could not read) stay as ty wrote them; only a refusal is labelled invalid-syntax.
    """
    if PARSER_REFUSAL.search(display):
        return unsupported_syntax(display, 'invalid-syntax')
    return unwrap_locations(display)


class Checker:
    """Checks scripts in warm sessions of the Harness's pool, caching outcomes."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.cache = CheckCache()
        self._idle: dict[str, list[_Session]] = {}
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    async def check(self, stubs: str, code: str) -> CheckReport:
        key = self.cache.key(stubs, code)
        known = await self.cache.claim(key)
        if known is not None:
            return known
        report: CheckReport | None = None
        try:
            report = await self._check(stubs, code)
        finally:
            self.cache.settle(key, None if report is None or report.errors.startswith(CRASHED) else report)
        return report

    async def _check(self, stubs: str, code: str) -> CheckReport:
        refused = lint(code, stub_functions(stubs))
        if refused:
            return failed_report(with_hints('\n'.join(refused), code, stubs))
        async with self._slot():
            crash: Exception | None = None
            for fresh in (False, True):  # an idle session's worker may have died since: the retry is a new one
                session = await self._take(stubs, fresh=fresh)
                try:
                    await session.session.feed_run(wrap(code), print_callback=lambda *_: None)
                except (monty.MontyTypingError, monty.MontySyntaxError) as exc:
                    self._give_back(stubs, session)
                    return failed_report(with_hints(script_messages(exc.display()), code, stubs))
                except monty.MontyRuntimeError as exc:
                    if OUT_OF_MEMORY in str(exc):  # ty ran out of the worker's memory: the worker is gone
                        await session.close()
                        return failed_report(too_big())
                    # Defining the wrapper runs nothing, so this is the parser refusing a construct.
                    self._give_back(stubs, session)
                    return failed_report(with_hints(unsupported_syntax(exc.display()), code, stubs))
                except (monty.MontyError, RuntimeError) as exc:
                    # The wrapper only defines a function, so anything else is the session's end: its worker
                    # was killed (from outside, or by the pool for running past its time) or crashed, or its
                    # checkout was finished under it (pydantic-monty raises a plain RuntimeError then).
                    await session.close()
                    crash = exc
                    if TIMED_OUT.search(str(exc)):
                        return failed_report(timed_out(str(exc)))
                    continue
                self._give_back(stubs, session)
                return CheckReport(ok=True)
        return failed_report(
            f'{CRASHED} on this script twice, in a fresh worker too ({type(crash).__name__}); '
            'simplify the script, or retry.'
        )

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            slot = self._slots.get(loop)
            if slot is None:
                slot = self._slots[loop] = asyncio.Semaphore(MAX_CHECKERS)
        return slot

    async def _take(self, stubs: str, *, fresh: bool = False) -> _Session:
        """An idle checking session for `stubs`, or (`fresh`, or none idle) a new one."""
        await self.pool.ensure_open()
        with self._lock:
            idle = self._idle.get(stubs)
            if idle and not fresh:
                return idle.pop()
        session = _Session(self.pool.checker(stubs))
        await session.open()
        return session

    def _give_back(self, stubs: str, session: _Session) -> None:
        session.uses += 1
        if session.uses >= SESSION_USES or not session.alive:  # a worker that died is replaced, not kept
            _close_later(session)
            return
        with self._lock:
            for other in [k for k in self._idle if k != stubs][: max(0, len(self._idle) - 3)]:
                for stale in self._idle.pop(other):  # keep sessions for the few newest catalogs only
                    _close_later(stale)
            self._idle.setdefault(stubs, []).append(session)

    async def aclose(self) -> None:
        with self._lock:
            sessions = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
        for session in sessions:
            await session.close()


class _Session:
    """One checked-out checking session, held open across checks."""

    def __init__(self, checkout: Any) -> None:
        self.checkout = checkout
        self._session: monty.AsyncMontySession | None = None
        self.uses = 0

    @property
    def session(self) -> monty.AsyncMontySession:
        assert self._session is not None, 'open() the checking session first'
        return self._session

    async def open(self) -> None:
        self._session = await self.checkout.__aenter__()

    @property
    def alive(self) -> bool:
        """Whether its worker still runs, as far as the pool knows (it forgets the worker once it ended)."""
        return self._session is not None and self._session.worker_pid is not None

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # a crashed worker is already gone; the pool replaces it
            await self.checkout.__aexit__(None, None, None)


def _close_later(session: _Session) -> None:
    with contextlib.suppress(RuntimeError):  # no running loop: the pool's shutdown reclaims it
        asyncio.get_running_loop().create_task(session.close())
