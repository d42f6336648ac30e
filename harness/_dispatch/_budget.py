"""Exact call budgets: `max_agent_calls`, `max_tool_calls` and per-callee `call_caps`.

`reserve` is synchronous and is called by the sandbox loop as each call is made, before anything is
awaited, so check-and-count is atomic under any fan-out: a gather of 10 under a budget of 5 makes
exactly 5 calls, whichever order they finish in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .._records import CallKind


class BudgetSpent(RuntimeError):
    """Raised inside the script (as `RuntimeError`) when a call would exceed a budget; catchable.

    `budget` names the budget and its setting, as every message about it does:
    'the sub-agent call budget (max_agent_calls=50) is spent'."""

    def __init__(self, message: str, budget: str) -> None:
        super().__init__(message)
        self.budget = budget


@dataclass
class Budget:
    """Counts calls against the limits of one orchestrator run (shared by all of its scripts)."""

    max_agent_calls: int = 50
    max_tool_calls: int | None = None
    call_caps: Mapping[str, int] = field(default_factory=dict)
    agent_calls: int = 0
    tool_calls: int = 0
    per_callee: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    """How many calls were refused; non-zero means the result must say the budget ran out."""
    spent: list[str] = field(default_factory=list)
    """The budgets that refused a call, each once, as `BudgetSpent.budget` names them (for `summary`)."""
    dollars: Callable[[], str] | None = None
    """What the run's dollar budgets spent and reserved (`_cost.CostBudget.summary`; '' when none), for `summary`."""

    def reserve(self, name: str, kind: CallKind) -> None:
        """Count one call to `name`, or raise `BudgetSpent` and count nothing."""
        cap = self.call_caps.get(name)
        if cap is not None and self.per_callee[name] >= cap:
            self._refuse(
                f'the call cap for {name} (call_caps[{name!r}]={cap}) is spent', f'at most {cap} {name} call(s) per run'
            )
        if kind == 'agent' and self.agent_calls >= self.max_agent_calls:
            self._refuse(
                f'the sub-agent call budget (max_agent_calls={self.max_agent_calls}) is spent',
                f'at most {self.max_agent_calls} sub-agent calls per run',
            )
        if kind == 'tool' and self.max_tool_calls is not None and self.tool_calls >= self.max_tool_calls:
            self._refuse(
                f'the tool call budget (max_tool_calls={self.max_tool_calls}) is spent',
                f'at most {self.max_tool_calls} tool calls per run',
            )
        self.count(name, kind)

    def count(self, name: str, kind: CallKind) -> None:
        """Count one call without checking: for calls a resumed run already made before its snapshot."""
        self.per_callee[name] += 1
        if kind == 'agent':
            self.agent_calls += 1
        else:
            self.tool_calls += 1

    def release(self, name: str, kind: CallKind) -> None:
        """Give back one counted call that never started (the script ended before it did)."""
        self.per_callee[name] -= 1
        if kind == 'agent':
            self.agent_calls -= 1
        else:
            self.tool_calls -= 1

    def note(self, budget: str) -> None:
        """A call was refused by `budget` (this one, or a dollar budget: `_cost`)."""
        self.refused += 1
        if budget not in self.spent:
            self.spent.append(budget)

    def _refuse(self, budget: str, limit: str) -> None:
        self.note(budget)
        message = (
            f'{budget[0].upper()}{budget[1:]}: {limit}; no more calls of this kind will run. '
            'Finish with the results you have.'
        )
        raise BudgetSpent(message, budget)

    @property
    def exhausted(self) -> bool:
        return self.refused > 0

    def summary(self) -> str:
        """The calls counted against the limits, the dollars spent, then each budget that refused a call, by its
        setting: '50/50 sub-agent calls, 3/1000 tool calls; the sub-agent call budget (max_agent_calls=50) is spent'."""
        used = f'{self.agent_calls}/{self.max_agent_calls} sub-agent calls'
        if self.tool_calls or self.max_tool_calls is not None:
            used += f', {self.tool_calls}' + (f'/{self.max_tool_calls}' if self.max_tool_calls is not None else '')
            used += ' tool calls'
        dollars = self.dollars() if self.dollars is not None else ''
        return '; '.join([used, *([dollars] if dollars else []), *self.spent])
