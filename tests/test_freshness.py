"""Seals know time (issue 25.1): a store, or one run in it, put back to an earlier copy is refused naming the
rollback, and the call it made since does not run twice; normal use (resume, replay, fork, processes sharing a
store, a store moved, a store made again) is never taken for one. Real SQLite files, real Monty, real processes."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Harness, RunRow, SnapshotError, StoreError
from harness._records import CallRecord
from harness._store import RunStore
from harness._store._freshness import SEALED_GENERATION, Generations, StoreRolledBack, generations_path
from harness._store._runs import _SEALED_RUN
from harness._store._seal import Sealer, store_key

ROLLBACK = 'the store is older than this machine last saw: restored from a backup?'

WIRE = 'w = await wire(amount=1_000_000)\nw\n'


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's machine: a state directory of its own, where the generations of runs are recorded."""
    monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
    return tmp_path / 'state' / 'harness' / 'generations.db'


def bank(store: Path, markers: Path) -> Harness:
    """A Harness whose `wire` needs a person's approval and counts every real run in a marker file."""
    h = Harness(store=str(store), tracing=False)

    @h.tool(side_effect=True, approval=True)
    async def wire(*, amount: int) -> str:
        with (markers / 'wired').open('a') as f:
            f.write(f'{amount}\n')
        return f'wired {amount}'

    @h.tool
    async def look(*, q: str) -> str:
        return f'seen {q}'

    return h


@pytest.fixture
def desk(tmp_path: Path, machine: Path) -> Iterator[tuple[Path, Path, Callable[[], Harness]]]:
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    made: list[Harness] = []

    def open_bank() -> Harness:
        made.append(bank(store, markers))
        return made[-1]

    yield store, markers, open_bank
    for h in made:
        h.close()


def wired(markers: Path) -> int:
    path = markers / 'wired'
    return len(path.read_text().splitlines()) if path.exists() else 0


