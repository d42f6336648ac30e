"""The records of a run: one shape for a call, the answers the sandbox is given, and what a run returns.

`CallRecord` is the only in-memory model of a call. The dispatcher fills it in as the call runs,
the journal writes it (the store has the one converter to and from its SQLite row), resume and
replay read it back, `CallEvent`s carry it to `on_event`, and errors list the completed ones.

The store's records the engine passes around live here too, so no stage reaches into storage for a shape:
`RunRow` (a run), `Decision` (a person's decision on a waiting call), `Owner` (the process that holds a run's
lease) and `Checkpoint` (a snapshot to store).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import JsonValue

CallStatus = Literal[
    'running', 'ok', 'error', 'refused', 'cancelled', 'skipped', 'lost', 'timed_out', 'waiting', 'unknown'
]
"""`refused`: a rule did not let it run. `cancelled`: it was running when the script ended without
waiting for it. `skipped`: the script ended before it started (no budget spent). `lost`: a join
(`first_of`, `quorum`) had what it needed and cancelled it. `timed_out`: cancelled at its
`within` deadline. `waiting`: it needs a person's approval and has not got it yet. `unknown`: it
was started, but the process died before its outcome was journaled."""
CallSource = Literal['live', 'replayed', 'resumed', 'reused', 'forked', 'answered', 'baseline']
"""Where a call's result came from: it ran, or the journal (or the user) answered it. `reused`: an identical
earlier call's result answered it, not charged (an idempotent callee's, or a side effect an earlier script already
made: `_dispatch._effects`). `answered`: a person's or a fork's answer. `baseline`: an eval run with `reuse_calls`
answered it from the baseline eval's journal (charged like a live call)."""
CallKind = Literal['agent', 'tool']
"""Sub-agents count against `max_agent_calls`, host tools against `max_tool_calls`."""
RunStatus = Literal['running', 'completed', 'failed', 'interrupted', 'needs_decision', 'waiting']
"""`waiting`: stopped at a call that needs a person's approval, or before its first call for the approval of its plan
(`Harness(review=...)`); `Harness.resume` continues it."""


@dataclass
class CallRecord:
    """One external call a script made, in the order it was made (`seq` starts at 1)."""

    seq: int
    callee: str
    arguments: dict[str, JsonValue]
    line: int | None
    status: CallStatus = 'running'
    result: JsonValue = None
    error: str | None = None
    started: float = 0.0
    """Seconds since the run started."""
    duration: float | None = None
    attempt: int = 1
    source: CallSource = 'live'
    side_effect: bool = False
    """The callee was registered `side_effect=True`: an unknown outcome is never re-run silently."""
    cost_usd: float | None = None
    """What the call cost in USD as a dollar budget settled it (`_dispatch._cost`); None: no dollar budget, or not
    settled (a crash left it running)."""


class PendingCall(TypedDict):
    """A call the paused interpreter waits on: how the loop tracks it and how a snapshot's ledger
    stores it (a restored interpreter knows only Monty's `call_id`)."""

    call_id: int
    seq: int | None
    """None for a call that was refused before it got a journal position."""
    callee: str
    arguments: dict[str, JsonValue]
    line: int | None


class Returned(TypedDict):
    return_value: Any


class Raised(TypedDict):
    exception: BaseException


Outcome = Returned | Raised
"""What the sandbox is answered with for one call."""


EventKind = Literal['started', 'finished', 'failed', 'refused', 'skipped', 'progress']
"""`refused`: a rule or a budget did not let the call run (it never started). A call a call budget refused gets no
journal position and is not a call of the run: its event's record has seq 0 (a dollar budget's refusal is journaled).
`skipped`: the script ended before the call started (it may have had a `started` event, if it was waiting for a
concurrency slot). `progress`: the script called `log(text)` or `phase(name)`: the record's callee is `progress:log`
or `progress:phase`, its `arguments['text']` the text (no call of the catalog; see `_sandbox._progress`)."""


