"""The engine's tables: runs, their call journal, the decisions on waiting calls, and the lease on each run.

Invariants:

- One owner per run: the process running a run holds its lease (`owner`, `lease_until`), renewed while
  it runs and released with the final status; every journal write and the final status are conditioned on
  holding it (`expect_owner`). A run stored `running` that no live process holds (its holder was killed, or
  stopped renewing) is read as `interrupted` everywhere (`shown_status`): computed on read, never written, so
  no reader races the holder.
- Sealed as written (`_seal`): every journal row over its run, its seq and all it says (its cost once settled,
  `sealed_call`); every run over what it ran, how it ended, its journal head and its generation (`_freshness`), brought
  up to date in the same transaction; `verify` names the first part that does not match, or a rollback.
- `CallRecord` and its row convert in one pair of functions (`_call_to_db`, `_call_from_db`).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import fields
from typing import Any, get_args

from .._errors import RunBusy
from .._records import CallRecord, CallSource, CallStatus, Checkpoint, Decision, Owner, RunRow, RunStatus
from ._connection import StoreError, decode, encode, encode_required
from ._freshness import SEALED_GENERATION, rolled_back
from ._seal import HEAD_FORMAT, advance, chained_head, head
from ._snapshots import Snapshots

JOURNAL_STATUSES: frozenset[str] = frozenset(get_args(CallStatus))
CALL_SOURCES: frozenset[str] = frozenset(get_args(CallSource))

LEASE_SECONDS = 30.0
"""How long a run's lease lasts unless renewed; the running process renews it well before."""

# Column order of each table as selected; the `*_from_db` helpers below depend on it.
_RUN_COLUMNS = (
    'run_id, script, status, created, updated, prompt, value_json, error, duration, '
    'parent_run_id, fork_at, orchestrator_run_id, trace_context, inputs_json, calls_count, access_json, catalog_json, '
    'conversation_id, budget_key'
)
_RUN_READ = f'{_RUN_COLUMNS}, owner, lease_until'
"""A run as read: its columns and its lease, from which `shown_status` tells a run nobody runs any more."""
_CALL_COLUMNS = (
    'run_id, seq, callee, arguments_json, line, status, result_json, error, started, duration, '
    'attempt, source, side_effect, cost_usd'
)
_SEALED_RUN = (
    f'run_id, script, status, created, prompt, value_json, error, parent_run_id, {SEALED_GENERATION}, '
    'CASE WHEN conversation_id IS NULL THEN orchestrator_run_id ELSE json_array(orchestrator_run_id, conversation_id) '
    'END, inputs_json, access_json, catalog_json, calls_count, journal_head'
)
"""What a run's seal covers (its last column, the journal's head, is read by position in `verify`). A run's conversation
is sealed beside its orchestrator run, and only when it has a conversation, so runs sealed before the column existed
still verify."""

# RunRow fields a caller may set with `update_run`, and the column each is stored in.
_UPDATABLE = {
    f.name: {'value': 'value_json', 'inputs': 'inputs_json', 'access': 'access_json', 'catalog': 'catalog_json'}.get(
        f.name, f.name
    )
    for f in fields(RunRow)
    if f.name not in ('run_id', 'calls_count')
}
_JSON_FIELDS = frozenset({'value', 'inputs', 'access', 'catalog'})


