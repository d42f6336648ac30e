"""What of the host's world a script may see: the clock and OS randomness, only when granted.

A script gets no wall clock and no OS entropy by default (both arrive as OS requests that the loop
refuses). When the host grants them, each value is journaled like a call, so a replay or a resume
answers it from the journal and the script sees the same world again.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._dispatch._dispatcher import Dispatcher
from .._records import Outcome


@dataclass(frozen=True)
class Grant:
    produce: Callable[[tuple[Any, ...]], Any]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _now(args: tuple[Any, ...]) -> dt.datetime:
    return dt.datetime.now(tz=args[0] if args and isinstance(args[0], dt.tzinfo) else None)


CLOCK = {
    'time.time': Grant(lambda args: time.time(), lambda v: v, float),
    'datetime.now': Grant(_now, lambda v: v.isoformat(), dt.datetime.fromisoformat),
    'date.today': Grant(lambda args: dt.date.today(), lambda v: v.isoformat(), dt.date.fromisoformat),
}
RANDOM = {
    'os.urandom': Grant(
        lambda args: os.urandom(min(int(args[0]), 1 << 16)), lambda v: base64.b64encode(v).decode(), base64.b64decode
    )
}


class HostGrants:
    """The loop's `os_handler`: answers granted OS requests through the dispatcher's journal."""

    def __init__(self, dispatcher: Dispatcher, *, clock: bool, randomness: bool) -> None:
        self.dispatcher = dispatcher
        self.grants = {**(CLOCK if clock else {}), **(RANDOM if randomness else {})}

    async def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Outcome | None:
        grant = self.grants.get(name)
        if grant is None:
            return None
        shown = [a if isinstance(a, str | int | float | bool) else type(a).__name__ for a in args]
        return self.dispatcher.host_value(
            f'os:{name}', {'args': shown}, lambda: grant.produce(args), grant.encode, grant.decode
        )
