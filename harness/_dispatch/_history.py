"""What the journal already knows about a run, and how resume, replay and fork answer calls from it.

A `History` is consulted by the dispatcher for every call, in call order, before anything runs:
it either answers the call from the journal (filling in the record) or says to run it live. It
never runs anything itself.

- `replay`: every call must be in the journal, in order, and is answered from it.
- `resume`: journaled results are answered; calls that were in flight run again (a side-effecting
  one only with `retry_unknown` or an explicit answer).
- `fork`: calls before `fork_at` are answered from the parent's journal; `fork_at` is answered
  with `answers[fork_at]`; later calls run live.

A result the journal holds as supplied (`answered`, `baseline`: a person's or a tool's answer, not a callee's)
is answered as supplied, never as `resumed`/`replayed`/`forked`, so the rules (`SUPPLIED`) still tell it from
a result that ran, however often the run is resumed or forked.

With `deferred` (a resume on the Temporal engine), a call journaled `running` is in flight in an
activity elsewhere: it is neither re-run nor a decision to make; the run waits for its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._catalog._rules import SUPPLIED
from .._errors import NeedsDecision, ReplayDivergence
from .._records import CallRecord, CallSource, Outcome, call_key, describe

HistoryMode = Literal['replay', 'resume', 'fork']


@dataclass
class History:
    mode: HistoryMode
    calls: dict[int, CallRecord]
    """The journal, by `seq`."""
    answers: dict[int, Any] = field(default_factory=dict)
    retry_unknown: bool = False
    fork_at: int | None = None
    deferred: bool = False
    """Calls journaled `running` are running elsewhere (Temporal activities), not lost in a crash."""
    questions: dict[str, CallRecord] | None = field(default=None, init=False, repr=False)
    """The journal by callee and arguments, built when a host value is asked out of order (`asked`)."""

    @property
    def source(self) -> CallSource:
        return {'replay': 'replayed', 'resume': 'resumed', 'fork': 'forked'}[self.mode]

    def answer(self, record: CallRecord) -> Outcome | None:
        """Answer `record` from the journal (filling it in), or None to run it live.

        Raises `ReplayDivergence` when the script no longer matches the journal and `NeedsDecision`
        when a side-effecting call's outcome is unknown.
        """
        seq = record.seq
        if self.fork_at is not None:
            if seq == self.fork_at:
                return answered(record, 'answered', result=self.answers[seq])
            if seq > self.fork_at:
                return None
        row = self.calls.get(seq)
        if row is not None and row.status == 'waiting':  # decided (or held again) by the approval gate
            record.attempt = row.attempt
            return None
        if row is not None and (row.status == 'skipped' or (row.status == 'cancelled' and self.mode == 'replay')):
            return None  # it never ran, or ran and was cancelled: a replay stages it (and must not start it)
        if row is None:
            if self.mode == 'replay':
                raise ReplayDivergence(
                    f'call #{seq} {describe(record.callee, record.arguments)} is not in the journal: '
                    'the script now makes more calls than the recorded run did.'
                )
            return None
        if row.callee != record.callee or row.arguments != record.arguments:
            raise ReplayDivergence(
                f'call #{seq} diverges from the journal: the script now calls '
                f'{describe(record.callee, record.arguments)}, the recorded run called '
                f'{describe(row.callee, row.arguments)}.'
            )
        if seq in self.answers:
            return answered(record, 'answered', result=self.answers[seq])
        record.attempt = row.attempt
        if row.status == 'ok':
            return answered(record, self.origin(row), result=row.result)
        if row.status == 'error':
            return answered(record, self.source, error=row.error or f'{row.callee} failed')
        if row.status == 'refused':
            return answered(record, self.source, error=row.error or f'{row.callee} was refused', refused=True)
        if row.status in ('lost', 'timed_out'):  # a join dropped it: the script gets what it got then
            record.status = row.status
            record.source, record.duration, record.error = self.source, row.duration, row.error
            kind = TimeoutError if row.status == 'timed_out' else RuntimeError
            return {'exception': kind(row.error or f'{row.callee} was cancelled')}
        if self.deferred:  # its activity runs it (or ran it, and its result is on the way)
            return None
        # In flight when the recorded run stopped: its outcome is unknown.
        if self.mode == 'replay':
            raise ReplayDivergence(f'call #{seq} {row.callee} never finished in the recorded run; resume it instead.')
        if (record.side_effect or row.side_effect) and not self.retry_unknown:
            raise NeedsDecision(
                f'call #{seq} {describe(row.callee, row.arguments)} has side effects and was in flight when the '
                'run stopped, so its outcome is unknown. Resume with --retry-unknown to run it again, or '
                f'--answer {seq}=JSON to supply its result.',
                seq=seq,
            )
        record.attempt = row.attempt + 1
        return None

    def origin(self, row: CallRecord) -> CallSource:
        """The source a journaled success is answered as: a resume keeps where a result that did not run came from
        (reused, answered, a baseline's, a fork's), so it is charged as before and never taken for a side effect
        that happened (`_effects`); a supplied result (`SUPPLIED`) stays supplied in every mode, so the rules
        still tell it from one that ran; else this history's own source."""
        if row.source in SUPPLIED or (self.mode == 'resume' and row.source not in ('live', 'resumed')):
            return row.source
        return self.source

    def spent(self, record: CallRecord) -> bool:
        """Whether the recorded run spent budget on this call: the journal's call at its position, unless
        that one cost nothing (`charged`); or a call the journal has no record of (a budget refused it)."""
        row = self.calls.get(record.seq)
        if row is None or row.callee != record.callee or row.arguments != record.arguments:
            return True
        return charged(row)

    def in_flight(self, seq: int) -> bool:
        """Whether call `seq` was handed to an activity that has not journaled its result (`deferred`)."""
        row = self.calls.get(seq)
        return self.deferred and row is not None and row.status == 'running'

    def host_value(self, record: CallRecord) -> tuple[bool, Any]:
        """A granted host value (the clock, entropy, a join's decision) as journaled: `(True, encoded)`,
        or `(False, None)` when the run should produce a fresh one.

        A question asked at another position than in the recorded run is answered as it was then: the
        join helpers see members that finished together in whatever order the results arrive (all at
        once in a replay), and `join:won` for a race's member is its journaled rank wherever it comes."""
        row = self.calls.get(record.seq)
        if row is not None and (self.fork_at is None or record.seq < self.fork_at):
            if row.callee != record.callee:
                raise ReplayDivergence(
                    f'call #{record.seq} diverges from the journal: the script now asks the host for '
                    f'{record.callee}, the recorded run called {describe(row.callee, row.arguments)}.'
                )
            if row.arguments != record.arguments:
                row = self.asked(record) or row
            return True, row.result
        if self.mode == 'replay':
            raise ReplayDivergence(f'call #{record.seq} ({record.callee}) is not in the journal.')
        return False, None

    def asked(self, record: CallRecord) -> CallRecord | None:
        """The journal's first answer to the same question (callee and arguments), if there is one."""
        if self.questions is None:
            self.questions = {}
            for row in self.calls.values():
                self.questions.setdefault(call_key(row.callee, row.arguments), row)
        row = self.questions.get(call_key(record.callee, record.arguments))
        return row if row is not None and (self.fork_at is None or row.seq < self.fork_at) else None


def charged(record: CallRecord) -> bool:
    """Whether a journaled call spent budget: it was not reused, refused or skipped, and a call a join
    dropped before it started (no duration) gave its budget back."""
    if record.status in ('lost', 'timed_out') and record.duration is None:
        return False
    return record.source != 'reused' and record.status not in ('refused', 'skipped')


def answered(
    record: CallRecord, source: CallSource, *, result: Any = None, error: str | None = None, refused: bool = False
) -> Outcome:
    """Fill in `record` as answered without running, and the outcome the sandbox gets: its result, a
    callee's failure (`RuntimeError`), or a rule's refusal (`PermissionError`)."""
    record.source = source
    record.duration = 0.0
    if refused:
        record.status, record.error = 'refused', error
        return {'exception': PermissionError(error)}
    if error is not None:
        record.status, record.error = 'error', error
        return {'exception': RuntimeError(error)}
    record.status, record.result = 'ok', result
    return {'return_value': result}
