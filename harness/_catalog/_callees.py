"""The catalog: which sub-agents and tools a script may call, with their validated signatures.

Registration turns what a user registers (a pydantic-ai Agent, an async function, a host tool)
into a `Callee`, and is where user mistakes are caught, each with an error that names the fix. A
`Callee` is a name, a pydantic model that validates the keyword arguments a script passes, an
adapter that turns the return value into plain data, and `invoke`, which runs it.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import inspect
import keyword
import math
import re
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic_ai import Tool, format_as_xml
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.exceptions import UserError
from pydantic_ai.function_signature import FunctionSignature
from pydantic_ai.usage import RunUsage
from pydantic_core import to_jsonable_python

from .._agent._usage import record as record_usage
from .._dispatch._context import CallContext, RunScope
from .._records import CallKind
from ._prelude import HELPER_NAMES
from ._rules import After

Invoke = Callable[[BaseModel, CallContext, RunScope], Awaitable[Any]]


class RegistrationError(UserError):
    """A sub-agent or tool cannot be registered as given; the message names the fix."""


# Names a script needs for itself: builtins, the modules Monty can import, the stub header's names.
SANDBOX_MODULES = frozenset(
    {'asyncio', 'json', 'math', 're', 'typing', 'sys', 'datetime', 'time', 'random', 'unicodedata', 'os'}
)
STUB_NAMES = frozenset({'Any', 'Awaitable', 'Generic', 'Literal', 'NotRequired', 'TypedDict', 'TypeVar', 'T'})
RESERVED_NAMES = frozenset(dir(builtins)) | SANDBOX_MODULES | STUB_NAMES | HELPER_NAMES


@dataclass(frozen=True)
class Returns:
    """How a callee's return value is checked against its declared type and becomes plain data, and
    the JSON schema the stub renders from it."""

    dump: Callable[[Any], Any]
    schema: dict[str, Any] | None
    adapter: TypeAdapter[Any] | None = None
    """Validates a return value against the declared type (None: nothing declared to check)."""

    @classmethod
    def of(cls, adapter: TypeAdapter[Any]) -> Returns:
        try:
            schema = adapter.json_schema(mode='serialization')
        except Exception:  # an Any-ish return: the stub says Any
            schema = None
        dump = lambda value: adapter.dump_python(value, mode='json', warnings=False)  # noqa: E731
        return cls(dump=dump, schema=schema, adapter=adapter if schema else None)

    def check(self, value: Any) -> Any:
        """`value` as the declared type (validated as pydantic does, so `'1'` for an `int` becomes 1);
        raises `WrongReturn` when it is not one."""
        if self.adapter is None:
            return value
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = '.'.join(str(part) for part in first['loc'])
            raise WrongReturn(type(value).__name__, (f'{where}: ' if where else '') + first['msg']) from None


class WrongReturn(TypeError):
    """A callee returned something its declared return type does not allow."""

    def __init__(self, actual: str, problem: str) -> None:
        super().__init__(actual, problem)
        self.actual = actual
        self.problem = problem


@dataclass(frozen=True)
class Callee:
    """One function a script can call: a sub-agent (counts against `max_agent_calls`) or a host tool."""

    name: str
    kind: CallKind
    description: str | None
    params: type[BaseModel]
    """Validates the script's keyword arguments; strict, no extra keys."""
    returns: Returns
    """Turns the return value into plain data, shaped as the stub promises."""
    invoke: Invoke
    expose_errors: bool = False
    """Show the callee's exception message to the script (off: only the type crosses)."""
    side_effect: bool = False
    """A call whose outcome is unknown after a crash is not re-run without permission."""
    requires: tuple[After, ...] = ()
    """Predecessors that must have completed earlier in the run (checked at every call)."""
    approval: bool = False
    """A person must approve each call before it runs (the run waits, holding no worker)."""
    blocking: bool = False
    """A sync host tool, run in a thread: it cannot be cancelled, so it is awaited when a script ends."""
    version: str | None = None
    """Given at registration to mark a change of behaviour the signature does not show; stored with
    every run, so a resume under another version is refused unless accepted."""
    side_effect_given: bool = False
    """`side_effect=` was given at registration: the audit takes it as the truth about a sub-agent, instead
    of suspecting the tools of its own agent."""
    cost: float | None = None
    """`cost=` at registration: the most one call can cost, in USD (None: a sub-agent's is its model's price
    times its usage limits, a host tool's is nothing). Accounting, not behaviour: not part of the digest."""
    inherits_model: bool = False
    """A sub-agent that runs on the orchestrator's model, so its price is not known before a run."""
    agent: AbstractAgent[Any, Any] | None = field(default=None, compare=False, repr=False)
    """The pydantic-ai agent a sub-agent runs (`add_agent`), read by the audit, never run by it."""
    signature: FunctionSignature = field(init=False)

    def __post_init__(self) -> None:
        parameters = self.params.model_json_schema()
        check_keywords(self.name, parameters)
        sig = FunctionSignature.from_schema(
            name=self.name, parameters_schema=parameters, return_schema=self.returns.schema
        )
        object.__setattr__(self, 'signature', sig)

    @property
    def declared_return(self) -> str:
        """The return type as the stub names it (`Review`, `list[str]`, `Any`)."""
        text = self.signature.render('...', is_async=True)
        m = re.search(r'\) -> (.+?):\n', text)
        return m[1] if m else 'Any'

    @property
    def unguarded(self) -> bool:
        """Irreversible with nothing in front of it: no `requires=` rule and no approval, so a script can call
        it at its first step (the audit names it; `strict=True` refuses scripts that can reach it)."""
        return self.side_effect and not self.requires and not self.approval

    def wrong_return(self, exc: WrongReturn) -> str:
        """The message a script (and the journal) gets for a return value of the wrong type."""
        return f'{self.name} returned {exc.actual}, but its stub promises {self.declared_return} ({exc.problem})'


