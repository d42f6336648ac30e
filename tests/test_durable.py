"""Durable runs: journal, snapshots, resume after SIGKILL, replay, fork, tampered blobs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness import ReplayDivergence, SandboxCrashed, SnapshotError, WorkflowError
from harness._store import RunStore

WORKER = Path(__file__).with_name('crash_worker.py')
sys.path.insert(0, str(WORKER.parent))
from crash_worker import EXPECTED, SCRIPT, build  # noqa: E402


def worker(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True, env=env)


def start_and_kill(store: Path, markers: Path, delay: float) -> str:
    proc = worker('run', str(store), str(markers))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith('run '), line
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return line.split()[1]


def finish(*runs: tuple[Path, Path, str], mode: str = 'resume') -> list[dict]:
    """Resume the given runs, one after another, in ONE fresh process."""
    args = [str(x) for run in runs for x in run]
    proc = worker(mode, *args)
    out, _ = proc.communicate(timeout=300)
    return [json.loads(line) for line in out.strip().splitlines()]


def markers_by_call(markers: Path) -> Counter[str]:
    return Counter(p.name.rsplit('-', 1)[0] for p in markers.iterdir())


# Kill moments measured from the first call: before, during and between the gathers, while results
# are being journaled and snapshots written, and while the side-effecting call is in flight.
KILL_DELAYS = [0.0, 0.03, 0.07, 0.1, 0.14, 0.18, 0.22, 0.27, 0.31, 0.36,
               0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9, 1.0, 1.15]


def crash_all(tmp_path: Path) -> list[tuple[Path, Path, str]]:
    """Start one workflow process per kill moment (four at a time) and SIGKILL each at its moment."""
    killed: list[tuple[Path, Path, str]] = []
    for batch in range(0, len(KILL_DELAYS), 4):
        procs = []
        for k in range(batch, min(batch + 4, len(KILL_DELAYS))):
            store, markers = tmp_path / f'runs{k}.db', tmp_path / f'markers{k}'
            markers.mkdir()
            procs.append((store, markers, KILL_DELAYS[k], worker('run', str(store), str(markers))))
        firsts = []
        for store, markers, _delay, proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith('run '), line
            firsts.append(time.monotonic())
            killed.append((store, markers, line.split()[1]))
        for (_, _, delay, proc), first in sorted(zip(procs, firsts, strict=True), key=lambda pf: pf[1] + pf[0][2]):
            time.sleep(max(0.0, first + delay - time.monotonic()))
            proc.send_signal(signal.SIGKILL)
        for *_, proc in procs:
            proc.wait()
    return killed


@pytest.mark.timeout(600)
def test_sigkill_at_twenty_moments_then_resume_in_a_new_process(tmp_path: Path):
    killed = crash_all(tmp_path)
    journaled = {}
    for store, _, run_id in killed:
        with RunStore(store) as db:
            journaled[run_id] = {r.seq for r in db.calls(run_id) if r.status in ('ok', 'error')}
    outcomes = dict(zip([k[2] for k in killed], finish(*killed), strict=True))
    undecided = [k for k in killed if outcomes[k[2]].get('error') == 'NeedsDecision']
    for _, markers, run_id in undecided:
        # Killed while the side-effecting call was in flight: never re-run without permission.
        assert markers_by_call(markers)['charge'] == 1
        assert '--retry-unknown' in outcomes[run_id]['message']
    if undecided:
        outcomes.update(zip([k[2] for k in undecided], finish(*undecided, mode="resume-retry"), strict=True))
    for store, markers, run_id in killed:
        assert outcomes[run_id] == {'value': EXPECTED, 'run_id': run_id}
        with RunStore(store) as db:
            rows = db.calls(run_id)
            assert db.get_run(run_id).status == 'completed'
        counts = markers_by_call(markers)
        assert len(rows) == 31
        for row in rows:
            name = 'charge' if row.callee == 'charge' else f'slow-{row.arguments["i"]}'
            assert 1 <= counts[name] <= row.attempt, (run_id, row.seq, name, counts[name], row.attempt)
            if row.seq in journaled[run_id]:  # its result was journaled before the kill: it never ran again
                assert counts[name] == 1 and row.attempt == 1, (run_id, row.seq, name)


def test_uncrashed_run_replays_without_calling_anything_and_detects_divergence(tmp_path: Path):
    markers = tmp_path / 'm'
    markers.mkdir()
    h = build(str(tmp_path / 'runs.db'), markers)
    try:
        result = h.run_sync(SCRIPT)
        assert result.value == EXPECTED
        before = len(list(markers.iterdir()))
        replayed = h.replay_sync(result.run_id)
        assert replayed.value == EXPECTED
        assert len(list(markers.iterdir())) == before  # zero external calls
        assert {c.source for c in replayed.calls} == {'replayed'}
        # Edit the stored script to call something else at position 4.
        with sqlite3.connect(tmp_path / 'runs.db') as db:
            db.execute('UPDATE runs SET script = ? WHERE run_id = ?',
                       (SCRIPT.replace('slow(i=3 * r + 1)', 'slow(i=3 * r + 7)'), result.run_id))
        with pytest.raises(ReplayDivergence, match='call #2 diverges'):
            h.replay_sync(result.run_id)
        assert len(list(markers.iterdir())) == before
    finally:
        h.close()


def test_fork_answers_call_k_and_runs_later_calls_live(tmp_path: Path):
    markers = tmp_path / 'm'
    markers.mkdir()
    h = build(str(tmp_path / 'runs.db'), markers)
    try:
        parent = h.run_sync(SCRIPT)
        before = markers_by_call(markers)
        forked = h.fork_sync(parent.run_id, at=29, result=1000)
        after = markers_by_call(markers)
        assert forked.run_id != parent.run_id
        assert [c.source for c in forked.calls[:28]] == ['forked'] * 28
        assert forked.calls[28].source == 'answered'
        assert forked.calls[29].source == 'live'
        expected_total = EXPECTED[0] - 28 * 28 + 1000
        assert forked.value == [expected_total, f'charged {expected_total}']
        new_runs = after - before
        assert new_runs == Counter({'slow-29': 1, 'charge': 1})  # only the calls after K ran
        row = h.store.get_run(forked.run_id)
        assert row.parent_run_id == parent.run_id and row.fork_at == 29
    finally:
        h.close()


def tamper(db_path: Path, run_id: str, change, *, as_if_written: bool = False) -> None:
    """Change the newest snapshot's blob; `as_if_written` also updates its recorded size and checksum,
    as a blob genuinely written that way (by a newer harness, or copied whole from another store) would have."""
    with sqlite3.connect(db_path) as db:
        (snap_id, blob), *_ = db.execute(
            'SELECT id, blob FROM snapshots WHERE run_id = ? ORDER BY id DESC', (run_id,)).fetchall()
        new = change(bytes(blob))
        db.execute('UPDATE snapshots SET blob = ? WHERE id = ?', (new, snap_id))
        if as_if_written:
            db.execute('UPDATE snapshots SET size = ?, digest = ? WHERE id = ?',
                       (len(new), hashlib.sha256(new).hexdigest(), snap_id))


@pytest.mark.parametrize(
    ('change', 'as_if_written', 'words'),
    [
        (lambda b: b[: len(b) // 2], False, 'truncated'),
        (lambda b: b[:-10] + bytes([b[-10] ^ 1]) + b[-9:], False, 'tampered'),
        (lambda b: b[:-10] + bytes([b[-10] ^ 1]) + b[-9:], True, 'does not authenticate'),
        (lambda b: b[:4] + (99).to_bytes(2, 'little') + b[6:], True, 'newer harness'),
    ],
)
def test_tampered_snapshots_refuse_to_load_and_nothing_runs(tmp_path: Path, change, as_if_written, words):
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    run_id = start_and_kill(store, markers, 0.3)
    tamper(store, run_id, change, as_if_written=as_if_written)
    before = markers_by_call(markers)
    h = build(str(store), markers)
    try:
        with pytest.raises(SnapshotError, match=words):
            h.resume_sync(run_id)
    finally:
        h.close()
    assert markers_by_call(markers) == before


def test_a_blob_from_another_store_is_refused(tmp_path: Path):
    markers = tmp_path / 'markers'
    markers.mkdir()
    run_a = start_and_kill(tmp_path / 'a.db', markers, 0.3)
    run_b = start_and_kill(tmp_path / 'b.db', markers, 0.3)
    with sqlite3.connect(tmp_path / 'a.db') as a:
        blob = a.execute('SELECT blob FROM snapshots WHERE run_id = ? ORDER BY id DESC', (run_a,)).fetchone()[0]
    tamper(tmp_path / 'b.db', run_b, lambda _: bytes(blob), as_if_written=True)
    h = build(str(tmp_path / 'b.db'), markers)
    try:
        with pytest.raises(SnapshotError, match='another store'):
            h.resume_sync(run_b)
    finally:
        h.close()


def test_two_processes_share_one_store_without_losing_rows(tmp_path: Path):
    code = (
        'import sys\nfrom harness import Harness\n'
        f'h = Harness(store={str(tmp_path / "shared.db")!r})\n'
        '@h.tool\ndef inc(*, x: int) -> int:\n    return x + 1\n'
        'for i in range(15):\n    h.run_sync("a = await inc(x=1)\\nb = await inc(x=a)\\nb")\n'
        'h.close()\n'
    )
    procs = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with RunStore(tmp_path / 'shared.db') as db:
        runs = db.list_runs(limit=100)
        assert len(runs) == 30
        assert all(r.status == 'completed' and r.value == 3 for r in runs)
        assert sum(len(db.calls(r.run_id)) for r in runs) == 60


def test_no_store_means_nothing_to_resume(make_harness):
    h = make_harness(store=None)

    @h.tool
    def one() -> int:
        return 1

    result = h.run_sync('await one()')
    assert h.runs() == []
    with pytest.raises(WorkflowError, match='no run store'):
        h.replay_sync(result.run_id)


def test_granted_clock_and_randomness_are_journaled_and_replayed(make_harness, tmp_path: Path):
    code = 'import time\nimport random\nt = time.time()\nr = random.random()\n[t, r]'
    refused = make_harness(store=str(tmp_path / 'a.db'))
    with pytest.raises(WorkflowError, match='not available in a workflow script'):
        refused.run_sync(code)
    h = make_harness(store=str(tmp_path / 'b.db'), grant_clock=True, grant_randomness=True)
    first = h.run_sync(code)
    assert [c.callee for c in first.calls] == ['os:time.time', 'os:os.urandom']
    time.sleep(0.05)
    again = h.replay_sync(first.run_id)
    assert again.value == first.value  # the same clock reading and the same random draw
    assert {c.source for c in again.calls} == {'replayed'}


def test_a_killed_sandbox_worker_is_a_retry_and_the_run_resumes(make_harness, tmp_path: Path):
    h = make_harness(store=str(tmp_path / 'runs.db'))
    ran: list[int] = []

    @h.tool
    def step(*, i: int) -> int:
        ran.append(i)
        if i == 2 and len(ran) == 3:  # first time only: kill the worker running this script
            for pid in monty_workers():
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        return i * 10

    code = 'total = 0\nfor i in range(4):\n    total += await step(i=i)\ntotal'
    with pytest.raises(SandboxCrashed) as info:
        h.run_sync(code)
    assert [c.result for c in info.value.completed] == [0, 10, 20]
    assert h.store.get_run(info.value.run_id).status == 'interrupted'
    resumed = h.resume_sync(info.value.run_id)
    assert resumed.value == 60
    assert ran == [0, 1, 2, 3]  # nothing journaled ran twice


def monty_workers() -> list[int]:
    """This process's sandbox worker processes."""
    pids = []
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / 'stat').read_text()
                cmd = (entry / 'cmdline').read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(')', 1)[1].split()[1]) == os.getpid() and b'monty' in cmd:
                pids.append(int(entry.name))
    return pids
