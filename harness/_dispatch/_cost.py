"""Dollar budgets: `max_cost` per orchestrator run, a `daily_cost` per `budget_key` and a `conversation_cost` per
conversation, exact under any fan-out.

A call's ceiling (`_catalog._prices.call_ceiling`) is reserved synchronously as the call is admitted, beside its call
budget (`Dispatcher.reserve`), so a gather of 200 under `max_cost` runs exactly the calls whose ceilings fit. When
the call ends its reservation is settled to what it cost: a sub-agent's usage as pydantic-ai priced it
(`RunUsage.cost`), a host tool's `cost=`; a call whose usage could not be priced, or that failed or was cancelled
without a usage, settles at its ceiling (never below what it may have cost). A call that never started gives its
reservation back. A call whose ceiling is not known (unpriced and no `cost=`, or no usage limit) cannot be reserved,
so under a dollar budget it is refused with the fix (give it `cost=`, or usage limits). A refusal (`CostSpent`, a
`PermissionError` in the script) is journaled `refused` by the dispatcher, so a resume or a replay answers it as it
was: what was left depends on when earlier calls settled, which only the journal knows.

The daily and conversation budgets are windows kept in the store (`_store._spend`): each reservation and each
settlement is one `BEGIN IMMEDIATE` transaction over every window the call spends, so processes sharing the store
share them exactly. A conversation's window spans every turn of one pydantic-ai `conversation_id` (a run of no
conversation, a direct `Harness.run`, has none). The reservation is a synchronous write on the event loop, in call
order (an `await` there would let a later call reserve first); it waits while another process holds the store's
lock, as every write does. The store holds each reservation by (run id, seq), so the process that ends a call settles
it, a Temporal worker's `call` activity too (`settle_elsewhere`). A process that dies with calls reserved leaves them
reserved (a budget is never given back on a guess); the call's re-run spends that hold at its ceiling.

A restored run (resume) counts what its journaled calls settled to (`CallRecord.cost_usd`), and a call the journal
has `running` (in flight when its process died, so it may have spent its ceiling) at its ceiling; run again, that
call reserves anew under the check (`lost`), so a crash and a resume never spend past `max_cost`. pydantic-ai checks
token limits after each response, so a call's last response can take its real cost past its ceiling by that
response's tokens.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic_ai.exceptions import UserError

if TYPE_CHECKING:
    from .._agent._usage import Totals
    from .._records import CallKind, CallRecord
    from .._settings import Settings
    from .._store import RunStore
    from ._budget import Budget
    from ._history import History


class Callee(Protocol):
    """What the dollar budgets read of a callee (a `_catalog._callees.Callee`; named here by its shape, so that the
    catalog, whose callees run with a `RunScope` holding these budgets, is not imported back)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> CallKind: ...
    @property
    def cost(self) -> float | None: ...


class Ceiling(Protocol):
    """What the budgets read of a call's ceiling (a `_catalog._prices.Ceiling`)."""

    @property
    def usd(self) -> float | None: ...
    @property
    def reason(self) -> str | None: ...


CONVERSATION = 'conversation'
"""The period of a conversation's window in the store (`_store._spend`): the whole conversation, never a day."""

EPSILON = 1e-9
"""Float sums of prices: a reservation that fits to the ninth decimal fits."""


class CostSpent(PermissionError):
    """A dollar budget refused a call: a `PermissionError` in the script (catchable), naming the budget and what is
    left; `budget` names it as `BudgetSpent.budget` does ('the cost budget (max_cost=$1.50)'). Not a `BudgetSpent`
    (a `RuntimeError`): the sandbox would give the script that."""

    def __new__(cls, message: str, budget: str) -> CostSpent:
        return super().__new__(cls, message)

    def __init__(self, message: str, budget: str) -> None:
        super().__init__(message)
        self.budget = budget