def copy_store(source: Path, target: Path) -> Path:
    """A consistent copy of the store file, as a backup tool takes it."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return target


def restore_file(backup: Path, store: Path) -> None:
    """Put the whole store file back from the backup (no process has it open)."""
    for suffix in ('-wal', '-shm'):
        Path(f'{store}{suffix}').unlink(missing_ok=True)
    shutil.copyfile(backup, store)


def waiting_and_approved(open_bank: Callable[[], Harness], script: str = WIRE, seq: int = 1) -> str:
    h = open_bank()
    waiting = h.run_sync(script)
    assert waiting.status == 'waiting'
    assert h.approve(waiting.run_id, seq, by='dana') == [seq]
    h.close()
    return waiting.run_id


def test_the_whole_store_put_back_before_an_approved_wire_ran_is_refused_and_it_does_not_run_twice(
    desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path, cli: Any
) -> None:
    store, markers, open_bank = desk
    run_id = waiting_and_approved(open_bank)
    backup = copy_store(store, tmp_path / 'backup.db')  # approved, not run yet
    h = open_bank()
    assert h.resume_sync(run_id).value == 'wired 1000000' and wired(markers) == 1
    h.close()

    restore_file(backup, store)
    h = open_bank()
    assert h.store is not None
    [problem] = h.store.verify(run_id)
    assert ROLLBACK in problem and run_id in problem
    with pytest.raises(StoreRolledBack) as raised:
        h.resume_sync(run_id)
    assert isinstance(raised.value, StoreError) and isinstance(raised.value, SnapshotError)
    message = str(raised.value)
    assert ROLLBACK in message and run_id in message and 'Nothing ran' in message and 'accept_restore' in message
    assert '\n' not in message and str(store) not in message  # one line, no host path (a model may read it)
    assert wired(markers) == 1
    h.close()

    (tmp_path / 'fresh_bank.py').write_text(
        textwrap.dedent(f"""
            from pathlib import Path
            from harness import Harness
            h = Harness()
            @h.tool(side_effect=True, approval=True)
            async def wire(*, amount: int) -> str:
                with Path({str(markers / 'wired')!r}).open('a') as f:
                    f.write(f'{{amount}}\\n')
                return f'wired {{amount}}'
        """)
    )
    done = cli(['resume', run_id, '--store', str(store), '--agents', 'fresh_bank:h'], cwd=tmp_path)
    assert done.exit_code == 1 and not done.traceback, done.describe()
    assert ROLLBACK in done.stdout + done.stderr
    shown = cli(['show', run_id, '--store', str(store)], cwd=tmp_path, columns=400)
    assert 'unverified' in shown.stderr and ROLLBACK in shown.stderr, shown.describe()
    assert wired(markers) == 1


def test_one_runs_rows_put_back_are_refused_and_the_other_runs_go_on(
    desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path
) -> None:
    store, markers, open_bank = desk
    first = waiting_and_approved(open_bank)
    backup = copy_store(store, tmp_path / 'backup.db')
    h = open_bank()
    assert h.resume_sync(first).status == 'completed' and wired(markers) == 1
    second = h.run_sync('w = await wire(amount=5)\nw\n').run_id
    h.close()

    with sqlite3.connect(store) as db:  # the first run's rows, as they were in the backup
        db.execute('ATTACH DATABASE ? AS old', (str(backup),))
        for table in ('runs', 'calls', 'snapshots', 'decisions'):
            db.execute(f'DELETE FROM {table} WHERE run_id = ?', (first,))
            db.execute(f'INSERT INTO {table} SELECT * FROM old.{table} WHERE run_id = ?', (first,))
    db.close()

    h = open_bank()
    assert h.store is not None and ROLLBACK in h.store.verify(first)[0]
    with pytest.raises(StoreRolledBack, match=f'run {first} is older than this machine last saw it'):
        h.resume_sync(first)
    assert wired(markers) == 1
    assert h.store.verify(second) == []  # the other run is as it was
    assert h.approve(second, 1) == [1]
    assert h.resume_sync(second).value == 'wired 5' and wired(markers) == 2


def test_a_run_put_back_cannot_be_advanced_by_any_write(machine: Path, tmp_path: Path) -> None:
    """Not only resume: every write that would advance a run older than this machine saw (a journal write, a status,
    a decision) is refused, so no number of writes brings it back to the generation this machine saw."""
    from harness._records import Decision

    with RunStore(tmp_path / 'runs.db') as db:
        db.create_run(RunRow('r'))
        db.put_calls('r', [CallRecord(1, 'look', {'q': 'a'}, 1, status='running', started=1.0)])
        before = copy_store(tmp_path / 'runs.db', tmp_path / 'before.db')
        db.put_calls('r', [CallRecord(1, 'look', {'q': 'a'}, 1, status='ok', result='x', started=1.0)])
    restore_file(before, tmp_path / 'runs.db')
    with RunStore(tmp_path / 'runs.db') as db:
        writes: list[Callable[[], Any]] = [
            lambda: db.put_calls('r', [CallRecord(2, 'look', {'q': 'b'}, 2, status='running', started=2.0)]),
            lambda: db.update_run('r', status='failed'),
            lambda: db.decide('r', 1, Decision(True, None, 'dana', 1.0)),
        ]
        for write in writes:
            with pytest.raises(StoreRolledBack, match=re.escape(ROLLBACK)):
                write()
        assert [c.status for c in db.calls('r')] == ['running'] and db.get_run('r').status == 'interrupted'  # type: ignore[union-attr]


def test_a_restore_accepted_on_purpose_goes_on(desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path) -> None:
    """Put back on purpose (a disk lost, a backup restored): `accept_restore` takes the store as it is; the calls made
    after the backup may then run again, which is what accepting it means."""
    store, markers, open_bank = desk
    run_id = waiting_and_approved(open_bank)
    backup = copy_store(store, tmp_path / 'backup.db')
    h = open_bank()
    h.resume_sync(run_id)
    h.close()
    restore_file(backup, store)
    with RunStore(store) as db:
        assert ROLLBACK in db.verify(run_id)[0]
        db.accept_restore()
        assert db.verify(run_id) == []
    h = open_bank()
    assert h.resume_sync(run_id).value == 'wired 1000000' and wired(markers) == 2


def test_replay_and_fork_of_a_run_put_back_run_nothing_unasked(
    desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path
) -> None:
    """A replay runs no callee and a fork is asked for: both may start from a run put back (resume may not)."""
    store, _, open_bank = desk
    h = open_bank()
    run_id = h.run_sync('a = await look(q="x")\nb = await look(q="y")\n[a, b]\n').run_id
    backup = copy_store(store, tmp_path / 'backup.db')
    assert h.store is not None
    h.store.update_run(run_id, error=None)  # one more write: the backup is now older than this machine saw
    h.close()
    restore_file(backup, store)
    h = open_bank()
    assert h.store is not None and ROLLBACK in h.store.verify(run_id)[0]
    with pytest.raises(StoreRolledBack):
        h.resume_sync(run_id)
    assert h.replay_sync(run_id).value == ['seen x', 'seen y']
    assert h.fork_sync(run_id, at=2, result='again').value == ['seen x', 'again']


# -- normal use is not a rollback -------------------------------------------------------------------


def test_resume_replay_and_fork_by_one_harness_after_another_are_never_refused(
    desk: tuple[Path, Path, Callable[[], Harness]], machine: Path
) -> None:
    store, markers, open_bank = desk
    run_id = waiting_and_approved(open_bank, 'x = await look(q="a")\nw = await wire(amount=3)\n[x, w]\n', 2)
    h = open_bank()
    assert h.resume_sync(run_id).value == ['seen a', 'wired 3']
    h.close()
    h = open_bank()  # a completed run: resumed (nothing to do), replayed, forked, again and again
    for _ in range(2):
        assert h.resume_sync(run_id).value == ['seen a', 'wired 3']
        assert h.replay_sync(run_id).value == ['seen a', 'wired 3']
        assert h.fork_sync(run_id, at=1, result='other').status == 'waiting'
    assert h.store is not None
    assert all(h.store.verify(r.run_id) == [] for r in h.runs())
    assert wired(markers) == 1
    with sqlite3.connect(store) as db:
        generation = db.execute('SELECT generation FROM runs WHERE run_id = ?', (run_id,)).fetchone()[0]
        store_id = db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
    db.close()
    seen = Generations(machine)
    assert seen.seen(store_id, run_id) == generation > 3  # recorded as the store has it
    seen.close()


SHARED_WRITER = """\
import sys
from harness import Harness
h = Harness(store=sys.argv[1], tracing=False)
@h.tool
def inc(*, x: int) -> int:
    return x + 1
