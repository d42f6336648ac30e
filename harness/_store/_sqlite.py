"""The run store: durable runs, their call journal, sealed interpreter snapshots and offline traces.

One SQLite file (standard library `sqlite3`), or `":memory:"`. Invariants:

- Durability: WAL with `synchronous=FULL`, so a call result is on disk when `put_calls`
  returns; the harness journals a result before it hands it to the sandbox.
- Concurrency: every write is one `BEGIN IMMEDIATE` transaction; several processes may share the
  file, and a write that finds the file locked past `busy_timeout` is retried (with backoff) up to
  `lock_patience` seconds; inside `at_once` it is not made at all (`WouldWait`). Several threads may
  share one `RunStore` (one connection, one lock).
- One owner per run: the process running a run holds its lease (`owner`, `lease_until`), renewed while
  it runs and released with the final status. A run stored `running` that no live process holds (its
  holder was killed, or stopped renewing) is read as `interrupted` everywhere (`shown_status`): computed
  on read, never written, so no reader races the holder.
- Schema: versioned in `meta.schema_version`; `MIGRATIONS[i]` takes version `i` to `i + 1` and all
  pending ones run in one transaction at open. A file newer than this code is refused, not touched.
- Snapshots: a Monty dump is sealed with the harness's key (`HARNESS_SECRET`, else a key file in the
  user's config directory; the store keeps only the key's id in `meta`, see `_seal.py`) and is
  verified before any of its bytes are returned: a row read back from the
  store carries only a verified dump. A blob altered, truncated, copied from another store, or
  written by a newer harness or Monty raises `SnapshotError` saying which.
- JSON columns hold plain data (None, bool, int, float, str, list, dict with str keys); tuples
  are stored as lists; anything else is refused when written, so what is read back equals what
  was written. A JSON value of `None` is stored as SQL NULL.
- Spans are kept under the run they belong to, an orchestrator's own (a chat turn's model requests) under its
  agent run ids, while a run of that turn is stored: the turn's last run deleted takes them with it.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import random
import secrets
import socket
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, get_args

from .._errors import RunBusy, SnapshotError
from .._records import CallRecord, CallSource, CallStatus, PendingCall, RunStatus, SpanDict
from ._seal import HEAD_FORMAT, Sealer, SealKeyError, advance, chained_head, head, key_id, store_key

T = TypeVar('T')

JOURNAL_STATUSES: frozenset[str] = frozenset(get_args(CallStatus))
CALL_SOURCES: frozenset[str] = frozenset(get_args(CallSource))

SNAPSHOT_MAGIC = b'HSNP'
STORE_FORMAT = 1
"""The sealed-snapshot layout this code writes and the newest it reads."""
SUPPORTED_MONTY_FORMAT = 14
"""The newest Monty dump version the installed pydantic-monty (1.4.0) loads."""
MONTY_MAGIC = b'MONTY\x00'
_PREFIX = struct.Struct('<4sHH')  # magic, store format, Monty dump version
_MAC_LEN = 32
HEADER_LEN = _PREFIX.size + _MAC_LEN

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
]


class WouldWait(Exception):
    """Raised by `RunStore.at_once`: the write would have had to wait for a lock, and was not made."""


class StoreError(Exception):
    """The run store cannot do what was asked; the message says why and, where there is one, the fix."""


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


@dataclass(frozen=True)
class Decision:
    """A person's decision on a call that needs approval."""

    approved: bool
    reason: str | None = None
    decided_by: str | None = None
    decided_at: float = field(default_factory=time.time)


LEASE_SECONDS = 30.0
"""How long a run's lease lasts unless renewed; the running process renews it well before."""


@dataclass(frozen=True)
class Owner:
    """A process that runs runs: its host, its pid, and a token that tells two lives of a pid apart."""

    host: str
    pid: int
    token: str

    def __str__(self) -> str:
        return f'{self.host}:{self.pid}:{self.token}'

    @classmethod
    def parse(cls, text: str | None) -> Owner | None:
        if not text:
            return None
        parts = text.rsplit(':', 2)  # the host may hold colons (IPv6); pid and token never do
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])

    def alive(self) -> bool | None:
        """Whether the process still exists: known on this host only (None elsewhere)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


_this: Owner | None = None


def this_process() -> Owner:
    """This process as a run's owner (a new token after a fork)."""
    global _this
    if _this is None or _this.pid != os.getpid():
        _this = Owner(socket.gethostname(), os.getpid(), secrets.token_hex(4))
    return _this


def one_execution() -> Owner:
    """This process as the holder of one resume or one decision: a token of its own, so two of them in one
    process (the studio serves many) exclude each other as two processes do, and giving one lease back never
    frees a lease another part of this process holds."""
    me = this_process()
    return Owner(me.host, me.pid, secrets.token_hex(4))


@dataclass
class RunRow:
    """One run: a script's execution (or an orchestrator run), its outcome and its lineage."""

    run_id: str
    script: str = ''
    status: RunStatus = 'running'
    created: float = field(default_factory=time.time)
    updated: float = 0.0
    """Last write to the run or its journal; `0.0` at construction means "same as `created`"."""
    prompt: str | None = None
    """First line of the user prompt, for orchestrator runs."""
    value: Any = None
    error: str | None = None
    duration: float | None = None
    parent_run_id: str | None = None
    """The run this one was forked from."""
    fork_at: int | None = None
    orchestrator_run_id: str | None = None
    trace_context: str | None = None
    """W3C `traceparent`, so a resumed run joins the original trace."""
    inputs: dict[str, Any] | None = None
    access: dict[str, Any] | None = None
    """`{'allow': [...] | None, 'deny': [...]}` when the run was restricted."""
    catalog: dict[str, Any] | None = None
    """The catalog manifest the run ran against (`_manifest.manifest`)."""
    calls_count: int = 0
    """Maintained by the store: the number of journaled calls."""

    def __post_init__(self) -> None:
        if not self.updated:
            self.updated = self.created


@dataclass(frozen=True)
class Checkpoint:
    """A snapshot to store: the paused interpreter's Monty dump and the calls it waits on."""

    after_seq: int
    """How many calls were journaled when it was taken."""
    dump: bytes
    ledger: list[PendingCall]


@dataclass
class SnapshotRow:
    """A paused interpreter as read back from the store; `dump` has passed verification."""

    id: int
    run_id: str
    after_seq: int
    """How many calls were journaled when the snapshot was taken."""
    dump: bytes
    """The Monty dump, authenticated with this store's key; safe to load."""
    ledger: list[PendingCall]
    """Calls pending at the pause."""
    monty_format: int
    store_format: int
    created: float


@dataclass
class Conversation:
    """A chat with the orchestrator: its whole message history, so `harness chat --continue` picks it up."""

    conversation_id: str
    created: float
    updated: float
    title: str | None
    """The first prompt's first line."""
    model: str | None
    messages_json: str
    """pydantic-ai's `ModelMessagesTypeAdapter` JSON of every message so far."""