@dataclass(frozen=True)
class Window:
    """A dollar budget kept in the store: `daily_cost[key]` USD per UTC day of a budget key (`kind` 'daily'), or
    `conversation_cost` USD over one conversation (`kind` 'conversation', `key` its id)."""

    store: RunStore
    key: str
    limit: float
    kind: Literal['daily', 'conversation'] = 'daily'

    def period(self) -> str:
        """The window's period now: today (UTC), or the whole conversation."""
        return today() if self.kind == 'daily' else CONVERSATION

    @property
    def name(self) -> str:
        if self.kind == 'conversation':
            return f'the conversation cost budget (conversation_cost={usd(self.limit)})'
        return f'the daily cost budget of {self.key!r} (daily_cost[{self.key!r}]={usd(self.limit)})'

    def summary(self) -> str:
        """ "'tenant-a' today: $0.0100 spent, $0.0015 reserved of $0.0500", of every process sharing the store."""
        spent, reserved = self.store.spend_of(self.key, self.period())
        label = f'{self.key!r} today' if self.kind == 'daily' else 'this conversation'
        return f'{label}: {usd(spent)} spent, {usd(reserved)} reserved of {usd(self.limit)}'


Daily = Window
"""The daily budget's window (its earlier name)."""


def today() -> str:
    return datetime.datetime.now(datetime.UTC).date().isoformat()


