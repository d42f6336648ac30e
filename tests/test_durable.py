"""Durable runs: journal, snapshots, resume after SIGKILL, replay, fork, tampered blobs.

The crash tests kill a real process and resume in a fresh one, but only two processes per test: one
runs a workflow per kill moment, each frozen at its moment on its own thread (a call's `started` or
`finished` event, or inside a callee), and is SIGKILLed once all are there; one resumes them all. A
moment is an event, never a delay, so a kill lands in the same phase of the run however busy the
machine is (and the assertions hold for any state a kill can leave). Five representative moments run
by default, all twenty (plus a sweep of staggered kills at arbitrary instants) under `-m slow`.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import CallRecord, ReplayDivergence, SandboxCrashed, SnapshotError, WorkflowError
from harness._dispatch._history import History
from harness._store import RunStore

WORKER = Path(__file__).parent / 'helpers' / 'crash_worker.py'
sys.path.insert(0, str(WORKER.parent))
from crash_worker import CALLS, EXPECTED, SCRIPT, build  # noqa: E402

# Every moment the slow tier cuts a run at: the call's event (the engine stops inside it) or its callee
# executing. Before and inside the first gather, between and inside later ones, and around the one
# side-effecting call (#31): journaled but not started, executing, done but not journaled.
MOMENTS = [
    'started:1',
    'callee:1',
    'finished:1',
    'finished:3',
    'started:4',
    'callee:8',
    'finished:9',
    'started:13',
    'callee:14',
    'finished:15',
    'started:16',
    'finished:18',
    'callee:20',
    'started:22',
    'finished:24',
    'callee:27',
    'finished:30',
    'started:31',
    'callee:31',
    'finished:31',
]
# The default tier: nothing has run yet; mid-run, a callee of a gather executing; the last result of a
# gather computed, not yet journaled; the side effect in flight; the side effect done, not journaled.
REPRESENTATIVE = ['started:1', 'callee:14', 'finished:18', 'callee:31', 'finished:31']
# Two more runs cut mid-way, as sources of stored snapshots for the tampering tests.
TAMPER_SOURCES = ['callee:14', 'callee:14']


def worker_env() -> dict[str, str]:
    return {**os.environ, 'PYTHONUNBUFFERED': '1'}


@dataclass(frozen=True)
class Crashed:
    store: Path
    markers: Path
    run_id: str
    moment: str


def crash(spawn: Callable[..., Any], directory: Path, moments: list[str]) -> list[Crashed]:
    """One process runs a workflow per moment, each frozen at its moment; SIGKILL it once all are."""
    child = spawn([sys.executable, str(WORKER), 'run', str(directory), *moments], env=worker_env())
    run_ids: dict[int, str] = {}
    while (line := child.line()) != 'all frozen':
        assert line.startswith('frozen '), f'{line}\n{child.describe()}'
        _, index, run_id = line.split()
        run_ids[int(index)] = run_id
    child.kill()
    return [Crashed(directory / f'runs{i}.db', directory / f'markers{i}', run_ids[i], m) for i, m in enumerate(moments)]


def resume_in(server: Any, mode: str, runs: list[Crashed]) -> dict[str, dict[str, Any]]:
    """Resume the runs, one after another, in the `serve` process; its answer per run id."""
    server.send(json.dumps({'mode': mode, 'runs': [[str(r.store), str(r.markers), r.run_id] for r in runs]}))
    answers = [json.loads(server.line()) for _ in runs]
    assert server.line() == 'done'
    return {a['run_id']: a for a in answers}


def markers_by_call(markers: Path) -> Counter[str]:
    return Counter(p.name.rsplit('-', 1)[0] for p in markers.iterdir())


def journaled_results(store: Path, run_id: str) -> set[int]:
    with RunStore(store) as db:
        return {r.seq for r in db.calls(run_id) if r.status in ('ok', 'error')}


def assert_resumes_exactly_once(
    server: Any, crashed: list[Crashed], *, side_effect_in_flight: set[str] | None = None
) -> None:
    """Resume every crashed run in a fresh process: each completes with the expected value, every call
    whose result was journaled before the kill never ran again, and a side-effecting call whose outcome
    is unknown is not re-run until that is allowed. `side_effect_in_flight`: the moments at which that
    must be the case (None: whichever it is)."""
    journaled = {c.run_id: journaled_results(c.store, c.run_id) for c in crashed}
    at_kill = {c.run_id: markers_by_call(c.markers) for c in crashed}
    outcomes = resume_in(server, 'resume', crashed)
    undecided = [c for c in crashed if outcomes[c.run_id].get('error') == 'NeedsDecision']
    if side_effect_in_flight is not None:
        assert {c.moment for c in undecided} == side_effect_in_flight, outcomes
    for c in undecided:
        assert markers_by_call(c.markers) == at_kill[c.run_id]  # not re-run without permission
        assert '--retry-unknown' in outcomes[c.run_id]['message']
    if undecided:
        outcomes.update(resume_in(server, 'resume-retry', undecided))
    for c in crashed:
        assert outcomes[c.run_id] == {'value': EXPECTED, 'run_id': c.run_id}, (c.moment, outcomes[c.run_id])
        with RunStore(c.store) as db:
            rows = db.calls(c.run_id)
            assert db.get_run(c.run_id).status == 'completed'
        counts = markers_by_call(c.markers)
        assert len(rows) == CALLS
        for row in rows:
            name = 'charge' if row.callee == 'charge' else f'slow-{row.arguments["i"]}'
            assert 1 <= counts[name] <= row.attempt, (c.moment, row.seq, name, counts[name], row.attempt)
            if row.seq in journaled[c.run_id]:  # its result was journaled before the kill: it never ran again
                assert counts[name] == 1 and row.attempt == 1, (c.moment, row.seq, name)


def in_flight(moments: list[str]) -> set[str]:
    return {m for m in moments if m.endswith(f':{CALLS}')}


@pytest.fixture(scope='module')
def crashed(spawn: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Crashed], Any]]:
    """The default tier's crashed runs (and the tampering tests' sources), and a resuming process
    started alongside, so its imports overlap the crashing process's work."""
    server = spawn([sys.executable, str(WORKER), 'serve'], env=worker_env())
    yield crash(spawn, tmp_path_factory.mktemp('crash'), REPRESENTATIVE + TAMPER_SOURCES), server
    server.finish()


