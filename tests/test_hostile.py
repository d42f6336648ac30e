"""Hostile input and a hostile store: no raw exception escapes, no forgery is accepted, the loop never blocks.

`hostile_scripts.CORPUS` holds 150+ scripts an attacker or a careless model would write. Each must end
in a `WorkflowError` whose message holds nothing of the host, and the Harness must run the next
script as if nothing happened. The forgeries edit a real store behind the harness's back.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import Harness, SnapshotError, WorkflowError, WorkflowTypeError
from harness._store import RunStore

sys.path.insert(0, str(Path(__file__).parent / 'helpers'))
from hostile_scripts import CORPUS


class Secretive:
    def __repr__(self) -> str:
        return 'Secretive(token=abc123)'


@pytest.fixture(scope='module')
def hostile() -> Any:
    h = Harness(store=':memory:', limits={'max_duration_secs': 0.3, 'max_memory': 64 * 1024 * 1024}, max_tool_calls=100)

    @h.tool
    async def ping(*, i: int) -> int:
        return i

    @h.tool
    async def echo(*, text: str) -> str:
        return text

    @h.tool
    async def keep(*, value: Any) -> str:
        return 'kept'

    @h.tool
    async def fail() -> str:
        raise ValueError('secret in /etc/passwd')

    @h.subagent
    async def agent(*, i: int) -> int:
        return i

    def deep() -> Any:
        value: Any = []
        for _ in range(100_000):
            value = [value]
        return value

    bad: dict[str, Any] = {
        'bad_set': lambda: {1, 2},
        'bad_nan': lambda: float('nan'),
        'bad_surrogate': lambda: '\ud800',
        'bad_bigint': lambda: 10**5000,
        'bad_deep': deep,
        'bad_bytes': lambda: b'x',
        'bad_object': Secretive,
    }
    for name, make in bad.items():

        def tool(make: Any = make) -> Any:
            return make()

        h.tool(name=name)(_returning_any(tool))

    @h.tool
    async def bad_type() -> int:
        return 'nope'  # type: ignore[return-value]

    yield h
    h.close()


def _returning_any(fn: Any) -> Any:
    async def tool() -> Any:
        return fn()

    return tool


HOST_LEAKS = ('/work/', 'site-packages', 'abc123', '/etc/passwd', 'MontyClassProxy', 'Internal error in monty')


@pytest.mark.parametrize(('name', 'code'), CORPUS, ids=[name for name, _ in CORPUS])
def test_a_hostile_script_ends_in_a_clear_error_and_the_host_stays_healthy(
    hostile: Harness, name: str, code: str
) -> None:
    try:
        hostile.run_sync(code)
    except WorkflowError as exc:
        message = exc.message
        leaks = [leak for leak in HOST_LEAKS if leak in message and leak not in code]  # the script's own text may echo
        assert message and not leaks, message
    assert hostile.run_sync('await ping(i=7)').value == 7  # and the next script runs as if nothing happened
    assert len(CORPUS) >= 150


def test_values_that_cannot_cross_are_named(hostile: Harness) -> None:
    cases = {
        'await keep(value={1, 2})': 'a set (use a list)',
        'await keep(value=b"x")': 'bytes (decode them to str',
        'await keep(value=10 ** 5000)': 'an int of about',
        'await keep(value=float("nan"))': 'the float nan (NaN and infinities are not JSON)',
        'x = []\nfor i in range(100000):\n    x = [x]\nx': 'nested deeper than 200 levels',
        'await bad_nan()': 'bad_nan returned the float nan',
        'await bad_surrogate()': 'bad_surrogate returned a string with invalid Unicode',
        'raise ValueError(42)': 'an exception takes at most one string',
    }
    for code, expected in cases.items():
        with pytest.raises(WorkflowError) as info:
            hostile.run_sync(code)
        assert expected in info.value.message, (code, info.value.message)
    with pytest.raises(WorkflowTypeError, match='not valid text: it holds a string with invalid Unicode'):
        hostile.run_sync('x = "\ud800"')


# -- a hostile store -------------------------------------------------------------------------------


def refund_desk(store: Path, charged: list[int]) -> Harness:
    h = Harness(store=str(store))

    @h.tool
    async def lookup(*, order: str) -> int:
        return 10

    @h.tool(side_effect=True)
    async def charge(*, amount: int) -> str:
        charged.append(amount)
        return f'charged {amount}'

    @h.tool
    async def hold() -> str:
        await asyncio.Event().wait()
        return 'never'

    return h


SCRIPT = 'n = await lookup(order="A")\nawait hold()\nawait charge(amount=n)'


def interrupted(h: Harness, script: str) -> str:
    async def go() -> str:
        task = asyncio.ensure_future(h.run(script))
        while not any(c.callee == 'hold' for r in h.runs() for c in h.store.calls(r.run_id)):  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return h.runs()[0].run_id

    return asyncio.run(go())


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str, str]:
    """A store with an interrupted run (waiting inside `hold`) and a completed one."""
    store = tmp_path / 'runs.db'
    with refund_desk(store, []) as h:
        waiting = interrupted(h, SCRIPT)
        done = h.run_sync('await lookup(order="B")').run_id
    return store, waiting, done


def edit(store: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(store) as db:
        db.execute(sql, args)


def refused(store: Path, run_id: str, action: str, match: str) -> None:
    charged: list[int] = []
    with refund_desk(store, charged) as h, pytest.raises(SnapshotError, match=match):
        getattr(h, f'{action}_sync')(run_id)
    assert charged == []


def test_an_edited_snapshot_ledger_is_refused(stored: tuple[Path, str, str]) -> None:
    store, run_id, _ = stored
    with sqlite3.connect(store) as db:
        sql = 'SELECT ledger_json FROM snapshots WHERE run_id = ? ORDER BY id DESC'
        (ledger,) = db.execute(sql, (run_id,)).fetchone()
    forged = json.loads(ledger)
    forged[0].update(callee='charge', arguments={'amount': 1_000_000})
    edit(store, 'UPDATE snapshots SET ledger_json = ? WHERE run_id = ?', json.dumps(forged), run_id)
    refused(store, run_id, 'resume', "does not authenticate with this store's key")


def test_a_snapshot_copied_from_another_run_is_refused(stored: tuple[Path, str, str], tmp_path: Path) -> None:
    store, run_id, _ = stored
    with refund_desk(store, []) as h:
        other = interrupted(h, SCRIPT)
    edit(store, 'DELETE FROM snapshots WHERE run_id = ?', run_id)
    edit(store, 'UPDATE snapshots SET run_id = ? WHERE run_id = ?', run_id, other)
    refused(store, run_id, 'resume', "does not authenticate with this store's key")


@pytest.mark.parametrize(
    ('forgery', 'match'),
    [
        ("UPDATE calls SET result_json = '-666' WHERE run_id = ? AND seq = 1", 'call #1 of run .* was modified'),
        ('DELETE FROM calls WHERE run_id = ? AND seq = 1', 'a call was removed'),
        ('UPDATE calls SET seq = 9 WHERE run_id = ? AND seq = 1', 'call #1 of run .* is missing'),
        (
            "UPDATE runs SET script = 'await charge(amount=1000000)' WHERE run_id = ?",
            'was modified after it was written',
        ),
    ],
)
def test_an_edited_journal_or_run_is_refused(stored: tuple[Path, str, str], forgery: str, match: str) -> None:
    store, _, done = stored
    edit(store, forgery, done)
    refused(store, done, 'replay', match)


def test_a_row_copied_from_another_run_or_put_back_is_refused(stored: tuple[Path, str, str]) -> None:
    store, waiting, done = stored
    with sqlite3.connect(store) as db:
        row = db.execute('SELECT * FROM calls WHERE run_id = ? AND seq = 1', (waiting,)).fetchone()
        db.execute('DELETE FROM calls WHERE run_id = ? AND seq = 1', (done,))
        db.execute(f'INSERT INTO calls VALUES ({", ".join("?" * len(row))})', (done, *row[1:]))
    refused(store, done, 'replay', 'call #1 of run .* was modified after it was written .or copied')


def test_a_row_put_back_to_its_earlier_version_is_refused(tmp_path: Path) -> None:
    from harness import CallRecord, RunRow

    with RunStore(tmp_path / 'runs.db') as db:
        db.create_run(RunRow('r'))
        db.put_calls('r', [CallRecord(1, 'charge', {'amount': 5}, None, status='running', started=1.0)])
        with sqlite3.connect(db.path) as raw:
            earlier = raw.execute('SELECT * FROM calls WHERE seq = 1').fetchone()
        db.put_calls('r', [CallRecord(1, 'charge', {'amount': 5}, 'ok', status='ok', started=1.0)])
        db.put_calls('r', [CallRecord(2, 'charge', {'amount': 7}, 'ok', status='ok', started=2.0)])
        assert db.verify('r') == []
        with sqlite3.connect(db.path) as raw:  # the row as it was while running: a valid seal, an old version
            raw.execute(f'INSERT OR REPLACE INTO calls VALUES ({", ".join("?" * len(earlier))})', earlier)
        assert 'put back to an earlier version' in db.verify('r')[0]


def test_a_journal_head_in_the_earlier_format_verifies_and_is_converted_on_the_next_write(tmp_path: Path) -> None:
    from harness import CallRecord, RunRow
    from harness._store._runs import _SEALED_RUN
    from harness._store._seal import HEAD_FORMAT, Sealer, chained_head, store_key

    with RunStore(tmp_path / 'runs.db') as db:
        db.create_run(RunRow('r'))
        db.put_calls('r', [CallRecord(1, 'charge', {'amount': 5}, 'ok', status='ok', started=1.0)])
        with sqlite3.connect(db.path) as raw:  # as the version before wrote it: a chained head, the run sealed over it
            seals = [seal for (seal,) in raw.execute('SELECT seal FROM calls ORDER BY seq')]
            raw.execute('UPDATE runs SET journal_head = ?', (chained_head(seals),))
            fields = raw.execute(f'SELECT {_SEALED_RUN} FROM runs').fetchone()
            raw.execute('UPDATE runs SET seal = ?', (Sealer(store_key()).mac(*fields),))
        assert db.verify('r') == []
        db.put_calls('r', [CallRecord(2, 'charge', {'amount': 7}, 'ok', status='ok', started=2.0)])
        assert db.verify('r') == []
        with sqlite3.connect(db.path) as raw:
            assert raw.execute('SELECT journal_head FROM runs').fetchone()[0].startswith(HEAD_FORMAT)


def test_the_key_is_not_in_the_store_and_another_key_cannot_resume(
    stored: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, waiting, done = stored
    with sqlite3.connect(store) as db:
        meta = dict(db.execute('SELECT key, value FROM meta').fetchall())
    assert 'secret_key' not in meta and len(meta['key_id']) == 16  # nothing here to re-seal a forgery with
    monkeypatch.setenv('HARNESS_SECRET', 'someone else')
    with RunStore(store) as db:
        assert db.get_run(done) is not None  # readable
        assert db.verify(done) == [f'the store is sealed with another key, so run {done} cannot be verified here']
    charged: list[int] = []
    with refund_desk(store, charged) as h:
        with pytest.raises(SnapshotError, match='sealed with another key'):
            h.replay_sync(done)
        with pytest.raises(SnapshotError, match='sealed with another key'):
            h.resume_sync(waiting)
    assert charged == []


def test_a_key_file_is_created_once_and_kept_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness._store._seal import store_key

    monkeypatch.delenv('HARNESS_SECRET')
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path))
    key = store_key()
    path = tmp_path / 'harness' / 'secret'
    assert path.stat().st_mode & 0o777 == 0o600 and store_key() == key
    with RunStore(tmp_path / 'runs.db') as db:
        from harness import RunRow

        db.create_run(RunRow('r'))
        assert db.verify('r') == []


# -- the loop never blocks -------------------------------------------------------------------------


async def test_a_store_locked_by_another_process_holds_up_only_its_own_runs(tmp_path: Path) -> None:
    locked = Harness(store=str(tmp_path / 'locked.db'), tracing=False)
    free = Harness(store=None, tracing=False)
    steps: list[int] = []

    @locked.tool
    async def write(*, i: int) -> int:
        return i

    @free.tool
    async def step(*, i: int) -> int:
        steps.append(i)
        return i

    assert (await locked.run('await write(i=0)')).value == 0  # the store exists, the pool is warm
    holder = sqlite3.connect(tmp_path / 'locked.db', isolation_level=None, check_same_thread=False)
    holder.execute('BEGIN IMMEDIATE')  # another process holds the write lock
    blocked = asyncio.ensure_future(locked.run('await write(i=1)'))
    free_result = await free.run('[await step(i=i) for i in range(20)]')  # runs while the other waits for the lock
    assert free_result.value == list(range(20)) and not blocked.done()
    holder.execute('COMMIT')
    assert (await blocked).value == 1
    holder.close()
    await locked.aclose()
    await free.aclose()


def test_the_model_reads_long_errors_and_values_cut_short(make_harness: Any) -> None:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    h = make_harness(limits={'max_error_chars': 500, 'max_value_chars': 1_000})
    seen: list[str] = []
    scripts = iter(['raise RuntimeError("x" * 100000)', '"y" * 100000'])

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                seen.append(str(part.content))
        script = next(scripts, None)
        if script is None:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script})])

    h.orchestrator(FunctionModel(model)).run_sync('go')
    error, value = seen
    assert len(error) < 2_000 and 'more characters cut (the whole message is stored with run' in error
    assert len(value) < 2_000 and 'The value is longer than 1000 characters' in value
    run = h.runs()[0]
    assert run.value == 'y' * 100000  # kept whole
