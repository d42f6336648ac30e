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
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from .._dispatch._dispatcher import Dispatcher
from .._records import Outcome

HOST_FUNCTIONS = frozenset({'__race__', '__race_won__', '__deadline__'})
MEMBER = re.compile(r'^<coroutine external_future\((\d+)\)>$')


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
        if name == '__race__':
            return self.race(str(kwargs['kind']), int(kwargs['need']), self.members(kwargs['members']))
        if name == '__race_won__':
            return self.race_won(int(kwargs['race']), int(kwargs['index']))
        return self.deadline(float(kwargs['seconds']), self.members(kwargs['members'])[0])

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

    def race_won(self, number: int, index: int) -> Outcome:
        race = self.races.get(number) or self.recover(number)
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

    def recover(self, number: int) -> Race:
        """A race opened before the snapshot this run restarted from, rebuilt from the journal."""
        opened = next(r for r in self.dispatcher.calls if r.callee == 'join:race' and r.result == number)
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
