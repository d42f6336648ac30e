"""Freshness: every run carries a generation, and this machine records the newest one it saw, outside the store.

Seals say a row is one this key wrote, not that it is the newest one: a run's rows, or the whole store file, put
back to an earlier copy verify. So each run has a generation (`runs.generation`, under the run's seal together with
the store's random id, `meta.store_id`), one higher after every write that advances the run: it is created, a
journal write (a call's start before it runs, its result before the script sees it), a change of its status, a
decision on it. Once the write has committed, the process records (store id, run id, generation) in
`generations.db`, a SQLite file beside the key (`$XDG_CONFIG_HOME/harness/`; with `HARNESS_SECRET` or a key given in
code, the user's state directory, `$XDG_STATE_HOME/harness/`). Invariants:

- The record is never ahead of the store but when the store went back: it is written after the store's commit (a
  crash between the two leaves it behind, never ahead), as the largest generation any process wrote (one upsert
  with `max`, safe across processes), and read before the store is (`seen`, then the run), so no reader takes a
  write under way for a rollback.
- A run older than the record is refused: `verify` names the rollback (`Rollback`), resume refuses it
  (`StoreRolledBack`, a `StoreError` and a `SnapshotError`), and so does every write that would advance it. Replay
  and fork go on: they run nothing that is not asked for.
- A store is known by its id, not its path: a store moved or renamed is the same store; a store deleted and made
  again is a new one, with no history here. A copy is the same store: a run resumed in one copy is refused in the
  other, as resuming it there could repeat calls.
- The record is kept cheaply: one read and one upsert per advancing write (WAL, `synchronous=NORMAL`: a power loss
  may lose the newest records, which only forgets, never refuses). A write on the event loop (`at_once`) never
  waits for this file: a record it cannot make at once is kept and made with the next write.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path

from .._errors import SnapshotError, StoreError

SEALED_GENERATION = (
    'CASE WHEN generation IS NULL THEN fork_at '
    "ELSE json_array(fork_at, generation, (SELECT value FROM meta WHERE key = 'store_id')) END"
)
"""What a run's seal covers in place of `fork_at`: with its generation, also the generation and the store's id, so
neither can be changed (nor the run moved to a store with another id) without the key. A run written before
generations existed is sealed as it was."""

NEW_STORE_ID = "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))))"


class StoreRolledBack(SnapshotError, StoreError):
    """A run (or the whole store) is older than this machine last saw it: put back from a backup or a copy. Nothing
    ran. A `SnapshotError` to a caller of resume, a `StoreError` to a caller of the store."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        SnapshotError.__init__(self, message, run_id=run_id)


class Rollback(str):
    """A problem `verify` reports that is a rollback (the rows are as sealed, but older than this machine saw)."""


def rolled_back(run_id: str, generation: int, seen: int) -> Rollback:
    return Rollback(
        f'run {run_id} is older than this machine last saw it (generation {generation}, seen {seen}): the store is '
        'older than this machine last saw: restored from a backup?'
    )


def refusal(problem: str, run_id: str) -> StoreRolledBack:
    return StoreRolledBack(
        f'{problem} Nothing ran, as going on could repeat calls it made since. If it was put back on purpose, accept '
        f"it here (`RunStore(path).accept_restore('{run_id}')`) or fork it (`harness fork {run_id} --at K --result "
        'JSON`).',
        run_id=run_id,
    )


def generations_path(key_from_file: bool) -> Path:
    """Where this machine's record lives: beside the key file, else in the user's state directory."""
    from ._key import config_dir

    if key_from_file:
        return config_dir() / 'generations.db'
    base = os.environ.get('XDG_STATE_HOME') or os.path.join(os.path.expanduser('~'), '.local', 'state')
    return Path(base) / 'harness' / 'generations.db'