@dataclass
class Turn:
    """One orchestrator run of a conversation (an `ask` is a conversation of one turn)."""

    conversation_id: str
    turn: int
    agent_run_id: str | None
    """pydantic-ai's run id: the `orchestrator_run_id` of the workflow runs the turn started."""
    prompt: str
    answer: str | None
    status: str
    """`completed`, `failed` or `cancelled`."""
    error: str | None = None
    usage: dict[str, Any] | None = None
    """The orchestrator's own tokens and cost (`_usage.Totals.as_json()`); sub-agents' are on their runs."""
    trace_id: str | None = None
    created: float = field(default_factory=time.time)
    agent_run_ids: list[str] = field(default_factory=list)
    """Every agent run of the turn, `agent_run_id` first: one more each time it continued after approvals
    (scripts it wrote then carry that run's id as their `orchestrator_run_id`)."""


# Column order of each table as selected; the `*_from_db` helpers below depend on it.
_RUN_COLUMNS = (
    'run_id, script, status, created, updated, prompt, value_json, error, duration, '
    'parent_run_id, fork_at, orchestrator_run_id, trace_context, inputs_json, calls_count, access_json, catalog_json'
)
_RUN_READ = f'{_RUN_COLUMNS}, owner, lease_until'
"""A run as read: its columns and its lease, from which `shown_status` tells a run nobody runs any more."""
_CALL_COLUMNS = (
    'run_id, seq, callee, arguments_json, line, status, result_json, error, started, duration, '
    'attempt, source, side_effect'
)
_SEALED_RUN = (
    'run_id, script, status, created, prompt, value_json, error, parent_run_id, fork_at, orchestrator_run_id, '
    'inputs_json, access_json, catalog_json, calls_count, journal_head'
)
"""What a run's seal covers (its last column, the journal's head, is read by position in `verify`)."""
_SNAPSHOT_COLUMNS = (
    'id, run_id, after_seq, blob, ledger_json, monty_format, store_format, size, digest, created'
)
_HOLDS_AGENT_RUN = 'agent_run_id = ? OR ? IN (SELECT value FROM json_each(agent_run_ids_json))'
"""A turn one of whose agent runs is the parameter (bound twice)."""

# RunRow fields a caller may set with `update_run`, and the column each is stored in.
_UPDATABLE = {
    f.name: {'value': 'value_json', 'inputs': 'inputs_json', 'access': 'access_json', 'catalog': 'catalog_json'}.get(
        f.name, f.name
    )
    for f in fields(RunRow)
    if f.name not in ('run_id', 'calls_count')
}
_JSON_FIELDS = frozenset({'value', 'inputs', 'access', 'catalog'})


