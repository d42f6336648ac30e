"""Recorded calls: answers a call from an earlier eval's journal instead of running it (`--reuse-calls`).

An eval case runs the orchestrator again on the same prompt; when its scripts make a call the baseline
eval's run of that case made too (the same callee, the same arguments), the baseline's result answers
it, so iterating on the orchestrator's prompt or model pays only for the calls that change. The n-th
identical call is answered with the n-th recorded result (a sampled sub-agent called three times keeps
its three answers), and a call recorded fewer times than it is made now runs live.

The answers reach the dispatcher through a context variable set around the case's orchestrator run (as
`_usage` collects totals): every script of that run is a task started inside it.

Never reused: a side-effecting callee or one that needs approval (unless named in `safe`), and a callee
whose signature or `version=` differs from the one the baseline ran against (its manifest digest).
"""

from __future__ import annotations

import contextvars
import json
from collections import Counter
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from .._catalog._callees import Callee, WrongReturn
from .._catalog._manifest import digest
from .._records import CallRecord
from .._sandbox._values import jsonable

REUSABLE_SOURCES = frozenset({'live', 'baseline'})
"""Results that came from running the callee (now, or in the eval this one reused): a `reused` result
repeats one of these and a replayed or forked one was not produced by the callee in that run."""


@dataclass
class RecordedCalls:
    """The results the baseline's run of one case got, by (callee, arguments), in the order it got them."""

    results: dict[str, list[JsonValue]] = field(default_factory=dict)
    digests: dict[str, str | None] = field(default_factory=dict)
    """Per callee, the manifest entry (digest and version) it had in the baseline."""
    safe: frozenset[str] = frozenset()
    """Side-effecting callees the user marked safe to answer from the record."""
    taken: Counter[str] = field(default_factory=Counter)
    answered: int = 0
    current: dict[str, str | None] = field(default_factory=dict)
    """Per callee, today's digest and version (computed once per case)."""

    def add_run(self, calls: list[CallRecord], catalog: Mapping[str, Any] | None) -> None:
        """Record one baseline run's journal (runs in the order they ran)."""
        entries = (catalog or {}).get('callees', {})
        for call in calls:
            if call.status != 'ok' or call.source not in REUSABLE_SOURCES:
                continue
            self.results.setdefault(key(call.callee, call.arguments), []).append(call.result)
            self.digests.setdefault(call.callee, _identity(entries.get(call.callee)))

    def answer(self, callee: Callee, record: CallRecord) -> tuple[bool, JsonValue]:
        """`(True, result)` when the record answers this call (counted as taken), else `(False, None)`."""
        if (callee.side_effect or callee.approval) and callee.name not in self.safe:
            return False, None
        if callee.name not in self.current:
            self.current[callee.name] = _identity({'digest': digest(callee), 'version': callee.version})
        if self.digests.get(callee.name) != self.current[callee.name]:
            return False, None
        k = key(record.callee, record.arguments)
        found = self.results.get(k, ())
        n = self.taken[k]
        if n >= len(found):
            return False, None
        try:  # the declared return type may have narrowed since: a value it refuses runs the call live
            value = jsonable(callee.returns.dump(callee.returns.check(found[n])))
        except WrongReturn:
            return False, None
        self.taken[k] += 1
        self.answered += 1
        return True, value


def key(callee: str, arguments: Mapping[str, Any]) -> str:
    return callee + json.dumps(arguments, sort_keys=True, separators=(',', ':'))


def _identity(entry: Mapping[str, Any] | None) -> str | None:
    return None if entry is None else f'{entry.get("digest")}:{entry.get("version")}'


_current: contextvars.ContextVar[RecordedCalls | None] = contextvars.ContextVar('harness_recorded', default=None)


@contextmanager
def answering_from(recorded: RecordedCalls | None) -> Generator[None]:
    """Let the calls made inside the block (and in tasks it starts) be answered from `recorded`."""
    token = _current.set(recorded)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> RecordedCalls | None:
    return _current.get()
