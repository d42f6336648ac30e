"""The host side of the join helpers (`first_of`, `quorum`, `within`; see `_prelude.py`).

The sandbox has no `asyncio.wait`, so the helpers ask the host: `__race__` opens a race over the
calls it names, `__race_won__` records each success in the order the script sees it, and once a
race has the successes it needs, the members still pending are dropped: their run is cancelled
(a sub-agent really stops), they are journaled `lost`, and the script gets an exception in their
place. `__deadline__` gives a call until an absolute time, journaled, so a deadline that passed
while the process was down fires as soon as the run resumes; the call is then `timed_out` and the
script gets `TimeoutError`.

Every decision is journaled (the host functions like granted host values, the dropped calls with
their status), so replay and resume reproduce the same outcome without running anything.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from .._dispatch._dispatcher import Dispatcher
from .._records import Outcome

HOST_FUNCTIONS = frozenset({'__race__', '__race_won__', '__deadline__'})
MEMBER = re.compile(r'^<coroutine external_future\((\d+)\)>$')
MAX_NEED = 1_000_000
"""A race needs at most this many successes (no gather holds more members: `max_suspensions`)."""


class JoinMisuse(TypeError):
    """A join helper's host function called with arguments the helpers never pass: the script's TypeError."""


def internal_call(name: str) -> NameError:
    """What a script that calls a helper's host function itself gets (the checker refuses it by name first)."""
    return NameError(f'{name} is internal to the join helpers: call first_of, quorum or within instead')


def _text(kwargs: dict[str, Any], key: str) -> str:
    value = kwargs.get(key)
    if not isinstance(value, str):
        raise JoinMisuse(f'the join helpers pass {key}= as a string, not {type(value).__name__}')
    return value


def _count(kwargs: dict[str, Any], key: str) -> int:
    value = kwargs.get(key)
    if not isinstance(value, int) or not 0 <= value <= MAX_NEED:
        raise JoinMisuse(f'the join helpers pass {key}= as a whole number from 0 to {MAX_NEED:,}')
    return int(value)


def _members(kwargs: dict[str, Any], key: str) -> list[str]:
    value = kwargs.get(key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise JoinMisuse(f'the join helpers pass {key}= as a list of strings')
    return value


@dataclass
class Race:
    kind: str
    need: int
    members: list[int | None]
    """Journal seqs of the member calls (None: not a catalog call, so it cannot be cancelled)."""
    won: int = 0


@dataclass
class Joins:
    """Answers the join helpers' host functions for one script run."""

    dispatcher: Dispatcher
    seq_of: Callable[[int], int | None]
    """The journal seq of the call with this Monty call id, if the script made it and it is pending."""
    races: dict[int, Race] = field(default_factory=dict)
    timers: list[asyncio.TimerHandle] = field(default_factory=list)

    def answer(self, name: str, kwargs: dict[str, Any]) -> Outcome:
        """The host's answer to one of the helpers' host functions; `JoinMisuse` (nothing journaled) for arguments
        the helpers never pass, which only a script calling the helpers' internals could (`__join__("x", "a", [])`)."""
        if name == '__race__':
            kind, members = _text(kwargs, 'kind'), _members(kwargs, 'members')
            need = kwargs.get('need')
            if not isinstance(need, int) or not 0 <= need <= MAX_NEED:  # quorum(k, ...) as the script wrote it
                raise JoinMisuse(f'{kind}(): the number of calls needed must be a whole number from 0 to {MAX_NEED:,}')
            return self.race(kind, int(need), self.members(members))
        if name == '__race_won__':
            number, index = _count(kwargs, 'race'), _count(kwargs, 'index')
            race = self.races.get(number) or self.recover(number)
            if race is None or not 0 <= index < len(race.members):
                raise JoinMisuse(f'__race_won__: there is no member {index} of a race {number}')
            return self.race_won(race, number, index)
        if set(kwargs) != {'seconds', 'members'}:
            raise JoinMisuse('__deadline__ takes seconds= and members=')
        seconds, members = kwargs['seconds'], _members(kwargs, 'members')
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds):
            shown = 'NaN' if isinstance(seconds, float) else type(seconds).__name__
            raise JoinMisuse(f'within(): seconds must be a number, not {shown}')
        if len(members) != 1:
            raise JoinMisuse('__deadline__ takes one member')
        return self.deadline(float(seconds), self.members(members)[0])

    def members(self, shown: list[str]) -> list[int | None]:
        seqs = []
        for text in shown:
            m = MEMBER.match(text)
            seqs.append(self.seq_of(int(m[1])) if m else None)
        return seqs

    def race(self, kind: str, need: int, members: list[int | None]) -> Outcome:
        number = len(self.races) + 1
        outcome = self.dispatcher.host_value(
            'join:race', {'kind': kind, 'need': need, 'members': members}, lambda: number, int, int
        )
        self.races[number] = Race(kind, need, members)
        return outcome

    def race_won(self, race: Race, number: int, index: int) -> Outcome:
        outcome = self.dispatcher.host_value(
            'join:won', {'race': number, 'index': index}, lambda: self.rank(race, index), int, int
        )
        race.won += 1
        if race.won == race.need:
            for seq in race.members:
                if seq is not None:
                    self.dispatcher.drop(seq, 'lost', RuntimeError(f'cancelled: {race.kind} had what it needed'))
        return outcome

    def rank(self, race: Race, index: int) -> int:
        """Where this success comes among the race's, in the order the calls finished on the host (the
        script may see two that finished together in either order)."""
        me = race.members[index]
        order = self.dispatcher.finished
        if me is None or me not in order:
            return race.won
        return sum(1 for other in race.members if other is not None and order.get(other, len(order)) < order[me])

    def recover(self, number: int) -> Race | None:
        """A race opened before the snapshot this run restarted from, rebuilt from the journal (None: no such race)."""
        opened = next((r for r in self.dispatcher.calls if r.callee == 'join:race' and r.result == number), None)
        if opened is None:
            return None
        won = sum(1 for r in self.dispatcher.calls if r.callee == 'join:won' and r.arguments.get('race') == number)
        args: dict[str, Any] = opened.arguments
        race = self.races[number] = Race(str(args['kind']), int(args['need']), list(args['members']), won)
        return race

    def deadline(self, seconds: float, member: int | None) -> Outcome:
        outcome = self.dispatcher.host_value(
            'join:deadline', {'seconds': seconds, 'member': member}, lambda: time.time() + seconds, float, float
        )
        if member is not None:
            self.arm(seconds, member, float(outcome.get('return_value', time.time())))
        return outcome

    def arm(self, seconds: float, member: int, due: float) -> None:
        error = TimeoutError(f'within({seconds:g}): the call did not finish in time and was cancelled')
        delay = due - time.time()
        if delay <= 0:  # it passed already (while the process was down): before the call can start
            self.dispatcher.drop(member, 'timed_out', error)
            return
        timer = asyncio.get_running_loop().call_later(delay, self.dispatcher.drop, member, 'timed_out', error)
        self.timers.append(timer)

    def rearm(self) -> None:
        """Deadlines set before the snapshot a run restarted from, for calls still pending: a deadline
        that passed while the process was down fires at once."""
        for record in self.dispatcher.calls:
            args: dict[str, Any] = record.arguments
            member = args.get('member') if record.callee == 'join:deadline' else None
            if isinstance(member, int) and self.dispatcher.calls[member - 1].status == 'running':
                self.arm(float(args['seconds']), member, float(cast(float, record.result)))

    def close(self) -> None:
        for timer in self.timers:
            timer.cancel()
