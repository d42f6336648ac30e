"""Progress events: one per call started, finished or failed, for live views and tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

EventKind = Literal['started', 'finished', 'failed']


@dataclass(frozen=True)
class CallEvent:
    """A call changed state. `elapsed` (seconds) is set on `finished` and `failed`."""

    kind: EventKind
    run_id: str
    seq: int
    callee: str
    arguments: dict[str, Any]
    line: int | None
    source: str = 'live'
    """`live`, or `reused` / `replayed` / `resumed` when the result came from the journal."""
    elapsed: float | None = None
    error: str | None = None
    result: Any = None


EventHandler = Callable[[CallEvent], None]
