"""What one call of a callee can cost at most, in USD, known before anything runs.

In order: a `cost=` given at registration is the ceiling; a host tool without one costs nothing; a sub-agent
(`add_agent`) costs its model's price times the most usage one call may have. The price is genai-prices', looked
up the way pydantic-ai prices a response (`ModelResponse.cost()`: model name, provider, base URL), so a model the
run would price the estimate prices the same; the usage is the sub-agent usage limits' worth of tokens, each
kind priced at its dearest (input as cache writes where those cost more; a `total_tokens_limit` spent on the
dearer of input and output). `cost_limit` caps it further for a priced model.

What cannot be priced says why and is never counted as free: a model genai-prices does not know (a
`FunctionModel` without a real model's name, `TestModel`), a sub-agent function (`@subagent`: what it calls is
not known), one on the orchestrator's model. No token limit is an unbounded call (`usd` None, priced).

The ceiling is what the limits allow as pydantic-ai enforces them: it checks token limits after each
response, so a call's last response can take it past them by that response's tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from ._callees import Callee

UNBOUNDED = 'no token limit bounds a call: set sub_agent_usage_limits (input and output, or total tokens) or cost='


@dataclass(frozen=True)
class Ceiling:
    """The most one call of a callee can cost (`usd`), where that comes from (`source`), and when `usd` is
    None why (`reason`): unpriced (`unpriced`: the price is not known) or unbounded (priced, no limit)."""

    usd: float | None
    source: str
    unpriced: bool = False
    reason: str | None = None


def call_ceiling(callee: Callee, limits: UsageLimits | None) -> Ceiling:
    """The ceiling of one call of `callee`, each of its sub-agent runs bounded by `limits`."""
    if callee.cost is not None:
        return Ceiling(callee.cost, 'cost=')
    if callee.kind == 'tool':
        return Ceiling(0.0, 'host tool')
    if callee.inherits_model:
        return _unpriced("the orchestrator's model", "it runs on the orchestrator's model: give it cost=")
    if callee.agent is None:
        return _unpriced('sub-agent function', 'what a sub-agent function calls is not known: give it cost=')
    model = getattr(callee.agent, 'model', None)
    if model is None:
        return _unpriced('no model', 'its agent has no model: give it one, or cost=')
    return model_ceiling(model, limits or UsageLimits())


def model_ceiling(model: Model | str, limits: UsageLimits) -> Ceiling:
    """The most one agent run on `model` can cost under `limits` (a `FallbackModel`: its dearest model)."""
    if isinstance(model, FallbackModel):
        found = [model_ceiling(each, limits) for each in model.models]
        dearest = max(found, key=lambda c: math.inf if c.usd is None else c.usd)
        return next((c for c in found if c.unpriced), dearest)
    if isinstance(model, WrapperModel):
        return model_ceiling(model.wrapped, limits)
    name, provider, url = _reference(model)
    usages = _worst_usages(limits)
    try:  # with no limits, one token tells whether the model is priced at all
        worst = max(_price(usage, name, provider, url) for usage in usages or [RequestUsage(input_tokens=1)])
    except (LookupError, ValueError):  # what pydantic-ai's own pricing takes for unknown
        return _unpriced(name, f'genai-prices has no price for {name!r}: give it cost=')
    except Exception as exc:  # pricing data it cannot read: the check that asked must still answer
        return _unpriced(name, f'genai-prices could not price {name!r} ({type(exc).__name__}): give it cost=')
    source = f'{name} (genai-prices)'
    bounds = [*([] if usages is None else [worst]), *([] if limits.cost_limit is None else [float(limits.cost_limit)])]
    return Ceiling(min(bounds), source) if bounds else Ceiling(None, source, reason=UNBOUNDED)


def _reference(model: Model | str) -> tuple[str, str | None, str | None]:
    """(model name, provider, base URL) as the responses of `model` carry them, which is what prices them."""
    if isinstance(model, str):  # 'openai:gpt-4o' as pydantic-ai infers it; a bare name matches by name alone
        provider, _, name = model.rpartition(':')
        return name, provider or None, None
    if isinstance(model, FunctionModel | TestModel):  # their responses name no provider: matched by name
        return model.model_name, None, None
    try:
        url = model.base_url
    except Exception:  # some providers cannot say before their client exists: nothing to match on
        url = None
    return model.model_name, model.system, url


def _worst_usages(limits: UsageLimits) -> list[RequestUsage] | None:
    """The usages at the corners of what `limits` allow (the dearest is one of them); None: no bound."""
    most_in, most_out, total = limits.input_tokens_limit, limits.output_tokens_limit, limits.total_tokens_limit
    if total is None:
        if most_in is None or most_out is None:
            return None
        splits = [(most_in, most_out)]
    else:
        given_in = total if most_in is None else min(most_in, total)
        given_out = total if most_out is None else min(most_out, total)
        splits = [(given_in, min(given_out, total - given_in)), (min(given_in, total - given_out), given_out)]
    return [RequestUsage(input_tokens=i, output_tokens=o, cache_write_tokens=w) for i, o in splits for w in {0, i}]


def _price(usage: RequestUsage, name: str, provider: str | None, url: str | None) -> float:
    response = ModelResponse(parts=[], usage=usage, model_name=name, provider_name=provider, provider_url=url)
    return float(response.cost().total_price)


def _unpriced(source: str, reason: str) -> Ceiling:
    return Ceiling(None, source, unpriced=True, reason=reason)
