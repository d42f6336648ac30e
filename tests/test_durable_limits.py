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


# -- a full disk -----------------------------------------------------------------------------------


def fill_at(store: Any, spare_pages: int) -> None:
    """Let the store's file grow by `spare_pages` pages only: past them a write fails as on a full disk
    (SQLite's SQLITE_FULL, 'database or disk is full', the error a full filesystem gives)."""
    conn = store._conn
    (pages,) = conn.execute('PRAGMA page_count').fetchone()
    conn.execute(f'PRAGMA max_page_count = {pages + spare_pages}')


def test_a_full_disk_fails_the_run_for_the_model_and_it_resumes_once_there_is_room(tmp_path: Path) -> None:
    """A full disk was a raw StoreError naming the store's path, and the run was recorded as cancelled: it is
    a WorkflowError naming no path, the run is recorded failed by it, and it resumes once there is room (#25)."""
    from harness import Harness, StoreError, WorkflowError

    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    h = Harness(store=str(store))

    @h.tool
    async def blob(*, i: int) -> str:
        """50 KB of text, leaving a marker each time it executes."""
        (markers / f'blob-{i}-{time.monotonic_ns()}').touch()
        return chr(ord('a') + i % 26) * BLOB

    try:
        assert h.run_sync('await blob(i=0)').status == 'completed'  # the store exists
        for p in markers.iterdir():
            p.unlink()
        assert h.store is not None
        fill_at(h.store, 200)  # 800 KB: the disk fills a few calls in
        try:
            h.run_sync(KEEPER.replace('CALLS', '40'))
        except WorkflowError as exc:
            error = exc
        else:
            raise AssertionError('the run finished on a full disk')
        assert not isinstance(error, StoreError) and type(error) is WorkflowError, repr(error)
        assert 'disk is full' in error.message and 'resume' in error.message, error.message
        assert str(tmp_path) not in error.message and 'runs.db' not in error.message, error.message
        run_id = error.run_id
        assert run_id is not None
        run = h.store.get_run(run_id)
        assert run is not None and run.status == 'failed' and 'disk is full' in (run.error or ''), run
        journaled = {c.seq for c in h.store.calls(run_id) if c.status == 'ok'}
        assert 0 < len(journaled) < 40
        ran_before = markers_by_call(markers)

        fill_at(h.store, 1_000_000)  # room again
        result = h.resume_sync(run_id)
        assert (result.status, result.value) == ('completed', 40)
    finally:
        h.close()
    ran = markers_by_call(markers)
    assert set(ran) == {f'blob-{i}' for i in range(40)}
    for seq in journaled:  # a call whose result was journaled never ran again
        assert ran[f'blob-{seq - 1}'] == 1 == ran_before[f'blob-{seq - 1}']
    assert all(n <= 2 for n in ran.values()), ran  # at most the call in flight when the disk filled ran again


BIG_TOOL = """\
def blob(i: int) -> str:
    \"\"\"50 KB of text.\"\"\"
    return chr(ord('a') + i % 26) * 50_000
"""


