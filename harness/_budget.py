"""Exact call budgets: `max_agent_calls`, `max_tool_calls` and per-callee `call_caps`.

`reserve` is synchronous and is called by the sandbox loop as each call is made, before anything is
awaited, so check-and-count is atomic under any fan-out: a gather of 10 under a budget of 5 makes
exactly 5 calls, whichever order they finish in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ._records import CallKind


class BudgetSpent(RuntimeError):
    """Raised inside the script (as `RuntimeError`) when a call would exceed a budget; catchable."""


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

    def reserve(self, name: str, kind: CallKind) -> None:
        """Count one call to `name`, or raise `BudgetSpent` and count nothing."""
        cap = self.call_caps.get(name)
        if cap is not None and self.per_callee[name] >= cap:
            self._refuse(f'call cap for {name} is spent: at most {cap} call(s) per run')
        if kind == 'agent' and self.agent_calls >= self.max_agent_calls:
            self._refuse(f'sub-agent call budget is spent: at most {self.max_agent_calls} sub-agent calls per run')
        if kind == 'tool' and self.max_tool_calls is not None and self.tool_calls >= self.max_tool_calls:
            self._refuse(f'tool call budget is spent: at most {self.max_tool_calls} tool calls per run')
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

    def _refuse(self, why: str) -> None:
        self.refused += 1
        raise BudgetSpent(f'{why}; no more calls of this kind will run. Finish with the results you have.')

    @property
    def exhausted(self) -> bool:
        return self.refused > 0

    def summary(self) -> str:
        used = f'{self.agent_calls}/{self.max_agent_calls} sub-agent calls'
        if self.tool_calls or self.max_tool_calls is not None:
            used += f', {self.tool_calls}' + (f'/{self.max_tool_calls}' if self.max_tool_calls is not None else '')
            used += ' tool calls'
        return used
