"""`Settings`: a Harness's keyword arguments, validated once into a frozen object.

`Harness.__init__` makes the one `Settings` from its arguments (normalised: the mappings copied, the limits parsed,
the Temporal address resolved); `Settings` checks them (errors are `UserError`s naming the fix). A `Harness` keeps
it as `settings` and never changes it, so what a run reads of its Harness is what the
Harness was made with. `FROM_ENVIRONMENT` is the default of `temporal`: `HARNESS_TEMPORAL` is read only when
`temporal` was not given, so `temporal=None` is the embedded engine whatever the environment says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib.util
import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from pydantic_ai.exceptions import UserError
from pydantic_ai.usage import UsageLimits

from ._records import EventHandler
from ._sandbox._pool import SandboxLimits

DEFAULT_SUB_AGENT_USAGE_LIMITS = UsageLimits(request_limit=50)
"""The default of `Harness(sub_agent_usage_limits=...)`; each Harness keeps a copy (`UsageLimits` is mutable)."""


V = TypeVar('V')


def frozen(mapping: Mapping[str, V] | None) -> Mapping[str, V]:
    """A read-only copy of a mapping setting (`call_caps`, `call_concurrency`, `task_queues`)."""
    return MappingProxyType(dict(mapping or {}))


def names(given: Iterable[str], *, option: str) -> frozenset[str]:
    """A setting that names callees (`allow_unguarded`), as a frozen set; one string is refused, as it would be
    read as its letters."""
    if not isinstance(given, str):
        with contextlib.suppress(TypeError):  # not iterable, or unhashable items
            found = frozenset(given)
            if all(isinstance(name, str) for name in found):
                return found
    example = given if isinstance(given, str) else 'drop_table'
    raise UserError(f'{option} takes a list of callee names, e.g. {option}=[{example!r}].')


class _FromEnvironment(enum.Enum):
    """The default of `Harness(temporal=...)`: `HARNESS_TEMPORAL`. A sentinel, because `None` is a choice
    (the embedded engine, whatever the environment says)."""

    TOKEN = 'HARNESS_TEMPORAL'


FROM_ENVIRONMENT = _FromEnvironment.TOKEN


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a Harness was made with, validated (`Harness`'s docstring says what each one means); the mappings are
    read-only copies of what was given (`frozen`), so nothing of a Harness's settings changes after it is made."""

    store_path: str | None
    max_agent_calls: int
    max_tool_calls: int | None
    max_concurrency: int | None
    call_caps: Mapping[str, int]
    call_concurrency: Mapping[str, int]
    max_repeats: int | None
    strict: bool
    allow_unguarded: frozenset[str]
    limits: SandboxLimits
    max_workers: int | None
    type_check: bool
    sub_agent_usage_limits: UsageLimits | None
    inherit_model: bool
    max_retries: int
    reuse_results: bool
    tracing: bool
    trace_values: bool
    grant_clock: bool
    grant_randomness: bool
    on_event: EventHandler | None
    temporal: str | None
    task_queue: str
    task_queues: Mapping[str, str]
    review: ReviewPolicy | None = None
    max_cost: float | None = None
    daily_cost: Mapping[str, float] = dataclasses.field(default_factory=lambda: frozen(None))
    conversation_cost: float | None = None

    def __post_init__(self) -> None:
        """The checks of `Harness(...)`'s keyword arguments, each a `UserError` naming the fix."""
        _check_budgets(
            self.max_agent_calls,
            self.max_tool_calls,
            self.max_concurrency,
            self.call_caps,
            self.call_concurrency,
            self.max_repeats,
        )
        checked_policy(self.review)
        if self.review is not None and self.store_path is None:
            raise UserError('review= keeps a script waiting for a person in the run store: give a store (not None).')
        _check_costs(self.max_cost, self.daily_cost, self.conversation_cost, self.store_path)
        if self.temporal and importlib.util.find_spec('temporalio') is None:
            raise UserError(f"temporal={self.temporal!r} needs the Temporal client: pip install 'harness[temporal]'")


def temporal_address(temporal: str | Literal[_FromEnvironment.TOKEN] | None) -> str | None:
    """`Harness(temporal=...)` as an address, or None for the embedded engine: `HARNESS_TEMPORAL` only when not
    given."""
    if temporal is FROM_ENVIRONMENT:
        temporal = os.environ.get('HARNESS_TEMPORAL')
    return temporal or None


ReviewPolicy = Literal['side_effects', 'always'] | Callable[[Any], bool]
"""`review=`: which scripts wait for a person's approval of their plan (`_check._plan.ReviewPlan`)."""


def checked_policy(review: object) -> ReviewPolicy | None:
    """`review=` as given, or a `UserError` naming what it takes."""
    if review is None or review in ('side_effects', 'always') or callable(review):
        return review  # ty: ignore[invalid-explicit-return]
    raise UserError(
        f"review= takes 'side_effects', 'always' or a callable(plan) -> bool, not {review!r}; "
        'None (the default) reviews nothing.'
    )


def _check_budgets(
    max_agent_calls: int,
    max_tool_calls: int | None,
    max_concurrency: int | None,
    call_caps: Mapping[str, int],
    call_concurrency: Mapping[str, int],
    max_repeats: int | None,
) -> None:
    _count('max_agent_calls', max_agent_calls, least=1, unlimited=False)
    _count('max_tool_calls', max_tool_calls, least=0)
    _count('max_concurrency', max_concurrency, least=1)
    for name, cap in call_caps.items():
        _count(f'call_caps[{name!r}]', cap, least=0, unlimited=False)
    for name, n in call_concurrency.items():
        _count(f'call_concurrency[{name!r}]', n, least=1, unlimited=False)
    _count('max_repeats', max_repeats, least=1)


def _count(name: str, value: object, *, least: int, unlimited: bool = True) -> None:
    """A count setting must be a whole number of at least `least` (or None where that means no limit)."""
    if value is None and unlimited:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        limit = ' (None: no limit)' if unlimited else ' (it has no "no limit": give a large number)'
        raise UserError(f'{name} must be a whole number of at least {least}{limit}, not {value!r}.')


def _check_costs(
    max_cost: float | None, daily_cost: Mapping[str, float], conversation_cost: float | None, store_path: str | None
) -> None:
    for name, value in (('max_cost', max_cost), ('conversation_cost', conversation_cost)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0):
            raise UserError(f'{name} must be 0 or more USD (None: no limit), not {value!r}.')
    for key, usd in daily_cost.items():
        if not usd >= 0:
            raise UserError(f'daily_cost[{key!r}] must be 0 or more USD.')
    if daily_cost and store_path is None:
        raise UserError('daily_cost is kept in the run store: give the Harness a store (store=None keeps nothing).')
    if conversation_cost is not None and store_path is None:
        raise UserError(
            'conversation_cost is kept in the run store: give the Harness a store (store=None keeps nothing).'
        )
