"""Small helpers shared by the command line and the reports."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar('T')

_TRUE = frozenset({'1', 'true', 'yes', 'on', 'y'})
_FALSE = frozenset({'0', 'false', 'no', 'off', 'n'})


def format_money(amount: float, currency: str = 'EUR') -> str:
    """`1234.5` -> `'1,234.50 EUR'`."""
    return f'{amount:,.2f} {currency}'


def slugify(text: str) -> str:
    """A lowercase, dash-separated identifier: `'Blue Mug (L)'` -> `'blue-mug-l'`."""
    slug = re.sub(r'[^a-z0-9]+', '-', text.lower())
    return slug.strip('-')


def parse_bool(text: str) -> bool:
    """Read a yes/no setting; raises ValueError for anything else."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f'expected yes or no, got {text!r}')


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Yield lists of at most `size` items, in order."""
    if size < 1:
        raise ValueError('size must be at least 1')
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def percent(part: float, whole: float) -> str:
    """`part` as a percentage of `whole`, one decimal place; `'-'` when `whole` is zero."""
    if whole == 0:
        return '-'
    return f'{100 * part / whole:.1f}%'