class RunStore:
    """Runs, call journal, snapshots and spans in one SQLite file (see the module docstring)."""

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
        try:
            self._key = key if key is not None else store_key()
        except SealKeyError as exc:
            raise StoreError(str(exc)) from None
        self._sealer = Sealer(self._key)
        self.key_matches = True
        """False when the store was sealed with another key: it can be read, not verified or written."""
        in_memory = self.path == ':memory:'
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

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'RunStore({self.path!r})'

    # -- runs ------------------------------------------------------------------------------------

    def create_run(self, run: RunRow, *, owner: Owner | None = None, ttl: float = LEASE_SECONDS) -> None:
        """Insert a new run; `StoreError` if the id is taken. `calls_count` starts at 0. With `owner`, the run
        is held by it from the same write (never `running` with nobody holding it)."""

        row = (
            run.run_id, run.script, run.status, run.created, run.updated, run.prompt,
            _encode(run.value, 'run value'), run.error, run.duration, run.parent_run_id, run.fork_at,
            run.orchestrator_run_id, run.trace_context, _encode(run.inputs, 'run inputs'), 0,
            _encode(run.access, 'run access'), _encode(run.catalog, 'run catalog'),
        )  # fmt: skip

        def write(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(f'INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({", ".join("?" * len(row))})', row)
            except sqlite3.IntegrityError:
                raise StoreError(f'a run with id {run.run_id!r} already exists in {self.path}.') from None
            conn.execute('UPDATE runs SET journal_head = ? WHERE run_id = ?', (head([]), run.run_id))
            if owner is not None:
                conn.execute('UPDATE runs SET owner = ?, lease_until = ? WHERE run_id = ?',
                             (str(owner), time.time() + ttl, run.run_id))
            self._reseal(conn, run.run_id)

        self._write(write)

    def update_run(self, run_id: str, *, expect_owner: Owner | None = None, **changes: Any) -> None:
        """Set some fields of a run (names as in `RunRow`); `updated` is set to now unless given.

        With `expect_owner`, only while that process holds the run's lease (else `RunBusy`); the
        lease is released in the same write when the run ends (its status is no longer `running`).
        """
        unknown = set(changes) - set(_UPDATABLE)
        if unknown:
            raise TypeError(f'update_run() cannot set {sorted(unknown)}; it sets {sorted(_UPDATABLE)}.')
        changes.setdefault('updated', time.time())
        columns = ', '.join(f'{_UPDATABLE[name]} = ?' for name in changes)
        values = [
            _encode(value, f'run {name}') if name in _JSON_FIELDS else value
            for name, value in changes.items()
        ]

        ending = changes.get('status', 'running') != 'running'
        release = ', owner = NULL, lease_until = NULL' if ending and expect_owner is not None else ''

        def write(conn: sqlite3.Connection) -> None:
            guard, params = _owner_guard(expect_owner)
            sql = f'UPDATE runs SET {columns}{release} WHERE run_id = ?{guard}'
            if conn.execute(sql, (*values, run_id, *params)).rowcount == 0:
                self._refuse_write(conn, run_id)
            self._reseal(conn, run_id)

        self._write(write)

    def runs_of_orchestrator(self, orchestrator_run_id: str) -> list[str]:
        """The ids of the runs (scripts) of one orchestrator run, oldest first."""
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT run_id FROM runs WHERE orchestrator_run_id = ? ORDER BY created, rowid', (orchestrator_run_id,)
            ).fetchall()
        )
        return [row[0] for row in rows]

    # -- approvals -------------------------------------------------------------------------------

    def decide(self, run_id: str, seq: int, decision: Decision) -> None:
        """Record a person's decision on a waiting call (a later decision replaces an earlier one)."""
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO decisions (run_id, seq, approved, reason, decided_by, decided_at) '
                'VALUES (?, ?, ?, ?, ?, ?)',
                (run_id, seq, int(decision.approved), decision.reason, decision.decided_by, decision.decided_at),
            )
        )

    def decisions(self, run_id: str) -> dict[int, Decision]:
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT seq, approved, reason, decided_by, decided_at FROM decisions WHERE run_id = ?', (run_id,)
            ).fetchall()
        )
        return {seq: Decision(bool(approved), reason, by, at) for seq, approved, reason, by, at in rows}

    def waiting_runs(self) -> list[str]:
        """Ids of the runs that wait for approvals, oldest first."""
        rows = self._read(
            lambda conn: conn.execute("SELECT run_id FROM runs WHERE status = 'waiting' ORDER BY created").fetchall()
        )
        return [row[0] for row in rows]

    def link_tool_call(self, tool_call_id: str, run_id: str) -> None:
        """Remember which run an orchestrator's (deferred) `run_workflow` call started."""
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO tool_calls (tool_call_id, run_id) VALUES (?, ?)', (tool_call_id, run_id)
            )
        )

    def run_of_tool_call(self, tool_call_id: str) -> str | None:
        sql = 'SELECT run_id FROM tool_calls WHERE tool_call_id = ?'
        row = self._read(lambda conn: conn.execute(sql, (tool_call_id,)).fetchone())
        return row[0] if row else None

    # -- one owner per run -----------------------------------------------------------------------

    def claim(
        self, run_id: str, owner: Owner, *, ttl: float = LEASE_SECONDS, unchanged_since: float | None = None
    ) -> None:
        """Take the run's lease for `owner`, or raise `RunBusy` naming the live process that holds it.

        A lease is free when nobody holds it, when it expired (its holder stopped renewing), or when
        its holder is a process on this host that no longer exists. `unchanged_since`: the run's `updated` when
        the caller read it; a run written since (another process went on with it) is `RunBusy(changed=True)`.
        """

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute('SELECT owner, lease_until, updated FROM runs WHERE run_id = ?', (run_id,)).fetchone()
            if row is None:
                raise StoreError(f'no run {run_id!r} in {self.path}.')
            holder = Owner.parse(row[0])
            if holder != owner and held(holder, row[1], time.time()):
                raise RunBusy(run_id, holder)
            if unchanged_since is not None and row[2] != unchanged_since:
                raise RunBusy(run_id, holder, changed=True)
            conn.execute('UPDATE runs SET owner = ?, lease_until = ? WHERE run_id = ?',
                         (str(owner), time.time() + ttl, run_id))

        self._write(write)

    def renew(self, run_id: str, owner: Owner, *, ttl: float = LEASE_SECONDS) -> bool:
        """Extend `owner`'s lease; False when it no longer holds it."""
        return self._write(
            lambda conn: conn.execute(
                'UPDATE runs SET lease_until = ? WHERE run_id = ? AND owner = ?',
                (time.time() + ttl, run_id, str(owner)),
            ).rowcount
            == 1
        )

    def release(self, run_id: str, owner: Owner) -> None:
        """Give the run's lease back (when holding it was all this process did, e.g. an approval)."""
        self._write(
            lambda conn: conn.execute(
                'UPDATE runs SET owner = NULL, lease_until = NULL WHERE run_id = ? AND owner = ?', (run_id, str(owner))
            )
        )

    def holder(self, run_id: str) -> tuple[Owner | None, float | None]:
        """Who holds the run's lease, and until when."""
        row = self._read(
            lambda conn: conn.execute('SELECT owner, lease_until FROM runs WHERE run_id = ?', (run_id,)).fetchone()
        )
        return (Owner.parse(row[0]), row[1]) if row else (None, None)

    # -- seals -----------------------------------------------------------------------------------

    def verify(self, run_id: str) -> list[str]:
        """What is wrong with the stored run, as sentences naming the first bad part; [] when the run,
        its journal and its seals are as this key sealed them."""
        if not self.key_matches:
            return [f'the store is sealed with another key, so run {run_id} cannot be verified here']

        def read(conn: sqlite3.Connection) -> list[str]:
            run = conn.execute(f'SELECT {_SEALED_RUN}, seal FROM runs WHERE run_id = ?', (run_id,)).fetchone()
            if run is None:
                return [f'no run {run_id!r}']
            if run[-1] is None:
                return [f'run {run_id} carries no seal (it was written before runs were sealed)']
            if not self._sealer.check(run[-1], *run[:-1]):
                return [f'run {run_id} was modified after it was written: its record does not match its seal']
            rows = conn.execute(
                f'SELECT {_CALL_COLUMNS}, seal FROM calls WHERE run_id = ? ORDER BY seq', (run_id,)
            ).fetchall()
            for expected, row in enumerate(rows, start=1):
                if row[1] != expected:
                    return [f'call #{expected} of run {run_id} is missing from its journal']
                if not self._sealer.check(row[-1], *row[:-1]):
                    return [f'call #{expected} of run {run_id} was modified after it was written (or copied from '
                            'another run): it does not match its seal']
            stored_head = run[_SEALED_RUN.count(',')] or ''
            sealed_with = head if stored_head.startswith(HEAD_FORMAT) else chained_head
            if sealed_with(row[-1] for row in rows) != stored_head:
                return [f'the journal of run {run_id} is not the one it was sealed with: a call was removed, or '
                        'put back to an earlier version of itself']
            return []

        return self._read(read)

    @staticmethod
    def _seals_at(conn: sqlite3.Connection, run_id: str, rows: list[tuple[Any, ...]]) -> list[str]:
        """The seals the journal holds now at the seqs `rows` are about to replace."""
        seqs = {int(row[1]) for row in rows}
        found = conn.execute(
            'SELECT seq, seal FROM calls WHERE run_id = ? AND seq BETWEEN ? AND ?', (run_id, min(seqs), max(seqs))
        )
        return [seal or '' for seq, seal in found if seq in seqs]

    @staticmethod
    def _next_head(
        conn: sqlite3.Connection, run_id: str, current: str, replaced: list[str], rows: list[tuple[Any, ...]]
    ) -> str:
        """The run's journal head once `rows` replaced the seals `replaced`: O(rows written)."""
        if current.startswith(HEAD_FORMAT):
            return advance(current, replaced, (str(row[-1]) for row in rows))
        # A run begun by an earlier version: its head is recomputed in this format once, from every row.
        return head(seal or '' for (seal,) in conn.execute('SELECT seal FROM calls WHERE run_id = ?', (run_id,)))

    def _reseal(self, conn: sqlite3.Connection, run_id: str) -> None:
        fields = conn.execute(f'SELECT {_SEALED_RUN} FROM runs WHERE run_id = ?', (run_id,)).fetchone()
        if fields is not None:
            conn.execute('UPDATE runs SET seal = ? WHERE run_id = ?', (self._sealer.mac(*fields), run_id))

    def _refuse_write(self, conn: sqlite3.Connection, run_id: str) -> None:
        row = conn.execute('SELECT owner FROM runs WHERE run_id = ?', (run_id,)).fetchone()
        if row is None:
            raise StoreError(f'no run {run_id!r} in {self.path}.')
        raise RunBusy(run_id, Owner.parse(row[0]), lost=True)

    def get_run(self, run_id: str) -> RunRow | None:
        """The run with this id, or with this unique id prefix (like git); `None` if none matches.

        An ambiguous prefix raises `StoreError` listing the candidates.
        """
        if not run_id:
            return None

        def read(conn: sqlite3.Connection) -> RunRow | None:
            row = conn.execute(f'SELECT {_RUN_READ} FROM runs WHERE run_id = ?', (run_id,)).fetchone()
            if row is not None:
                return _run_from_db(row)
            rows = conn.execute(
                f'SELECT {_RUN_READ} FROM runs WHERE {_prefix_clause(run_id)} ORDER BY run_id LIMIT 11',
                _prefix_params(run_id),
            ).fetchall()
            if len(rows) > 1:
                shown = ', '.join(r[0] for r in rows[:10]) + (', ...' if len(rows) > 10 else '')
                raise StoreError(
                    f'run id prefix {run_id!r} is ambiguous: it matches {shown}. Give more characters.'
                )
            return _run_from_db(rows[0]) if rows else None

        return self._read(read)

    def list_runs(
        self, limit: int = 50, *, status: Iterable[str] | None = None, orchestrator_run_id: str | None = None
    ) -> list[RunRow]:
        """Stored runs, newest first (by `created`, then by insertion order); only those with one of
        `status` (as shown: see `shown_status`), or of one orchestrator run, when given."""
        wanted = set(status) if status is not None else None
        where, params = [], []
        if wanted is not None:
            stored = sorted(wanted | ({'running'} if 'interrupted' in wanted else set()))
            where.append(f'status IN ({", ".join("?" * len(stored))})' if stored else '0')
            params += stored
        if orchestrator_run_id is not None:
            where.append('orchestrator_run_id = ?')
            params.append(orchestrator_run_id)
        clause = f'WHERE {" AND ".join(where)} ' if where else ''
        # Filtered by the status shown, the rows are read lazily until `limit` of them match.
        sql = f'SELECT {_RUN_READ} FROM runs {clause}ORDER BY created DESC, rowid DESC' + (
            '' if wanted is not None else ' LIMIT ?')

        def read(conn: sqlite3.Connection) -> list[RunRow]:
            rows = (_run_from_db(row) for row in conn.execute(sql, params if wanted is not None else (*params, limit)))
            return list(itertools.islice((r for r in rows if wanted is None or r.status in wanted), limit))

        return self._read(read)

    # -- the call journal ------------------------------------------------------------------------

    def put_calls(
        self, run_id: str, calls: Iterable[CallRecord], *, snapshot: Checkpoint | None = None,
        expect_owner: Owner | None = None, only_running: bool = False,
    ) -> int | None:
        """Write whole call rows of one run in one transaction (INSERT OR REPLACE by `seq`).

        The run must exist; its `calls_count` is brought up to date. With `snapshot`, the snapshot
        is stored in the same transaction, after the rows it depends on (one fsync, not two), and
        its id is returned. `only_running`: a row whose journaled call is no longer `running` (a join
        dropped it meanwhile) keeps what it says.
        """
        rows = [_call_to_db(run_id, call) for call in calls]
        rows = [(*row, self._sealer.mac(*row)) for row in rows]
        snapshot_row = self._snapshot_row(run_id, snapshot) if snapshot is not None else None
        if not rows and snapshot_row is None:
            return None
        # seq runs 1..n within a run, so the highest seq written is the run's call count.
        top = max((row[1] for row in rows), default=0)

        def write(conn: sqlite3.Connection) -> int | None:
            nonlocal rows
            if only_running and rows:
                settled = {seq for seq, status in conn.execute(
                    "SELECT seq, status FROM calls WHERE run_id = ? AND status != 'running'", (run_id,))}
                rows = [row for row in rows if row[1] not in settled]
                if not rows and snapshot_row is None:
                    return None
            guard, params = _owner_guard(expect_owner)
            # One read and one update of the run per write: its sealed fields, then count, head and seal.
            sealed = conn.execute(
                f'SELECT {_SEALED_RUN} FROM runs WHERE run_id = ?{guard}', (run_id, *params)
            ).fetchone()
            if sealed is None:
                if expect_owner is None:
                    raise StoreError(f'no run {run_id!r} in {self.path}: create_run() before journaling calls.')
                self._refuse_write(conn, run_id)
            if rows:
                replaced = self._seals_at(conn, run_id, rows)
                conn.executemany(
                    f'INSERT OR REPLACE INTO calls ({_CALL_COLUMNS}, seal) VALUES ({", ".join("?" * 14)})', rows
                )
                count = max(sealed[-2], top)
                journal_head = self._next_head(conn, run_id, sealed[-1] or '', replaced, rows)
                conn.execute(
                    'UPDATE runs SET calls_count = ?, journal_head = ?, updated = ?, seal = ? WHERE run_id = ?',
                    (count, journal_head, time.time(), self._sealer.mac(*sealed[:-2], count, journal_head), run_id),
                )
            else:
                conn.execute('UPDATE runs SET updated = ? WHERE run_id = ?', (time.time(), run_id))
            return self._insert_snapshot(conn, snapshot_row) if snapshot_row is not None else None

        return self._write(write)

    def calls(self, run_id: str) -> list[CallRecord]:
        """The run's journal, ordered by `seq`."""
        return self._read(
            lambda conn: [
                _call_from_db(row)
                for row in conn.execute(
                    f'SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? ORDER BY seq', (run_id,)
                )
            ]
        )

    def call(self, run_id: str, seq: int) -> CallRecord | None:
        """One journaled call, or None."""
        row = self._read(
            lambda conn: conn.execute(f'SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND seq = ?',
                                      (run_id, seq)).fetchone()
        )
        return _call_from_db(row) if row is not None else None

    # -- snapshots -------------------------------------------------------------------------------

    def _snapshot_row(self, run_id: str, snapshot: Checkpoint) -> tuple[Any, ...]:
        ledger = snapshot.ledger
        if not isinstance(ledger, list) or not all(isinstance(entry, dict) for entry in ledger):
            raise TypeError('a snapshot ledger is a list of dicts {call_id, seq, callee, arguments, line}.')
        ledger_json = _encode_required(ledger, 'snapshot ledger')
        sealed = self._seal(snapshot.dump, _binding(run_id, snapshot.after_seq, ledger_json))
        return (
            run_id, snapshot.after_seq, sealed, ledger_json, _monty_format(snapshot.dump), STORE_FORMAT,
            len(sealed), hashlib.sha256(sealed).hexdigest(), time.time(),
        )  # fmt: skip

    @staticmethod
    def _insert_snapshot(conn: sqlite3.Connection, row: tuple[Any, ...]) -> int:
        """Insert a snapshot row of a run the transaction has found (`put_calls`)."""
        cursor = conn.execute(
            'INSERT INTO snapshots (run_id, after_seq, blob, ledger_json, monty_format, store_format, '
            'size, digest, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
            row,
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def latest_snapshot(self, run_id: str) -> SnapshotRow | None:
        """The run's most recently taken snapshot, verified; `SnapshotError` if it fails verification."""
        return self._snapshot(
            f'SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE run_id = ? ORDER BY id DESC', (run_id,)
        )

    def snapshot_after(self, run_id: str, after_seq: int) -> SnapshotRow | None:
        """The newest snapshot taken with at most `after_seq` calls journaled, verified."""
        return self._snapshot(
            f'SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE run_id = ? AND after_seq <= ? '
            'ORDER BY after_seq DESC, id DESC',
            (run_id, after_seq),
        )

    def _seal(self, dump: bytes, binding: bytes = b'') -> bytes:
        """`HSNP` + u16 store format + u16 Monty format + HMAC-SHA256(key, those 8 bytes + binding + dump)
        + dump. The binding (run id, position, ledger) ties the blob to its row: a snapshot copied to
        another run, or its ledger edited, does not verify."""
        monty_format = _monty_format(dump)
        if monty_format > SUPPORTED_MONTY_FORMAT:
            raise ValueError(
                f'this Monty dump is format {monty_format}, newer than the {SUPPORTED_MONTY_FORMAT} this '
                'harness knows: the installed pydantic-monty does not match the one harness pins.'
            )
        prefix = _PREFIX.pack(SNAPSHOT_MAGIC, STORE_FORMAT, monty_format)
        return prefix + self._sealer.blob(prefix + binding + dump) + bytes(dump)

    # -- offline traces --------------------------------------------------------------------------

    def add_spans(self, run_id: str, spans: list[SpanDict]) -> None:
        """Append a batch of span dicts; values that are not JSON are stored as their `str`."""
        self._write(lambda conn: _insert_spans(conn, run_id, spans))

    def spans(self, run_id: str) -> list[SpanDict]:
        """Every span stored for the run, batches in the order they were added."""
        return self._read(lambda conn: _spans_of(conn, [run_id]))

    def add_orchestrator_spans(self, agent_run_id: str, spans: list[SpanDict]) -> None:
        """Append a batch of an orchestrator agent run's own spans (its model requests, its tool executions).
        Kept while a run (script) of its turn is: `delete_run` deletes them with the last. A turn that ran no
        script keeps none, as no run would ever show or delete them. Store the turn first (`add_turn`)."""

        def write(conn: sqlite3.Connection) -> None:
            if _referenced(conn, _turn_agent_runs(conn, agent_run_id)):
                _insert_spans(conn, agent_run_id, spans)

        self._write(write)

    def orchestrator_spans(self, agent_run_id: str) -> list[SpanDict]:
        """The orchestrator's own spans of every agent run of the turn `agent_run_id` is one of, in the order
        stored: a turn that continued after approvals has one agent run more each time."""
        return self._read(lambda conn: _spans_of(conn, _turn_agent_runs(conn, agent_run_id)))

    # -- the terminal's records: usage, conversations, cancel requests, deletion ------------------

    def set_usage(self, run_id: str, usage: dict[str, Any]) -> None:
        """Store a run's token and cost totals (`_usage.Totals.as_json()`), replacing earlier ones."""
        usage_json = _encode_required(usage, 'run usage')
        self._write(lambda conn: conn.execute(
            'INSERT OR REPLACE INTO run_usage (run_id, usage_json) VALUES (?, ?)', (run_id, usage_json)
        ))

    def usage(self, run_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored totals of those runs that have any, by run id."""
        ids = list(run_ids)
        if not ids:
            return {}
        rows = self._read(lambda conn: conn.execute(
            f'SELECT run_id, usage_json FROM run_usage WHERE run_id IN ({_marks(ids)})', ids
        ).fetchall())
        return {run_id: json.loads(text) for run_id, text in rows}

    def short_ids(self, run_ids: Iterable[str], minimum: int = 7) -> dict[str, str]:
        """The shortest prefix of each id (at least `minimum` characters) that names no other run, as git
        abbreviates: one more character than the longest prefix it shares with its neighbours in id order."""

        def read(conn: sqlite3.Connection) -> dict[str, str]:
            short = {}
            for run_id in run_ids:
                shared = 0
                for sql in ('SELECT max(run_id) FROM runs WHERE run_id < ?',
                            'SELECT min(run_id) FROM runs WHERE run_id > ?'):
                    other = conn.execute(sql, (run_id,)).fetchone()[0]
                    if other is not None:
                        shared = max(shared, _common_prefix(run_id, other))
                short[run_id] = run_id[: max(minimum, shared + 1)]
            return short

        return self._read(read)

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its journal, snapshots, spans and totals (runs forked from it keep theirs), and
        with the last run of a turn, the orchestrator's spans of that turn (`add_orchestrator_spans`)."""

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute('SELECT orchestrator_run_id FROM runs WHERE run_id = ?', (run_id,)).fetchone()
            if row is None:
                raise StoreError(f'no run {run_id!r} in {self.path}.')
            conn.execute('DELETE FROM runs WHERE run_id = ?', (run_id,))
            for table in ('calls', 'snapshots', 'spans', 'run_usage', 'cancel_requests'):
                conn.execute(f'DELETE FROM {table} WHERE run_id = ?', (run_id,))
            agent_runs = _turn_agent_runs(conn, row[0]) if row[0] else []
            if agent_runs and not _referenced(conn, agent_runs):  # the turn's last run: its orchestrator's spans too
                conn.execute(f'DELETE FROM spans WHERE run_id IN ({_marks(agent_runs)})', agent_runs)

        self._write(write)

    def snapshot_positions(self, run_id: str) -> list[int]:
        """The call counts (`after_seq`) the run has snapshots at: the valid `replay --from K`."""
        rows = self._read(lambda conn: conn.execute(
            'SELECT DISTINCT after_seq FROM snapshots WHERE run_id = ? ORDER BY after_seq', (run_id,)
        ).fetchall())
        return [row[0] for row in rows]

    def request_cancel(self, run_id: str) -> None:
        """Ask the process that runs `run_id` to cancel it (it looks at each pause of the script)."""
        self._write(lambda conn: conn.execute(
            'INSERT OR REPLACE INTO cancel_requests (run_id, requested) VALUES (?, ?)', (run_id, time.time())
        ))

    def cancel_requested(self, run_id: str) -> bool:
        return self._read(lambda conn: conn.execute(
            'SELECT 1 FROM cancel_requests WHERE run_id = ?', (run_id,)
        ).fetchone()) is not None

    def clear_cancel(self, run_id: str) -> None:
        self._write(lambda conn: conn.execute('DELETE FROM cancel_requests WHERE run_id = ?', (run_id,)))

    def save_conversation(self, conversation: Conversation) -> None:
        """Insert or replace a conversation (its whole message history, as pydantic-ai's JSON)."""
        row = (conversation.conversation_id, conversation.created, conversation.updated, conversation.title,
               conversation.model, conversation.messages_json)
        self._write(lambda conn: conn.execute(
            'INSERT OR REPLACE INTO conversations (conversation_id, created, updated, title, model, messages_json) '
            'VALUES (?, ?, ?, ?, ?, ?)', row
        ))

    def get_conversation(self, conversation_id: str | None = None) -> Conversation | None:
        """The conversation with this id or unique id prefix; the latest one when `conversation_id` is None."""
        columns = 'conversation_id, created, updated, title, model, messages_json'

        def read(conn: sqlite3.Connection) -> Conversation | None:
            if conversation_id is None:
                rows = conn.execute(f'SELECT {columns} FROM conversations ORDER BY updated DESC LIMIT 1').fetchall()
            else:
                rows = conn.execute(
                    f'SELECT {columns} FROM conversations WHERE substr(conversation_id, 1, ?) = ? LIMIT 2',
                    (len(conversation_id), conversation_id),
                ).fetchall()
                if len(rows) > 1:
                    raise StoreError(f'conversation id prefix {conversation_id!r} is ambiguous: give more characters.')
            return Conversation(*rows[0]) if rows else None

        return self._read(read)

    def add_turn(self, turn: Turn) -> None:
        agent_runs = list(dict.fromkeys(a for a in (turn.agent_run_id, *turn.agent_run_ids) if a))
        row = (turn.conversation_id, turn.turn, turn.agent_run_id, turn.prompt, turn.answer, turn.status, turn.error,
               _encode(turn.usage, 'turn usage'), turn.trace_id, turn.created, _encode(agent_runs or None, 'turn runs'))
        self._write(lambda conn: conn.execute(
            'INSERT OR REPLACE INTO turns (conversation_id, turn, agent_run_id, prompt, answer, status, error, '
            'usage_json, trace_id, created, agent_run_ids_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', row
        ))

    def turns(self, conversation_id: str | None = None, *, agent_run_id: str | None = None) -> list[Turn]:
        """A conversation's turns in order, or the turn one orchestrator agent run (any of a turn's) belongs to."""
        columns = ('conversation_id, turn, agent_run_id, prompt, answer, status, error, usage_json, trace_id, created, '
                   'agent_run_ids_json')
        if agent_run_id is not None:
            sql, params = f'SELECT {columns} FROM turns WHERE {_HOLDS_AGENT_RUN}', (agent_run_id, agent_run_id)
        else:
            sql, params = f'SELECT {columns} FROM turns WHERE conversation_id = ? ORDER BY turn', (conversation_id,)
        rows = self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [Turn(*row[:7], usage=_decode(row[7]), trace_id=row[8], created=row[9],
                     agent_run_ids=_decode(row[10]) or ([row[2]] if row[2] else [])) for row in rows]


    # -- the studio's reads (`harness ui`) ---------------------------------------------------------

    def status_counts(self) -> dict[str, int]:
        """How many runs have each status as shown (the studio's filter shows them)."""

        def read(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            ended = "SELECT status, count(*) FROM runs WHERE status != 'running' GROUP BY status"
            running = "SELECT owner, lease_until FROM runs WHERE status = 'running'"
            return conn.execute(ended).fetchall(), conn.execute(running).fetchall()

        ended, running = self._read(read)
        counts = {status: n for status, n in ended}
        now = time.time()
        for owner, lease_until in running:
            shown = shown_status('running', owner, lease_until, now)
            counts[shown] = counts.get(shown, 0) + 1
        return counts

    def forks_of(self, run_id: str) -> list[RunRow]:
        """The runs forked from `run_id`, oldest first."""
        return self._read(lambda conn: [
            _run_from_db(row) for row in conn.execute(
                f'SELECT {_RUN_READ} FROM runs WHERE parent_run_id = ? ORDER BY created, rowid', (run_id,)
            )
        ])

    def list_conversations(self, limit: int = 50) -> list[dict[str, Any]]:
        """Stored conversations, the latest updated first: conversation_id, created, updated, title, model and
        their number of turns (not their messages)."""
        rows = self._read(lambda conn: conn.execute(
            'SELECT c.conversation_id, c.created, c.updated, c.title, c.model, '
            '(SELECT count(*) FROM turns t WHERE t.conversation_id = c.conversation_id) '
            'FROM conversations c ORDER BY c.updated DESC LIMIT ?', (limit,)
        ).fetchall())
        keys = ('conversation_id', 'created', 'updated', 'title', 'model', 'turns')
        return [dict(zip(keys, row, strict=True)) for row in rows]

    # -- internals -------------------------------------------------------------------------------

    def _snapshot(self, sql: str, params: tuple[Any, ...]) -> SnapshotRow | None:
        row = self._read(lambda conn: conn.execute(sql + ' LIMIT 1', params).fetchone())
        if row is None:
            return None
        snap_id, run_id, after_seq, blob, ledger_json, monty_format, store_format, size, digest, created = row
        dump = self._unseal(bytes(blob), what=f'snapshot {snap_id} of run {run_id}', size=size, digest=digest,
                            binding=_binding(run_id, after_seq, ledger_json))
        return SnapshotRow(
            id=snap_id, run_id=run_id, after_seq=after_seq, dump=dump, ledger=json.loads(ledger_json),
            monty_format=monty_format, store_format=store_format, created=created,
        )  # fmt: skip

    def _unseal(
        self, blob: bytes, *, what: str, size: int | None, digest: str | None, binding: bytes = b''
    ) -> bytes:
        """Checks in an order that names the real cause: damage first, then versions, then the key."""
        minimum = HEADER_LEN + len(MONTY_MAGIC) + 2
        if len(blob) < (minimum if size is None else max(size, minimum)):
            expected = f'at least {minimum}' if size is None or size < minimum else str(size)
            raise SnapshotError(
                f'{what} is truncated ({len(blob)} of {expected} bytes): the stored copy is damaged and will '
                'not be loaded. Replay the run from its journal instead.'
            )
        if digest is not None and not hmac.compare_digest(hashlib.sha256(blob).hexdigest(), digest):
            raise SnapshotError(
                f'{what} was modified after it was written (its bytes no longer match the checksum recorded '
                'with it): it is corrupt or was tampered with, and will not be loaded. Replay the run from '
                'its journal.'
            )
        magic, store_format, monty_format = _PREFIX.unpack_from(blob)
        if magic != SNAPSHOT_MAGIC:
            raise SnapshotError(
                f'{what} is not a sealed harness snapshot (bad magic {magic!r}, expected '
                f'{SNAPSHOT_MAGIC!r}); it will not be loaded.'
            )
        if store_format > STORE_FORMAT:
            raise SnapshotError(
                f'{what} was written in snapshot format {store_format} by a newer harness; this one reads '
                f'up to format {STORE_FORMAT}. Upgrade harness to resume it.'
            )
        if store_format < 1:
            raise SnapshotError(f'{what} has an invalid snapshot format {store_format}: it is corrupt.')
        prefix, mac, dump = blob[: _PREFIX.size], blob[_PREFIX.size : HEADER_LEN], blob[HEADER_LEN:]
        if not hmac.compare_digest(mac, self._sealer.blob(prefix + binding + dump)):
            if digest is not None:
                raise SnapshotError(
                    f"{what} does not authenticate with this store's key: it was sealed by another store "
                    "(snapshots cannot be copied between store files), this store's key was replaced, or it "
                    'was altered together with its recorded checksum. It will not be loaded; resume or '
                    'replay it from the store that wrote it.'
                )
            raise SnapshotError(
                f"{what} does not authenticate with this store's key: it was modified after it was sealed, "
                'or sealed by another store. It will not be loaded.'
            )
        if monty_format > SUPPORTED_MONTY_FORMAT:
            raise SnapshotError(
                f'{what} holds a Monty dump in format {monty_format}, but the installed pydantic-monty '
                f'reads up to format {SUPPORTED_MONTY_FORMAT}. Upgrade pydantic-monty (and harness) to '
                'resume it.'
            )
        if not dump.startswith(MONTY_MAGIC) or _monty_format(dump) != monty_format:
            raise SnapshotError(f'{what} does not hold the Monty dump its header describes: it is corrupt.')
        return dump

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
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(target),)
                )
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('key_id', ?)", (key_id(self._key),)
                )
                return conn.execute("SELECT value FROM meta WHERE key = 'key_id'").fetchone()[0]

            return self._write(write, migrating=True)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f'{self.path} is not a usable harness run store: {exc}') from exc

    def _write(self, fn: Callable[[sqlite3.Connection], T], *, migrating: bool = False) -> T:
        """Run `fn` in one `BEGIN IMMEDIATE` transaction: all of it commits, or none of it."""
        if not self.key_matches and not migrating:
            raise StoreError(
                f'the run store {self.path} is sealed with another key: it can be read, but not written, resumed '
                'or replayed here. Set HARNESS_SECRET to the secret that sealed it, or use another store.'
            )

        def transaction(conn: sqlite3.Connection) -> T:
            conn.execute('BEGIN IMMEDIATE')
            try:
                result = fn(conn)
                conn.execute('COMMIT')
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute('ROLLBACK')
                raise

        return self._retry(transaction)

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

    # -- evals -----------------------------------------------------------------------------------
    # Rows are dicts with the column names as keys (`_evals` gives them their shape); JSON columns are
    # `summary` (plain data) and `report_json` (pydantic-evals' own JSON of its report, kept as text).

    def create_eval(self, row: dict[str, Any]) -> None:
        """Insert an eval as `running`: eval_id, name, dataset, and optionally source, model, instructions,
        baseline_id, reused_from."""
        now = time.time()
        values = (row['eval_id'], now, now, 'running', row['name'], row['dataset'], row.get('source'),
                  row.get('model'), row.get('instructions'), row.get('baseline_id'), row.get('reused_from'))
        self._write(lambda conn: conn.execute(
            'INSERT INTO evals (eval_id, created, updated, status, name, dataset, source, model, instructions, '
            'baseline_id, reused_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', values
        ))

    def finish_eval(self, eval_id: str, *, status: str, report_json: str | None = None,
                    summary: dict[str, Any] | None = None) -> None:
        """Record how an eval ended: `completed` with its report and summary, or `interrupted`."""
        summary_json = _encode(summary, 'eval summary')
        self._write(lambda conn: conn.execute(
            'UPDATE evals SET status = ?, updated = ?, report_json = coalesce(?, report_json), '
            'summary_json = coalesce(?, summary_json) WHERE eval_id = ?',
            (status, time.time(), report_json, summary_json, eval_id),
        ))

    def add_eval_case(self, eval_id: str, case_name: str, orchestrator_run_id: str | None, error: str | None,
                      usage: dict[str, Any] | None) -> None:
        """One case of an eval: the orchestrator run it made (its scripts are runs with that
        `orchestrator_run_id`), its failure if it failed, and its tokens and cost."""
        values = (eval_id, case_name, orchestrator_run_id, error, _encode(usage, 'eval case usage'))
        self._write(lambda conn: conn.execute(
            'INSERT OR REPLACE INTO eval_cases (eval_id, case_name, orchestrator_run_id, error, usage_json) '
            'VALUES (?, ?, ?, ?, ?)', values
        ))

    def get_eval(self, eval_id: str) -> dict[str, Any] | None:
        """The eval with this id or unique id prefix; `StoreError` naming the candidates when ambiguous."""
        if not eval_id:
            return None

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            exact = conn.execute(f'SELECT {self._EVAL_COLUMNS} FROM evals WHERE eval_id = ?', (eval_id,)).fetchall()
            return exact or conn.execute(
                f'SELECT {self._EVAL_COLUMNS} FROM evals WHERE substr(eval_id, 1, ?) = ? ORDER BY eval_id LIMIT 11',
                (len(eval_id), eval_id),
            ).fetchall()

        rows = self._read(read)
        if len(rows) > 1:
            shown = ', '.join(r[0] for r in rows[:10]) + (', ...' if len(rows) > 10 else '')
            raise StoreError(f'eval id prefix {eval_id!r} is ambiguous: it matches {shown}. Give more characters.')
        return self._eval_row(rows[0]) if rows else None

    def list_evals(self, limit: int = 50) -> list[dict[str, Any]]:
        """Stored evals, newest first."""
        rows = self._read(lambda conn: conn.execute(
            f'SELECT {self._EVAL_COLUMNS} FROM evals ORDER BY created DESC, rowid DESC LIMIT ?', (limit,)
        ).fetchall())
        return [self._eval_row(row) for row in rows]

    def eval_cases(self, eval_id: str) -> list[dict[str, Any]]:
        """An eval's cases as they finished: case_name, orchestrator_run_id, error, usage."""
        rows = self._read(lambda conn: conn.execute(
            'SELECT case_name, orchestrator_run_id, error, usage_json FROM eval_cases WHERE eval_id = ? ORDER BY rowid',
            (eval_id,),
        ).fetchall())
        return [{'case_name': name, 'orchestrator_run_id': run, 'error': error, 'usage': _decode(usage)}
                for name, run, error, usage in rows]

    _EVAL_COLUMNS = ('eval_id, created, updated, status, name, dataset, source, model, instructions, baseline_id, '
                     'reused_from, report_json, summary_json')

    @classmethod
    def _eval_row(cls, row: tuple[Any, ...]) -> dict[str, Any]:
        found = dict(zip(cls._EVAL_COLUMNS.split(', '), row, strict=True))
        found['summary'] = _decode(found.pop('summary_json'))
        return found


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _marks(values: list[Any]) -> str:
    """`?, ?, ?`: one parameter per value, for `IN (...)`."""
    return ', '.join('?' * len(values))