def test_a_sigkilled_run_is_shown_interrupted_with_resume_offered(crashed: tuple[list[Crashed], Any], cli: Any):
    """Killed mid-run, a run is not `running` for ever: once its holder is gone it is `interrupted` in
    `h.runs()`, `harness runs`, `harness show` and the studio's JSON, which offers Resume (before any resume)."""
    from harness._studio._views import run_page, runs_page

    runs, _ = crashed
    for c in runs:
        h = build(str(c.store), c.markers)
        try:
            assert [(r.run_id, r.status) for r in h.runs()] == [(c.run_id, 'interrupted')], c.moment
        finally:
            h.close()
        listed = cli(['runs', '--json', '--store', str(c.store)], cwd=c.store.parent)
        assert [r['status'] for r in json.loads(listed.stdout)] == ['interrupted'], listed.describe()
        shown = cli(['show', c.run_id, '--json', '--store', str(c.store)], cwd=c.store.parent)
        assert json.loads(shown.stdout)['status'] == 'interrupted', shown.describe()
        with RunStore(c.store) as db:
            assert runs_page(db, statuses=['interrupted'], limit=10)['counts']['interrupted'] == 1
            page = run_page(db, db.get_run(c.run_id), ['slow', 'charge'])
            assert (page['status'], page['actions']['resume']) == ('interrupted', True), c.moment


