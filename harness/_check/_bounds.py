"""Loop bounds the source states literally: how many times a `for` (or a comprehension's `for`) runs when its
iterable says so in the text (a literal list, tuple, set, dict or string, or `range` of int literals).

A name bound once, at the top of the module, to such a literal and used nowhere but as a loop's iterable
(`tickets = [...]`, then `for t in tickets`) is the literal: nothing can change its length, since no other use
(a method call, an argument, an alias, a `del`, a parameter or import of the same name) exists to change it.

Anything else is no bound (None): the analysis then counts the loop's sites as unbounded, never guesses.
"""

from __future__ import annotations

import ast


def literal_bound(iterable: ast.expr, constants: dict[str, ast.expr] | None = None) -> int | None:
    """How many times a `for` over `iterable` runs, when the source says so literally (`constants`: the names
    that stand for a literal, `constant_iterables`)."""
    if isinstance(iterable, ast.Name) and constants and iterable.id in constants:
        iterable = constants[iterable.id]
    if isinstance(iterable, ast.List | ast.Tuple | ast.Set) and not any(
        isinstance(e, ast.Starred) for e in iterable.elts
    ):
        return len(iterable.elts)
    if isinstance(iterable, ast.Dict) and None not in iterable.keys:
        return len(iterable.keys)
    if isinstance(iterable, ast.Constant) and isinstance(iterable.value, str | bytes):
        return len(iterable.value)
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == 'range'
        and not iterable.keywords
    ):
        values = [a.value for a in iterable.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
        if len(values) == len(iterable.args) and 1 <= len(values) <= 3:
            return len(range(*values))
    return None


def constant_iterables(tree: ast.Module) -> dict[str, ast.expr]:
    """The names bound once, by a top-level `name = <literal>`, whose every other use is a loop's iterable."""
    assigned: dict[str, tuple[ast.Name, ast.expr]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if not isinstance(value, ast.Call) and literal_bound(value) is not None:
            assigned[target.id] = (target, value)
    if not assigned:
        return {}
    loops = ast.For | ast.AsyncFor | ast.comprehension
    iterables = {id(node.iter) for node in ast.walk(tree) if isinstance(node, loops)}
    spoilt: set[str] = set()
    for node in ast.walk(tree):
        for name in _identifiers(node):
            if name not in assigned or node is assigned[name][0]:
                continue
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) in iterables):
                spoilt.add(name)  # any other use (a second binding included) may change or alias it
    return {name: value for name, (_target, value) in assigned.items() if name not in spoilt}


def _identifiers(node: ast.AST) -> list[str]:
    """Every identifier a node binds or reads by name."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split('.')[0]]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, ast.Global | ast.Nonlocal):
        return list(node.names)
    return []