def _insert_spans(conn: sqlite3.Connection, run_id: str, spans: list[SpanDict]) -> None:
    spans_json = json.dumps(spans, ensure_ascii=False, separators=(',', ':'), default=str)
    conn.execute('INSERT INTO spans (run_id, spans_json, created) VALUES (?, ?, ?)', (run_id, spans_json, time.time()))


def _spans_of(conn: sqlite3.Connection, keys: list[str]) -> list[SpanDict]:
    """The spans stored under any of `keys`, batches in the order they were added."""
    batches = conn.execute(f'SELECT spans_json FROM spans WHERE run_id IN ({_marks(keys)}) ORDER BY id', keys)
    return [span for (text,) in batches.fetchall() for span in json.loads(text)]


def _turn_agent_runs(conn: sqlite3.Connection, agent_run_id: str) -> list[str]:
    """Every agent run of the turn `agent_run_id` is one of; just it when no stored turn has it."""
    row = conn.execute(f'SELECT agent_run_id, agent_run_ids_json FROM turns WHERE {_HOLDS_AGENT_RUN} LIMIT 1',
                       (agent_run_id, agent_run_id)).fetchone()
    return (_decode(row[1]) or [row[0]]) if row is not None else [agent_run_id]


def _referenced(conn: sqlite3.Connection, agent_runs: list[str]) -> bool:
    """Whether a stored run (script) was written by one of these orchestrator agent runs."""
    sql = f'SELECT 1 FROM runs WHERE orchestrator_run_id IN ({_marks(agent_runs)}) LIMIT 1'
    return conn.execute(sql, agent_runs).fetchone() is not None