def test_sigkill_at_representative_moments_then_resume_in_a_new_process(crashed: tuple[list[Crashed], Any]):
    runs, server = crashed
    assert_resumes_exactly_once(server, runs[: len(REPRESENTATIVE)], side_effect_in_flight=in_flight(REPRESENTATIVE))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkill_at_all_twenty_moments_then_resume_in_a_new_process(spawn: Callable[..., Any], tmp_path: Path):
    server = spawn([sys.executable, str(WORKER), 'serve'], env=worker_env())
    assert_resumes_exactly_once(server, crash(spawn, tmp_path, MOMENTS), side_effect_in_flight=in_flight(MOMENTS))
    server.finish()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkill_at_staggered_instants_then_resume_in_a_new_process(spawn: Callable[..., Any], tmp_path: Path):
    """Twenty runs with callees that take real time, started 60 ms apart in one process that SIGKILLs
    itself 1.2 s after the first started: each is cut at another instant, wherever that falls (inside
    a journal write or a snapshot write too). Whatever the state, resuming must finish each exactly once."""
    server = spawn([sys.executable, str(WORKER), 'serve'], env=worker_env())
    count = 20
    child = spawn([sys.executable, str(WORKER), 'sweep', str(tmp_path), str(count), '0.06', '1.2'], env=worker_env())
    assert child.wait(timeout=300) == -signal.SIGKILL, child.describe()
    started = [line.split() for line in ''.join(child.stdout).splitlines() if line.startswith('run ')]
    assert started, child.describe()
    runs = [
        Crashed(tmp_path / f'runs{i}.db', tmp_path / f'markers{i}', run_id, f'instant {i}') for _, i, run_id in started
    ]
    assert_resumes_exactly_once(server, runs)
    server.finish()


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
        # Edit the stored script to call something else at position 4: the run's seal no longer matches.
        with sqlite3.connect(tmp_path / 'runs.db') as db:
            db.execute(
                'UPDATE runs SET script = ? WHERE run_id = ?',
                (SCRIPT.replace('slow(i=3 * r + 1)', 'slow(i=3 * r + 7)'), result.run_id),
            )
        with pytest.raises(SnapshotError, match='was modified after it was written'):
            h.replay_sync(result.run_id)
        assert len(list(markers.iterdir())) == before
        # A script that asks for something else than its journal holds diverges, naming the call.
        journal = {c.seq: c for c in h.store.calls(result.run_id)}  # type: ignore[union-attr]
        asked = CallRecord(2, journal[2].callee, {'i': 999}, None)
        with pytest.raises(ReplayDivergence, match='call #2 diverges'):
            History(mode='replay', calls=journal).answer(asked)
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


