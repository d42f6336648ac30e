"""The host side of `log(message)` and `phase(name)`: a script's own progress, journaled like a host value.

The helpers (`_catalog._prelude`) call the host function `__progress__`, which pauses the sandbox and is
answered at once with `None` (a plain return, not a future: the helpers are synchronous). Each entry is a
journal row, `progress:log` or `progress:phase` with `{'text': ...}`, at the seq the call took, so replay,
resume and fork answer it from the journal like the clock (`Dispatcher.host_value`) and `r.progress` is the
same on every run. It is no call of the catalog: no rule, no budget, no `max_repeats` counter sees it. The
live view hears of it as a `progress` event, and the run's span gets a `progress` event.

Bounds, so a loop of logs cannot fill the store: text past `MAX_TEXT` characters is cut; a run keeps its
first `MAX_ENTRIES` entries, and the ones after are counted, not kept, in a `progress:dropped` row whose
result is the count. The count is exact across a resume: drops made after a snapshot are counted in a row
of their own (`seal`), which a restored interpreter makes again from the same point.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from .._catalog._prelude import PROGRESS_MAX_ENTRIES as MAX_ENTRIES
from .._catalog._prelude import PROGRESS_MAX_TEXT as MAX_TEXT
from .._dispatch._dispatcher import Dispatcher
from .._records import PROGRESS_DROPPED as DROPPED
from .._records import PROGRESS_PREFIX as PREFIX
from .._records import CallRecord, Outcome, progress_kind
from .._tracing._names import ATTR_PROGRESS_KIND, ATTR_PROGRESS_TEXT, ATTR_SEQ, EVENT_PROGRESS

PROGRESS_FUNCTION = '__progress__'
KINDS = ('log', 'phase')


def bounded(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f'{text[:MAX_TEXT]}… [{len(text) - MAX_TEXT} more characters cut]'


class Progress:
    """Answers `__progress__` for one script run."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.kept: int | None = None
        """Entries the run has kept, counted from its records at the first entry (a restored run has some)."""
        self.counting: CallRecord | None = None
        """The `progress:dropped` row that later drops are added to, until a snapshot seals it."""

    def answer(self, kwargs: dict[str, Any]) -> Outcome:
        kind, text = kwargs.get('kind'), kwargs.get('text')
        helper = kind if kind in KINDS else 'log'
        if not isinstance(text, str):
            return {
                'exception': TypeError(
                    f'{helper}() takes one str, got {type(text).__name__}: write {helper}(str(x)) or an f-string'
                )
            }
        if self.kept is None:
            self.kept = sum(1 for c in self.dispatcher.calls if progress_kind(c) is not None)
        if self.kept >= MAX_ENTRIES:
            self.count_dropped()
            return {'return_value': None}
        self.kept += 1
        outcome = self.dispatcher.host_value(
            f'{PREFIX}{helper}', {'text': bounded(text)}, lambda: None, lambda v: v, lambda v: v
        )
        self.report(self.dispatcher.calls[-1])
        return outcome

    def count_dropped(self) -> None:
        """One more entry past the cap: added to the open `progress:dropped` row, or to a new one."""
        row = self.counting
        if row is not None:
            row.result = (row.result if isinstance(row.result, int) else 0) + 1
            self.dispatcher.journal.add([row])
            return
        self.dispatcher.host_value(DROPPED, {}, lambda: 1, int, int)
        row = self.counting = self.dispatcher.calls[-1]
        row.result = 1  # a restored run counts again from here: the journal's count was of the run that died

    def seal(self) -> None:
        """A snapshot is being taken: drops after it go to a row of their own, which a restored interpreter
        (resuming from this snapshot) makes again, so none is counted twice."""
        self.counting = None

    def report(self, record: CallRecord) -> None:
        """The live view's `progress` event and the run span's (its text only with `trace_values`)."""
        self.dispatcher.emit('progress', record)
        attributes: dict[str, Any] = {ATTR_PROGRESS_KIND: record.callee.removeprefix(PREFIX), ATTR_SEQ: record.seq}
        if self.dispatcher.trace_values:
            attributes[ATTR_PROGRESS_TEXT] = record.arguments.get('text') or ''
        trace.get_current_span().add_event(EVENT_PROGRESS, attributes)