class Runs(Snapshots):
    """Runs and their journal (a snapshot is written in a journal write's transaction: `put_calls`)."""

    lease_seconds: float = LEASE_SECONDS
    """How long a lease this store gives lasts unless renewed (`_leases` renews it every third of that)."""

    # -- runs ------------------------------------------------------------------------------------

    def create_run(self, run: RunRow, *, owner: Owner | None = None, ttl: float | None = None) -> None:
        """Insert a new run; `StoreError` if the id is taken. `calls_count` starts at 0. With `owner`, the run
        is held by it from the same write (never `running` with nobody holding it)."""

        row = (
            run.run_id, run.script, run.status, run.created, run.updated, run.prompt,
            encode(run.value, 'run value'), run.error, run.duration, run.parent_run_id, run.fork_at,
            run.orchestrator_run_id, run.trace_context, encode(run.inputs, 'run inputs'), 0,
            encode(run.access, 'run access'), encode(run.catalog, 'run catalog'), run.conversation_id, run.budget_key,
        )  # fmt: skip

        def write(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(f'INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({", ".join("?" * len(row))})', row)
            except sqlite3.IntegrityError:
                raise StoreError(f'a run with id {run.run_id!r} already exists in {self.path}.') from None
            conn.execute('UPDATE runs SET journal_head = ? WHERE run_id = ?', (head([]), run.run_id))
            if owner is not None:
                conn.execute(
                    'UPDATE runs SET owner = ?, lease_until = ? WHERE run_id = ?',
                    (str(owner), time.time() + self._ttl(ttl), run.run_id),
                )
            self._reseal(conn, run.run_id, created=True)

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
        values = [encode(value, f'run {name}') if name in _JSON_FIELDS else value for name, value in changes.items()]

        ending = changes.get('status', 'running') != 'running'
        release = ', owner = NULL, lease_until = NULL' if ending and expect_owner is not None else ''

        def write(conn: sqlite3.Connection) -> None:
            guard, params = _owner_guard(expect_owner)
            sql = f'UPDATE runs SET {columns}{release} WHERE run_id = ?{guard}'
            if conn.execute(sql, (*values, run_id, *params)).rowcount == 0:
                self._refuse_write(conn, run_id)
            self._reseal(conn, run_id)

        self._write(write)

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
                raise StoreError(f'run id prefix {run_id!r} is ambiguous: it matches {shown}. Give more characters.')
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
            '' if wanted is not None else ' LIMIT ?'
        )

        def read(conn: sqlite3.Connection) -> list[RunRow]:
            rows = (_run_from_db(row) for row in conn.execute(sql, params if wanted is not None else (*params, limit)))
            return list(itertools.islice((r for r in rows if wanted is None or r.status in wanted), limit))

        return self._read(read)

    def runs_of_orchestrator(self, orchestrator_run_id: str) -> list[str]:
        """The ids of the runs (scripts) of one orchestrator run, oldest first."""
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT run_id FROM runs WHERE orchestrator_run_id = ? ORDER BY created, rowid', (orchestrator_run_id,)
            ).fetchall()
        )
        return [row[0] for row in rows]

    def side_effects(
        self, orchestrator_run_id: str | None, conversation_id: str | None
    ) -> list[tuple[RunRow, list[CallRecord]]]:
        """The runs of one orchestrator run or conversation that journaled a side-effecting success, oldest first,
        each with those calls (their status `ok`, any source: the caller picks the effects, `_effects.is_effect`)."""

        def read(conn: sqlite3.Connection) -> list[tuple[RunRow, list[CallRecord]]]:
            runs = [
                _run_from_db(row)
                for row in conn.execute(
                    f'SELECT {_RUN_READ} FROM runs WHERE (orchestrator_run_id = ? OR conversation_id = ?) AND EXISTS '
                    "(SELECT 1 FROM calls c WHERE c.run_id = runs.run_id AND c.side_effect = 1 AND c.status = 'ok') "
                    'ORDER BY created, rowid',
                    (orchestrator_run_id, conversation_id),
                )
            ]
            return [
                (
                    run,
                    [
                        _call_from_db(row)
                        for row in conn.execute(
                            f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND side_effect = 1 AND status = 'ok' "
                            'ORDER BY seq',
                            (run.run_id,),
                        )
                    ],
                )
                for run in runs
            ]

        if orchestrator_run_id is None and conversation_id is None:
            return []
        return self._read(read)

    def statuses_of_conversation(self, conversation_id: str) -> list[tuple[str, RunStatus]]:
        """The runs (scripts) the turns of one conversation wrote, oldest first: their ids and shown statuses."""
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT run_id, status, owner, lease_until FROM runs WHERE conversation_id = ? ORDER BY created, rowid',
                (conversation_id,),
            ).fetchall()
        )
        now = time.time()
        return [(run_id, shown_status(status, owner, lease_until, now)) for run_id, status, owner, lease_until in rows]

    def forks_of(self, run_id: str) -> list[RunRow]:
        """The runs forked from `run_id`, oldest first."""
        return self._read(
            lambda conn: [
                _run_from_db(row)
                for row in conn.execute(
                    f'SELECT {_RUN_READ} FROM runs WHERE parent_run_id = ? ORDER BY created, rowid', (run_id,)
                )
            ]
        )

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

    # -- the call journal ------------------------------------------------------------------------

    def put_calls(
        self,
        run_id: str,
        calls: Iterable[CallRecord],
        *,
        snapshot: Checkpoint | None = None,
        expect_owner: Owner | None = None,
        only_running: bool = False,
    ) -> int | None:
        """Write whole call rows of one run in one transaction (INSERT OR REPLACE by `seq`).

        The run must exist; its `calls_count` is brought up to date. With `snapshot`, the snapshot
        is stored in the same transaction, after the rows it depends on (one fsync, not two), and
        its id is returned. `only_running`: a row whose journaled call is no longer `running` (a join
        dropped it meanwhile) keeps what it says.
        """
        rows = [_call_to_db(run_id, call) for call in calls]
        rows = [(*row, self._sealer.mac(*sealed_call(row))) for row in rows]
        snapshot_row = self._snapshot_row(run_id, snapshot) if snapshot is not None else None
        if not rows and snapshot_row is None:
            return None
        # seq runs 1..n within a run, so the highest seq written is the run's call count.
        top = max((row[1] for row in rows), default=0)

        def write(conn: sqlite3.Connection) -> int | None:
            nonlocal rows
            if only_running and rows:
                settled = {
                    seq
                    for seq, status in conn.execute(
                        "SELECT seq, status FROM calls WHERE run_id = ? AND status != 'running'", (run_id,)
                    )
                }
                rows = [row for row in rows if row[1] not in settled]
                if not rows and snapshot_row is None:
                    return None
            guard, params = _owner_guard(expect_owner)
            if rows:  # a journal write advances the run (a call's start before it runs, its result before it is seen)
                self._advance(conn, run_id)
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
                    f'INSERT OR REPLACE INTO calls ({_CALL_COLUMNS}, seal) VALUES ({", ".join("?" * 15)})', rows
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
                for row in conn.execute(f'SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? ORDER BY seq', (run_id,))
            ]
        )

    def call(self, run_id: str, seq: int) -> CallRecord | None:
        """One journaled call, or None."""
        row = self._read(
            lambda conn: conn.execute(
                f'SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND seq = ?', (run_id, seq)
            ).fetchone()
        )
        return _call_from_db(row) if row is not None else None

    # -- approvals -------------------------------------------------------------------------------

    def decide(self, run_id: str, seq: int, decision: Decision) -> None:
        """Record a person's decision on a waiting call (a later decision replaces an earlier one)."""

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                'INSERT OR REPLACE INTO decisions (run_id, seq, approved, reason, decided_by, decided_at) '
                'VALUES (?, ?, ?, ?, ?, ?)',
                (run_id, seq, int(decision.approved), decision.reason, decision.decided_by, decision.decided_at),
            )
            self._reseal(conn, run_id)  # a decision advances the run

        self._write(write)

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
        self, run_id: str, owner: Owner, *, ttl: float | None = None, unchanged_since: float | None = None
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
            until = time.time() + self._ttl(ttl)
            conn.execute('UPDATE runs SET owner = ?, lease_until = ? WHERE run_id = ?', (str(owner), until, run_id))

        self._write(write)

    def renew(self, run_id: str, owner: Owner, *, ttl: float | None = None) -> bool:
        """Extend `owner`'s lease; False when it no longer holds it."""
        return self._write(
            lambda conn: (
                conn.execute(
                    'UPDATE runs SET lease_until = ? WHERE run_id = ? AND owner = ?',
                    (time.time() + self._ttl(ttl), run_id, str(owner)),
                ).rowcount
                == 1
            )
        )

    def _ttl(self, ttl: float | None) -> float:
        return self.lease_seconds if ttl is None else ttl

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
            seen = self._seen(run_id)  # this machine's record first: it is never ahead of what is committed
            found = conn.execute(f'SELECT {_SEALED_RUN}, seal, generation FROM runs WHERE run_id = ?', (run_id,))
            *run, generation = found.fetchone() or (None,)
            if not run:
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
                if not self._sealer.check(row[-1], *sealed_call(row[:-1])):
                    return [
                        f'call #{expected} of run {run_id} was modified after it was written (or copied from '
                        'another run): it does not match its seal'
                    ]
            stored_head = run[-2] or ''  # the journal's head, before the seal
            sealed_with = head if stored_head.startswith(HEAD_FORMAT) else chained_head
            if sealed_with(row[-1] for row in rows) != stored_head:
                return [
                    f'the journal of run {run_id} is not the one it was sealed with: a call was removed, or '
                    'put back to an earlier version of itself'
                ]
            return [rolled_back(run_id, generation or 0, seen)] if (generation or 0) < seen else []

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

    def _reseal(self, conn: sqlite3.Connection, run_id: str, *, created: bool = False) -> None:
        self._advance(conn, run_id, created=created)  # every resealed change advances the run
        fields = conn.execute(f'SELECT {_SEALED_RUN} FROM runs WHERE run_id = ?', (run_id,)).fetchone()
        if fields is not None:
            conn.execute('UPDATE runs SET seal = ? WHERE run_id = ?', (self._sealer.mac(*fields), run_id))

    def _refuse_write(self, conn: sqlite3.Connection, run_id: str) -> None:
        row = conn.execute('SELECT owner FROM runs WHERE run_id = ?', (run_id,)).fetchone()
        if row is None:
            raise StoreError(f'no run {run_id!r} in {self.path}.')
        raise RunBusy(run_id, Owner.parse(row[0]), lost=True)


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


