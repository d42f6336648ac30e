"""Turns what a user registers (a pydantic-ai Agent, an async function, a host tool) into a `Callee`."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model
from pydantic_ai import format_as_xml
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.usage import RunUsage
from pydantic_core import to_jsonable_python

from ._catalog import Callee, CallKind, Returns, check_name, model_params, params_from_function, return_shape
from ._context import CallContext, RunScope
from ._errors import RegistrationError

TASK_PARAMS = create_model(
    'task_arguments',
    __config__=ConfigDict(extra='forbid', strict=True),
    task=(str, ...),
)


def callee_from_agent(
    agent: AbstractAgent[Any, Any],
    *,
    name: str | None,
    description: str | None,
    params: type[BaseModel] | None,
    existing: set[str],
    inherit_model: bool = False,
    side_effect: bool = False,
    expose_errors: bool = False,
) -> Callee:
    """A sub-agent: `(*, task: str) -> <output>`, or the fields of `params` as keyword parameters."""
    if not isinstance(agent, AbstractAgent):
        raise RegistrationError(f'add_agent() takes a pydantic-ai Agent, got {type(agent).__name__}.')
    resolved = check_name(agent.name if name is None else name, existing, what='sub-agent')
    arguments = TASK_PARAMS if params is None else model_params(params, resolved)
    returns = _agent_output(agent)

    async def invoke(args: BaseModel, ctx: CallContext, scope: RunScope) -> Any:
        prompt = getattr(args, 'task') if params is None else format_as_xml(args, root_tag='input')  # noqa: B009
        model = scope.model if inherit_model and scope.model is not None else None
        result = await agent.run(
            prompt,
            deps=scope.deps,
            model=model,
            usage_limits=scope.sub_agent_usage_limits,
        )
        if scope.usage is not None:
            scope.usage.incr(tokens_only(result.usage))
        return result.output

    return Callee(
        name=resolved,
        kind='agent',
        description=description if description is not None else agent.description,
        params=arguments,
        returns=returns,
        invoke=invoke,
        expose_errors=expose_errors,
        side_effect=side_effect,
    )


def tokens_only(usage: RunUsage) -> RunUsage:
    """A sub-agent's usage as it is added to the orchestrator's: tokens, not requests.

    Each sub-agent run counts its own requests against its own limit, so 50 sub-agent calls never
    trip the orchestrator's default 50-request limit (the reference shares one counter and does).
    """
    return dataclasses.replace(usage, requests=0, tool_calls=0)


def _agent_output(agent: AbstractAgent[Any, Any]) -> Returns:
    output_type = getattr(agent, 'output_type', str)
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        adapter.json_schema(mode='serialization')
        return Returns.of(adapter)
    except Exception:  # an output spec that is not one type (a list of outputs, ToolOutput, ...)
        return Returns(dump=to_jsonable_python, schema=agent.output_json_schema())


def callee_from_function(
    fn: Callable[..., Any],
    *,
    kind: CallKind,
    name: str | None,
    description: str | None,
    existing: set[str],
    side_effect: bool = False,
    expose_errors: bool = False,
) -> Callee:
    """A typed function: keyword parameters become the stub's parameters, the docstring its description."""
    what = 'sub-agent' if kind == 'agent' else 'tool'
    if not callable(fn):
        raise RegistrationError(f'{what} must be a function, got {type(fn).__name__}.')
    resolved = check_name(getattr(fn, '__name__', None) if name is None else name, existing, what=what)
    is_async = inspect.iscoroutinefunction(fn)
    if kind == 'agent' and not is_async:
        raise RegistrationError(
            f'sub-agent {resolved} must be an `async def` function; register plain functions with @h.tool.'
        )
    params, context_param = params_from_function(fn, resolved)
    returns = return_shape(fn, resolved)

    async def invoke(args: BaseModel, ctx: CallContext, scope: RunScope) -> Any:
        kwargs = {key: getattr(args, key) for key in type(args).model_fields}
        if context_param is not None:
            kwargs[context_param] = ctx
        if is_async:
            return await fn(**kwargs)
        # A sync host tool must not block the event loop that drives every other call.
        return await asyncio.to_thread(fn, **kwargs)

    doc = inspect.getdoc(fn)
    return Callee(
        name=resolved,
        kind=kind,
        description=description if description is not None else doc,
        params=params,
        returns=returns,
        invoke=invoke,
        expose_errors=expose_errors,
        side_effect=side_effect,
    )