@dataclass(frozen=True)
class CallEvent:
    """A call changed state; `call` is its record at that moment (read it in the handler)."""

    kind: EventKind
    run_id: str
    call: CallRecord
    spent_usd: float | None = None
    """Under a dollar budget, what the orchestrator run's calls had cost (settled USD) at this moment; else None."""
    reserved_usd: float | None = None
    """Under a dollar budget, what its calls in flight held reserved then (their ceilings, USD); else None."""
    dollars: str | None = None
    """The two as a person reads them: '$0.0040 spent, $0.0030 reserved of max_cost=$1.00' (reserved while any is)."""

    @property
    def seq(self) -> int:
        return self.call.seq

    @property
    def callee(self) -> str:
        return self.call.callee

    @property
    def arguments(self) -> dict[str, JsonValue]:
        return self.call.arguments

    @property
    def line(self) -> int | None:
        return self.call.line

    @property
    def source(self) -> CallSource:
        return self.call.source

    @property
    def elapsed(self) -> float | None:
        """Seconds the call took; None on `started`."""
        return None if self.kind == 'started' else self.call.duration

    @property
    def error(self) -> str | None:
        return self.call.error

    @property
    def result(self) -> JsonValue:
        return self.call.result


EventHandler = Callable[[CallEvent], None]


@dataclass(frozen=True)
class Pending:
    """A call that waits for a person's approval: `Harness.approve(run_id, seq)` or `reject`."""

    seq: int
    callee: str
    arguments: dict[str, JsonValue]
    run_id: str = ''


@dataclass
class WorkflowResult:
    """What `Harness.run` (and replay, resume, fork) returns."""

    value: Any
    run_id: str
    status: RunStatus
    calls: list[CallRecord] = field(default_factory=list)
    """The run's journal in `seq` order: its calls, and the rows of granted host values (the clock, entropy, a
    join's decisions) and of `log`/`phase` (`is_progress`; read them as `progress`), which take seqs too."""
    printed: str = ''
    budget_exhausted: bool = False
    """A call was refused because a budget ran out; the script caught it and finished."""
    note: str | None = None
    waiting: list[Pending] = field(default_factory=list)
    """With `status == 'waiting'`: the calls that wait for approval (the run holds no worker meanwhile)."""
    plan: Any = None
    """With `status == 'waiting'` before the first call (`Harness(review=...)`): the plan a person approves
    (a `ReviewPlan`: `.code`, `.analysis`, `.estimate`), then `approve(run_id)` and `resume(run_id)`."""

    @property
    def cost_usd(self) -> float | None:
        """What this run's calls cost in USD as its dollar budgets settled them (`max_cost`, `daily_cost`); None
        when no call was settled (no dollar budget)."""
        return cost_of(self.calls)

    @property
    def progress(self) -> list[dict[str, Any]]:
        """The script's `log(text)`/`phase(name)` entries, in order: `{'kind': 'log' | 'phase', 'text', 'seq'}`
        (`seq`: its place in the journal; the same on replay). Entries past the cap are counted in
        `progress_dropped`."""
        return progress_entries(self.calls)

    @property
    def progress_dropped(self) -> int:
        """`log`/`phase` entries past the run's cap (`PROGRESS_MAX_ENTRIES`): counted, not kept."""
        return progress_dropped(self.calls)


PROGRESS_PREFIX = 'progress:'
"""The journal rows of `log`/`phase` (`progress:log`, `progress:phase`) and of the count past the cap."""
PROGRESS_DROPPED = 'progress:dropped'


def is_progress(record: CallRecord) -> bool:
    """A `log`/`phase` row (or the count past the cap): no call of the catalog, and no completed result."""
    return record.callee.startswith(PROGRESS_PREFIX)


def progress_kind(record: CallRecord) -> str | None:
    """`'log'` or `'phase'` for a kept entry; None for a call or the count past the cap."""
    if not is_progress(record) or record.callee == PROGRESS_DROPPED:
        return None
    return record.callee.removeprefix(PROGRESS_PREFIX)


def cost_of(calls: Iterable[CallRecord]) -> float | None:
    """What calls cost as the dollar budgets settled them (`CallRecord.cost_usd`); None: none was settled."""
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    return sum(costs) if costs else None


def progress_entries(calls: Iterable[CallRecord]) -> list[dict[str, Any]]:
    """The kept `log`/`phase` entries among a run's journal rows, in order, as `r.progress` gives them."""
    return [
        {'kind': kind, 'text': c.arguments.get('text'), 'seq': c.seq}
        for c in calls
        if (kind := progress_kind(c)) is not None
    ]


def progress_dropped(calls: Iterable[CallRecord]) -> int:
    """How many `log`/`phase` entries past the cap a run counted and did not keep."""
    return sum(c.result for c in calls if c.callee == PROGRESS_DROPPED and isinstance(c.result, int))


