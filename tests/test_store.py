"""The run store: round trips, ordering, prefix lookup, migrations, sealed snapshots, concurrency."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness import CallRecord
from harness._dispatch._effects import stored_effects
from harness._errors import SnapshotError
from harness._records import Checkpoint, RunRow
from harness._store import RunStore, StoreError, Turn, WouldWait
from harness._store import _connection as store_module
from harness._store._connection import DEFAULT_BUSY_TIMEOUT, MIGRATIONS
from harness._store._snapshots import HEADER_LEN, STORE_FORMAT, SUPPORTED_MONTY_FORMAT, _binding

ROOT = Path(__file__).resolve().parents[1]


def fake_dump(payload: bytes = b'\xa4kpaused interpreter state' * 4, version: int = 14) -> bytes:
    return b'MONTY\x00' + version.to_bytes(2, 'little') + payload


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / 'nested' / 'dir' / 'runs.db'


@pytest.fixture
def store(db: Path):
    with RunStore(db) as s:
        yield s


def put_snapshot(store: RunStore, run_id: str, after_seq: int, dump: bytes, ledger: list | None = None) -> int:
    snapshot_id = store.put_calls(run_id, [], snapshot=Checkpoint(after_seq, dump, ledger or []))
    assert snapshot_id is not None
    return snapshot_id


def _version(store: RunStore) -> int:
    row = store._read(lambda conn: conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone())
    return int(row[0])


def raw(db: Path) -> sqlite3.Connection:
    """A plain connection to the store file, for inspecting and damaging it behind the store's back."""
    return sqlite3.connect(db, isolation_level=None, check_same_thread=False)


# -- runs ---------------------------------------------------------------------------------------


def test_run_round_trip_and_persistence(db: Path) -> None:
    run = RunRow(
        run_id='r-1', script='x = await f()\nx', status='completed', created=100.0,
        prompt='Review the repo', value={'ok': True, 'items': (1, 2.5, None, 'é')}, error=None, duration=1.5,
        parent_run_id='r-0', fork_at=3, orchestrator_run_id='o-1', inputs={'files': ['a.py']},
        trace_context='00-' + 'a' * 32 + '-' + 'b' * 16 + '-01',
    )  # fmt: skip
    with RunStore(db) as s:
        s.create_run(run)
    assert db.exists()
    with RunStore(db) as s:
        got = s.get_run('r-1')
    assert got is not None
    assert got.value == {'ok': True, 'items': [1, 2.5, None, 'é']}  # tuples come back as lists
    assert (got.script, got.status, got.created, got.updated) == (run.script, 'completed', 100.0, 100.0)
    assert (got.prompt, got.duration, got.parent_run_id, got.fork_at, got.orchestrator_run_id) == (
        'Review the repo', 1.5, 'r-0', 3, 'o-1',
    )  # fmt: skip
    assert got.trace_context == run.trace_context
    assert got.inputs == {'files': ['a.py']}
    assert got.calls_count == 0


def test_plain_values_round_trip(store: RunStore) -> None:
    values = [None, True, False, 0, -7, 2**70, 1.25, float('inf'), '', 'ünï', [], {}, [1, [2, {'a': None}]]]
    for i, value in enumerate(values):
        store.create_run(RunRow(f'v{i}', value=value))
        assert store.get_run(f'v{i}').value == value  # type: ignore[union-attr]


def test_update_run(store: RunStore) -> None:
    store.create_run(RunRow('r', created=10.0))
    store.update_run('r', status='failed', error='boom', value=[1, (2, 3)], duration=0.5)
    got = store.get_run('r')
    assert got is not None
    assert (got.status, got.error, got.value, got.duration) == ('failed', 'boom', [1, [2, 3]], 0.5)
    assert got.updated > 10.0
    store.update_run('r', value=None)
    assert store.get_run('r').value is None  # type: ignore[union-attr]
    with pytest.raises(TypeError, match='calls_count'):
        store.update_run('r', calls_count=3)
    with pytest.raises(TypeError, match='nonsense'):
        store.update_run('r', nonsense=1)
    with pytest.raises(StoreError, match="no run 'missing'"):
        store.update_run('missing', status='failed')


def test_create_run_twice_and_non_plain_values(store: RunStore) -> None:
    store.create_run(RunRow('r'))
    with pytest.raises(StoreError, match='already exists'):
        store.create_run(RunRow('r'))
    with pytest.raises(TypeError, match='set is not plain data'):
        store.create_run(RunRow('s', value={1, 2}))
    with pytest.raises(TypeError, match='dict key is int'):
        store.create_run(RunRow('s', value={1: 'x'}))
    assert store.get_run('s') is None