@dataclass
class CostBudget:
    """The dollar budgets of one orchestrator run (shared by its scripts, in `RunScope`): reservations by call,
    `spent` settled. Inactive (nothing priced, nothing reserved) when neither `max_cost` nor a window is set."""

    max_cost: float | None = None
    daily: Window | None = None
    price: Callable[[Any], Ceiling] | None = None
    """A call's ceiling (`_catalog._prices.call_ceiling` under the run's usage limits), handed in by the engine."""
    conversation: Window | None = None
    """`conversation_cost` over the run's conversation (None: no such budget, or the run is of no conversation)."""
    spent: float = 0.0
    reserved: dict[tuple[str, int], tuple[float, bool]] = field(default_factory=dict)
    """Ceilings reserved by (run id, seq), and whether the store's windows hold them too (a replay's do not)."""
    rerun: set[tuple[str, int]] = field(default_factory=set)
    """Calls a restored run counted at their ceiling as lost attempts (`count`), whose re-run reserves again."""

    @property
    def windows(self) -> list[Window]:
        return [w for w in (self.daily, self.conversation) if w is not None]

    @property
    def active(self) -> bool:
        return self.max_cost is not None or bool(self.windows)

    @property
    def held(self) -> float:
        """USD reserved by this run's calls in flight."""
        return sum(usd for usd, _ in self.reserved.values())

    def ceiling(self, callee: Callee) -> float | None:
        assert self.price is not None
        return self.price(callee).usd

    def reserve(self, key: tuple[str, int], callee: Callee) -> None:
        """Reserve the ceiling of one call of `callee`, or raise `CostSpent` and reserve nothing."""
        if not self.active:
            return
        assert self.price is not None
        found = self.price(callee)
        windows = self.windows
        name = self.name if self.max_cost is not None or not windows else windows[0].name
        if found.usd is None:
            raise CostSpent(
                f'{cap(name)} cannot reserve a call of {callee.name}: its cost has no known ceiling ({found.reason}). '
                'No call of it will run under this budget.',
                name,
            )
        if self.max_cost is not None:
            left = self.max_cost - self.spent - self.held
            if found.usd > left + EPSILON:
                raise CostSpent(refusal(self.name, callee.name, found.usd, max(left, 0.0)), self.name)
        if windows:  # one transaction over every window: all reserve, or none does
            store = windows[0].store
            refused = store.reserve_spend(*key, [(w.key, w.period(), w.limit) for w in windows], found.usd)
            if refused is not None:
                window = windows[refused[0]]
                raise CostSpent(refusal(window.name, callee.name, found.usd, refused[1]), window.name)
        self.reserved[key] = (found.usd, bool(windows))

    def settle(self, key: tuple[str, int], cost: float | None) -> float | None:
        """The call ended: its reservation becomes what it cost (`cost`; None: unknown, its ceiling). Returns the
        settled cost, or None when nothing was reserved for it."""
        held = self.reserved.pop(key, None)
        if held is None:
            return None
        ceiling, stored = held
        settled = ceiling if cost is None else cost
        self.spent += settled
        if stored and self.windows:
            self.windows[0].store.settle_spend(*key, settled)
        return settled

    def release(self, run_id: str, seq: int) -> None:
        """The call never started: its reservation is given back."""
        held = self.reserved.pop((run_id, seq), None)
        if held is not None and held[1] and self.windows:
            self.windows[0].store.settle_spend(run_id, seq, 0.0)

    # -- what the dispatcher asks, one line each (`Dispatcher.reserve`, `start`, `run_one`, `skip`, `preload`) --

    def admit(self, run_id: str, record: CallRecord, callee: Callee, history: History | None, calls: Budget) -> None:
        """Reserve a call's ceiling as it is admitted, after its call budget (`calls`), which a refusal gives back
        and names. On a resume, a call the journal has `running` was in flight when its process died: that attempt
        may have spent its ceiling, counted before this one is reserved."""
        if not self.active or record.status == 'refused':  # answered refused (the journal, a person): runs nothing
            return
        row = history.calls.get(record.seq) if history is not None and history.mode == 'resume' else None
        lost = row is not None and row.status == 'running' and row.cost_usd is None and row.callee == callee.name
        if lost and (run_id, record.seq) not in self.rerun:  # (not counted already, before its snapshot)
            self.count(row, callee, run_id)
        if lost and history is not None and history.in_flight(record.seq):
            return  # not lost: its activity runs it on Temporal, and settles the ceiling it holds (`Settler`)
        try:
            if history is not None and history.mode == 'replay':
                self.follow(run_id, record, callee, history)
            else:
                self.reserve((run_id, record.seq), callee)
        except CostSpent as exc:
            calls.release(callee.name, callee.kind)
            calls.note(exc.budget)
            raise

    def follow(self, run_id: str, record: CallRecord, callee: Callee, history: History) -> None:
        """A replay spends nothing and follows the recorded run, whose dollar refusals are journaled (answered from
        there): a call it ran is held at what it settled to, unchecked (when the recorded run settled it is not
        known); one the journal does not have is left to diverge."""
        row = history.calls.get(record.seq)
        if row is not None and row.callee == record.callee and row.arguments == record.arguments:
            held = row.cost_usd if row.cost_usd is not None else self.ceiling(callee) or 0.0
            self.reserved[(run_id, record.seq)] = (held, False)

    def answered(self, run_id: str, record: CallRecord, history: History | None, calls: Budget) -> None:
        """A reserved call answered without running: from the journal, at what it cost then (not journaled: its
        ceiling); answered otherwise (a person's answer), nothing. Answered with this budget's journaled refusal
        (a resume, a replay), the refusal is noted as it was (`calls.note`): uncaught, it is `BudgetExceeded` again."""
        names = [*([self.name] if self.max_cost is not None else []), *(w.name for w in self.windows)]
        spent = next((n for n in names if record.status == 'refused' and (record.error or '').startswith(cap(n))), None)
        if spent is not None:
            calls.note(spent)
        row = history.calls.get(record.seq) if history is not None else None
        journaled = row is not None and row.callee == record.callee  # (a cost it does not know: its ceiling)
        self.ended(run_id, record, row.cost_usd if row is not None and journaled else 0.0)
        if row is not None and journaled and record.cost_usd is None:  # settled elsewhere (a Temporal activity)
            record.cost_usd = row.cost_usd

    def ended(self, run_id: str, record: CallRecord, cost: float | None) -> None:
        """A reserved call ended: settled to `cost` (None: its ceiling), journaled with its result."""
        settled = self.settle((run_id, record.seq), cost)
        if settled is not None:
            record.cost_usd = settled

    def count(self, record: CallRecord, callee: Callee, run_id: str | None = None) -> None:
        """A call a restored run (`run_id`; None: another script of its orchestrator run) made before, counted as
        spent, unchecked: what it settled to, or, with no settled cost, its ceiling (it was in flight when its process
        died and may have spent that); such a call of this run, run again, reserves its cost again (`lost`)."""
        if not self.active:
            return
        self.spent += record.cost_usd if record.cost_usd is not None else self.ceiling(callee) or 0.0
        if run_id is not None and record.cost_usd is None and record.status == 'running':
            self.rerun.add((run_id, record.seq))

    def lost(self, run_id: str, seq: int) -> bool:
        """Whether call `seq`, counted by `count`, was in flight at a crash: admitted again, it reserves anew."""
        return (run_id, seq) in self.rerun

    @property
    def name(self) -> str:
        return f'the cost budget (max_cost={usd(self.max_cost or 0.0)})'

    def summary(self) -> str:
        """'$0.0123 spent, $0.0030 reserved of max_cost=$0.50' ('' with no dollar budget), then each window's totals."""
        if not self.active:
            return ''
        return '; '.join([self.totals(), *(w.summary() for w in self.windows)])

    def totals(self) -> str:
        """This run's part of `summary` (no store read): spent, reserved while any call holds a reservation."""
        text = f'{usd(self.spent)} spent' + (f', {usd(self.held)} reserved' if self.held else '')
        return text + (f' of max_cost={usd(self.max_cost)}' if self.max_cost is not None else ' in this run')


