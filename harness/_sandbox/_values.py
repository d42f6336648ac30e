"""Every value that crosses the sandbox's boundary, or into the journal, through one conversion.

`plain` makes a value plain JSON data (None, bool, int, float, str, lists, dicts with str keys)
or raises `NotPlainData` saying what is wrong with it, never the value's repr: a set, bytes, a
dict key JSON cannot hold, NaN, an int too long to print, invalid Unicode, nesting deeper than
`MAX_DEPTH`, or an object of another type. It walks the value with an explicit stack, so a
100,000-deep list is a clear refusal, not a `RecursionError`. A dataclass instance defined in a
script becomes a dict of its fields (the sandbox hands it over as a `MontyClassProxy`).

Dict keys JSON writes as strings (int, float, bool, None) become the strings `json.dumps` makes of
them, unless two keys of one dict would become the same: that would lose a value, so it is refused
by name. A callee's result is held to the same rule before its type's dump (which would drop one
silently); the run's result says which keys of the final value became strings (`renamed`).

Callers decide whose fault it is: a script's argument is a `TypeError` at the call, a callee's
result is that callee's failure, a script's final value is a `WorkflowRuntimeError`.
"""

from __future__ import annotations

import json
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


def plain(value: Any, renamed: list[Any] | None = None) -> JsonValue:
    """`value` as plain JSON data (tuples become lists), or `NotPlainData` naming the problem; each dict
    key that became a string is appended to `renamed`."""
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
                name = _key(k)
                if name in converted:
                    raise NotPlainData(collision(item, name))
                if renamed is not None and not isinstance(k, str):
                    renamed.append(k)
                converted[name] = None
                stack.append((child, converted, name, depth + 1))
        elif isinstance(item, monty.MontyClassProxy) and item.is_dataclass:
            converted = {}
            stack.extend((child, converted, k, depth + 1) for k, child in item.attributes.items())
        else:
            raise NotPlainData(_describe(item))
        parent[key] = converted
    return root[0]


def renamed_note(keys: list[Any]) -> str:
    """Says which dict keys of a value became strings (`plain`), a few by name."""
    shown = ', '.join(f'{_shown(k)} -> {_shown(_json_key(k))}' for k in keys[:5])
    more = f' and {len(keys) - 5} more' if len(keys) > 5 else ''
    return f'Dict keys in the final value that were not str became strings, as in JSON: {shown}{more}.'


def to_plain(value: Any, dump: Callable[[Any], Any] | None) -> JsonValue:
    """A callee's return value as plain data, through its declared type's dump first, so pydantic
    models, dataclasses, enums and UUIDs become what their JSON schema (and the stub) promises."""
    if dump is not None:
        bad = _unfaithful(value)  # a JSON dump would turn it into None, or drop a key, without a word
        if bad is not None:
            raise NotPlainData(bad)
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


def _unfaithful(value: Any) -> str | None:
    """What a JSON dump would lose of a value without a word: the first NaN or infinity, or a dict whose
    keys become the same string (through containers, dataclasses and pydantic models)."""
    stack, seen = [(value, 0)], 0
    while stack and seen < 100_000:
        item, depth = stack.pop()
        seen += 1
        if isinstance(item, float):
            if not math.isfinite(item):
                return f'the float {item} (NaN and infinities are not JSON)'
        elif depth < MAX_DEPTH:
            if isinstance(item, list | tuple | set | frozenset):
                stack.extend((child, depth + 1) for child in item)
            elif isinstance(item, dict):
                if not all(isinstance(k, str) for k in item):
                    names = {_json_key(k) for k in item}
                    if len(names) < len(item):
                        return collision(item, None)
                stack.extend((child, depth + 1) for child in item.values())
            elif hasattr(item, '__dict__') and not isinstance(item, type):
                stack.extend((child, depth + 1) for child in vars(item).values())
    return None


def _key(key: Any) -> str:
    """A dict key as the string JSON makes of it, or `NotPlainData` for a key JSON cannot hold."""
    if isinstance(key, str):
        return _text(key)
    if key is None or isinstance(key, bool | int | float):
        if isinstance(key, float) and not math.isfinite(key):
            raise NotPlainData(f'a dict with the float key {key} (NaN and infinities are not JSON)')
        if isinstance(key, int) and not isinstance(key, bool):
            _int(key)
        return _json_key(key)
    raise NotPlainData(f'a dict with {type(key).__name__} keys')


def _json_key(key: Any) -> Any:
    """The string `json.dumps` writes for a key it accepts (other keys as they are)."""
    if isinstance(key, str) or not (key is None or isinstance(key, bool | int | float)):
        return key
    return json.dumps(key)


def collision(item: dict[Any, Any], name: str | None) -> str:
    """Name two keys of `item` that become the same string (`name`, or the first such)."""
    seen: dict[Any, Any] = {}
    for k in item:
        key = _json_key(k)
        if key in seen and (name is None or key == name):
            return f'a dict whose keys {_shown(seen[key])} and {_shown(k)} are the same in JSON ({_shown(key)})'
        seen.setdefault(key, k)
    return 'a dict whose keys are the same in JSON'


def _shown(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 40 else text[:37] + '...'


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
