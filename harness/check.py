"""The type check: a script against the catalog's stubs, with Monty's built-in ty.

The check happens inside the worker when the script is fed; a script that fails it never starts.
Results are cached by (stubs, script): a retried or repeated script is checked once, and identical
scripts started together wait for one check instead of each paying for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

DIAGNOSTIC = re.compile(
    r'^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>\w+)\[(?P<rule>[\w-]+)\] (?P<message>.*)$'
)


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
    """`ok` and, when not, ty's messages as text (`errors`) and parsed (`diagnostics`)."""

    ok: bool
    errors: str = ''
    diagnostics: list[Diagnostic] = field(default_factory=list)


def parse_diagnostics(text: str) -> list[Diagnostic]:
    found = []
    for line in text.splitlines():
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
