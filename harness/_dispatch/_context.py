"""What a callee may learn about the call it serves, and what an orchestrator run shares with its scripts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue
from pydantic_ai.usage import RunUsage, UsageLimits

from .._catalog._rules import Access
from ._budget import Budget
from ._cost import CostBudget
from ._effects import Effect


@dataclass
class RunScope:
    """State shared by every script of one orchestrator run (or of one direct `Harness.run`).

    The budget lives here so that `max_agent_calls` is one ceiling for the whole orchestrator run,
    however many scripts the model writes.
    """

    deps: Any = None
    usage: RunUsage | None = None
    """Sub-agent usage is added here after each sub-agent run (never shared during it)."""
    model: Any = None
    """The orchestrator's model, used by sub-agents registered with `inherit_model=True`."""
    sub_agent_usage_limits: UsageLimits | None = None
    budget: Budget = field(default_factory=Budget)
    """One ceiling for every script of the orchestrator run."""
    cost: CostBudget = field(default_factory=CostBudget)
    """Its dollar budgets (`max_cost`, a `budget_key`'s `daily_cost`), reserved beside `budget` (`_cost`)."""
    prompt: str | None = None
    """First line of the user's prompt, stored with each script's run."""
    orchestrator_run_id: str | None = None
    access: Access = field(default_factory=Access)
    """Which callees the orchestrator's scripts may call (`orchestrator(allow=..., deny=...)`)."""
    conversation_id: str | None = None
    """The conversation the orchestrator run is a turn of (pydantic-ai's `RunContext.conversation_id`)."""
    seen: frozenset[str] = frozenset()
    """The earlier agent runs whose messages are in this one's history: the model has their results, so their side
    effects are not answered again (a repeat is meant); those of a turn it has no messages of are (`_effects`)."""
    reusable: dict[str, JsonValue] = field(default_factory=dict)
    """Results of completed idempotent calls by (callee, arguments): a retried script gets them without paying again."""
    supplied: set[str] = field(default_factory=set)
    """The keys of `reusable` whose result an eval baseline supplied: answered again, it is still the baseline's
    (charged, and never taken for a predecessor that ran: `SUPPLIED`)."""
    effects: list[Effect] = field(default_factory=list)
    """Side effects that succeeded in the scope's scripts (and, read from the store at each script's start, in the
    conversation's): a later script repeating one is answered, not run again (`_effects`)."""

    def __post_init__(self) -> None:
        self.budget.dollars = self.cost.summary  # the call budget's summary says what the dollars did too


@dataclass(frozen=True)
class CallContext:
    """Passed to a registered function that declares a parameter annotated `CallContext`.

    The parameter is injected by the harness and hidden from the script's stub.
    """

    run_id: str
    seq: int
    callee: str
    attempt: int
    deps: Any = None

    @property
    def idempotency_key(self) -> str:
        """Stable across resumes of the same run: a side-effecting tool can deduplicate on it."""
        return f'{self.run_id}:{self.seq}'