class Generations:
    """This machine's record of the newest generation of each run of each store it wrote."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._unrecorded: dict[tuple[str, str], int] = {}
        """Records not made yet (the file was busy for a write on the event loop): made with the next one."""

    @property
    def open(self) -> bool:
        return self._conn is not None

    def ready(self) -> None:
        """Open the file, making it if need be, before a write that will record in it; `StoreError` naming the fix."""
        with self._lock:
            self._connect(create=True)

    def seen(self, store_id: str, run_id: str, *, at_once: bool = False) -> int:
        """The newest generation of the run this machine recorded (0: none). A busy file raises sqlite's busy
        error, which the store's retry waits out (or, `at_once`, turns into `WouldWait`)."""
        with self._lock:
            pending = self._unrecorded.get((store_id, run_id), 0)
            conn = self._connect(create=False)
            if conn is None:
                return pending
            sql = 'SELECT generation FROM generations WHERE store_id = ? AND run_id = ?'
            try:
                row = self._run(conn, at_once, sql, (store_id, run_id)).fetchone()
            except sqlite3.Error as exc:
                if getattr(exc, 'sqlite_errorcode', 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise  # the store's retry waits it out, or (`at_once`) makes it `WouldWait`
                raise self._unusable(str(exc)) from None
            return max(pending, row[0] if row else 0)

    def record(self, store_id: str, generations: dict[str, int], *, at_once: bool = False) -> None:
        """Record generations the store just committed. Never raises: the store's write is made, and a record not
        made now is kept for the next one (an unmade record only forgets)."""
        with self._lock:
            for run_id, generation in generations.items():
                key = (store_id, run_id)
                self._unrecorded[key] = max(self._unrecorded.get(key, 0), generation)
            if self._conn is not None and self._unrecorded:
                self._flush(self._conn, at_once)

    def _flush(self, conn: sqlite3.Connection, at_once: bool) -> None:
        rows = [(s, r, g) for (s, r), g in self._unrecorded.items()]
        try:
            self._run(conn, at_once, 'BEGIN IMMEDIATE', ())
            conn.executemany(
                'INSERT INTO generations (store_id, run_id, generation) VALUES (?, ?, ?) ON CONFLICT '
                '(store_id, run_id) DO UPDATE SET generation = max(generation, excluded.generation)',
                rows,
            )
            conn.execute('COMMIT')
        except (sqlite3.Error, OSError):
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute('ROLLBACK')
            return
        self._unrecorded.clear()

    def accept(self, store_id: str, generations: dict[str, int]) -> None:
        """Take the store's generations of these runs as the newest (a restore made on purpose)."""
        with self._lock:
            conn = self._connect(create=True)
            assert conn is not None
            for run_id in generations:
                self._unrecorded.pop((store_id, run_id), None)
            with conn:
                conn.executemany(
                    'INSERT OR REPLACE INTO generations (store_id, run_id, generation) VALUES (?, ?, ?)',
                    [(store_id, run_id, g) for run_id, g in generations.items()],
                )

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                if self._unrecorded:
                    self._flush(conn, at_once=False)
                conn.close()

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and not self.path.exists():
            return None  # nothing recorded on this machine yet; reading makes no file
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # its -wal and -shm files take its mode
            conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise self._unusable(getattr(exc, 'strerror', None) or str(exc)) from None
        try:
            conn.execute('PRAGMA journal_mode = WAL')
            conn.execute('PRAGMA synchronous = NORMAL')
            conn.execute(
                'CREATE TABLE IF NOT EXISTS generations (store_id TEXT NOT NULL, run_id TEXT NOT NULL, '
                'generation INTEGER NOT NULL, PRIMARY KEY (store_id, run_id)) WITHOUT ROWID'
            )
        except sqlite3.Error as exc:
            conn.close()
            raise self._unusable(str(exc)) from None
        self._conn = conn
        return conn

    @staticmethod
    def _run(conn: sqlite3.Connection, at_once: bool, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        if not at_once:
            return conn.execute(sql, params)
        conn.execute('PRAGMA busy_timeout = 0')
        try:
            return conn.execute(sql, params)
        finally:
            conn.execute('PRAGMA busy_timeout = 10000')

    def _unusable(self, why: str) -> StoreError:
        return StoreError(
            f"cannot keep this machine's record of run generations at {self.path} ({why}): make its directory "
            'writable, or set XDG_STATE_HOME (with HARNESS_SECRET) or XDG_CONFIG_HOME to a writable one.'
        )