def _binding(run_id: str, after_seq: int, ledger_json: str) -> bytes:
    return json.dumps([run_id, after_seq, ledger_json]).encode()


def _owner_guard(owner: Owner | None) -> tuple[str, tuple[Any, ...]]:
    return (' AND owner = ?', (str(owner),)) if owner is not None else ('', ())


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, 'sqlite_errorcode', None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc)
    return 'database is locked' in text or 'database is busy' in text or 'database table is locked' in text


def _schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _monty_format(dump: bytes) -> int:
    if len(dump) < len(MONTY_MAGIC) + 2 or not dump.startswith(MONTY_MAGIC):
        raise ValueError("not a Monty dump: it does not start with b'MONTY\\x00' and a u16 version.")
    return int.from_bytes(dump[len(MONTY_MAGIC) : len(MONTY_MAGIC) + 2], 'little')


def _check_status(status: str) -> None:
    if status not in JOURNAL_STATUSES:
        raise ValueError(f'unknown call status {status!r}; expected one of {sorted(JOURNAL_STATUSES)}.')


def _prefix_clause(prefix: str) -> str:
    # A range over the primary key uses its index; it is exact for BINARY collation because UTF-8
    # byte order equals code point order. The last character must have a successor outside surrogates.
    last = ord(prefix[-1])
    if last < 0xD7FF or 0xE000 <= last < 0x10FFFF:
        return 'run_id >= ? AND run_id < ?'
    return 'substr(run_id, 1, ?) = ?'


