"""The Monty worker pool: one per Harness, long-lived, sized for many paused workflows at once.

A paused session keeps its worker, so the pool is sized for concurrent workflows rather than for
CPU cores. The pool is created lazily on first use and works from any event loop; `aclose` (or
interpreter exit) shuts it down.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pydantic_monty as monty
from pydantic_ai.exceptions import UserError

from .._catalog._prelude import HELPERS_SOURCE

SCRIPT_NAME = 'workflow.py'
LIMIT_KEYS = frozenset({'max_duration_secs', 'max_memory', 'max_suspensions', 'max_value_chars', 'max_error_chars'})


@dataclass(frozen=True)
class SandboxLimits:
    """Per-script sandbox limits (see `Harness(limits=...)`)."""

    max_duration_secs: float = 10.0
    """Sandbox CPU time for the whole script; time spent waiting on callees does not count."""
    max_memory: int = 256 * 1024 * 1024
    max_suspensions: int = 1_000_000
    """Every call and every future resolution is one; Monty's default of 1,000 would stop a big gather."""
    max_value_chars: int = 50_000
    """Host side: a final value longer than this (as JSON) reaches the model as a preview; the run keeps it whole."""
    max_error_chars: int = 8_000
    """Host side: an error message longer than this reaches the model cut short; the run keeps it whole."""

    @classmethod
    def from_mapping(cls, limits: Mapping[str, Any] | None) -> SandboxLimits:
        if not limits:
            return cls()
        unknown = set(limits) - LIMIT_KEYS
        if unknown:
            raise UserError(f'unknown sandbox limit(s) {sorted(unknown)}: the keys are {sorted(LIMIT_KEYS)}.')
        values = {**cls().__dict__, **{k: v for k, v in limits.items() if v is not None}}
        if any(value <= 0 for value in values.values()):
            raise UserError('limits must be positive numbers.')
        return cls(**values)

    def as_monty_limits(self) -> monty.ResourceLimits:
        return {
            'max_feed_duration_secs': self.max_duration_secs,
            'max_memory': self.max_memory,
            'max_suspensions': self.max_suspensions,
            'max_total_sleep_secs': self.max_duration_secs,
        }


# The script gets no wall clock and no OS randomness of its own: both arrive as OS calls the host
# refuses (or, when granted, answers and journals), so a replay sees the same world.
OS_POLICY: monty.OSPolicy = {'datetime': 'call_host', 'random_start': 'call_host'}


class SandboxPool:
    """Owns one `AsyncMonty` pool; hands out sessions with the script helpers (joins, `log`, `phase`) defined."""

    def __init__(self, *, max_workers: int, limits: SandboxLimits, reserved: int = 0) -> None:
        self.max_workers = max_workers
        self.reserved = reserved
        """Extra workers for long-lived checking sessions, so they never starve workflows."""
        self.limits = limits
        self._pool: monty.AsyncMonty | None = None
        self._opening: concurrent.futures.Future[monty.AsyncMonty] | None = None
        self._lock = threading.Lock()
        _live_pools.add(self)

    async def _ensure(self) -> monty.AsyncMonty:
        if self._pool is not None:
            return self._pool
        with self._lock:
            opening, owner = self._opening, self._opening is None
            if owner:
                opening = self._opening = concurrent.futures.Future()
        assert opening is not None
        if not owner:
            return await asyncio.wrap_future(opening)
        try:
            pool = monty.AsyncMonty(
                max_processes=self.max_workers + self.reserved,
                # A backstop behind the in-sandbox duration limit: a turn that runs far past it is killed.
                request_timeout=self.limits.max_duration_secs + 30.0,
            )
            await pool.__aenter__()
        except BaseException as exc:
            with self._lock:
                self._opening = None
            opening.set_exception(exc)
            raise
        self._pool = pool
        opening.set_result(pool)
        return pool

    @asynccontextmanager
    async def session(
        self, *, stubs: str | None, print_callback: Any = None, helpers: bool = True
    ) -> AsyncGenerator[monty.AsyncMontySession]:
        """A checked-out worker; type checking is on when `stubs` is given.

        With `helpers`, the script helpers are defined first; without, the session is fresh, as
        `load_snapshot` requires (a dump already holds the helpers).
        """
        pool = await self._ensure()
        checkout = pool.checkout(
            script_name=SCRIPT_NAME,
            limits=self.limits.as_monty_limits(),
            type_check=stubs is not None,
            type_check_stubs=stubs,
            type_check_format='concise',
            os_policy=OS_POLICY,
        )
        async with checkout as session:
            if helpers:
                await session.feed_run(HELPERS_SOURCE, skip_type_check=True, print_callback=print_callback)
            yield session

    def checker(self, stubs: str) -> Any:
        """A (not yet entered) checkout for a session that only type-checks scripts."""
        if self._pool is None:
            raise RuntimeError('the sandbox pool is not open')
        return self._pool.checkout(
            script_name=SCRIPT_NAME,
            limits=self.limits.as_monty_limits(),
            type_check=True,
            type_check_stubs=stubs,
            type_check_format='concise',
            os_policy=OS_POLICY,
        )

    async def ensure_open(self) -> None:
        await self._ensure()

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        with self._lock:
            self._opening = None
        if pool is not None:
            await pool.__aexit__(None, None, None)
            global _last_closed
            _last_closed = time.monotonic()

    def close_sync(self) -> None:
        if self._pool is None:
            return
        try:
            asyncio.run(self.aclose())
        except RuntimeError:  # called from inside a running loop: run it on a private thread
            worker = threading.Thread(target=lambda: asyncio.run(self.aclose()))
            worker.start()
            worker.join()


_live_pools: weakref.WeakSet[SandboxPool] = weakref.WeakSet()
_last_closed: float | None = None
"""When a pool was last closed (monotonic), so the process does not exit right after it."""
EXIT_GRACE_SECS = 0.05
"""pydantic-monty 1.4.0: a process exiting right after closing a pool aborted (SIGABRT) now and then; a short
pause between the close and the exit stopped it. The pause is taken once, at exit, not at every close (a
test suite closes hundreds of pools)."""


@atexit.register
def _close_pools_at_exit() -> None:
    for pool in list(_live_pools):
        with contextlib.suppress(Exception):
            pool.close_sync()
    if _last_closed is not None:
        time.sleep(max(0.0, EXIT_GRACE_SECS - (time.monotonic() - _last_closed)))


def default_workers() -> int:
    """Workers are cheap (~13 MB, spawned on demand) and a paused workflow holds one: size for
    concurrent workflows, not cores."""
    return max(64, (os.cpu_count() or 1) * 16)
