"""Loop bounds the source states literally: how many times a `for` (or a comprehension's `for`) runs when its
iterable says so in the text (a literal list, tuple, set, dict or string, or `range` of int literals).

Anything else is no bound (None): the analysis then counts the loop's sites as unbounded, never guesses.
"""

from __future__ import annotations

import ast


def literal_bound(iterable: ast.expr) -> int | None:
    """How many times a `for` over `iterable` runs, when the source says so literally."""
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