print('ready', flush=True)
sys.stdin.readline()
for i in range(12):
    h.run_sync("a = await inc(x=1)\\nb = await inc(x=a)\\nc = await inc(x=b)\\nc")
h.close()
print('done', flush=True)
"""


def test_processes_sharing_a_store_record_every_generation_and_refuse_nothing(
    tmp_path: Path, machine: Path, spawn: Callable[..., Any]
) -> None:
    """Four processes write runs into one store at once, all recording into one file beside the key: no write is
    refused, every run verifies, and the record holds each run's newest generation."""
    store = tmp_path / 'runs.db'
    RunStore(store).close()
    writers = [spawn([sys.executable, '-c', SHARED_WRITER, str(store)], env=dict(os.environ)) for _ in range(4)]
    for writer in writers:
        assert writer.line() == 'ready'
    for writer in writers:
        writer.send('go')
    for writer in writers:
        assert writer.expect('done', timeout=300) == 'done'
        writer.finish()
    with RunStore(store) as db:
        runs = db.list_runs(limit=100)
        assert len(runs) == 48 and {r.status for r in runs} == {'completed'}
        assert all(db.verify(r.run_id) == [] for r in runs)
        stored = dict(db._read(lambda conn: conn.execute('SELECT run_id, generation FROM runs').fetchall()))
        seen = Generations(machine)
        assert {r: seen.seen(db.store_id, r) for r in stored} == stored
        seen.close()


def test_a_store_moved_or_made_again_is_not_a_rollback(
    desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path
) -> None:
    """A store is known by its id: moved to another directory it is the same store; deleted and made again at the
    same path it is a new one, with no history on this machine (even for a run id it had before)."""
    store, markers, open_bank = desk
    run_id = waiting_and_approved(open_bank)
    (tmp_path / 'moved').mkdir()
    moved = tmp_path / 'moved' / 'renamed.db'
    os.rename(store, moved)
    h = bank(moved, markers)
    try:
        assert h.resume_sync(run_id).value == 'wired 1000000'
    finally:
        h.close()
    for suffix in ('', '-wal', '-shm'):
        Path(f'{moved}{suffix}').unlink(missing_ok=True)
    with RunStore(moved) as db:  # a new store where the old one was
        db.create_run(RunRow(run_id))
        assert db.verify(run_id) == []
    h = bank(moved, markers)
    try:
        fresh = waiting_and_approved(lambda: bank(moved, markers))
        assert h.resume_sync(fresh).value == 'wired 1000000' and wired(markers) == 2
    finally:
        h.close()