def test_list_runs_newest_first(store: RunStore) -> None:
    for i, created in enumerate([5.0, 1.0, 9.0, 3.0]):
        store.create_run(RunRow(f'run-{i}', created=created))
    store.create_run(RunRow('tie-a', created=7.0))
    store.create_run(RunRow('tie-b', created=7.0))
    assert [r.run_id for r in store.list_runs()] == ['run-2', 'tie-b', 'tie-a', 'run-0', 'run-3', 'run-1']
    assert [r.run_id for r in store.list_runs(limit=2)] == ['run-2', 'tie-b']


def test_prefix_lookup(store: RunStore) -> None:
    for run_id in ['3f9a01', '3f9b77', 'c0ffee', 'c0ffee12']:
        store.create_run(RunRow(run_id))
    assert store.get_run('3f9a').run_id == '3f9a01'  # type: ignore[union-attr]
    assert store.get_run('c0ffee1').run_id == 'c0ffee12'  # type: ignore[union-attr]
    assert store.get_run('c0ffee').run_id == 'c0ffee'  # an exact id wins over a longer id it prefixes
    assert store.get_run('3F9A') is None  # case-sensitive, like the ids
    assert store.get_run('zz') is None
    assert store.get_run('') is None
    with pytest.raises(StoreError, match='ambiguous') as info:
        store.get_run('3f9')
    assert '3f9a01' in str(info.value) and '3f9b77' in str(info.value)


def test_prefix_lookup_odd_characters(store: RunStore) -> None:
    for run_id in ['a%_1', 'a%_2', 'ab', 'x\U0010ffffy']:
        store.create_run(RunRow(run_id))
    assert store.get_run('a%_1').run_id == 'a%_1'  # type: ignore[union-attr]
    with pytest.raises(StoreError, match='ambiguous'):
        store.get_run('a%')
    assert store.get_run('x\U0010ffff').run_id == 'x\U0010ffffy'  # type: ignore[union-attr]


def test_a_runs_conversation_is_sealed_and_a_run_without_one_keeps_its_seal(db: Path, store: RunStore) -> None:
    """Which conversation a run belongs to decides which side effects answer a later turn (issue 23.4): it is
    sealed, so a run moved to another conversation in the store answers nothing there; a run without one (and without
    a generation) is sealed over exactly the fields it was before conversations were stored, so older stores still
    verify."""
    effect = CallRecord(
        seq=1, callee='refund', arguments={'ticket': 'T-1'}, line=1, status='ok', result='done', side_effect=True
    )
    store.create_run(RunRow(run_id='r-c', orchestrator_run_id='o-1', conversation_id='c-1'))
    store.put_calls('r-c', [effect])
    store.create_run(RunRow(run_id='r-n', orchestrator_run_id='o-1'))
    assert store.verify('r-c') == [] == store.verify('r-n') and store.get_run('r-c').conversation_id == 'c-1'
    before = (
        'run_id, script, status, created, prompt, value_json, error, parent_run_id, fork_at, '
        'orchestrator_run_id, inputs_json, access_json, catalog_json, calls_count, journal_head'
    )
    # As a harness before conversations and generations (`_freshness`) sealed it: it verifies.
    raw(db).execute("UPDATE runs SET generation = NULL WHERE run_id = 'r-n'")
    fields = raw(db).execute(f'SELECT {before} FROM runs WHERE run_id = ?', ('r-n',)).fetchone()
    raw(db).execute("UPDATE runs SET seal = ? WHERE run_id = 'r-n'", (store._sealer.mac(*fields),))
    store.accept_restore('r-n')  # this machine saw it at generation 1, so it reads as put back: accepted
    assert store.verify('r-n') == []
    assert [e.run_id for e in stored_effects(store, None, 'c-1')] == ['r-c']

    raw(db).execute("UPDATE runs SET conversation_id = 'c-2' WHERE run_id = 'r-c'")
    assert 'was modified after it was written' in store.verify('r-c')[0]
    assert stored_effects(store, None, 'c-2') == []


def test_a_running_run_nobody_holds_reads_as_interrupted(store: RunStore) -> None:
    """`running` is shown only while a live process holds the run's lease: one whose holder on this host is
    gone, whose lease expired, or that nobody holds, reads as `interrupted` everywhere (and nothing is written)."""
    from harness._records import Owner, this_process

    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
    owners = {
        'live': this_process(),
        'gone': Owner(this_process().host, int(dead.stdout), 'gone'),  # killed: its lease had not expired yet
        'expired': Owner('elsewhere', 1, 'x'),  # another host: only the expiry tells
        'released': None,
    }
    for name, owner in owners.items():
        store.create_run(RunRow(name))
        if owner is not None:
            store.claim(name, owner, ttl=-1.0 if name == 'expired' else 30.0)
    store.create_run(RunRow('done', status='completed'))
    shown = {name: store.get_run(name).status for name in [*owners, 'done']}  # type: ignore[union-attr]
    assert shown == {
        'live': 'running',
        'gone': 'interrupted',
        'expired': 'interrupted',
        'released': 'interrupted',
        'done': 'completed',
    }
    assert {r.run_id: r.status for r in store.list_runs()} == shown
    assert [r.run_id for r in store.list_runs(status=['running'])] == ['live']
    assert {r.run_id for r in store.list_runs(status=['interrupted'])} == {'gone', 'expired', 'released'}
    assert len(store.list_runs(2, status=['interrupted', 'completed'])) == 2  # the limit counts what is shown
    assert store.status_counts() == {'running': 1, 'interrupted': 3, 'completed': 1}
    with raw(Path(store.path)) as conn:  # computed when read, never written
        assert {status for (status,) in conn.execute('SELECT status FROM runs')} == {'running', 'completed'}