def _prefix_params(prefix: str) -> tuple[Any, ...]:
    if _prefix_clause(prefix).startswith('substr'):
        return (len(prefix), prefix)
    return (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))


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


def _encode_required(value: Any, what: str) -> str:
    return json.dumps(_plain(value, what), ensure_ascii=False, separators=(',', ':'))


def _encode(value: Any, what: str) -> str | None:
    return None if value is None else _encode_required(value, what)


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def held(holder: Owner | None, lease_until: float | None, now: float) -> bool:
    """Whether a live process holds a run's lease: one is named, its lease has not expired, and it is not
    known to be gone (a process of this host that no longer exists)."""
    return holder is not None and (lease_until or 0) > now and holder.alive() is not False


def shown_status(status: RunStatus, owner: str | None, lease_until: float | None, now: float) -> RunStatus:
    """A run's status as every reader sees it: one stored `running` that no live process holds (its holder
    was killed, or stopped renewing its lease) is `interrupted`, as `resume` finds it. Computed when read,
    never written, so no reader races the writer that still holds the run."""
    if status == 'running' and not held(Owner.parse(owner), lease_until, now):
        return 'interrupted'
    return status


def _run_from_db(row: tuple[Any, ...]) -> RunRow:
    (run_id, script, status, created, updated, prompt, value_json, error, duration, parent_run_id, fork_at,
     orchestrator_run_id, trace_context, inputs_json, calls_count, access_json, catalog_json, owner,
     lease_until) = row  # fmt: skip
    status = shown_status(status, owner, lease_until, time.time())
    return RunRow(
        run_id=run_id, script=script, status=status, created=created,
        updated=updated, prompt=prompt, value=_decode(value_json), error=error, duration=duration,
        parent_run_id=parent_run_id, fork_at=fork_at, orchestrator_run_id=orchestrator_run_id,
        trace_context=trace_context, inputs=_decode(inputs_json), calls_count=calls_count,
        access=_decode(access_json), catalog=_decode(catalog_json),
    )  # fmt: skip


def _call_to_db(run_id: str, call: CallRecord) -> tuple[Any, ...]:
    """The one converter from a call record to its row (refusing what would not read back equal)."""
    _check_status(call.status)
    if call.source not in CALL_SOURCES:
        raise ValueError(f'unknown call source {call.source!r}; expected one of {sorted(CALL_SOURCES)}.')
    return (
        run_id, call.seq, call.callee, _encode_required(call.arguments, f'arguments of call {call.seq}'), call.line,
        call.status, _encode(call.result if call.status == 'ok' else None, f'result of call {call.seq}'), call.error,
        call.started, call.duration, call.attempt, call.source, int(call.side_effect),
    )  # fmt: skip


def _call_from_db(row: tuple[Any, ...]) -> CallRecord:
    """The one converter back: a journal row as the record the engine works with."""
    (_run_id, seq, callee, arguments_json, line, status, result_json, error, started, duration, attempt,
     source, side_effect) = row  # fmt: skip
    return CallRecord(
        seq=seq, callee=callee, arguments=json.loads(arguments_json), line=line, status=status,
        result=_decode(result_json), error=error, started=started, duration=duration, attempt=attempt,
        source=source, side_effect=bool(side_effect),
    )  # fmt: skip
