"""`Settings`: a Harness's keyword arguments, validated once into a frozen object.

`Settings.of` is the one place they are checked and normalised (errors are `UserError`s naming the fix); a
`Harness` keeps the result as `settings` and never changes it, so what a run reads of its Harness is what the
Harness was made with. `FROM_ENVIRONMENT` is the default of `temporal`: `HARNESS_TEMPORAL` is read only when
`temporal` was not given, so `temporal=None` is the embedded engine whatever the environment says.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic_ai.exceptions import UserError
from pydantic_ai.usage import UsageLimits

from ._records import EventHandler
from ._sandbox._pool import SandboxLimits

DEFAULT_SUB_AGENT_USAGE_LIMITS = UsageLimits(request_limit=50)


class _FromEnvironment(enum.Enum):
    """The default of `Harness(temporal=...)`: `HARNESS_TEMPORAL`. A sentinel, because `None` is a choice
    (the embedded engine, whatever the environment says)."""

    TOKEN = 'HARNESS_TEMPORAL'


FROM_ENVIRONMENT = _FromEnvironment.TOKEN


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a Harness was made with, validated (`Harness`'s docstring says what each one means). Made by
    `Settings.of`; the mappings are the Harness's own copies."""

    store_path: str | None
    max_agent_calls: int
    max_tool_calls: int | None
    max_concurrency: int | None
    call_caps: dict[str, int]
    call_concurrency: dict[str, int]
    max_repeats: int | None
    strict: bool
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
    task_queues: dict[str, str]

    @classmethod
    def of(
        cls,
        *,
        store: str | None = '.harness/runs.db',
        max_agent_calls: int = 50,
        max_tool_calls: int | None = 1_000,
        max_concurrency: int | None = None,
        call_caps: Mapping[str, int] | None = None,
        call_concurrency: Mapping[str, int] | None = None,
        max_repeats: int | None = 10,
        strict: bool = False,
        limits: Mapping[str, Any] | None = None,
        max_workers: int | None = None,
        type_check: bool = True,
        sub_agent_usage_limits: UsageLimits | None = DEFAULT_SUB_AGENT_USAGE_LIMITS,
        inherit_model: bool = False,
        max_retries: int = 3,
        reuse_results: bool = True,
        tracing: bool = True,
        trace_values: bool = True,
        grant_clock: bool = False,
        grant_randomness: bool = False,
        on_event: EventHandler | None = None,
        temporal: str | Literal[_FromEnvironment.TOKEN] | None = FROM_ENVIRONMENT,
        task_queue: str = 'harness',
        task_queues: Mapping[str, str] | None = None,
    ) -> Settings:
        """The settings of `Harness(...)`'s keyword arguments (the same names and defaults), or a `UserError`."""
        _check_budgets(max_agent_calls, max_tool_calls, max_concurrency, call_caps or {}, call_concurrency or {},
                       max_repeats)
        sandbox = SandboxLimits.from_mapping(limits)  # unknown keys raise
        if temporal is FROM_ENVIRONMENT:
            temporal = os.environ.get('HARNESS_TEMPORAL')
        temporal = temporal or None
        if temporal and importlib.util.find_spec('temporalio') is None:
            raise UserError(f"temporal={temporal!r} needs the Temporal client: pip install 'harness[temporal]'")
        return cls(
            store_path=store,
            max_agent_calls=max_agent_calls,
            max_tool_calls=max_tool_calls,
            max_concurrency=max_concurrency,
            call_caps=dict(call_caps or {}),
            call_concurrency=dict(call_concurrency or {}),
            max_repeats=max_repeats,
            strict=strict,
            limits=sandbox,
            max_workers=max_workers,
            type_check=type_check,
            sub_agent_usage_limits=sub_agent_usage_limits,
            inherit_model=inherit_model,
            max_retries=max_retries,
            reuse_results=reuse_results,
            tracing=tracing,
            trace_values=trace_values,
            grant_clock=grant_clock,
            grant_randomness=grant_randomness,
            on_event=on_event,
            temporal=temporal,
            task_queue=task_queue,
            task_queues=dict(task_queues or {}),
        )


def _check_budgets(
    max_agent_calls: int, max_tool_calls: int | None, max_concurrency: int | None, call_caps: Mapping[str, int],
    call_concurrency: Mapping[str, int], max_repeats: int | None,
) -> None:
    if max_agent_calls < 1:
        raise UserError('max_agent_calls must be at least 1.')
    if max_tool_calls is not None and max_tool_calls < 0:
        raise UserError('max_tool_calls must be 0 or more (None: no limit).')
    if max_concurrency is not None and max_concurrency < 1:
        raise UserError('max_concurrency must be at least 1 (None: no limit).')
    for name, cap in call_caps.items():
        if cap < 0:
            raise UserError(f'call_caps[{name!r}] must be 0 or more.')
    for name, n in call_concurrency.items():
        if n < 1:
            raise UserError(f'call_concurrency[{name!r}] must be at least 1.')
    if max_repeats is not None and max_repeats < 1:
        raise UserError('max_repeats must be at least 1 (None: no limit).')
