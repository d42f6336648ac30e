"""The constructs a workflow script never needs that would hide its calls from the analysis before the run.

Two lists, one for each user: `unfollowable` is what the analysis cannot follow at all (code made at
run time, names looked up by a computed string): `analyze` reports it as incomplete. `refusals` adds
what the analysis follows only coarsely and a script has a direct alternative for (a class with
methods, which may run anywhere, while a data class with fields only is fine; a script binding that
shadows a catalog function, so that a call by that name may not be the callee's): the checker
refuses all of them, each with a message naming the alternative. Measured against pydantic-monty
1.4.0: `eval`, `exec`, `locals`, `getattr`/`setattr` and classes run there; `globals`, `vars`,
`compile`, `__import__`, `__builtins__` and `__dict__` do not exist in the sandbox, so they cannot
hide a call and are not listed.
"""

from __future__ import annotations

import ast

from .._catalog._prelude import HELPER_NAMES, INTERNAL_NAMES, JOIN_HELPERS
from ._scopes import Scopes

RUN_TIME_CODE = frozenset({'eval', 'exec'})
BY_NAME = frozenset({'getattr', 'setattr', 'delattr', 'hasattr'})
DIRECT = 'call the functions directly (choose between them with `if`)'
DICTS = 'keep the values in a dict and index it (`found[key]`)'


def unfollowable(tree: ast.Module, scopes: Scopes) -> list[tuple[ast.AST, str]]:
    """(node, reason) for each construct whose calls cannot be read from the source."""
    found: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and not scopes.is_script_name(node):
            if node.id in RUN_TIME_CODE:
                found.append(
                    (node, f'{node.id}() runs code made at run time, which cannot be checked before the run: {DIRECT}')
                )
            elif node.id == 'locals':
                found.append((node, f'locals() reads variables by a computed name: {DICTS}'))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in BY_NAME
            and not scopes.is_script_name(node.func)
            and not _literal_name(node)
        ):
            found.append(
                (node, f'{node.func.id}() with a computed attribute name: write the attribute (`x.name`), or {DICTS}')
            )
    return _in_order(found)


def refusals(tree: ast.Module, scopes: Scopes, functions: set[str]) -> list[tuple[ast.AST, str]]:
    """(node, message) for each construct the checker refuses; `functions`: the catalog's (and the
    join helpers') names."""
    found = unfollowable(tree, scopes)
    found += [
        (
            node,
            "a class with methods is refused in workflow scripts (a method's calls cannot be checked "
            'before the run): use functions, and dicts (or a @dataclass with fields only) for data',
        )
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and _methods(node)
    ]
    found += [
        (
            node,
            f'`{name}` is internal to the script helpers and cannot be used in a script: '
            'call first_of, quorum, within, log or phase instead',
        )
        for node in ast.walk(tree)
        if (name := _name_of(node)) in INTERNAL_NAMES
    ]
    found += [
        (
            node,
            f'`{name}` is {_kind_of(name)}: '
            f'{_binding(node)} here would hide its calls from the checks; use another name',
        )
        for name, node in scopes.bindings_of(functions)
    ]
    return _in_order(found)


def _name_of(node: ast.AST) -> str | None:
    """The name `node` uses or binds, if it is a name (a variable, a function or class, a parameter, an import)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.alias):
        return node.asname or node.name
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _kind_of(name: str) -> str:
    if name in JOIN_HELPERS:
        return 'a join helper'
    return 'a script helper' if name in HELPER_NAMES else 'a catalog function'


def _methods(node: ast.ClassDef) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) for n in ast.walk(node))


def _literal_name(node: ast.Call) -> bool:
    return len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)


def _binding(node: ast.AST) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return 'a function of that name'
    if isinstance(node, ast.ClassDef):
        return 'a class of that name'
    if isinstance(node, ast.arg):
        return 'a parameter of that name'
    if isinstance(node, ast.Import | ast.ImportFrom):
        return 'an import of that name'
    return 'binding that name (an assignment, a loop variable, `:=`, an `except ... as`)'


def _in_order(found: list[tuple[ast.AST, str]]) -> list[tuple[ast.AST, str]]:
    return sorted(found, key=lambda item: (getattr(item[0], 'lineno', 0), getattr(item[0], 'col_offset', 0)))