def test_a_full_disk_is_one_line_for_the_cli_naming_no_path(cli: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """`harness exec` on a full disk printed a traceback of a StoreError naming the store: it is one line that
    says what to do, and `harness resume RUN` finishes the run once there is room (#25)."""
    import re

    from harness._store._connection import Database

    (tmp_path / 'big.py').write_text(BIG_TOOL)
    (tmp_path / 'flow.py').write_text(KEEPER.replace('CALLS', '40'))
    env = {'HARNESS_STORE': str(tmp_path / 'store' / 'runs.db')}
    configure = Database._configure

    def small_disk(self: Any, conn: Any, *, in_memory: bool) -> None:
        configure(self, conn, in_memory=in_memory)
        conn.execute('PRAGMA max_page_count = 300')  # 1.2 MB: room for the schema and a few calls

    monkeypatch.setattr(Database, '_configure', small_disk)
    full = cli(['exec', 'flow.py', '--tools', 'big:blob'], cwd=tmp_path, env=env)
    assert full.exit_code == 1 and isinstance(full.exception, SystemExit) and not full.traceback, full.describe()
    said = ' '.join((full.stdout + full.stderr).split())
    assert 'Traceback' not in said and 'disk is full' in said and 'resume' in said, full.describe()
    assert str(tmp_path) not in said and 'runs.db' not in said, full.describe()
    match = re.search(r'harness resume (\S+?)`', said)
    assert match, said

    monkeypatch.setattr(Database, '_configure', configure)  # room again
    resumed = cli(['resume', match[1], '--tools', 'big:blob'], cwd=tmp_path, env=env)
    assert resumed.exit_code == 0 and not resumed.traceback, resumed.describe()
    assert '40' in resumed.stdout, resumed.describe()


def test_a_resume_on_a_disk_still_full_is_a_workflow_error_and_the_run_stays_resumable(tmp_path: Path) -> None:
    from harness import Harness, StoreError, WorkflowError

    h = Harness(store=str(tmp_path / 'runs.db'))

    @h.tool
    async def blob(*, i: int) -> str:
        """50 KB of text."""
        return chr(ord('a') + i % 26) * BLOB

    try:
        assert h.store is not None
        assert h.run_sync('await blob(i=0)').status == 'completed'
        fill_at(h.store, 100)
        run_id = None
        try:
            h.run_sync(KEEPER.replace('CALLS', '40'))
        except WorkflowError as exc:
            run_id = exc.run_id
        assert run_id is not None
        fill_at(h.store, 0)  # nothing can grow
        for _ in range(2):
            try:
                h.resume_sync(run_id)
            except WorkflowError as exc:
                assert not isinstance(exc, StoreError) and 'disk is full' in exc.message, exc
                assert str(tmp_path) not in exc.message
            else:
                raise AssertionError('resumed on a full disk')
        fill_at(h.store, 1_000_000)
        assert h.resume_sync(run_id).value == 40
    finally:
        h.close()


def test_a_full_disk_is_the_models_to_read_and_the_turn_goes_on(tmp_path: Path) -> None:
    """The orchestrator's turn died of the raw StoreError; the model reads the disk's error as the script's
    failure, naming no path, and the turn goes on (#25)."""
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from harness import Harness

    read: list[str] = []
    scripts = [KEEPER.replace('CALLS', '40')]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and len(messages) > 1:
            read.extend(str(getattr(part, 'content', '')) for part in last.parts)
        if scripts:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': scripts.pop(0)})])
        return ModelResponse(parts=[TextPart('the disk is full; I will stop here')])

    h = Harness(store=str(tmp_path / 'runs.db'))

    @h.tool
    async def blob(*, i: int) -> str:
        """50 KB of text."""
        return chr(ord('a') + i % 26) * BLOB

    try:
        assert h.store is not None
        assert h.run_sync('await blob(i=0)').status == 'completed'
        fill_at(h.store, 100)
        output = h.orchestrator(FunctionModel(respond)).run_sync('keep 40 blobs').output
    finally:
        h.close()
    assert output == 'the disk is full; I will stop here'
    said = ' '.join(read)
    assert 'disk is full' in said and 'resume' in said, said
    assert str(tmp_path) not in said and 'runs.db' not in said, said


def test_a_run_keeps_its_newest_snapshot_and_older_ones_only_within_the_retained_bytes(tmp_path: Path) -> None:
    from harness._records import CallRecord, Checkpoint, RunRow
    from harness._store import RunStore
    from harness._store._snapshots import RETAIN_BYTES

    def dump(size: int) -> bytes:
        return b'MONTY\x00' + (14).to_bytes(2, 'little') + os.urandom(size)

    with RunStore(tmp_path / 'runs.db') as store:
        store.create_run(RunRow('small'))
        store.create_run(RunRow('big'))
        for seq in range(1, 41):  # small snapshots: every position is kept (replay --from K starts at any)
            store.put_calls('small', [CallRecord(seq, 'f', {}, 1)], snapshot=Checkpoint(seq, dump(1000), []))
        assert store.snapshot_positions('small') == list(range(1, 41))
        for seq in range(1, 41):  # 100 KB each: the newest, and what fits in the retained bytes
            store.put_calls('big', [CallRecord(seq, 'f', {}, 1)], snapshot=Checkpoint(seq, dump(100_000), []))
            kept = store.snapshot_positions('big')
            assert kept[-1] == seq and len(kept) <= 2 + 2 * RETAIN_BYTES // 100_000, kept
        latest = store.latest_snapshot('big')
        assert latest is not None and latest.after_seq == 40
        assert store.snapshot_positions('small') == list(range(1, 41))  # one run's pruning leaves others alone
