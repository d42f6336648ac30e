"""Renders the catalog as the Python stubs the model reads and the checker checks against.

Both see the same text, byte for byte: pydantic-ai's `FunctionSignature` renders each callee as an
async function with keyword-only parameters and its output as a `TypedDict`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_ai.function_signature import FunctionSignature

from ._callees import Callee, RegistrationError
from ._prelude import HELPER_STUBS

STUB_HEADER = 'import asyncio\nfrom typing import Any, Awaitable, Generic, Literal, NotRequired, TypedDict, TypeVar\n'


def render_stubs(callees: Iterable[Callee]) -> str:
    """The catalog as stubs: header, output types, one async function per callee, the helpers (joins, progress)."""
    callees = list(callees)
    signatures = [c.signature for c in callees]
    conflicting = FunctionSignature.get_conflicting_type_names(signatures)
    blocks = [STUB_HEADER]
    blocks.extend(FunctionSignature.render_type_definitions(signatures, conflicting))
    blocks.extend(
        c.signature.render('...', description=describe(c), is_async=True, conflicting_type_names=conflicting)
        for c in callees
    )
    blocks.append('# Helpers, available in every script: joins and progress.\n' + HELPER_STUBS)
    return '\n\n'.join(block.rstrip('\n') for block in blocks) + '\n'


def check_type_names(callees: Iterable[Callee]) -> None:
    """Refuse a catalog whose stubs would name a type they do not define.

    When two callees use different types of the same name, `FunctionSignature` renders each under its
    callee's prefix (`a_Item`, `b_Item`). pydantic-ai 2.62 applies the prefix only where a callee uses the
    type itself: inside another type (a field `items: list[Item]` of a model) the bare name stays, names
    nothing, and the checker sees `Unknown` there.
    """
    signatures = [c.signature for c in callees]
    conflicting = FunctionSignature.get_conflicting_type_names(signatures)
    if not conflicting:
        return
    for sig in signatures:
        for owner in sig.referenced_types:
            if owner.name in conflicting:
                continue
            for field in owner.fields.values():
                clash = sorted(conflicting & set(re.findall(r'[A-Za-z_]\w*', str(field.type))))
                if clash:
                    users = sorted(
                        s.name
                        for s in signatures
                        if s is not sig and any(t.name == clash[0] for t in s.referenced_types)
                    )
                    raise RegistrationError(
                        f'{sig.name}: its type {owner.name} has a field {field.name!r} of type {clash[0]}, and '
                        f'{" and ".join(users)} use{"s" if len(users) == 1 else ""} a different type also named '
                        f'{clash[0]!r}; the stubs cannot '
                        f'tell the two apart inside {owner.name}. Rename one of the two classes (e.g. '
                        f'{owner.name}{clash[0]}).'
                    )


def render_inputs(inputs: Mapping[str, Any]) -> str:
    """Declarations for the globals a run binds with `inputs=`, so the checker knows their types."""
    return ''.join(f'{name}: {type_expr(value)}\n' for name, value in inputs.items())


def type_expr(value: Any) -> str:
    """A type expression for plain data, precise where it is cheap and `Any` elsewhere."""
    if value is None:
        return 'None'
    for t in (bool, int, float, str, bytes):
        if type(value) is t:
            return t.__name__
    if isinstance(value, list | tuple | set):
        kinds = {type_expr(v) for v in value}
        inner = kinds.pop() if len(kinds) == 1 else 'Any'
        container = 'list' if isinstance(value, list) else 'set' if isinstance(value, set) else 'tuple'
        return f'tuple[{inner}, ...]' if container == 'tuple' else f'{container}[{inner}]'
    if isinstance(value, dict):
        kinds = {type_expr(v) for v in value.values()}
        inner = kinds.pop() if len(kinds) == 1 else 'Any'
        return f'dict[str, {inner}]'
    return 'Any'


def describe(callee: Callee) -> str | None:
    """The callee's description, with what the model must know about its rules."""
    notes = [callee.description] if callee.description else []
    if callee.side_effect:
        notes.append('Side effects: it changes something outside the script.')
    if callee.approval:
        notes.append(
            'Needs approval: a person must approve each call before it runs, so the script waits there '
            'for their decision; a rejected call raises PermissionError with their reason and does not run.'
        )
    notes.extend(
        f'Requires {rule.describe()}; otherwise it is refused with PermissionError and does not run.'
        for rule in callee.requires
    )
    return '\n\n'.join(notes) or None