# -- calls --------------------------------------------------------------------------------------


def test_calls_round_trip(store: RunStore) -> None:
    store.create_run(RunRow('r'))
    first = CallRecord(
        seq=1, callee='reviewer', arguments={'task': 'look'}, line=3, status='ok',
        result={'score': 0.5, 'notes': ('a', 'b')}, started=1.0, duration=0.25, attempt=2, source='resumed',
        side_effect=True,
    )  # fmt: skip
    second = CallRecord(
        seq=2,
        callee='lint',
        arguments={'path': 'b.py', 'opts': ('x', 1)},
        line=4,
        status='error',
        result='ignored: not ok',
        error='ValueError: nope',
        started=2.0,
        duration=0.1,
    )
    store.put_calls('r', [second, first])
    calls = store.calls('r')
    assert [c.seq for c in calls] == [1, 2]
    assert calls[0] == CallRecord(
        seq=1, callee='reviewer', arguments={'task': 'look'}, line=3, status='ok',
        result={'score': 0.5, 'notes': ['a', 'b']}, error=None, started=1.0, duration=0.25, attempt=2,
        source='resumed', side_effect=True,
    )  # fmt: skip
    assert calls[1].arguments == {'path': 'b.py', 'opts': ['x', 1]}
    assert (calls[1].status, calls[1].error, calls[1].result, calls[1].side_effect) == (
        'error', 'ValueError: nope', None, False,
    )  # fmt: skip
    assert store.get_run('r').calls_count == 2  # type: ignore[union-attr]
    assert store.calls('other') == []


def test_a_retry_replaces_its_row(store: RunStore) -> None:
    store.create_run(RunRow('r'))
    store.put_calls('r', [CallRecord(1, 'f', {}, None, status='error', error='flaky', started=1.0)])
    store.put_calls('r', [CallRecord(1, 'f', {}, None, attempt=2, started=2.0)])
    (call,) = store.calls('r')
    assert (call.status, call.error, call.attempt, call.started) == ('running', None, 2, 2.0)
    assert store.get_run('r').calls_count == 1  # type: ignore[union-attr]


def test_call_journal_refuses_bad_input(store: RunStore) -> None:
    store.create_run(RunRow('r'))
    with pytest.raises(StoreError, match='create_run'):
        store.put_calls('missing', [CallRecord(1, 'f', {}, None)])
    with pytest.raises(ValueError, match='unknown call status'):
        store.put_calls('r', [CallRecord(1, 'f', {}, None, status='done')])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='unknown call source'):
        store.put_calls('r', [CallRecord(1, 'f', {}, None, source='magic')])  # type: ignore[arg-type]
    store.put_calls('r', [CallRecord(1, 'f', {}, None)])
    with pytest.raises(TypeError, match='result of call 1: object is not plain data'):
        store.put_calls('r', [CallRecord(1, 'f', {}, None, status='ok', result=object())])  # type: ignore[arg-type]
    assert store.calls('r')[0].status == 'running'


def test_put_calls_in_one_transaction(store: RunStore) -> None:
    store.create_run(RunRow('fork'))
    store.put_calls(
        'fork',
        (CallRecord(seq, 'f', {'i': seq}, None, status='ok', result=seq * 10, source='forked') for seq in (1, 2, 3)),
    )
    assert [(c.seq, c.result, c.source) for c in store.calls('fork')] == [
        (1, 10, 'forked'), (2, 20, 'forked'), (3, 30, 'forked'),
    ]  # fmt: skip
    assert store.get_run('fork').calls_count == 3  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        store.put_calls('fork', [CallRecord(4, 'f', {}, None), CallRecord(5, 'f', {'x': object()}, None)])
    with pytest.raises(ValueError, match='not a Monty dump'):  # a bad snapshot rolls its calls back too
        store.put_calls('fork', [CallRecord(4, 'f', {}, None)], snapshot=Checkpoint(4, b'junk', []))
    assert len(store.calls('fork')) == 3  # the whole batch rolled back


# -- snapshots and spans ------------------------------------------------------------------------