def new_run_id() -> str:
    """Unique across processes, and random from its first character: a short prefix names one run (git-like
    abbreviations in the CLI), where a leading timestamp made every run of a day share 7 characters.
    Runs are ordered by their `created` column, never by id."""
    return f'{secrets.token_hex(6)}{int(time.time() * 1000):012x}'


def preview(value: Any, limit: int = 300, *, as_text: bool = False) -> str:
    """A bounded JSON rendering of plain data, for messages, spans and terminal lines.

    `as_text`: a string is shown as it is, not JSON-quoted (for values that are already text).
    """
    if as_text and isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(',', ':'), default=str)
        except (TypeError, ValueError):
            text = f'<{type(value).__name__}>'
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + '…'


class SpanDict(TypedDict):
    """One finished span as the offline recorder keeps it and the run store holds it."""

    name: str
    span_id: str
    parent_span_id: str | None
    trace_id: str
    start: float
    """Unix seconds."""
    end: float
    status: Literal['ok', 'error']
    error: str | None
    exceptions: NotRequired[list[dict[str, str]]]
    """Exception events: `type`, `message`, `stacktrace` (a callee's real error, for the operator)."""
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Decision:
    """A person's decision on a call that needs approval."""

    approved: bool
    reason: str | None = None
    decided_by: str | None = None
    decided_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Owner:
    """A process that runs runs: its host, its pid, and a token that tells two lives of a pid apart."""

    host: str
    pid: int
    token: str

    def __str__(self) -> str:
        return f'{self.host}:{self.pid}:{self.token}'

    @classmethod
    def parse(cls, text: str | None) -> Owner | None:
        if not text:
            return None
        parts = text.rsplit(':', 2)  # the host may hold colons (IPv6); pid and token never do
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])

    def alive(self) -> bool | None:
        """Whether the process still exists: known on this host only (None elsewhere)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


_this: Owner | None = None


def this_process() -> Owner:
    """This process as a run's owner (a new token after a fork)."""
    global _this
    if _this is None or _this.pid != os.getpid():
        _this = Owner(socket.gethostname(), os.getpid(), secrets.token_hex(4))
    return _this


def one_execution() -> Owner:
    """This process as the holder of one resume or one decision: a token of its own, so two of them in one
    process (the studio serves many) exclude each other as two processes do, and giving one lease back never
    frees a lease another part of this process holds."""
    me = this_process()
    return Owner(me.host, me.pid, secrets.token_hex(4))


@dataclass
class RunRow:
    """One run: a script's execution (or an orchestrator run), its outcome and its lineage."""

    run_id: str
    script: str = ''
    status: RunStatus = 'running'
    created: float = field(default_factory=time.time)
    updated: float = 0.0
    """Last write to the run or its journal; `0.0` at construction means "same as `created`"."""
    prompt: str | None = None
    """First line of the user prompt, for orchestrator runs."""
    value: Any = None
    error: str | None = None
    duration: float | None = None
    parent_run_id: str | None = None
    """The run this one was forked from."""
    fork_at: int | None = None
    orchestrator_run_id: str | None = None
    conversation_id: str | None = None
    """The conversation whose turn the orchestrator run was (pydantic-ai's `conversation_id`), if any."""
    trace_context: str | None = None
    """W3C `traceparent`, so a resumed run joins the original trace."""
    inputs: dict[str, Any] | None = None
    access: dict[str, Any] | None = None
    """`{'allow': [...] | None, 'deny': [...]}` when the run was restricted."""
    catalog: dict[str, Any] | None = None
    """The catalog manifest the run ran against (`_manifest.manifest`)."""
    budget_key: str | None = None
    """Whose `daily_cost` the run spends (`run(budget_key=...)`); a resume or a fork of it spends the same."""
    calls_count: int = 0
    """Maintained by the store: the number of journaled calls."""

    def __post_init__(self) -> None:
        if not self.updated:
            self.updated = self.created


@dataclass(frozen=True)
class Checkpoint:
    """A snapshot to store: the paused interpreter's Monty dump and the calls it waits on."""

    after_seq: int
    """How many calls were journaled when it was taken."""
    dump: bytes
    ledger: list[PendingCall]


def call_key(callee: str, arguments: dict[str, Any]) -> str:
    """One string per callee and arguments: equal exactly when the call asks the same thing."""
    return callee + json.dumps(arguments, sort_keys=True, separators=(',', ':'))


def describe(callee: str, arguments: dict[str, Any]) -> str:
    """`callee({...})`, bounded: how messages name a call."""
    return f'{callee}({preview(arguments, 120)})'