def test_a_run_created_again_under_an_id_this_machine_saw_starts_past_it(machine: Path, tmp_path: Path) -> None:
    """A run deleted from a store and made again with the same id is a new run, not the old one put back."""
    with RunStore(tmp_path / 'runs.db') as db:
        db.create_run(RunRow('r'))
        for seq in (1, 2, 3):
            db.put_calls('r', [CallRecord(seq, 'look', {}, seq, status='ok', result=seq, started=1.0)])
        db.delete_run('r')
        db.create_run(RunRow('r'))
        assert db.verify('r') == []
        db.put_calls('r', [CallRecord(1, 'look', {}, 1, status='ok', result=1, started=1.0)])
        assert db.verify('r') == []


def test_a_store_from_before_generations_verifies_and_resumes(
    desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path
) -> None:
    """A store written before generations (schema 13: no `runs.generation`, no store id) is migrated: its runs,
    sealed as they were, verify and resume."""
    store, markers, open_bank = desk
    run_id = waiting_and_approved(open_bank)
    old_fields = _SEALED_RUN.replace(SEALED_GENERATION, 'fork_at')
    with sqlite3.connect(store) as db:  # as the harness before this one left it
        db.execute('ALTER TABLE runs DROP COLUMN generation')
        db.execute("DELETE FROM meta WHERE key = 'store_id'")
        db.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")
        fields = db.execute(f'SELECT {old_fields} FROM runs').fetchone()
        db.execute('UPDATE runs SET seal = ?', (Sealer(store_key()).mac(*fields),))
    db.close()
    h = open_bank()
    assert h.store is not None and h.store.verify(run_id) == []
    assert h.resume_sync(run_id).value == 'wired 1000000' and wired(markers) == 1
    assert h.store.verify(run_id) == []


def test_where_this_machine_keeps_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the key file; with `HARNESS_SECRET` (no key file), in the user's state directory."""
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'config'))
    monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
    assert generations_path(key_from_file=False) == tmp_path / 'state' / 'harness' / 'generations.db'
    assert generations_path(key_from_file=True) == tmp_path / 'config' / 'harness' / 'generations.db'
    monkeypatch.delenv('HARNESS_SECRET')
    with RunStore(tmp_path / 'runs.db') as db:
        db.create_run(RunRow('r'))
    assert {'generations.db', 'secret'} <= {p.name for p in (tmp_path / 'config' / 'harness').iterdir()}
    assert not (tmp_path / 'state').exists()
    mode = (tmp_path / 'config' / 'harness' / 'generations.db').stat().st_mode & 0o777
    assert mode == 0o600


def test_a_record_that_cannot_be_kept_is_a_one_line_error_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / 'state').write_text('a file where the state directory should be')
    monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
    with RunStore(tmp_path / 'runs.db') as db:
        with pytest.raises(StoreError, match="cannot keep this machine's record of run generations") as raised:
            db.create_run(RunRow('r'))
        assert '\n' not in str(raised.value) and 'XDG_STATE_HOME' in str(raised.value)
        assert db.get_run('r') is None


def test_a_fresh_machine_with_only_the_store_and_the_secret_cannot_tell(
    desk: tuple[Path, Path, Callable[[], Harness]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is not detected, as the README says: a machine that never saw the store has nothing to compare with."""
    store, _, open_bank = desk
    run_id = waiting_and_approved(open_bank)
    backup = copy_store(store, tmp_path / 'backup.db')
    h = open_bank()
    h.resume_sync(run_id)
    h.close()
    restore_file(backup, store)
    monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'another machine'))
    with RunStore(store) as db:
        assert db.verify(run_id) == []


def test_copying_a_run_between_stores_is_refused_by_its_seal(machine: Path, tmp_path: Path) -> None:
    """The store's id is under each run's seal: a run copied into another store (or a store given another id, to
    escape this machine's record) does not verify."""
    with RunStore(tmp_path / 'a.db') as a:
        a.create_run(RunRow('r'))
    RunStore(tmp_path / 'b.db').close()
    with sqlite3.connect(tmp_path / 'b.db') as b:
        b.execute('ATTACH DATABASE ? AS a', (str(tmp_path / 'a.db'),))
        b.execute("INSERT INTO runs SELECT * FROM a.runs WHERE run_id = 'r'")
    b.close()
    with sqlite3.connect(tmp_path / 'a.db') as a:
        a.execute("UPDATE meta SET value = 'another' WHERE key = 'store_id'")
    a.close()
    for name in ('a.db', 'b.db'):
        with RunStore(tmp_path / name) as db:
            assert 'was modified after it was written' in db.verify('r')[0]
