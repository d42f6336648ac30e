"""The ways a call can be answered without running it: small answer sources the dispatcher asks in order.

Each source looks at one call (its callee and its record, arguments validated and `seq` given) and
answers it, filling in the record (`answered`), or returns None to let the next one try; the last None
means the call runs live. Every source is synchronous, so `Dispatcher.start` stays free of `await`
from lookup to the budget's reservation and budgets stay exact. A source decides; it never journals,
charges or runs anything: the dispatcher does, as it does for a live call.

The order (`answer_sources`) is part of the contract:

1. `JournalAnswers`: resume, replay and fork answer from the journal (`History`). A run with a
   history is answered from it, never from an earlier script's results or a baseline; past its journal a
   resumed script's side effects are answered as when it started (`Effects`, `_effects.resumed_effects`).
2. `Effects`: a side-effecting call that already succeeded in an earlier script of the same orchestrator
   run or conversation (`_effects`: never one of this script, each success answering one call). Not charged.
3. `EarlierScript`: an identical call of an idempotent callee completed by this or an earlier script of the
   same orchestrator run (`reuse`), unless a `once` rule counts its calls (each of those runs). Not charged
   (the dispatcher sees `source == 'reused'`).
4. `Baseline`: an eval baseline's result (`reuse_calls`), charged like the live call it replaces.
5. `Decisions`: a call that needs approval. A person's rejection answers it (a refusal); an approval,
   or a grant that covers it (`Grant`), lets it run; with no decision the call is held (`HOLD`): journaled
   `waiting`, never run, and the run stops for it. It is last because an approved call runs live, which is
   what None means here.

A rule's refusal comes before every source and a replay's budget charge before the journal is asked
(`Dispatcher.start`): both are the dispatcher's, not a source's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import JsonValue

from .._catalog._callees import Callee
from .._catalog._rules import counted
from .._records import CallRecord, Decision, Outcome, call_key
from .._tracing._names import (
    ATTR_CALLEE,
    ATTR_DECIDED_AT,
    ATTR_DECIDED_BY,
    ATTR_DECISION,
    ATTR_RUN_ID,
    ATTR_SEQ,
    approval_span_name,
)
from .._tracing._setup import TRACER
from ._context import RunScope
from ._effects import EarlierEffects, Effect, is_effect
from ._history import History, answered
from ._recorded import RecordedCalls


@dataclass(frozen=True)
class Hold:
    """The answer of a call that must wait for a person's decision: the dispatcher holds it (`Dispatcher.hold`)."""


HOLD = Hold()

Answer = Outcome | Hold | None
"""What a source says of a call: its outcome (the record filled in), hold it, or None (not this source's)."""


class AnswerSource(Protocol):
    def answer(self, callee: Callee, record: CallRecord) -> Answer:
        """Answer the call, hold it, or None to leave it to the next source (and, after the last, to run it)."""
        ...


@dataclass
class JournalAnswers:
    """Resume, replay and fork: the journal's answer (`History.answer`, which may raise `ReplayDivergence`
    or `NeedsDecision`)."""

    history: History

    def answer(self, callee: Callee, record: CallRecord) -> Answer:
        return self.history.answer(record)


@dataclass
class Effects:
    """A side-effecting call that succeeded in an earlier script (`_effects.EarlierEffects`): its result, so a
    retry does not repeat the effect; the record's call is not run again."""

    earlier: EarlierEffects

    def answer(self, callee: Callee, record: CallRecord) -> Answer:
        if not callee.side_effect:
            return None
        effect = self.earlier.take(record)
        return None if effect is None else answered(record, 'reused', result=effect.result)


@dataclass
class EarlierScript:
    """An identical call of an idempotent callee that completed in this or an earlier script of the same
    orchestrator run (`RunScope.reusable`, filled by `remember`). A side effect is never answered here: within one
    script every one runs (`Effects` answers those of earlier scripts)."""

    reusable: Mapping[str, JsonValue]
    supplied: Set[str] = frozenset()
    """Keys whose result a baseline supplied: answered as the baseline's, so a rule never takes it for a run."""
    counted: Set[str] = frozenset()
    """Callees a `once` rule counts (`_rules.counted`): each of their calls runs, as it authorises one call."""

    def answer(self, callee: Callee, record: CallRecord) -> Answer:
        if callee.side_effect or callee.name in self.counted:
            return None
        key = reuse_key(record.callee, record.arguments)
        if key not in self.reusable:
            return None
        return answered(record, 'baseline' if key in self.supplied else 'reused', result=self.reusable[key])


@dataclass
class Baseline:
    """The baseline eval's journal (`reuse_calls`): charged like a live call, so the budget and later reuse see
    the run the baseline saw; its answers are supplied (`SUPPLIED`): they never authorise a side effect."""

    recorded: RecordedCalls

    def answer(self, callee: Callee, record: CallRecord) -> Answer:
        found, value = self.recorded.answer(callee, record)
        return answered(record, 'baseline', result=value) if found else None


