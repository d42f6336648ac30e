"""Moving values across the sandbox boundary: validating what goes out, making plain what comes in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic_monty as monty
from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python

PLAIN_SCALARS = (type(None), bool, int, float, str)


class NotPlainData(TypeError):
    """A callee returned a value that cannot become plain data (JSON-like) for the sandbox."""

    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


def to_plain(value: Any, dump: Callable[[Any], Any] | None) -> Any:
    """Convert a callee's return value to plain data: None, bool, int, float, str, list, dict.

    The declared return type's dump is used first, so pydantic models, dataclasses, enums and
    UUIDs become what their JSON schema (and so the stub) promises. Anything that still is not plain
    raises `NotPlainData` naming only the type, never the value's repr.
    """
    if dump is not None:
        try:
            value = dump(value)
        except (PydanticSerializationError, ValueError, TypeError):
            raise NotPlainData(type(value).__name__) from None
    return _check_plain(value)


def _check_plain(value: Any) -> Any:
    if isinstance(value, PLAIN_SCALARS):
        return value
    if isinstance(value, list | tuple):
        return [_check_plain(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotPlainData(f'dict with {type(key).__name__} keys')
            out[key] = _check_plain(item)
        return out
    raise NotPlainData(type(value).__name__)


def from_sandbox(value: Any) -> Any:
    """A value the script hands over (its final value, a call's arguments) with no sandbox objects left:
    a dataclass instance becomes a dict of its fields; an instance of any other class defined in the
    script, or a class itself, raises `NotPlainData` naming it (never its repr)."""
    if isinstance(value, PLAIN_SCALARS):
        return value
    if isinstance(value, monty.MontyClassProxy):
        if value.is_dataclass:
            return {key: from_sandbox(item) for key, item in value.attributes.items()}
        raise NotPlainData(f'an instance of class {value.name}')
    if isinstance(value, monty.MontyClassTypeProxy | monty.MontyStdTypeProxy):
        raise NotPlainData('a class')
    if isinstance(value, list):
        return [from_sandbox(item) for item in value]
    if isinstance(value, tuple):
        return tuple(from_sandbox(item) for item in value)
    if isinstance(value, dict):
        return {key: from_sandbox(item) for key, item in value.items()}
    return value


def jsonable(value: Any) -> JsonValue:
    """Plain JSON data for the store: what cannot be converted is named by its type, never its repr."""
    return to_jsonable_python(value, fallback=lambda v: f'<{type(v).__name__}>')