def check_name(name: str | None, existing: set[str], *, what: str) -> str:
    """Validate a callee name; raise `RegistrationError` naming the fix."""
    if not name:
        raise RegistrationError(f'{what} has no name: pass name="..." (a Python identifier) when registering it.')
    if not name.isidentifier():
        raise RegistrationError(
            f'{what} name {name!r} is not a Python identifier: pass name="..." using letters, digits and _.'
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise RegistrationError(f'{what} name {name!r} is a Python keyword: pass a different name="...".')
    if name in RESERVED_NAMES:
        raise RegistrationError(
            f'{what} name {name!r} would shadow a name scripts need (a builtin, a module or a script helper): '
            'pass a different name="...".'
        )
    if name.startswith('_'):
        raise RegistrationError(f'{what} name {name!r} starts with "_": pass a public name="...".')
    if name in existing:
        raise RegistrationError(
            f'{what} name {name!r} is already registered: pass a different name="..." or remove the first one.'
        )
    return name


def check_cost(cost: object, name: str) -> float | None:
    """A `cost=` ceiling: a non-negative finite number of USD, or None."""
    if cost is None:
        return None
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0:
        raise RegistrationError(
            f'{name}: cost= is a ceiling in USD per call (a non-negative finite number), got {cost!r}: '
            'pass a number, e.g. cost=0.02.'
        )
    return float(cost)


def check_keywords(name: str, parameters: Mapping[str, Any]) -> None:
    """Every parameter the stub shows must be a keyword argument a script can write. A field alias can
    make one that is not (`Field(alias='from')`); pydantic-ai's `FunctionSignature` would render it as
    is, giving stubs that do not parse."""
    for param in parameters.get('properties', {}):
        if not param.isidentifier() or keyword.iskeyword(param):
            usable = param + '_' if keyword.iskeyword(param) else re.sub(r'\W|^(?=\d)', '_', param)
            raise RegistrationError(
                f'{name}: parameter {param!r} (a field alias?) is not a keyword argument a script can pass: '
                f'name the field, and its alias if it has one, with a Python identifier that is not a keyword '
                f'(e.g. {usable!r}).'
            )


def check_crossable(annotation: Any, *, where: str) -> TypeAdapter[Any]:
    """A type can cross into the sandbox when pydantic can describe it as JSON."""
    try:
        adapter = TypeAdapter(annotation)
        adapter.json_schema()
    except Exception:
        name = getattr(annotation, '__name__', None) or repr(annotation)
        raise RegistrationError(
            f'{where} has type {name}, which cannot cross into the sandbox: use plain data '
            '(str, int, float, bool, None, list, dict, Literal, TypedDict, a dataclass or a pydantic model).'
        ) from None
    return adapter


def params_from_function(fn: Callable[..., Any], name: str, docs: dict[str, str]) -> tuple[type[BaseModel], str | None]:
    """The keyword parameters of `fn` as a strict pydantic model (described by `docs`, per parameter),
    and the name of its `CallContext` parameter."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise RegistrationError(
            f'cannot read the type hints of {name}: {exc}. Make every annotation importable at module level.'
        ) from None
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise RegistrationError(
                f'{name}: parameter {param.name!r} is {param.kind.description}; scripts call by keyword, '
                'so declare keyword parameters only, e.g. `async def f(*, path: str)`.'
            )
        if param.name not in hints:
            raise RegistrationError(
                f'{name}: parameter {param.name!r} has no type annotation: annotate it (e.g. `{param.name}: str`) '
                'so scripts can be type checked.'
            )
        annotation = hints[param.name]
        if annotation is CallContext:
            context_param = param.name
            continue
        check_crossable(annotation, where=f'{name}: parameter {param.name!r}')
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
    model = create_model(  # type: ignore[call-overload]
        f'{name}_arguments', __config__=ConfigDict(extra='forbid', strict=True), **fields
    )
    return model, context_param


def function_docs(fn: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """The function's description and per-parameter descriptions, parsed from its docstring the way
    pydantic-ai parses a tool's (Google, NumPy or Sphinx style)."""
    try:
        with warnings.catch_warnings():  # its return-schema warnings: the return type is checked below
            warnings.simplefilter('ignore')
            tool_def = Tool(fn, takes_ctx=False).tool_def
    except Exception:  # what pydantic-ai cannot describe was refused above with a clearer message
        return inspect.getdoc(fn), {}
    properties = tool_def.parameters_json_schema.get('properties', {})
    params = {key: value['description'] for key, value in properties.items() if value.get('description')}
    return tool_def.description or None, params


def return_shape(fn: Callable[..., Any], name: str) -> Returns:
    hints = get_type_hints(fn, include_extras=True)
    if 'return' not in hints:
        raise RegistrationError(
            f'{name} has no return annotation: annotate it (e.g. `-> str` or `-> MyModel`) so scripts know '
            'what they get back.'
        )
    return Returns.of(check_crossable(hints['return'], where=f'{name}: the return type'))


def model_params(params: type[BaseModel], name: str) -> type[BaseModel]:
    """A strict, closed copy of a user's params model, so scripts cannot pass unknown keys."""
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise RegistrationError(f'{name}: params= must be a pydantic BaseModel subclass, got {params!r}.')
    for field_name in params.model_fields:
        if keyword.iskeyword(field_name) or not field_name.isidentifier():
            raise RegistrationError(
                f'{name}: params field {field_name!r} cannot be a keyword argument; rename the field.'
            )
    return _closed(params)


def _closed(params: type[BaseModel]) -> type[BaseModel]:
    config = dict(params.model_config)
    if config.get('extra') == 'forbid' and config.get('strict'):
        return params
    closed = ConfigDict(**{**config, 'extra': 'forbid', 'strict': True})  # type: ignore[typeddict-item]
    return type(params.__name__, (params,), {'model_config': closed, '__doc__': params.__doc__})


TASK_PARAMS = create_model('task_arguments', __config__=ConfigDict(extra='forbid', strict=True), task=(str, ...))


def callee_from_agent(
    agent: AbstractAgent[Any, Any],
    *,
    name: str | None,
    description: str | None,
    params: type[BaseModel] | None,
    existing: set[str],
    inherit_model: bool = False,
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
        result = await agent.run(prompt, deps=scope.deps, model=model, usage_limits=scope.sub_agent_usage_limits)
        if scope.usage is not None:
            scope.usage.incr(tokens_only(result.usage))
        record_usage(result.usage)  # the workflow run's own totals
        return result.output

    return Callee(
        name=resolved,
        kind='agent',
        description=description if description is not None else agent.description,
        params=arguments,
        returns=returns,
        invoke=invoke,
        agent=agent,
        inherits_model=inherit_model,
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
    fn: Callable[..., Any], *, kind: CallKind, name: str | None, description: str | None, existing: set[str]
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
    doc, param_docs = function_docs(fn)
    params, context_param = params_from_function(fn, resolved, param_docs)
    returns = return_shape(fn, resolved)

    async def invoke(args: BaseModel, ctx: CallContext, scope: RunScope) -> Any:
        kwargs = {key: getattr(args, key) for key in type(args).model_fields}
        if context_param is not None:
            kwargs[context_param] = ctx
        if is_async:
            return await fn(**kwargs)
        # A sync host tool must not block the event loop that drives every other call. What it raises comes back
        # as a value and is raised here: a GeneratorExit set on the thread's future would be thrown into the top of
        # the awaiting task, past every handler of the dispatcher that makes it the callee's failure.
        value, raised = await asyncio.to_thread(_boxed, fn, kwargs)
        if raised is not None:
            raise raised
        return value

    return Callee(
        name=resolved,
        kind=kind,
        description=description if description is not None else doc,
        params=params,
        returns=returns,
        invoke=invoke,
        blocking=not is_async,
    )


def _boxed(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """`fn(**kwargs)` on a worker thread: its value, or whatever it raised, as a value."""
    try:
        return fn(**kwargs), None
    except BaseException as exc:
        return None, exc


def check_rules(callees: Mapping[str, Callee]) -> None:
    """Every `requires=` names a registered callee, and every `same=` field is a parameter of both."""
    for callee in callees.values():
        for rule in callee.requires:
            before = callees.get(rule.callee)
            if before is None:
                raise RegistrationError(
                    f'{callee.name} requires {rule.callee!r}, which is not registered: register it, or fix requires=.'
                )
            for field_name in rule.same:
                for who in (callee, before):
                    if field_name not in who.params.model_fields:
                        raise RegistrationError(
                            f'{callee.name}: After({rule.callee!r}, same=...) names {field_name!r}, which is not a '
                            f'parameter of {who.name}: name a parameter both take.'
                        )


def validate_arguments(callee: Callee, kwargs: dict[str, Any]) -> BaseModel:
    """Validate keyword arguments against the callee's declared types, as a `TypeError` the script can read."""
    try:
        return callee.params.model_validate(kwargs)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False)[:5]:
            where = '.'.join(str(part) for part in err['loc']) or 'arguments'
            if err['type'] == 'extra_forbidden':
                problems.append(f'unexpected keyword argument {where!r}')
            elif err['type'] == 'missing':
                problems.append(f'missing keyword argument {where!r}')
            else:
                problems.append(f'argument {where!r}: {err["msg"]}')
        raise TypeError(f'{callee.name}(): ' + '; '.join(problems)) from None