def test_snapshot_round_trip(db: Path) -> None:
    ledger = [{'call_id': 7, 'seq': 3, 'callee': 'lint', 'arguments': {'path': 'a.py'}, 'line': 2}]
    with RunStore(db) as s:
        s.create_run(RunRow('r'))
        assert s.latest_snapshot('r') is None
        first = put_snapshot(s, 'r', 0, fake_dump(b'zero'), [])
        second = put_snapshot(s, 'r', 2, fake_dump(b'two'), ledger)
        third = put_snapshot(s, 'r', 4, fake_dump(b'four'), [])
        assert first < second < third
    with RunStore(db) as s:  # the key persists: a reopened store verifies its own blobs
        latest = s.latest_snapshot('r')
        assert latest is not None
        assert (latest.id, latest.after_seq, latest.dump) == (third, 4, fake_dump(b'four'))
        assert (latest.monty_format, latest.store_format) == (14, STORE_FORMAT)
        at3 = s.snapshot_after('r', 3)
        assert at3 is not None and (at3.id, at3.dump, at3.ledger) == (second, fake_dump(b'two'), ledger)
        assert s.snapshot_after('r', 2).id == second  # type: ignore[union-attr]
        assert s.snapshot_after('r', 0).id == first  # type: ignore[union-attr]
        assert s.snapshot_after('r', -1) is None
        assert s.latest_snapshot('other') is None


def test_snapshot_refuses_what_is_not_a_monty_dump(store: RunStore) -> None:
    store.create_run(RunRow('r'))
    with pytest.raises(ValueError, match='not a Monty dump'):
        put_snapshot(store, 'r', 0, b'pickle bytes', [])
    with pytest.raises(ValueError, match='newer than the 14'):
        put_snapshot(store, 'r', 0, fake_dump(version=15), [])
    with pytest.raises(StoreError, match='create_run'):
        put_snapshot(store, 'missing', 0, fake_dump(), [])
    with pytest.raises(TypeError, match='ledger'):
        put_snapshot(store, 'r', 0, fake_dump(), {'call_id': 1})  # type: ignore[arg-type]


def test_real_monty_dump_round_trip(store: RunStore) -> None:
    monty = pytest.importorskip('pydantic_monty')

    async def paused_dump() -> bytes:
        async with monty.AsyncMonty() as pool, pool.checkout() as session:
            snap = await session.feed_start('x = f()')
            assert type(snap).__name__ == 'AsyncFunctionSnapshot'
            return snap.dump()

    dump = asyncio.run(paused_dump())
    time.sleep(0.05)  # pydantic-monty 1.4.0 can abort if its closed pool is not given a moment
    assert dump.startswith(b'MONTY\x00') and int.from_bytes(dump[6:8], 'little') == SUPPORTED_MONTY_FORMAT
    store.create_run(RunRow('r'))
    put_snapshot(store, 'r', 0, dump, [{'call_id': 0, 'seq': 1, 'callee': 'f', 'arguments': {}, 'line': 1}])
    assert store.latest_snapshot('r').dump == dump  # type: ignore[union-attr]


def test_spans_round_trip(store: RunStore) -> None:
    assert store.spans('r') == []
    store.add_spans('r', [{'name': 'run', 'id': 1, 'attributes': {'tags': ('a', 'b')}}])
    store.add_spans('r', [{'name': 'call f', 'id': 2, 'parent': 1}, {'name': 'call g', 'id': 3, 'parent': 1}])
    store.add_spans('other', [{'name': 'x'}])
    assert [s['name'] for s in store.spans('r')] == ['run', 'call f', 'call g']
    assert store.spans('r')[0]['attributes'] == {'tags': ['a', 'b']}


def test_a_turns_orchestrator_spans_are_read_with_any_of_its_runs_and_deleted_with_the_last(store: RunStore) -> None:
    """A turn that went on after approvals is several agent runs (`a1`, then `a2`); its scripts carry the id of
    the one that wrote them. Each run's trace reads the orchestrator spans of all of them, and the turn's last run
    deleted takes them along; spans of an agent run no stored run belongs to are not kept at all."""
    store.add_turn(Turn('c', 1, 'a1', 'go', None, 'completed', agent_run_ids=['a1', 'a2']))
    store.create_run(RunRow('first', orchestrator_run_id='a1'))
    store.create_run(RunRow('second', orchestrator_run_id='a2'))
    store.add_orchestrator_spans('a1', [{'name': 'invoke_agent 1'}])
    store.add_orchestrator_spans('a2', [{'name': 'invoke_agent 2'}])
    store.add_orchestrator_spans('elsewhere', [{'name': 'a turn with no script'}])
    for agent_run in ('a1', 'a2'):
        assert [s['name'] for s in store.orchestrator_spans(agent_run)] == ['invoke_agent 1', 'invoke_agent 2']
        assert [t.turn for t in store.turns(agent_run_id=agent_run)] == [1]
    assert store.orchestrator_spans('elsewhere') == []
    store.delete_run('first')
    assert len(store.orchestrator_spans('a1')) == 2  # `second` still shows them
    store.delete_run('second')
    assert raw(store.path).execute('SELECT count(*) FROM spans').fetchone() == (0,)


