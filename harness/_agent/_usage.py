"""Token and cost totals: of one workflow run (its sub-agents' runs), and of the orchestrator's own requests.

pydantic-ai already prices every response it can (genai-prices) into `RunUsage.cost`; this module only
adds the runs up. A run's totals are collected through a context variable set for the run's task: every
call the run dispatches is a task started inside it, so a sub-agent run anywhere under it is counted
once, in the run that made the call, and concurrent runs never mix.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .._tracing._names import ATTR_USAGE_COST, ATTR_USAGE_INPUT_TOKENS, ATTR_USAGE_OUTPUT_TOKENS, ATTR_USAGE_REQUESTS


@dataclass
class Totals:
    """Tokens, requests and cost (USD) added up; `cost` is None while nothing could be priced, and
    `unpriced` counts the requests whose model genai-prices does not know (the cost is then a lower bound)."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cost: Decimal | None = None
    unpriced: int = 0

    def add_usage(self, usage: Any) -> None:
        """Add a pydantic-ai `RunUsage` (a sub-agent run) or `RequestUsage` (one response)."""
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.requests += getattr(usage, 'requests', 1) or 0
        cost = getattr(usage, 'cost', None)
        if cost is not None:
            self.cost = (self.cost or Decimal(0)) + cost
        else:
            self.unpriced += getattr(usage, 'requests', 1) or 0

    def add(self, other: Totals) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests
        self.unpriced += other.unpriced
        if other.cost is not None:
            self.cost = (self.cost or Decimal(0)) + other.cost

    @property
    def empty(self) -> bool:
        return not (self.input_tokens or self.output_tokens or self.requests)

    def as_json(self) -> dict[str, Any]:
        return {
            'input_tokens': self.input_tokens,
            'output_tokens': self.output_tokens,
            'requests': self.requests,
            'cost': float(self.cost) if self.cost is not None else None,
            'unpriced': self.unpriced,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Totals:
        data = data or {}
        cost = data.get('cost')
        return cls(
            input_tokens=int(data.get('input_tokens') or 0),
            output_tokens=int(data.get('output_tokens') or 0),
            requests=int(data.get('requests') or 0),
            cost=Decimal(str(cost)) if cost is not None else None,
            unpriced=int(data.get('unpriced') or 0),
        )

    def span_attributes(self) -> dict[str, int | float]:
        """The run span's `harness.usage.*` totals."""
        attributes: dict[str, int | float] = {
            ATTR_USAGE_INPUT_TOKENS: self.input_tokens,
            ATTR_USAGE_OUTPUT_TOKENS: self.output_tokens,
            ATTR_USAGE_REQUESTS: self.requests,
        }
        if self.cost is not None:
            attributes[ATTR_USAGE_COST] = float(self.cost)
        return attributes

    def text(self) -> str:
        """`1,234 in / 56 out tokens · $0.0042` (`≥ $…` when some request could not be priced)."""
        line = f'{self.input_tokens:,} in / {self.output_tokens:,} out tokens'
        return line + (f' · {format_cost(self.cost, self.unpriced)}' if self.cost is not None else '')


def format_cost(cost: Decimal | float | None, unpriced: int = 0) -> str:
    if cost is None:
        return '–'
    value = float(cost)
    text = f'${value:.4f}' if value < 1 else f'${value:,.2f}'
    return ('≥ ' if unpriced else '') + text


def of_responses(messages: Iterable[Any]) -> Totals:
    """The totals of the model responses among `messages` (an orchestrator turn's own requests)."""
    from pydantic_ai.messages import ModelResponse

    totals = Totals()
    for message in messages:
        if isinstance(message, ModelResponse):
            usage = message.usage
            cost = usage.cost
            if cost is None and message.model_name:
                try:
                    cost = message.cost().total_price
                except Exception:  # an unknown model or provider: genai-prices has no price for it
                    cost = None
            totals.input_tokens += usage.input_tokens or 0
            totals.output_tokens += usage.output_tokens or 0
            totals.requests += 1
            if cost is not None:
                totals.cost = (totals.cost or Decimal(0)) + cost
            else:
                totals.unpriced += 1
    return totals


_current: contextvars.ContextVar[Totals | None] = contextvars.ContextVar('harness_run_usage', default=None)


_call: contextvars.ContextVar[Totals | None] = contextvars.ContextVar('harness_call_usage', default=None)


@contextmanager
def _collecting(into: contextvars.ContextVar[Totals | None]) -> Generator[Totals]:
    totals = Totals()
    token = into.set(totals)
    try:
        yield totals
    finally:
        into.reset(token)


def collecting() -> contextlib.AbstractContextManager[Totals]:
    """Count the sub-agent runs started inside the block (and in tasks it starts) into the yielded totals."""
    return _collecting(_current)


def collecting_call() -> contextlib.AbstractContextManager[Totals]:
    """Count the sub-agent runs inside the block (one call of a script) into the yielded totals as well: what the
    call cost, which settles its reservation of a dollar budget (`_dispatch._cost`)."""
    return _collecting(_call)


def record(usage: Any) -> None:
    """A sub-agent run finished with `usage` (a `RunUsage`): add it to the run that made the call, and the call."""
    for totals in (_current.get(), _call.get()):
        if totals is not None:
            totals.add_usage(usage)
