"""Shared fixtures: every Harness a test makes is closed after it, so no sandbox worker outlives its test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness import Harness


@pytest.fixture
def make_harness() -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(**kwargs: Any) -> Harness:
        kwargs.setdefault('store', ':memory:')
        h = Harness(**kwargs)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