def test_the_runs_of_a_turn_are_the_scripts_of_each_of_its_agent_runs(store: RunStore) -> None:
    """`harness show`, `/runs` in chat, the studio's run and conversation pages all list a turn's scripts through
    one function: a script written after an approval (under the turn's second agent run) is one of them."""
    from harness._ui._runs import runs_of_turn, siblings_of, turn_agent_runs, turn_of

    store.add_turn(Turn('c', 1, 'a1', 'go', None, 'completed', agent_run_ids=['a1', 'a2']))
    store.create_run(RunRow('first', orchestrator_run_id='a1', created=1.0))
    store.create_run(RunRow('second', orchestrator_run_id='a2', created=2.0))
    store.create_run(RunRow('alone', created=3.0))
    second = store.get_run('second')
    assert second is not None
    turn = turn_of(store, second)
    assert turn is not None and turn_agent_runs(turn) == ['a1', 'a2']
    assert [r.run_id for r in siblings_of(store, second, turn)] == ['first', 'second']
    assert [r.run_id for r in runs_of_turn(store, ['a2', None, 'a1', 'a2'])] == ['first', 'second']
    alone = store.get_run('alone')
    assert alone is not None and turn_of(store, alone) is None and siblings_of(store, alone, None) == []


def test_a_turn_stored_before_its_agent_runs_were_is_its_first_ones(db: Path, store: RunStore) -> None:
    """A turn stored by an older harness has only `agent_run_id`: that is its one agent run."""
    store.add_turn(Turn('c', 1, 'a1', 'go', 'done', 'completed'))
    raw(db).execute('UPDATE turns SET agent_run_ids_json = NULL')
    [turn] = store.turns(agent_run_id='a1')
    assert turn.agent_run_ids == ['a1']
    store.create_run(RunRow('r', orchestrator_run_id='a1'))
    store.add_orchestrator_spans('a1', [{'name': 'invoke_agent'}])
    assert [s['name'] for s in store.orchestrator_spans('a1')] == ['invoke_agent']


# -- schema and migrations ----------------------------------------------------------------------


def test_fresh_file_is_migrated_and_configured(db: Path, store: RunStore) -> None:
    assert _version(store) == len(MIGRATIONS)
    con = raw(db)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {'meta', 'runs', 'calls', 'snapshots', 'spans'} <= tables
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(len(MIGRATIONS)),)
    assert con.execute("SELECT value FROM meta WHERE key = 'secret_key'").fetchone() is None  # the key lives elsewhere
    assert len(con.execute("SELECT value FROM meta WHERE key = 'key_id'").fetchone()[0]) == 16
    assert con.execute('PRAGMA journal_mode').fetchone() == ('wal',)
    assert store._conn.execute('PRAGMA synchronous').fetchone() == (2,)  # FULL
    assert store._conn.execute('PRAGMA busy_timeout').fetchone() == (10_000,)