def dollar_budgets(
    settings: Settings,
    store: RunStore | None,
    budget_key: str | None,
    price: Callable[[Any], Ceiling],
    conversation_id: str | None = None,
) -> CostBudget:
    """The dollar budgets of a new orchestrator run: `max_cost`, `budget_key`'s `daily_cost` (a key with none is
    refused: a misspelt tenant would otherwise spend without limit), and `conversation_cost` over `conversation_id`."""
    daily = conversation = None
    if budget_key is not None:
        if budget_key not in settings.daily_cost or store is None:  # (not listing the others: they are tenants)
            raise UserError(f'budget_key={budget_key!r} has no daily_cost: add it to Harness(daily_cost={{...}}).')
        daily = Window(store, budget_key, settings.daily_cost[budget_key])
    if settings.conversation_cost is not None and conversation_id is not None and store is not None:
        conversation = Window(store, conversation_id, settings.conversation_cost, 'conversation')
    return CostBudget(settings.max_cost, daily, price, conversation)


@dataclass
class Settler(CostBudget):
    """The dollar budgets of a call another process admitted (a Temporal worker's `call` activity runs it; the
    `advance` that admitted it reserved its ceiling): nothing is reserved here, and when the call ends it is journaled
    at what it cost (unknown: its `ceiling_usd`) and its holds on the store's windows are settled to that. Settles
    nothing when the Harness has no dollar budget (`settling`), as the embedded engine then settles nothing."""

    store: RunStore | None = None
    ceiling_usd: float | None = None
    settling: bool = False

    def ended(self, run_id: str, record: CallRecord, cost: float | None) -> None:
        settled = cost if cost is not None else self.ceiling_usd
        if not self.settling or settled is None:
            return
        record.cost_usd = settled
        self.spent += settled
        if self.store is not None:
            self.store.settle_spend(run_id, record.seq, settled)


def settler(settings: Settings, store: RunStore | None, ceiling: float | None) -> Settler:
    """What settles a call run for another process (`Settler`), under `settings`' dollar budgets."""
    budgets = settings.max_cost is not None or bool(settings.daily_cost) or settings.conversation_cost is not None
    return Settler(store=store, ceiling_usd=ceiling, settling=budgets)


def refusal(budget: str, callee: str, ceiling: float, left: float) -> str:
    return (
        f'{cap(budget)} has {usd(left)} left; a call of {callee} can cost up to {usd(ceiling)}, so it was not run '
        '(it cost nothing). Finish with the results you have.'
    )


def call_cost(callee: Callee, used: Totals) -> float | None:
    """What a finished call cost, or None when that is not known (it settles at its ceiling)."""
    if callee.kind == 'tool':
        return callee.cost or 0.0
    if used.requests and not used.unpriced and used.cost is not None:
        return float(used.cost)
    return None


def usd(value: float) -> str:
    return f'${value:.4f}' if value < 1 else f'${value:,.2f}'


def cap(text: str) -> str:
    return text[0].upper() + text[1:]