def copy_store(source: Path, target: Path) -> Path:
    """A consistent copy of a store, as the killed process left it (committed writes only)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return target


def tamper(db_path: Path, run_id: str, change, *, as_if_written: bool = False) -> None:
    """Change the newest snapshot's blob; `as_if_written` also updates its recorded size and checksum,
    as a blob genuinely written that way (by a newer harness, or copied whole from another store) would have."""
    with sqlite3.connect(db_path) as db:
        (snap_id, blob), *_ = db.execute(
            'SELECT id, blob FROM snapshots WHERE run_id = ? ORDER BY id DESC', (run_id,)
        ).fetchall()
        new = change(bytes(blob))
        db.execute('UPDATE snapshots SET blob = ? WHERE id = ?', (new, snap_id))
        if as_if_written:
            db.execute(
                'UPDATE snapshots SET size = ?, digest = ? WHERE id = ?',
                (len(new), hashlib.sha256(new).hexdigest(), snap_id),
            )
    db.close()


def tamper_sources(crashed: tuple[list[Crashed], Any]) -> list[Crashed]:
    runs, _ = crashed
    return runs[len(REPRESENTATIVE) :]


@pytest.mark.parametrize(
    ('change', 'as_if_written', 'words'),
    [
        (lambda b: b[: len(b) // 2], False, 'truncated'),
        (lambda b: b[:-10] + bytes([b[-10] ^ 1]) + b[-9:], False, 'tampered'),
        (lambda b: b[:-10] + bytes([b[-10] ^ 1]) + b[-9:], True, 'does not authenticate'),
        (lambda b: b[:4] + (99).to_bytes(2, 'little') + b[6:], True, 'newer harness'),
    ],
)
def test_tampered_snapshots_refuse_to_load_and_nothing_runs(
    crashed: tuple[list[Crashed], Any], tmp_path: Path, change, as_if_written, words
):
    source = tamper_sources(crashed)[0]
    store, markers = copy_store(source.store, tmp_path / 'runs.db'), tmp_path / 'markers'
    markers.mkdir()
    tamper(store, source.run_id, change, as_if_written=as_if_written)
    h = build(str(store), markers)
    try:
        with pytest.raises(SnapshotError, match=words):
            h.resume_sync(source.run_id)
    finally:
        h.close()
    assert markers_by_call(markers) == Counter()  # nothing ran


def test_a_blob_from_another_store_is_refused(crashed: tuple[list[Crashed], Any], tmp_path: Path):
    a, b = tamper_sources(crashed)
    with sqlite3.connect(a.store) as db:
        blob = db.execute('SELECT blob FROM snapshots WHERE run_id = ? ORDER BY id DESC', (a.run_id,)).fetchone()[0]
    db.close()
    store = copy_store(b.store, tmp_path / 'b.db')
    tamper(store, b.run_id, lambda _: bytes(blob), as_if_written=True)
    markers = tmp_path / 'markers'
    markers.mkdir()
    h = build(str(store), markers)
    try:
        with pytest.raises(SnapshotError, match='another store'):
            h.resume_sync(b.run_id)
    finally:
        h.close()
    assert markers_by_call(markers) == Counter()


SHARED_STORE_WRITER = """\
import sys
from harness import Harness
h = Harness(store=sys.argv[1])
@h.tool
def inc(*, x: int) -> int:
    return x + 1
print('ready', flush=True)
sys.stdin.readline()
for i in range(15):
    h.run_sync("a = await inc(x=1)\\nb = await inc(x=a)\\nb")
h.close()
print('done', flush=True)
"""


def test_two_processes_share_one_store_without_losing_rows(spawn: Callable[..., Any], make_harness, tmp_path: Path):
    """This process and another write runs to one store file at the same time (they start on a signal)."""
    path = tmp_path / 'shared.db'
    other = spawn([sys.executable, '-c', SHARED_STORE_WRITER, str(path)], env=worker_env())
    h = make_harness(store=str(path))

    @h.tool
    def inc(*, x: int) -> int:
        return x + 1

    assert other.line() == 'ready'
    other.send('go')
    for _ in range(15):
        h.run_sync('a = await inc(x=1)\nb = await inc(x=a)\nb')
    assert other.line() == 'done'
    other.finish()
    with RunStore(path) as db:
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
    again = h.replay_sync(first.run_id)
    assert {c.source for c in again.calls} == {'replayed'}  # the host was not asked again
    assert again.value == first.value  # so the same clock reading and the same random draw


def test_a_killed_sandbox_worker_is_a_retry_and_the_run_resumes(make_harness, sandbox_workers, tmp_path: Path):
    h = make_harness(store=str(tmp_path / 'runs.db'))
    ran: list[int] = []

    @h.tool
    def step(*, i: int) -> int:
        ran.append(i)
        if i == 2 and len(ran) == 3:  # first time only: kill the worker running this script
            killed = sandbox_workers()
            assert killed
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            wait_until_dead(killed)  # before the result goes back to the sandbox
        return i * 10

    code = 'total = 0\nfor i in range(4):\n    total += await step(i=i)\ntotal'
    with pytest.raises(SandboxCrashed) as info:
        h.run_sync(code)
    assert [c.result for c in info.value.completed] == [0, 10, 20]
    assert h.store.get_run(info.value.run_id).status == 'interrupted'
    resumed = h.resume_sync(info.value.run_id)
    assert resumed.value == 60
    assert ran == [0, 1, 2, 3]  # nothing journaled ran twice


def wait_until_dead(pids: list[int], timeout: float = 30) -> None:
    """Block until each process has exited (a pidfd becomes readable then), at most `timeout` s."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f'sandbox worker {pid} still alive {timeout}s after SIGKILL'
        finally:
            os.close(fd)


