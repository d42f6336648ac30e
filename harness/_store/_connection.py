"""The run store's connection: one SQLite file, its transactions, its schema and how JSON columns are kept.

`Database` is the base every part of `RunStore` stands on (`_sqlite`). One SQLite file (standard library
`sqlite3`), or `":memory:"`. Invariants:

- Durability: WAL with `synchronous=FULL`, so a write is on disk when it returns; the harness journals a
  result before it hands it to the sandbox.
- Concurrency: every write is one `BEGIN IMMEDIATE` transaction (`_write`); several processes may share the
  file, and a write that finds the file locked past `busy_timeout` is retried (with backoff) up to
  `lock_patience` seconds; inside `at_once` it is not made at all (`WouldWait`). Several threads may
  share one `RunStore` (one connection, one lock).
- Schema: versioned in `meta.schema_version`; `MIGRATIONS[i]` takes version `i` to `i + 1` and all
  pending ones run in one transaction at open. A file newer than this code is refused, not touched.
- A store sealed with another key (`_seal`) can be read, not written (`key_matches`).
- Freshness (`_freshness`): a write that advances a run bumps its generation (`_advance`, which refuses a run older
  than this machine saw it); once the write commits, the new generations are recorded outside the store.
- JSON columns hold plain data (None, bool, int, float, str, list, dict with str keys); tuples
  are stored as lists; anything else is refused when written (`encode`), so what is read back equals what
  was written. A JSON value of `None` is stored as SQL NULL.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

from .._errors import StoreError
from ._freshness import NEW_STORE_ID, Generations, generations_path, refusal, rolled_back
from ._key import SealKeyError, from_environment, store_key
from ._seal import Sealer, key_id

T = TypeVar('T')

DEFAULT_BUSY_TIMEOUT = 10.0
DEFAULT_LOCK_PATIENCE = 120.0

MIGRATIONS: list[tuple[str, ...]] = [
    # 0 -> 1: the first schema.
    (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            status TEXT NOT NULL,
            script TEXT NOT NULL,
            stubs_digest TEXT NOT NULL,
            prompt TEXT,
            value_json TEXT,
            error TEXT,
            duration REAL,
            parent_run_id TEXT,
            fork_at INTEGER,
            orchestrator_run_id TEXT,
            trace_context TEXT,
            inputs_json TEXT,
            calls_count INTEGER NOT NULL DEFAULT 0
        )""",
        'CREATE INDEX runs_created ON runs (created)',
        'CREATE INDEX runs_orchestrator ON runs (orchestrator_run_id)',
        """CREATE TABLE calls (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            callee TEXT NOT NULL,
            arguments_json TEXT NOT NULL,
            line INTEGER,
            status TEXT NOT NULL,
            result_json TEXT,
            error TEXT,
            started REAL NOT NULL,
            duration REAL,
            attempt INTEGER NOT NULL DEFAULT 1,
            source TEXT NOT NULL,
            side_effect INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, seq)
        )""",
        # `size` and `digest` (SHA-256 of the sealed blob) are not a security check (the HMAC is):
        # they tell a blob damaged in place from one that was sealed with another store's key.
        """CREATE TABLE snapshots (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            after_seq INTEGER NOT NULL,
            blob BLOB NOT NULL,
            ledger_json TEXT NOT NULL,
            monty_format INTEGER NOT NULL,
            store_format INTEGER NOT NULL,
            size INTEGER NOT NULL,
            digest TEXT NOT NULL,
            created REAL NOT NULL
        )""",
        'CREATE INDEX snapshots_run ON snapshots (run_id, after_seq)',
        """CREATE TABLE spans (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            spans_json TEXT NOT NULL,
            created REAL NOT NULL
        )""",
        'CREATE INDEX spans_run ON spans (run_id, id)',
    ),
    # 1 -> 2: `stubs_digest` was written and never read.
    ('ALTER TABLE runs DROP COLUMN stubs_digest',),
    # 2 -> 3: which callees a run may call (`allow`/`deny`), so a resumed run keeps its restrictions.
    ('ALTER TABLE runs ADD COLUMN access_json TEXT',),
    # 3 -> 4: the catalog the run ran against (stubs, and a digest and version per callee).
    ('ALTER TABLE runs ADD COLUMN catalog_json TEXT',),
    # 4 -> 5: one owner per run: the process that runs it holds a lease it renews.
    ('ALTER TABLE runs ADD COLUMN owner TEXT', 'ALTER TABLE runs ADD COLUMN lease_until REAL'),
    # 5 -> 6: the terminal's records: token and cost totals per run, conversations and their turns
    # (`harness chat --continue`), and requests to cancel a run that another process runs (`harness cancel`).
    (
        'CREATE TABLE run_usage (run_id TEXT PRIMARY KEY, usage_json TEXT NOT NULL)',
        """CREATE TABLE conversations (
            conversation_id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            title TEXT,
            model TEXT,
            messages_json TEXT NOT NULL
        )""",
        """CREATE TABLE turns (
            conversation_id TEXT NOT NULL,
            turn INTEGER NOT NULL,
            agent_run_id TEXT,
            prompt TEXT NOT NULL,
            answer TEXT,
            status TEXT NOT NULL,
            error TEXT,
            usage_json TEXT,
            trace_id TEXT,
            created REAL NOT NULL,
            PRIMARY KEY (conversation_id, turn)
        )""",
        'CREATE INDEX turns_agent_run ON turns (agent_run_id)',
        'CREATE TABLE cancel_requests (run_id TEXT PRIMARY KEY, requested REAL NOT NULL)',
    ),
    # 6 -> 7: a person's decisions on calls that need approval, and which orchestrator tool call
    # (pydantic-ai's deferred approval) a waiting run belongs to.
    (
        """CREATE TABLE decisions (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            approved INTEGER NOT NULL,
            reason TEXT,
            decided_by TEXT,
            decided_at REAL NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        'CREATE TABLE tool_calls (tool_call_id TEXT PRIMARY KEY, run_id TEXT NOT NULL)',
    ),
    # 7 -> 8: seals. The key moves out of the store (only its id stays here, in `meta`); runs and journal
    # rows are sealed. Runs written before carry no seal: they read as unverified.
    (
        'ALTER TABLE calls ADD COLUMN seal TEXT',
        'ALTER TABLE runs ADD COLUMN seal TEXT',
        'ALTER TABLE runs ADD COLUMN journal_head TEXT',
        "DELETE FROM meta WHERE key = 'secret_key'",
    ),
    # 8 -> 9: evals (`harness eval`): pydantic-evals' report of each, and per case the orchestrator run whose
    # scripts are ordinary runs, so a later eval can diff against it or answer calls from its journal.
    (
        """CREATE TABLE evals (
            eval_id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            status TEXT NOT NULL,
            name TEXT NOT NULL,
            dataset TEXT NOT NULL,
            source TEXT,
            model TEXT,
            instructions TEXT,
            baseline_id TEXT,
            reused_from TEXT,
            report_json TEXT,
            summary_json TEXT
        )""",
        'CREATE INDEX evals_created ON evals (created)',
        """CREATE TABLE eval_cases (
            eval_id TEXT NOT NULL,
            case_name TEXT NOT NULL,
            orchestrator_run_id TEXT,
            error TEXT,
            usage_json TEXT,
            PRIMARY KEY (eval_id, case_name)
        )""",
    ),
    # 9 -> 10: every agent run of a turn (one more each time it continues after approvals), so the orchestrator
    # spans of all of them are read with any run of the turn and deleted with the last (NULL: `agent_run_id` only).
    ('ALTER TABLE turns ADD COLUMN agent_run_ids_json TEXT',),
    # 10 -> 11: the conversation an orchestrator run's scripts belong to, so a later turn is answered from the side
    # effects an earlier one finished and is told what an interrupted one left unknown (`_dispatch._effects`).
    ('ALTER TABLE runs ADD COLUMN conversation_id TEXT', 'CREATE INDEX runs_conversation ON runs (conversation_id)'),
    # 11 -> 12: dollar budgets (`_dispatch._cost`): what each call cost, journaled with its result (NULL: not
    # settled, or written before), the budget key a run spends (so its resume does too), and the daily budgets' spent
    # and reserved USD per budget key and UTC day (`_spend`).
    (
        'ALTER TABLE calls ADD COLUMN cost_usd REAL',
        'ALTER TABLE runs ADD COLUMN budget_key TEXT',
        """CREATE TABLE spend (
            budget_key TEXT NOT NULL,
            day TEXT NOT NULL,
            spent REAL NOT NULL DEFAULT 0,
            reserved REAL NOT NULL DEFAULT 0,
            PRIMARY KEY (budget_key, day)
        )""",
    ),
    # 12 -> 13: what each call in flight reserved on each stored dollar window (`_spend`), so
    # whichever process ends it (a Temporal worker too) settles it; a conversation's window is a `spend` row too.
    (
        """CREATE TABLE spend_holds (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            budget_key TEXT NOT NULL,
            day TEXT NOT NULL,
            usd REAL NOT NULL,
            PRIMARY KEY (run_id, seq, budget_key, day)
        )""",
    ),
    # 13 -> 14: freshness (`_freshness`): each store a random id, each run a generation this machine records.
    ('ALTER TABLE runs ADD COLUMN generation INTEGER', NEW_STORE_ID),
]


class WouldWait(Exception):
    """Raised by `RunStore.at_once`: the write would have had to wait for a lock, and was not made."""


class StoreFull(StoreError):
    """The store's disk (or its size limit) is full: the write was not made, and nothing it would have
    changed is changed (its transaction rolled back). The message names no path."""

    def __init__(self) -> None:
        super().__init__("the run store's disk is full: free space, then `harness resume RUN`.")


def lookup(get: Callable[[str], T | None], key: str, *, missing: str, error: Callable[[str], Exception]) -> T:
    """`get(key)`, a lookup by id or unique prefix, with an ambiguous key (`StoreError`) and a missing one both
    raised as `error(message)`: one line, and `missing` names the command that lists what there is."""
    try:
        row = get(key)
    except StoreError as exc:
        raise error(str(exc)) from None
    if row is None:
        raise error(missing)
    return row


class Database:
    """One connection to the store's file, its transactions and its schema; the parts of `RunStore` add the
    tables' reads and writes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        lock_patience: float = DEFAULT_LOCK_PATIENCE,
        key: bytes | None = None,
    ) -> None:
        self.path = str(path)
        self.lock_patience = lock_patience
        self._lock = threading.Lock()
        self._now = threading.local()
        """`on` while this thread is inside `at_once`."""
        self._busy_ms = int(busy_timeout * 1000)
        self.store_id = ''
        """The store's random id (`meta.store_id`): what this machine's record of its runs is kept under."""
        self._noted: dict[str, int] = {}
        """The generations the write under way advanced runs to, recorded once it commits."""
        key_from_file = key is None and not from_environment()
        try:
            self._key = key if key is not None else store_key()
        except SealKeyError as exc:
            raise StoreError(str(exc)) from None
        self._sealer = Sealer(self._key)
        self.key_matches = True
        """False when the store was sealed with another key: it can be read, not verified or written."""
        in_memory = self.path == ':memory:'
        self._generations = None if in_memory else Generations(generations_path(key_from_file))
        if not in_memory and Path(self.path).is_dir():
            raise StoreError(f'{self.path} is a directory: the run store is a file, e.g. {self.path}/runs.db')
        if not in_memory:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f'cannot create the run store {self.path}: {exc.strerror}') from None
        try:
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f'cannot open the run store {self.path}: {exc}') from exc
        try:
            self._retry(lambda conn: self._configure(conn, in_memory=in_memory))
            self.key_matches = self._migrate() == key_id(self._key)
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; idempotent. Every later call raises `StoreError`."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        if self._generations is not None:
            self._generations.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.path!r})'

    # -- transactions ----------------------------------------------------------------------------

    def _write(self, fn: Callable[[sqlite3.Connection], T], *, migrating: bool = False) -> T:
        """Run `fn` in one `BEGIN IMMEDIATE` transaction: all of it commits, or none of it."""
        if not self.key_matches and not migrating:
            raise StoreError(
                f'the run store {self.path} is sealed with another key: it can be read, but not written, resumed '
                'or replayed here. Set HARNESS_SECRET to the secret that sealed it, or use another store.'
            )

        at_once = getattr(self._now, 'on', False)
        generations = self._generations if not migrating else None
        if generations is not None and not generations.open:
            if at_once:
                raise WouldWait  # opened once per process, off the event loop
            generations.ready()

        def transaction(conn: sqlite3.Connection) -> T:
            self._noted = {}
            conn.execute('BEGIN IMMEDIATE')
            try:
                result = fn(conn)
                conn.execute('COMMIT')
            except BaseException:
                if conn.in_transaction:
                    conn.execute('ROLLBACK')
                raise
            if generations is not None and self._noted:
                generations.record(self.store_id, self._noted, at_once=at_once)
            return result

        return self._retry(transaction)

    def _advance(self, conn: sqlite3.Connection, run_id: str, *, created: bool = False) -> None:
        """Bump the run's generation in this write (recorded once it commits); a run older than this machine saw it
        is refused (`StoreRolledBack`), so nothing advances it. A new run starts past anything seen of its id."""
        row = conn.execute('SELECT generation FROM runs WHERE run_id = ?', (run_id,)).fetchone()
        if row is None:
            return
        generation, seen = row[0] or 0, self._seen(run_id)
        if created:
            generation = max(generation, seen)
        elif generation < seen:
            raise refusal(rolled_back(run_id, generation, seen), run_id)
        conn.execute('UPDATE runs SET generation = ? WHERE run_id = ?', (generation + 1, run_id))
        self._noted[run_id] = generation + 1

    def _seen(self, run_id: str) -> int:
        """The newest generation of the run this machine recorded; read before the store is (the record is never
        ahead of a committed write)."""
        if self._generations is None:
            return 0
        return self._generations.seen(self.store_id, run_id, at_once=getattr(self._now, 'on', False))

    def accept_restore(self, run_id: str | None = None) -> None:
        """Accept the store as it is now for one run (or all of them) on this machine: a store put back on purpose.
        Its runs can then be resumed again, and calls they made after this state may run again."""
        sql = 'SELECT run_id, coalesce(generation, 0) FROM runs' + (' WHERE run_id = ?' if run_id else '')
        rows = self._read(lambda conn: conn.execute(sql, (run_id,) if run_id else ()).fetchall())
        if self._generations is not None:
            self._generations.accept(self.store_id, dict(rows))

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._retry(fn)

    def at_once(self, method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Call `method` (one of this store's) only if it can run now, without waiting for a lock: the
        connection is free and no other process holds the file; else raise `WouldWait`, having changed
        nothing. For an event loop, which must never wait on a lock (the journal falls back to a thread)."""
        self._now.on = True
        try:
            return method(*args, **kwargs)
        finally:
            self._now.on = False

    def _retry(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` under the connection lock, retrying while another process holds the file locked
        (within `at_once`: `WouldWait` instead of waiting)."""
        at_once = getattr(self._now, 'on', False)
        deadline = time.monotonic() + self.lock_patience
        delay = 0.005
        while True:
            if not self._lock.acquire(blocking=not at_once):
                raise WouldWait
            try:
                if self._conn is None:
                    raise StoreError(f'the run store {self.path} is closed.')
                try:
                    if at_once:
                        self._conn.execute('PRAGMA busy_timeout = 0')
                    return fn(self._conn)
                except sqlite3.OperationalError as exc:
                    if _is_full(exc):
                        raise StoreFull from None
                    if not _is_busy(exc):
                        raise StoreError(f'run store {self.path}: {exc}') from exc
                    if at_once:
                        raise WouldWait from None
                    if time.monotonic() >= deadline:
                        raise StoreError(
                            f'the run store {self.path} stayed locked by another process for over '
                            f'{self.lock_patience:.0f} s; is a stuck process holding it?'
                        ) from exc
                finally:
                    if at_once:
                        self._conn.execute(f'PRAGMA busy_timeout = {self._busy_ms}')
            finally:
                self._lock.release()
            time.sleep(delay * (0.5 + random.random()))  # jitter: two waiters do not retry in lockstep
            delay = min(delay * 2, 0.1)

    # -- the schema ------------------------------------------------------------------------------

    def _configure(self, conn: sqlite3.Connection, *, in_memory: bool) -> None:
        try:
            conn.execute(f'PRAGMA busy_timeout = {self._busy_ms}')
            if not in_memory:
                conn.execute('PRAGMA journal_mode = WAL')
            conn.execute('PRAGMA synchronous = FULL')
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                raise
            raise StoreError(f'{self.path} is not a usable harness run store: {exc}') from exc

    def _migrate(self) -> str:
        """Bring the schema up to date (all pending migrations in one transaction); return the id of
        the key the store is sealed with (this process's key, for a new store)."""
        target = len(MIGRATIONS)

        def current(conn: sqlite3.Connection) -> tuple[int, str | None]:
            meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
            if meta.fetchone() is None:
                return 0, None
            key = conn.execute("SELECT value FROM meta WHERE key = 'key_id'").fetchone()
            store = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
            self.store_id = store[0] if store else ''
            return _schema_version(conn), key[0] if key else None

        def refuse_newer(version: int) -> None:
            if version > target:
                raise StoreError(
                    f'the run store {self.path} has schema version {version}, newer than this harness knows '
                    f'({target}): it was written by a newer harness. Upgrade harness (pip install -U '
                    'harness) to open it; this version will not modify it.'
                )

        try:
            version, key = self._read(current)
            refuse_newer(version)
            if version == target and key is not None:
                return key

            def write(conn: sqlite3.Connection) -> str:
                conn.execute('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
                found = _schema_version(conn)  # again: another process may have migrated meanwhile
                refuse_newer(found)
                for statements in MIGRATIONS[found:]:
                    for statement in statements:
                        conn.execute(statement)
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(target),))
                conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('key_id', ?)", (key_id(self._key),))
                self.store_id = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
                return conn.execute("SELECT value FROM meta WHERE key = 'key_id'").fetchone()[0]

            return self._write(write, migrating=True)
        except sqlite3.DatabaseError as exc:
            if _is_full(exc):
                raise StoreFull from None
            raise StoreError(f'{self.path} is not a usable harness run store: {exc}') from exc


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, 'sqlite_errorcode', None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc)
    return 'database is locked' in text or 'database is busy' in text or 'database table is locked' in text


def _is_full(exc: sqlite3.Error) -> bool:
    code = getattr(exc, 'sqlite_errorcode', None)
    return (code is not None and code & 0xFF == sqlite3.SQLITE_FULL) or 'database or disk is full' in str(exc)


def _schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _plain(value: Any, what: str) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item, what) for item in value]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f'cannot store {what}: a dict key is {type(key).__name__}, not str.')
        return {key: _plain(item, what) for key, item in value.items()}
    raise TypeError(
        f'cannot store {what}: {type(value).__name__} is not plain data '
        '(None, bool, int, float, str, list, tuple, dict with str keys).'
    )


def encode_required(value: Any, what: str) -> str:
    """`value` as the JSON a column holds; `TypeError` naming `what` unless it is plain data."""
    return json.dumps(_plain(value, what), ensure_ascii=False, separators=(',', ':'))


def encode(value: Any, what: str) -> str | None:
    """`encode_required`, with None stored as SQL NULL."""
    return None if value is None else encode_required(value, what)


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def marks(values: list[Any]) -> str:
    """`?, ?, ?`: one parameter per value, for `IN (...)`."""
    return ', '.join('?' * len(values))