def test_forward_migration_keeps_data(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with RunStore(db) as s:
        s.create_run(RunRow('old', script='1'))
        key = s._key
    newer = [*MIGRATIONS, ('ALTER TABLE runs ADD COLUMN labels TEXT',)]
    monkeypatch.setattr(store_module, 'MIGRATIONS', newer)
    with RunStore(db) as s:
        assert _version(s) == len(newer)
        assert s._key == key
        assert s.get_run('old').script == '1'  # type: ignore[union-attr]
    columns = {r[1] for r in raw(db).execute('PRAGMA table_info(runs)')}
    assert 'labels' in columns


def test_failed_migration_rolls_back(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    RunStore(db).close()
    broken = [*MIGRATIONS, ('ALTER TABLE runs ADD COLUMN labels TEXT', 'THIS IS NOT SQL')]
    monkeypatch.setattr(store_module, 'MIGRATIONS', broken)
    with pytest.raises(StoreError):
        RunStore(db)
    assert 'labels' not in {r[1] for r in raw(db).execute('PRAGMA table_info(runs)')}
    assert raw(db).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(len(MIGRATIONS)),)


def test_newer_schema_is_refused(db: Path) -> None:
    RunStore(db).close()
    raw(db).execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    newer = rf'schema version 99, newer than this harness knows \({len(MIGRATIONS)}\).*Upgrade harness'
    with pytest.raises(StoreError, match=newer):
        RunStore(db)
    assert raw(db).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ('99',)


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / 'notes.txt'
    path.write_bytes(b'this is not sqlite at all' * 100)
    with pytest.raises(StoreError, match='not a usable harness run store'):
        RunStore(path)


def test_memory_store_and_close() -> None:
    s = RunStore(':memory:')
    s.create_run(RunRow('m'))
    assert s.get_run('m') is not None
    s.close()
    s.close()
    with pytest.raises(StoreError, match='closed'):
        s.get_run('m')


# -- tampering ----------------------------------------------------------------------------------


def _stored_blob(db: Path, snap_id: int) -> bytes:
    return raw(db).execute('SELECT blob FROM snapshots WHERE id = ?', (snap_id,)).fetchone()[0]


def _overwrite(db: Path, snap_id: int, blob: bytes, *, with_checksum: bool) -> None:
    con = raw(db)
    con.execute('UPDATE snapshots SET blob = ? WHERE id = ?', (blob, snap_id))
    if with_checksum:  # a consistent row, as a (newer) harness would have written it
        con.execute(
            'UPDATE snapshots SET size = ?, digest = ? WHERE id = ?',
            (len(blob), hashlib.sha256(blob).hexdigest(), snap_id),
        )


def _error(store: RunStore) -> str:
    with pytest.raises(SnapshotError) as info:
        store.latest_snapshot('r')
    return str(info.value)


@pytest.fixture
def sealed(db: Path, store: RunStore) -> int:
    store.create_run(RunRow('r'))
    return put_snapshot(store, 'r', 1, fake_dump(), [])


def test_tamper_truncated(db: Path, store: RunStore, sealed: int) -> None:
    blob = _stored_blob(db, sealed)
    messages = set()
    for cut in (len(blob) - 1, HEADER_LEN + 3, 10, 0):
        _overwrite(db, sealed, blob[:cut], with_checksum=False)
        message = _error(store)
        assert f'snapshot {sealed} of run r is truncated ({cut} of {len(blob)} bytes)' in message
        messages.add(message.split(' (')[0])
    assert len(messages) == 1
    with pytest.raises(SnapshotError, match='truncated'):
        store._unseal(blob[:HEADER_LEN], what='snapshot', size=None, digest=None)


def test_tamper_flipped_byte_anywhere(db: Path, store: RunStore, sealed: int) -> None:
    blob = _stored_blob(db, sealed)
    for i in range(len(blob)):
        flipped = bytearray(blob)
        flipped[i] ^= 0x01
        _overwrite(db, sealed, bytes(flipped), with_checksum=False)
        assert 'was modified after it was written' in _error(store), i
        # Without the row's checksum (a bare blob), it is still refused, at every position.
        with pytest.raises(SnapshotError):
            store._unseal(bytes(flipped), what='snapshot', size=None, digest=None)
    _overwrite(db, sealed, blob, with_checksum=False)
    assert store.latest_snapshot('r').dump == fake_dump()  # type: ignore[union-attr]


def test_tamper_flipped_payload_with_recomputed_checksum(db: Path, store: RunStore, sealed: int) -> None:
    flipped = bytearray(_stored_blob(db, sealed))
    flipped[-1] ^= 0x80
    _overwrite(db, sealed, bytes(flipped), with_checksum=True)  # an attacker can fix a checksum, not the MAC
    assert "does not authenticate with this store's key" in _error(store)


def test_tamper_sealed_by_another_store(tmp_path: Path, db: Path, store: RunStore, sealed: int) -> None:
    with RunStore(tmp_path / 'other.db', key=b'another key' * 3) as other:
        other.create_run(RunRow('r'))
        foreign = _stored_blob(tmp_path / 'other.db', put_snapshot(other, 'r', 1, fake_dump(), []))
        assert other._unseal(foreign, what='snapshot', size=None, digest=None, binding=BINDING) == fake_dump()
    _overwrite(db, sealed, foreign, with_checksum=True)  # the whole row copied across
    message = _error(store)
    assert "does not authenticate with this store's key: it was sealed by another store" in message
    with pytest.raises(SnapshotError, match="does not authenticate with this store's key"):
        store._unseal(foreign, what='snapshot', size=None, digest=None, binding=BINDING)


BINDING = _binding('r', 1, '[]')
"""What the `sealed` fixture's snapshot is bound to: run `r`, after call 1, an empty ledger."""


def _forge(store: RunStore, dump: bytes, *, store_format: int, monty_format: int) -> bytes:
    """A blob sealed with this store's key in the layout a future harness might write."""
    prefix = b'HSNP' + store_format.to_bytes(2, 'little') + monty_format.to_bytes(2, 'little')
    return prefix + hmac.new(store._key, prefix + BINDING + dump, hashlib.sha256).digest() + dump


def test_tamper_newer_store_format(db: Path, store: RunStore, sealed: int) -> None:
    _overwrite(db, sealed, _forge(store, fake_dump(), store_format=2, monty_format=14), with_checksum=True)
    message = _error(store)
    assert 'written in snapshot format 2 by a newer harness; this one reads up to format 1' in message
    assert 'Upgrade harness' in message


def test_newer_monty_format(db: Path, store: RunStore, sealed: int) -> None:
    dump = fake_dump(version=15)
    _overwrite(db, sealed, _forge(store, dump, store_format=1, monty_format=15), with_checksum=True)
    message = _error(store)
    assert 'Monty dump in format 15, but the installed pydantic-monty reads up to format 14' in message
    assert 'Upgrade pydantic-monty' in message


def test_bad_magic(store: RunStore) -> None:
    blob = store._seal(fake_dump())
    with pytest.raises(SnapshotError, match='not a sealed harness snapshot'):
        store._unseal(b'XSNP' + blob[4:], what='snapshot', size=None, digest=None)


def test_tamper_messages_are_distinct(tmp_path: Path, db: Path, store: RunStore, sealed: int) -> None:
    blob = _stored_blob(db, sealed)
    flipped = bytearray(blob)
    flipped[HEADER_LEN + 5] ^= 0xFF
    with RunStore(tmp_path / 'other.db') as other:
        foreign = other._seal(fake_dump())
    cases = {
        'truncated': (blob[:-5], False),
        'flipped': (bytes(flipped), False),
        'other store': (foreign, True),
        'newer format': (_forge(store, fake_dump(), store_format=3, monty_format=14), True),
    }
    messages = {}
    for name, (bad, with_checksum) in cases.items():
        _overwrite(db, sealed, bad, with_checksum=with_checksum)
        messages[name] = _error(store)
    assert len(set(messages.values())) == len(cases), messages


# -- concurrency --------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time, types
    from pathlib import Path

    # Import only the store (and the two small modules it uses), not the whole engine.
    db, tag, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    package = types.ModuleType('harness')
    package.__path__ = [str(root / 'harness')]
    sys.modules['harness'] = package
    from harness._records import CallRecord, Checkpoint, RunRow
    from harness._store import RunStore

    dump = b'MONTY\\x00' + (14).to_bytes(2, 'little') + b'state'
    with RunStore(db, busy_timeout=0.05) as store:   # a short busy timeout exercises the retry path
        print('ready', flush=True)
        sys.stdin.readline()  # both have opened (and raced to migrate) the file: now write together
        for i in range(200):
            run_id = f'{tag}-{i:03d}'
            store.create_run(RunRow(run_id, script='x'))
            for seq in range(1, 6):
                store.put_calls(run_id, [CallRecord(seq, 'f', {'i': i, 'seq': seq}, None)])
                store.put_calls(run_id, [CallRecord(seq, 'f', {'i': i, 'seq': seq}, None, status='ok',
                                                    result=[tag, i, seq], duration=0.0)])
            if i % 50 == 0:
                store.put_calls(run_id, [], snapshot=Checkpoint(5, dump, []))
            store.update_run(run_id, status='completed', value=i)
    """
)


def test_two_processes_write_at_once(tmp_path: Path) -> None:
    db = tmp_path / 'shared.db'
    procs = [
        subprocess.Popen(
            [sys.executable, '-c', WRITER, str(db), tag, str(ROOT)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for tag in ('a', 'b')
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == b'ready\n', proc.stderr
    for proc in procs:  # both at once, then wait
        assert proc.stdin is not None
        proc.stdin.write(b'go\n')
        proc.stdin.flush()
    for proc in procs:
        _, err = proc.communicate(timeout=110)
        assert proc.returncode == 0, err.decode()
    with RunStore(db) as s:
        runs = s.list_runs(limit=1000)
        assert len(runs) == 400
        assert all(r.status == 'completed' and r.calls_count == 5 for r in runs)
        assert {r.value for r in runs} == set(range(200))
        for tag in ('a', 'b'):
            calls = s.calls(f'{tag}-123')
            assert [(c.seq, c.status, c.result) for c in calls] == [(seq, 'ok', [tag, 123, seq]) for seq in range(1, 6)]
            assert s.latest_snapshot(f'{tag}-050') is not None
    spans = {tag: [r.created for r in runs if r.run_id.startswith(tag)] for tag in ('a', 'b')}
    assert max(min(spans['a']), min(spans['b'])) < min(max(spans['a']), max(spans['b'])), 'no overlap'
    con = raw(db)
    assert con.execute('SELECT COUNT(*) FROM calls').fetchone() == (2000,)
    assert con.execute("SELECT COUNT(*) FROM calls WHERE status = 'ok'").fetchone() == (2000,)
    assert con.execute('SELECT COUNT(*) FROM snapshots').fetchone() == (8,)


def test_write_outlasts_a_lock_longer_than_busy_timeout(db: Path) -> None:
    with RunStore(db, busy_timeout=0.05, lock_patience=10) as s:
        holder = raw(db)
        holder.execute('BEGIN IMMEDIATE')
        released = threading.Event()

        def release() -> None:
            released.set()
            holder.execute('COMMIT')

        threading.Timer(0.5, release).start()
        s.create_run(RunRow('r'))  # SQLite gives up after 50 ms; the store keeps retrying
        assert released.is_set()  # it wrote only once the other connection let go of the lock
        assert s.get_run('r') is not None


def test_write_gives_up_after_lock_patience(db: Path) -> None:
    with RunStore(db, busy_timeout=0.05, lock_patience=0.3) as s:
        holder = raw(db)
        holder.execute('BEGIN IMMEDIATE')
        try:
            with pytest.raises(StoreError, match='stayed locked by another process'):
                s.create_run(RunRow('r'))
        finally:
            holder.execute('ROLLBACK')
        s.create_run(RunRow('r'))


def test_threads_share_one_store(store: RunStore) -> None:
    errors: list[BaseException] = []

    def work(tag: int) -> None:
        try:
            for i in range(30):
                run_id = f't{tag}-{i}'
                store.create_run(RunRow(run_id))
                store.put_calls(run_id, [CallRecord(1, 'f', {}, None)])
                store.put_calls(run_id, [CallRecord(1, 'f', {}, None, status='ok', result=i)])
                assert store.get_run(run_id) is not None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.list_runs(limit=500)) == 120


# -- writes from an event loop ----------------------------------------------------------------------------


def test_at_once_does_not_wait_for_a_lock_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / 'runs.db'
    with RunStore(path) as db:
        db.create_run(RunRow(run_id='r1', status='waiting'))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute('BEGIN IMMEDIATE')  # another process writing
        started = time.monotonic()
        with pytest.raises(WouldWait):
            db.at_once(db.update_run, 'r1', status='failed')
        assert time.monotonic() - started < DEFAULT_BUSY_TIMEOUT  # refused at once, not after the busy timeout
        other.execute('ROLLBACK')
        assert db.get_run('r1').status == 'waiting'
        db.at_once(db.update_run, 'r1', status='failed')
        assert db.get_run('r1').status == 'failed'
        other.close()


async def test_a_store_locked_by_another_process_holds_up_the_run_not_the_event_loop(
    make_harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal writes on the event loop only when the store is free: a locked store sends the write to
    a thread, so the loop (and every other workflow on it) goes on, and the run finishes once it is free."""
    from harness._store import _journal

    h = make_harness(store=str(tmp_path / 'runs.db'), tracing=False)

    @h.tool
    async def f(*, i: int) -> int:
        return i + 1

    assert h.run_sync('await f(i=0)').value == 1  # the store exists
    on_thread, handed = _journal.on_thread, asyncio.Event()

    async def spy(*args, **kwargs):
        handed.set()
        return await on_thread(*args, **kwargs)

    monkeypatch.setattr(_journal, 'on_thread', spy)
    other = sqlite3.connect(tmp_path / 'runs.db', isolation_level=None)
    other.execute('BEGIN IMMEDIATE')
    run = asyncio.ensure_future(h.run('await f(i=1)'))
    await handed.wait()  # the loop is free while the write waits for the lock on a thread
    assert not run.done()
    other.execute('COMMIT')
    other.close()
    result = await run
    assert result.value == 2 and result.status == 'completed'
    assert [c.result for c in h.store.calls(result.run_id)] == [2]


def test_store_error_is_public_and_the_package_surface_is_consistent() -> None:
    """`StoreError` reaches callers (a store that cannot be opened), so it is importable from `harness`; every
    public name is in `__all__`, in the lazy map, and imported for type checkers, and loads."""
    import ast

    import harness
    from harness import StoreError as Public

    assert Public is StoreError
    tree = ast.parse(Path(harness.__file__).read_text())
    typed = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        for stmt in node.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }
    assert set(harness.__all__) == set(harness._WHERE) == typed
    assert all(getattr(harness, name) is not None for name in harness.__all__)


def test_a_run_written_between_reading_and_claiming_is_not_taken(store: RunStore) -> None:
    """A resume reads its plan, admits it (a type check, no write), then claims the run: a run another process
    finished in between is refused (RunBusy), not opened again and run on top of its ending."""
    from harness import RunBusy
    from harness._records import Owner, this_process

    store.create_run(RunRow('r'))
    read = store.get_run('r')
    assert read is not None
    other = Owner('elsewhere', 1, 'x')
    store.claim('r', other)  # another process goes on with the run, and finishes it
    store.update_run('r', status='completed', expect_owner=other)
    store.release('r', other)
    with pytest.raises(RunBusy, match='changed while this resume was being prepared'):
        store.claim('r', this_process(), unchanged_since=read.updated)
    assert store.get_run('r').status == 'completed'  # type: ignore[union-attr]
    store.claim('r', this_process(), unchanged_since=store.get_run('r').updated)  # type: ignore[union-attr]