def _owner_guard(owner: Owner | None) -> tuple[str, tuple[Any, ...]]:
    return (' AND owner = ?', (str(owner),)) if owner is not None else ('', ())


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


def _run_from_db(row: tuple[Any, ...]) -> RunRow:
    (run_id, script, status, created, updated, prompt, value_json, error, duration, parent_run_id, fork_at,
     orchestrator_run_id, trace_context, inputs_json, calls_count, access_json, catalog_json, conversation_id,
     budget_key, owner, lease_until) = row  # fmt: skip
    status = shown_status(status, owner, lease_until, time.time())
    return RunRow(
        run_id=run_id, script=script, status=status, created=created,
        updated=updated, prompt=prompt, value=decode(value_json), error=error, duration=duration,
        parent_run_id=parent_run_id, fork_at=fork_at, orchestrator_run_id=orchestrator_run_id,
        trace_context=trace_context, inputs=decode(inputs_json), calls_count=calls_count,
        access=decode(access_json), catalog=decode(catalog_json), conversation_id=conversation_id,
        budget_key=budget_key,
    )  # fmt: skip


def _call_to_db(run_id: str, call: CallRecord) -> tuple[Any, ...]:
    """The one converter from a call record to its row (refusing what would not read back equal)."""
    _check_status(call.status)
    if call.source not in CALL_SOURCES:
        raise ValueError(f'unknown call source {call.source!r}; expected one of {sorted(CALL_SOURCES)}.')
    return (
        run_id, call.seq, call.callee, encode_required(call.arguments, f'arguments of call {call.seq}'), call.line,
        call.status, encode(call.result if call.status == 'ok' else None, f'result of call {call.seq}'), call.error,
        call.started, call.duration, call.attempt, call.source, int(call.side_effect), call.cost_usd,
    )  # fmt: skip


def sealed_call(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a call row's seal covers: its columns, its cost only once settled, so rows written before costs were
    journaled still verify."""
    return row if row[-1] is not None else row[:-1]


def _call_from_db(row: tuple[Any, ...]) -> CallRecord:
    """The one converter back: a journal row as the record the engine works with."""
    (_run_id, seq, callee, arguments_json, line, status, result_json, error, started, duration, attempt,
     source, side_effect, cost_usd) = row  # fmt: skip
    return CallRecord(
        seq=seq, callee=callee, arguments=json.loads(arguments_json), line=line, status=status,
        result=decode(result_json), error=error, started=started, duration=duration, attempt=attempt,
        source=source, side_effect=bool(side_effect), cost_usd=cost_usd,
    )  # fmt: skip
