"""The catalog: which sub-agents and tools a script may call, with their validated signatures.

Registration is where user mistakes are caught, each with an error that names the fix. A
registered callee is a `Callee`: a name, a pydantic model that validates the keyword arguments a
script passes, an adapter that turns the return value into plain data, and `invoke`, which runs it.
"""

from __future__ import annotations

import builtins
import inspect
import keyword
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model
from pydantic_ai.function_signature import FunctionSignature

from ._context import CallContext, RunScope
from ._errors import RegistrationError
from ._prelude import HELPER_NAMES

CallKind = Literal['agent', 'tool']
Invoke = Callable[[BaseModel, CallContext, RunScope], Awaitable[Any]]

# Names a script needs for itself: builtins, the modules Monty can import, the stub header's names.
SANDBOX_MODULES = frozenset(
    {'asyncio', 'json', 'math', 're', 'typing', 'sys', 'datetime', 'time', 'random', 'unicodedata', 'os'}
)
STUB_NAMES = frozenset({'Any', 'Awaitable', 'Generic', 'Literal', 'NotRequired', 'TypedDict', 'TypeVar', 'T'})
RESERVED_NAMES = frozenset(dir(builtins)) | SANDBOX_MODULES | STUB_NAMES | HELPER_NAMES


@dataclass(frozen=True)
class Returns:
    """How a callee's return value becomes plain data, and the JSON schema the stub renders from it."""

    dump: Callable[[Any], Any]
    schema: dict[str, Any] | None

    @classmethod
    def of(cls, adapter: TypeAdapter[Any]) -> Returns:
        try:
            schema = adapter.json_schema(mode='serialization')
        except Exception:  # an Any-ish return: the stub says Any
            schema = None
        return cls(dump=lambda value: adapter.dump_python(value, mode='json', warnings=False), schema=schema)


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
    signature: FunctionSignature = field(init=False)

    def __post_init__(self) -> None:
        sig = FunctionSignature.from_schema(
            name=self.name,
            parameters_schema=self.params.model_json_schema(),
            return_schema=self.returns.schema,
        )
        object.__setattr__(self, 'signature', sig)


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
            f'{what} name {name!r} would shadow a name scripts need (a builtin, a module or a join helper): '
            'pass a different name="...".'
        )
    if name.startswith('_'):
        raise RegistrationError(f'{what} name {name!r} starts with "_": pass a public name="...".')
    if name in existing:
        raise RegistrationError(
            f'{what} name {name!r} is already registered: pass a different name="..." or remove the first one.'
        )
    return name


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


def params_from_function(fn: Callable[..., Any], name: str) -> tuple[type[BaseModel], str | None]:
    """The keyword parameters of `fn` as a strict pydantic model, and the name of its `CallContext` param."""
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
        fields[param.name] = (annotation, default)
    model = create_model(  # type: ignore[call-overload]
        f'{name}_arguments', __config__=ConfigDict(extra='forbid', strict=True), **fields
    )
    return model, context_param


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
