"""Side effects that already happened: the ledger a later script is answered from, so a retry of an orchestrator
run, or a later turn of the same conversation, does not refund twice, and what the model is told about it.

Invariants:

- Within one script every call of a `side_effect=True` callee runs, identical or not: a script is answered
  only from effects that finished before it started (`EarlierEffects` is built from a snapshot of the
  ledger), never from its own.
- Only effects that ran count (`COUNTED`): a live call, a resumed run's journal of one, an eval baseline's
  answer standing in for one. A person's or a fork's answer, a copy a fork made of its parent's calls and a
  reuse are not effects.
- The ledger is a multiset: the n-th identical call of a script is answered by the n-th identical success of
  the earlier scripts, so a retry that repeats three emails sends none, and one that writes a fourth sends it.
- A later turn of the conversation is answered only from the turns whose messages it does not have (one that
  died, or whose answer was dropped): a turn that has an earlier one's results in its history and repeats its
  side effect means a second one, and it runs.
- A resumed script is answered, past its journal only (the calls it holds are its own), from the effects of the
  scripts started before it, less those its journal was answered from (`EarlierEffects.of`, `resumed_effects`):
  as it would have been had it not stopped. Its conversation's other turns count only when the turn going on with
  it says which it has the results of (`resumed_by_turn`); a resume without one (`harness resume`) takes its
  orchestrator run's.
- With a store, the ledger is read from it at each script's start (the runs of the same orchestrator run or
  conversation whose journals verify); without one it is what this process's scripts of the scope remembered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import JsonValue

from .._records import CallRecord, RunRow, call_key, describe

if TYPE_CHECKING:
    from .._store import RunStore

COUNTED = frozenset({'live', 'resumed', 'baseline'})
"""The sources of a journaled success that is an effect that happened (see the module docstring)."""
MAX_NAMED = 10
"""Calls named one by one in a note; the rest are counted."""


@dataclass(frozen=True)
class Effect:
    """A call of a side-effecting callee that succeeded in an earlier script."""

    run_id: str
    seq: int
    callee: str
    arguments: dict[str, JsonValue]
    result: JsonValue
    same_run: bool = True
    """Of the same orchestrator run (a retry); else of an earlier turn of the same conversation."""

    @classmethod
    def of(cls, run_id: str, record: CallRecord, *, same_run: bool = True) -> Effect:
        return cls(run_id, record.seq, record.callee, record.arguments, record.result, same_run)

    def where(self) -> str:
        if self.same_run:
            return f'an earlier script of this orchestrator run (run {self.run_id}, #{self.seq})'
        return (
            f'an earlier script of this conversation (run {self.run_id}, #{self.seq}), in a turn whose messages '
            'you do not have'
        )


def is_effect(record: CallRecord) -> bool:
    """Whether a journaled call is a side effect that happened and succeeded."""
    return record.side_effect and record.status == 'ok' and record.source in COUNTED


@dataclass
class EarlierEffects:
    """The answer source for side-effecting calls: an identical success of an earlier script (`Effect`s, oldest
    first) answers the call instead of running it again; each answers one call of this script."""

    done: Mapping[str, Sequence[Effect]]
    used: Counter[str] = field(default_factory=Counter)
    answered: dict[int, Effect] = field(default_factory=dict)
    """The calls of this script answered this way, by seq, for the note the model reads (`note`)."""

    past: int = 0
    """A resumed script's journal length: the calls it holds are its own (answered, run, or waiting for a person)."""

    @classmethod
    def of(cls, effects: Iterable[Effect], journal: Iterable[CallRecord] = ()) -> EarlierEffects:
        """From the effects that finished before the script started; resumed, with its `journal`: the effects its
        calls were answered from are used up, and only calls past the journal are answered (as they would have
        been had it not stopped)."""
        done: dict[str, list[Effect]] = {}
        for effect in effects:
            done.setdefault(call_key(effect.callee, effect.arguments), []).append(effect)
        journal = list(journal)
        used = Counter(call_key(c.callee, c.arguments) for c in journal if c.side_effect and c.source == 'reused')
        return cls(done, used, past=max((c.seq for c in journal), default=0))

    def take(self, record: CallRecord) -> Effect | None:
        """The earlier success that answers this call (and is used up by it), or None: it runs."""
        if record.seq <= self.past:
            return None
        key = call_key(record.callee, record.arguments)
        earlier, n = self.done.get(key, ()), self.used[key]
        if n >= len(earlier):
            return None
        self.used[key] = n + 1
        self.answered[record.seq] = earlier[n]
        return earlier[n]

    def note(self) -> str | None:
        """What the model is told of the calls answered this way: that they did not run again, and where they ran."""
        if not self.answered:
            return None
        shown = [
            f'{describe(e.callee, e.arguments)} was not run again: it already succeeded in {e.where()}'
            for e in list(self.answered.values())[:MAX_NAMED]
        ]
        more = len(self.answered) - len(shown)
        return (
            'Side effects not repeated: '
            + '; '.join(shown)
            + (f'; and {more} more' if more > 0 else '')
            + '. The script got the recorded result in its place.'
        )


