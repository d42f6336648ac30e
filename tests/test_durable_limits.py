"""Durability's limits: a lease outlives blocking callees, the store stays proportional to the work, and a
full disk is an error the model and the CLI can act on, leaving the run resumable.

Real parts: real store files, real processes, real Monty; time is waited on only where it is what is tested
(a lease's expiry).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HELPERS = Path(__file__).parent / 'helpers'
sys.path.insert(0, str(HELPERS))
from lease_worker import CALLS, SCRIPT, build  # noqa: E402


def markers_by_call(markers: Path) -> Counter[str]:
    return Counter(p.name.rsplit('-', 1)[0] for p in markers.iterdir())


# -- the lease -------------------------------------------------------------------------------------


def test_the_lease_outlives_more_blocking_sync_calls_than_the_default_pool_has_threads(tmp_path: Path) -> None:
    """12 sync tools block longer than the lease lasts, more than the default executor has threads: the
    owner keeps renewing its lease, a second process is refused, and every call runs once (#25)."""
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    release, entered = threading.Event(), threading.Semaphore(0)
    h = build(str(store), markers, release, entered.release)
    assert h.store is not None
    h.store.lease_seconds = 2.0  # (a store without this setting keeps its 30 s: the test waits that long)
    pool = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor
    assert pool < CALLS
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(h.run_sync(SCRIPT))
        except BaseException as exc:  # reported by the assertions below
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        for _ in range(pool):  # the default executor is full of blocked calls
            assert entered.acquire(timeout=60), 'the sync calls did not start'
        (running,) = h.store.list_runs(1)
        _, first_expiry = h.store.holder(running.run_id)
        assert first_expiry is not None
        # Past the lease the run began with, by half a lease: only renewals can still hold it now.
        time.sleep(max(0.0, first_expiry - time.time()) + h.store.lease_seconds / 2)
        second = subprocess.run(
            [sys.executable, str(HELPERS / 'lease_worker.py'), str(store), str(markers), running.run_id],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, 'PYTHONUNBUFFERED': '1'},
        )
        answer = json.loads(second.stdout.strip().splitlines()[-1])
        assert answer.get('error') == 'RunBusy', (answer, second.stderr)
        assert 'active in another process' in answer['message']
    finally:
        release.set()
        thread.join(120)
        h.close()
    (result,) = outcome
    assert not isinstance(result, BaseException), result
    assert (result.status, result.value) == ('completed', sum(range(CALLS)))
    assert markers_by_call(markers) == Counter({f'block-{i}': 1 for i in range(CALLS)})


# -- the store's size ------------------------------------------------------------------------------

KEEPER = """\
kept = []
for i in range(CALLS):
    kept.append(await blob(i=i))
len(kept)
"""
BLOB = 50_000


def on_disk(store: Path) -> int:
    """The store's bytes: the file, its write-ahead log and its shared-memory index."""
    return sum(p.stat().st_size for p in store.parent.glob(store.name + '*'))


def test_the_store_stays_proportional_to_what_is_live(tmp_path: Path) -> None:
    """200 calls whose 50 KB results the script keeps: a snapshot of everything live at every pause grew the
    store with the square of the calls (1 GB); it stays within a small multiple of what is live (#25)."""
    from harness import Harness

    store = tmp_path / 'runs.db'
    live = 200 * BLOB
    bound = 5 * live
    seen: list[int] = []
    h = Harness(store=str(store))

    @h.tool
    async def blob(*, i: int) -> str:
        """50 KB of text."""
        seen.append(on_disk(store))
        if seen[-1] > bound:  # stop as soon as it is over, rather than write a gigabyte
            raise RuntimeError(f'the store holds {seen[-1]} bytes after {i} calls')
        return chr(ord('a') + i % 26) * BLOB

    try:
        result = h.run_sync(KEEPER.replace('CALLS', '200'))
        assert (result.status, result.value) == ('completed', 200), result
        seen.append(on_disk(store))
    finally:
        h.close()
    assert max(seen) <= bound, f'{max(seen)} bytes for {live} live'
