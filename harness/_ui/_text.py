"""A call and its values as short text, for the terminal and the studio alike (no rich in it)."""

from __future__ import annotations

from typing import Any

VALUE_CHARS = 60
"""A string argument longer than this is shown as its start and its length."""
RESULT_CHARS = 160
"""A result is cut after this many characters."""


def literal(value: Any, limit: int = VALUE_CHARS) -> str:
    """`value` (plain data) as a Python literal, each string cut to `limit` characters with its length."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f'{value[:limit]!r}…({len(value):,} chars)'
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        items = [literal(v, limit) for v in value[:20]]
        more = [f'…{len(value) - 20} more'] if len(value) > 20 else []
        return '[' + ', '.join(items + more) + ']'
    if isinstance(value, dict):
        entries = [f'{k!r}: {literal(v, limit)}' for k, v in list(value.items())[:20]]
        more = [f'…{len(value) - 20} more'] if len(value) > 20 else []
        return '{' + ', '.join(entries + more) + '}'
    return repr(value)


def call_text(callee: str, arguments: dict[str, Any], limit: int = VALUE_CHARS) -> str:
    """`callee(key='value', n=3)`: the call as the script wrote it."""
    return f'{callee}(' + ', '.join(f'{k}={literal(v, limit)}' for k, v in arguments.items()) + ')'


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + '…'