def interrupted_notice(runs: Sequence[tuple[str, Sequence[CallRecord]]]) -> str | None:
    """What a turn is told, before it writes a script, of the runs an earlier turn of its conversation left
    interrupted (`(run_id, journal)` each): the calls that never finished, and the side effects that did."""
    if not runs:
        return None
    lines = [
        'An earlier turn of this conversation was interrupted (its process stopped, or it was cancelled) while '
        'its scripts ran:'
    ]
    for run_id, calls in runs:
        unknown = [c for c in calls if c.status == 'running']
        done = [c for c in calls if is_effect(c)]
        lines.append(
            f'- run {run_id}: '
            + (f'{len(done)} side effect(s) finished: {named(done)}' if done else 'no side effect finished')
        )
        if unknown:
            lines.append(f'  started but never finished, outcome unknown: {named(unknown)}')
    lines.append(
        'A script of this turn that repeats a finished side effect with the same arguments gets its '
        'recorded result without running it again. Before repeating a call whose outcome is unknown, '
        'check whether it happened (or tell the user it may have).'
    )
    return '\n'.join(lines)


def named(calls: Sequence[CallRecord]) -> str:
    shown = ', '.join(f'#{c.seq} {describe(c.callee, c.arguments)}' for c in calls[:MAX_NAMED])
    return shown + (f' and {len(calls) - MAX_NAMED} more' if len(calls) > MAX_NAMED else '')


def stored_effects(
    store: RunStore,
    orchestrator_run_id: str | None,
    conversation_id: str | None,
    seen: frozenset[str] = frozenset(),
    *,
    resumed: RunRow | None = None,
) -> list[Effect]:
    """The side effects the store holds for a new script of this orchestrator run or conversation, oldest first:
    not those of the agent runs in `seen` (the model has their results), and only from runs whose journal verifies
    (a row edited in the store answers nothing; its call runs). For a `resumed` script: those of the scripts
    started before it, as when it started."""
    found: list[Effect] = []
    for run, calls in store.side_effects(orchestrator_run_id, conversation_id):
        if resumed is not None and (run.run_id == resumed.run_id or run.created > resumed.created):
            continue
        same = orchestrator_run_id is not None and run.orchestrator_run_id == orchestrator_run_id
        if (not same and run.orchestrator_run_id in seen) or store.verify(run.run_id):
            continue
        found += [Effect.of(run.run_id, call, same_run=same) for call in calls if is_effect(call)]
    return found


_TURN_SEEN: ContextVar[frozenset[str] | None] = ContextVar('harness_turn_seen', default=None)
"""While an orchestrator turn resumes a run after a person decided (`resumed_by_turn`): the agent runs whose results
it has (`RunScope.seen`), as its scripts' scope has them."""


@contextmanager
def resumed_by_turn(seen: frozenset[str]) -> Generator[None]:
    """Resume runs inside this block for the turn that goes on with them, which has the results of `seen`."""
    token = _TURN_SEEN.set(seen)
    try:
        yield
    finally:
        _TURN_SEEN.reset(token)


def resumed_effects(store: RunStore, run: RunRow) -> list[Effect]:
    """The side effects a resumed script started with (its calls past the journal are answered from them, as they
    would have been had it not stopped): its conversation's other turns only when a turn going on with it says
    which of them it has the results of (`resumed_by_turn`); without one (`harness resume`), its orchestrator run's."""
    seen = _TURN_SEEN.get()
    conversation = run.conversation_id if seen is not None else None
    if run.orchestrator_run_id is None and conversation is None:
        return []
    return stored_effects(store, run.orchestrator_run_id, conversation, seen or frozenset(), resumed=run)


def interrupted_runs(store: RunStore, conversation_id: str) -> list[tuple[str, list[CallRecord]]]:
    """The conversation's runs that were never finished (`interrupted` as read: their process died, or the turn was
    cancelled) since its last run that finished, with their journals: what the next turn is told
    (`interrupted_notice`). Once a later script has run to an end, the turn that wrote it was told; later ones are not.
    """
    runs = store.statuses_of_conversation(conversation_id)
    last_ended = max((i for i, (_, status) in enumerate(runs) if status not in ('running', 'interrupted')), default=-1)
    return [(run_id, store.calls(run_id)) for run_id, status in runs[last_ended + 1 :] if status == 'interrupted']
