"""Shared fixtures: every Harness a test makes is closed after it, so no sandbox worker outlives its test."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness import Harness


def pytest_configure(config: pytest.Config) -> None:
    """Let the many Python subprocesses the crash, CLI and tracing tests start share a bytecode cache.

    With PYTHONDONTWRITEBYTECODE set (as on this project's machines), each one would otherwise
    compile pydantic-ai from source again, seconds of CPU apiece.
    """
    if os.environ.pop('PYTHONDONTWRITEBYTECODE', None) is not None and not os.environ.get('PYTHONPYCACHEPREFIX'):
        os.environ['PYTHONPYCACHEPREFIX'] = os.path.join(tempfile.gettempdir(), 'harness-tests-pycache')


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
