"""The records a run returns: its calls and its final value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

CallStatus = Literal['running', 'ok', 'error', 'cancelled', 'unknown']
CallSource = Literal['live', 'replayed', 'resumed', 'reused', 'forked', 'answered']
"""Where a call's result came from: it ran, or the journal (or the user) answered it."""
RunStatus = Literal['running', 'completed', 'failed', 'interrupted', 'needs_decision']


@dataclass
class CallRecord:
    """One external call a script made, in the order it was made (`seq` starts at 1)."""

    seq: int
    callee: str
    arguments: dict[str, Any]
    line: int | None
    status: CallStatus = 'running'
    result: Any = None
    error: str | None = None
    started: float = 0.0
    """Seconds since the run started."""
    duration: float | None = None
    attempt: int = 1
    source: CallSource = 'live'


@dataclass
class WorkflowResult:
    """What `Harness.run` (and replay, resume, fork) returns."""

    value: Any
    run_id: str
    status: RunStatus
    calls: list[CallRecord] = field(default_factory=list)
    printed: str = ''
    budget_exhausted: bool = False
    """A call was refused because a budget ran out; the script caught it and finished."""
    note: str | None = None