@dataclass
class Grant:
    """A person's approval, given once, of the calls of one callee in one run that `when(arguments)` accepts, up to
    `max_calls` of them (`Harness.grant`). `used` counts the calls it approved: calls answered from the journal
    never reach it again, so a resume does not count them twice."""

    callee: str
    max_calls: int | None
    when: Callable[[dict[str, Any]], bool] | None
    by: str
    used: int = 0

    def decision(self, record: CallRecord) -> Decision | None:
        """The approval of this call, or None when the grant does not cover it (a `when` that raises covers none)."""
        if record.callee != self.callee or (self.max_calls is not None and self.used >= self.max_calls):
            return None
        try:
            covered = self.when is None or bool(self.when(dict(record.arguments)))
        except Exception:
            covered = False
        if not covered:
            return None
        self.used += 1
        return Decision(True, None, f'{self.by} (grant)')


@dataclass
class Decisions:
    """A person's decisions on calls that need approval, by seq (read when the run started), and the grants
    given for the run: a call a grant covers needs no decision of its own."""

    run_id: str
    decisions: Mapping[int, Decision]
    grants: Sequence[Grant] = ()

    def answer(self, callee: Callee, record: CallRecord) -> Answer:
        if not callee.approval:
            return None
        decision = self.decisions.get(record.seq) or next(
            (found for grant in self.grants if (found := grant.decision(record)) is not None), None
        )
        if decision is None:
            return HOLD
        return self.decided(record, decision)

    def decided(self, record: CallRecord, decision: Decision) -> Outcome | None:
        """The decision, traced with who decided and when: None (approved: it runs) or the refusal the script
        gets."""
        attributes = {
            ATTR_RUN_ID: self.run_id,
            ATTR_CALLEE: record.callee,
            ATTR_SEQ: record.seq,
            ATTR_DECISION: 'approved' if decision.approved else 'rejected',
            ATTR_DECIDED_BY: decision.decided_by or '',
            ATTR_DECIDED_AT: decision.decided_at,
        }
        with TRACER.start_as_current_span(approval_span_name(record.callee), attributes=attributes):
            pass
        if decision.approved:
            return None
        who = decision.decided_by or 'a person'
        why = f'{record.callee} was rejected by {who}' + (f': {decision.reason}' if decision.reason else '')
        return answered(record, 'answered', error=why, refused=True)


def answer_sources(
    *,
    run_id: str,
    callees: Mapping[str, Callee],
    history: History | None,
    scope: RunScope,
    reuse: bool,
    recorded: RecordedCalls | None,
    decisions: Mapping[int, Decision],
    grants: Sequence[Grant] = (),
) -> tuple[AnswerSource, ...]:
    """The sources one script's calls are asked, in order (see the module docstring). The scope's reusable results
    (with `reuse`) and `recorded` are ignored for a run with a history: its journal is the only record it follows,
    and past it a resumed script is answered from the side effects it started with. The side effects are taken as
    they are now, before the script's first call."""
    if history is not None:  # the scope's effects are a resumed script's (`_effects.stored_effects`)
        first: list[AnswerSource] = [
            JournalAnswers(history),
            Effects(EarlierEffects.of(scope.effects, history.calls.values())),
        ]
    else:
        counts = counted(callee.requires for callee in callees.values())
        earlier = [EarlierScript(scope.reusable, scope.supplied, counts)] if reuse else []
        first = [
            Effects(EarlierEffects.of(scope.effects)),
            *earlier,
            *([Baseline(recorded)] if recorded is not None else []),
        ]
    return (*first, Decisions(run_id, decisions, grants))


def remember(scope: RunScope, run_id: str, records: list[CallRecord]) -> None:
    """Journaled results later calls of the scope may be answered from: an idempotent callee's live result (and the
    baseline's answers at the same point, so a reusing eval reuses where its baseline did), and a side effect that
    happened, for later scripts only (`Effects`)."""
    for record in records:
        if record.status == 'ok' and record.source in ('live', 'baseline'):
            key = reuse_key(record.callee, record.arguments)
            if key not in scope.reusable and record.source == 'baseline':
                scope.supplied.add(key)
            scope.reusable.setdefault(key, record.result)
        if is_effect(record):
            scope.effects.append(Effect.of(run_id, record))


def effects_note(sources: tuple[AnswerSource, ...]) -> str | None:
    """What the model reads of the script's calls the `Effects` source answered, if any."""
    return next((s.earlier.note() for s in sources if isinstance(s, Effects)), None)


def ask(sources: tuple[AnswerSource, ...], callee: Callee, record: CallRecord) -> Answer:
    """The first source's answer (or hold) for the call; None when none answers it and it runs live."""
    for source in sources:
        found = source.answer(callee, record)
        if found is not None:
            return found
    return None


def reuse_key(callee: str, arguments: dict[str, Any]) -> str:
    """The identity of a call for reuse and for counting identical repeats: its callee and arguments."""
    return call_key(callee, arguments)
