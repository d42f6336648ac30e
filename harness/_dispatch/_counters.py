"""The counters that stop a stuck script: identical calls, one callee's same failure, and refused calls.

- `max_repeats` identical calls (callee and arguments) per script; one more stops the script as stuck.
- A callee whose last `max_repeats` results handed to the script were the same failure, whatever its
  arguments: its next call stops the script as stuck (a loop whose arguments drift).
- `MAX_REFUSALS` calls refused by a rule or a budget: one more stops the script.

Each counts only what the script did, in the order it did it: calls as they are made (`call`, `refusal`),
failures as the script is handed them (`outcome`, in call order within one delivery). A restored run counts its
journaled calls again (`restore`) and does not count a call twice when the restored interpreter makes it again,
so a run stopped and resumed any number of times stops where an uninterrupted one does. (A budget's refusal is
not journaled: a resumed run counts those afresh.)
"""

from __future__ import annotations

from collections import Counter

from .._catalog._rules import MAX_REFUSALS
from .._errors import WorkflowRuntimeError
from .._records import CallRecord, describe, preview
from ._sources import reuse_key


class Counters:
    def __init__(self, max_repeats: int | None) -> None:
        self.limit = max_repeats
        self.repeats: Counter[str] = Counter()
        self.failing: dict[str, tuple[str, int]] = {}
        """Per callee: the error its latest results handed to the script repeat, and how many times in a row."""
        self.refusals: list[str] = []
        """Messages of the calls refused by a rule, so an uncaught one is reported as `PolicyViolation`."""
        self.refused = 0
        self.refused_by: Counter[str] = Counter()
        """Why calls were refused (a rule's message, or the budget), for the message that stops the script."""
        self.restored: set[int] = set()
        """Seqs counted by `restore`: a restored interpreter makes them again, and they are not counted again."""

    def call(self, record: CallRecord) -> None:
        """A call the script made: stop the script if it repeats one call, or one failure, too often."""
        if self.limit is None or record.seq in self.restored:
            return
        key = reuse_key(record.callee, record.arguments)
        self.repeats[key] += 1
        if self.repeats[key] > self.limit:
            raise WorkflowRuntimeError(
                f'The script looks stuck: it called {describe(record.callee, record.arguments)} with the same '
                f'arguments {self.repeats[key]} times (at most {self.limit} identical calls per script). Keep the '
                'first result in a variable instead of calling again, or change what the loop passes.'
            )
        error, times = self.failing.get(record.callee, ('', 0))
        if times >= self.limit:
            raise WorkflowRuntimeError(
                f'The script looks stuck: {record.callee} failed {times} times in a row with the same error '
                f'({preview(error, 200, as_text=True)}), whatever its arguments (at most {self.limit} per callee). '
                f'Stop retrying {record.callee} when it fails that way: finish with the results you have, or fix '
                'what the error names.'
            )

    def outcome(self, record: CallRecord) -> None:
        """A callee's result the script is handed: a failure like the one before extends the run of them."""
        if record.seq in self.restored:
            return
        if record.status == 'ok':
            self.failing.pop(record.callee, None)
        elif record.status == 'error':
            error, times = self.failing.get(record.callee, ('', 0))
            self.failing[record.callee] = (record.error or '', times + 1 if record.error == error else 1)

    def refusal(self, why: str, seq: int | None = None) -> None:
        """Count a refused call and why (a rule's message, or the budget `BudgetSpent` names); past
        `MAX_REFUSALS` the script is stopped, with what refused its calls."""
        if seq is not None and seq in self.restored:
            return
        self.refused += 1
        self.refused_by[why] += 1
        if self.refused > MAX_REFUSALS:
            causes = '; and because '.join(why.rstrip('.') for why, _ in self.refused_by.most_common(3))
            raise WorkflowRuntimeError(
                f'The script stopped after {MAX_REFUSALS} refused calls, refused because {causes}. It keeps making '
                'calls that cannot run: finish with the results you have, and do not retry a refused call in a loop.'
            )

    def restore(self, record: CallRecord) -> None:
        """A journaled call of the run being restored (in call order), counted as it was when it was made."""
        if record.status == 'refused' and record.source == 'live':  # a rule's (a person's rejection is 'answered')
            self.refusals.append(record.error or '')
            self.refused += 1  # never past the stop: the call that went past it was not journaled
            self.refused_by[record.error or ''] += 1
        self.outcome(record)
        self.restored.add(record.seq)
        if self.limit is not None:
            self.repeats[reuse_key(record.callee, record.arguments)] += 1