@pytest.mark.parametrize('entry', ['chat', 'api'])
def test_a_turn_killed_after_its_refund_then_asked_again_refunds_once(
    spawn: Callable[..., Any], cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
):
    """Issue 23.4: an orchestrator process SIGKILLed once its refund is journaled, then the same question in the
    same conversation (`harness chat --continue`, or the Python API with the conversation's id): the new turn is
    told of the interrupted run before it writes a script, and its identical refund is answered, not run again."""
    import effects_worker

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    env = {
        **worker_env(),
        'EFFECTS_MARKERS': str(markers),
        'EFFECTS_HANG': '1',
        'PYTHONPATH': os.pathsep.join([str(WORKER.parent), os.environ.get('PYTHONPATH', '')]),
    }
    conversation = ['conv-T1'] if entry == 'api' else []
    child = spawn(
        [sys.executable, str(WORKER.parent / 'effects_worker.py'), entry, str(store), *conversation],
        env=env,
        cwd=tmp_path,
    )
    if entry == 'chat':
        child.send(effects_worker.PROMPT)
    child.expect('journaled')  # the refund's result is journaled: the sandbox has it and called follow_up
    child.kill()
    refunds = markers / 'refunds'
    assert refunds.read_text() == 'T-1\n'
    with RunStore(store) as db:
        [dead] = db.list_runs()
    assert dead.status == 'interrupted' and dead.conversation_id is not None

    monkeypatch.setenv('EFFECTS_MARKERS', str(markers))
    effects_worker.INSTRUCTIONS.clear()
    effects_worker.RETURNED.clear()
    if entry == 'chat':
        choice = ModelChoice(effects_worker.model(), 'scripted', demo=False)
        monkeypatch.setattr(harness._cli._shared, 'choose_model', lambda *a, **k: choice)
        out = cli(
            ['chat', '--continue', '--agents', 'effects_worker:catalog', '--store', str(store)],
            cwd=tmp_path,
            input=effects_worker.PROMPT + '\n',
            env={'EFFECTS_MARKERS': str(markers)},
            columns=200,
        )
        assert out.exit_code == 0, out.describe()
        assert f'run {dead.run_id} of an earlier turn was interrupted after 2 call(s)' in out.stdout
    else:
        h = effects_worker.harness_on(str(store))
        try:
            h.orchestrator(effects_worker.model()).run_sync(effects_worker.PROMPT, conversation_id='conv-T1')
        finally:
            h.close()
    assert refunds.read_text() == 'T-1\n'  # exactly one refund
    told = effects_worker.INSTRUCTIONS[0]  # before the turn's first script
    assert f'- run {dead.run_id}: 1 side effect(s) finished: #1 refund({{"ticket":"T-1"}})' in told, told
    assert 'started but never finished, outcome unknown: #2 follow_up({"ticket":"T-1"})' in told
    [returned] = effects_worker.RETURNED
    assert returned['result'] == 'refunded T-1'
    assert (
        'refund({"ticket":"T-1"}) was not run again: it already succeeded in an earlier script of this '
        f'conversation (run {dead.run_id}, #1)'
    ) in returned['note']
    with RunStore(store) as db:
        assert db.get_run(dead.run_id).status == 'interrupted'  # still there to resume; never run over
