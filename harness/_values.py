"""Every value that crosses the sandbox's boundary, or into the journal, through one conversion.

`plain` makes a value plain JSON data (None, bool, int, float, str, lists, dicts with str keys)
or raises `NotPlainData` saying what is wrong with it, never the value's repr: a set, bytes, a
non-str key, NaN, an int too long to print, invalid Unicode, nesting deeper than `MAX_DEPTH`, or an
object of another type. It walks the value with an explicit stack, so a 100,000-deep list is a
clear refusal, not a `RecursionError`. A dataclass instance defined in a script becomes a dict of
its fields (the sandbox hands it over as a `MontyClassProxy`).

Callers decide whose fault it is: a script's argument is a `TypeError` at the call, a callee's
result is that callee's failure, a script's final value is a `WorkflowRuntimeError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pydantic_monty as monty
from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python

MAX_DEPTH = 200
"""Deepest nesting of lists and dicts a value may have."""
MAX_INT_DIGITS = 4_300
"""Python's own limit for printing an int (and so for JSON)."""


class NotPlainData(TypeError):
    """A value cannot become plain data; `type_name` says what it holds instead (e.g. `a set`)."""

    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


def plain(value: Any) -> JsonValue:
    """`value` as plain JSON data (tuples become lists), or `NotPlainData` naming the problem."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]  # (item, its container, its key there, depth)
    while stack:
        item, parent, key, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise NotPlainData(f'a value nested deeper than {MAX_DEPTH} levels')
        converted: Any
        if item is None or isinstance(item, bool):
            converted = item
        elif isinstance(item, int):
            converted = _int(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise NotPlainData(f'the float {item} (NaN and infinities are not JSON)')
            converted = item
        elif isinstance(item, str):
            converted = _text(item)
        elif isinstance(item, list | tuple):
            converted = [None] * len(item)
            stack.extend((child, converted, i, depth + 1) for i, child in enumerate(item))
        elif isinstance(item, dict):
            converted = {}
            for k, child in item.items():
                if not isinstance(k, str):
                    raise NotPlainData(f'a dict with {type(k).__name__} keys')
                converted[_text(k)] = None
                stack.append((child, converted, k, depth + 1))
        elif isinstance(item, monty.MontyClassProxy) and item.is_dataclass:
            converted = {}
            stack.extend((child, converted, k, depth + 1) for k, child in item.attributes.items())
        else:
            raise NotPlainData(_describe(item))
        parent[key] = converted
    return root[0]


def to_plain(value: Any, dump: Callable[[Any], Any] | None) -> JsonValue:
    """A callee's return value as plain data, through its declared type's dump first, so pydantic
    models, dataclasses, enums and UUIDs become what their JSON schema (and the stub) promises."""
    if dump is not None:
        bad = _non_finite(value)  # a JSON dump would turn it into None without a word
        if bad is not None:
            raise NotPlainData(f'the float {bad} (NaN and infinities are not JSON)')
        try:
            value = dump(value)
        except (PydanticSerializationError, ValueError, TypeError):
            raise NotPlainData(_describe(value)) from None
    return plain(value)


def jsonable(value: Any) -> JsonValue:
    """Plain JSON data for the store, whatever the value: what cannot be converted is named by its type."""
    try:
        return plain(value)
    except NotPlainData:
        return to_jsonable_python(value, fallback=lambda v: f'<{type(v).__name__}>')


def _non_finite(value: Any) -> float | None:
    """The first NaN or infinity in a value (through containers, dataclasses and pydantic models)."""
    stack, seen = [(value, 0)], 0
    while stack and seen < 100_000:
        item, depth = stack.pop()
        seen += 1
        if isinstance(item, float):
            if not math.isfinite(item):
                return item
        elif depth < MAX_DEPTH:
            if isinstance(item, list | tuple | set | frozenset):
                stack.extend((child, depth + 1) for child in item)
            elif isinstance(item, dict):
                stack.extend((child, depth + 1) for child in item.values())
            elif hasattr(item, '__dict__') and not isinstance(item, type):
                stack.extend((child, depth + 1) for child in vars(item).values())
    return None


def _int(value: int) -> int:
    if value.bit_length() > MAX_INT_DIGITS * 3.33:  # about that many decimal digits
        raise NotPlainData(f'an int of about {int(value.bit_length() / 3.33)} digits (at most {MAX_INT_DIGITS})')
    return value


def _text(value: str) -> str:
    try:
        value.encode('utf-8')
    except UnicodeEncodeError as exc:
        raise NotPlainData(f'a string with invalid Unicode (a lone surrogate at index {exc.start})') from None
    return value


def _describe(value: Any) -> str:
    if isinstance(value, set | frozenset):
        return 'a set (use a list)'
    if isinstance(value, bytes | bytearray):
        return 'bytes (decode them to str, e.g. with base64)'
    if isinstance(value, monty.MontyClassProxy):
        return f'an instance of class {value.name}'
    if isinstance(value, monty.MontyClassTypeProxy | monty.MontyStdTypeProxy):
        return 'a class'
    return type(value).__name__
