"""Snapshots: a paused interpreter's Monty dump, sealed in the store's blob format, and read back verified.

The blob is `HSNP` + u16 store format + u16 Monty format + HMAC-SHA256 (the store's key, `_seal`) over those
8 bytes, the snapshot's binding (its run, position and ledger) and the dump, then the dump. Invariants:

- A dump is verified before any of its bytes are returned: a row read back from the store carries only a
  verified dump. A blob altered, truncated, copied from another run or store, or written by a newer harness
  or Monty raises `SnapshotError` saying which.
- A snapshot is written only with the journal rows it depends on, in their transaction (`Runs.put_calls`).
- A run keeps its newest snapshot and older ones only up to `RETAIN_BYTES` (and at most `RETAIN_BYTES` more
  written since they were last pruned): the store grows with the work (its journal), not with what is live
  times the pauses.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import struct
import time
from dataclasses import dataclass
from typing import Any

from .._errors import SnapshotError
from .._records import Checkpoint, PendingCall
from ._connection import Database, encode_required

SNAPSHOT_MAGIC = b'HSNP'
STORE_FORMAT = 1
"""The sealed-snapshot layout this code writes and the newest it reads."""
SUPPORTED_MONTY_FORMAT = 14
"""The newest Monty dump version the installed pydantic-monty (1.4.0) loads."""
MONTY_MAGIC = b'MONTY\x00'
_PREFIX = struct.Struct('<4sHH')  # magic, store format, Monty dump version
_MAC_LEN = 32
HEADER_LEN = _PREFIX.size + _MAC_LEN


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


_SNAPSHOT_COLUMNS = 'id, run_id, after_seq, blob, ledger_json, monty_format, store_format, size, digest, created'

RETAIN_BYTES = 256 * 1024
"""Besides its newest snapshot, a run keeps the newest older ones that fit in this many bytes together (blob and
ledger): the positions `replay --from K` can start at. The journal is the truth and a snapshot a shortcut, so
what a run keeps is its journal, one snapshot of what is live, and at most this; never a copy of everything live
at every pause (which grows with the square of the calls a run makes)."""
_PRUNE = (
    'DELETE FROM snapshots WHERE id IN (SELECT id FROM (SELECT id, sum(size + length(ledger_json)) OVER '
    '(ORDER BY id DESC) AS kept FROM snapshots WHERE run_id = ?) WHERE kept > ?)'
)
"""The snapshots of a run that no longer fit, newest first, beside the one about to be written."""


class Snapshots(Database):
    """The `snapshots` table: sealed on the way in, verified on the way out."""

    def _snapshot_row(self, run_id: str, snapshot: Checkpoint) -> tuple[Any, ...]:
        ledger = snapshot.ledger
        if not isinstance(ledger, list) or not all(isinstance(entry, dict) for entry in ledger):
            raise TypeError('a snapshot ledger is a list of dicts {call_id, seq, callee, arguments, line}.')
        ledger_json = encode_required(ledger, 'snapshot ledger')
        sealed = self._seal(snapshot.dump, _binding(run_id, snapshot.after_seq, ledger_json))
        return (
            run_id, snapshot.after_seq, sealed, ledger_json, _monty_format(snapshot.dump), STORE_FORMAT,
            len(sealed), hashlib.sha256(sealed).hexdigest(), time.time(),
        )  # fmt: skip

    def _insert_snapshot(self, conn: sqlite3.Connection, row: tuple[Any, ...]) -> int:
        """Insert a snapshot row of a run the transaction has found (`put_calls`), and let go of the run's older
        snapshots past `RETAIN_BYTES` (first, so the pages they free hold the new one). The older ones are looked
        at once per `RETAIN_BYTES` written for the run, not at every pause: a run of small snapshots pays one
        scan per hundred of them, and what waits to be pruned is never more than `RETAIN_BYTES`."""
        written = self.__dict__.setdefault('_unpruned', {})
        run_id, size = row[0], row[6] + len(row[3])
        since = written.get(run_id, 0) + size
        if since >= RETAIN_BYTES:
            conn.execute(_PRUNE, (run_id, RETAIN_BYTES))
            written.pop(run_id, None)
        else:
            if len(written) >= 4096:  # many runs at once: forgetting a count only defers a prune
                written.clear()
            written[run_id] = since
        cursor = conn.execute(
            'INSERT INTO snapshots (run_id, after_seq, blob, ledger_json, monty_format, store_format, '
            'size, digest, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
            row,
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def latest_snapshot(self, run_id: str) -> SnapshotRow | None:
        """The run's most recently taken snapshot, verified; `SnapshotError` if it fails verification."""
        return self._snapshot(f'SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE run_id = ? ORDER BY id DESC', (run_id,))

    def snapshot_after(self, run_id: str, after_seq: int) -> SnapshotRow | None:
        """The newest snapshot taken with at most `after_seq` calls journaled, verified."""
        return self._snapshot(
            f'SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE run_id = ? AND after_seq <= ? '
            'ORDER BY after_seq DESC, id DESC',
            (run_id, after_seq),
        )

    def snapshot_positions(self, run_id: str) -> list[int]:
        """The call counts (`after_seq`) the run has snapshots at: the valid `replay --from K`."""
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT DISTINCT after_seq FROM snapshots WHERE run_id = ? ORDER BY after_seq', (run_id,)
            ).fetchall()
        )
        return [row[0] for row in rows]

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

    def _snapshot(self, sql: str, params: tuple[Any, ...]) -> SnapshotRow | None:
        row = self._read(lambda conn: conn.execute(sql + ' LIMIT 1', params).fetchone())
        if row is None:
            return None
        snap_id, run_id, after_seq, blob, ledger_json, monty_format, store_format, size, digest, created = row
        dump = self._unseal(
            bytes(blob),
            what=f'snapshot {snap_id} of run {run_id}',
            size=size,
            digest=digest,
            binding=_binding(run_id, after_seq, ledger_json),
        )
        return SnapshotRow(
            id=snap_id, run_id=run_id, after_seq=after_seq, dump=dump, ledger=json.loads(ledger_json),
            monty_format=monty_format, store_format=store_format, created=created,
        )  # fmt: skip

    def _unseal(self, blob: bytes, *, what: str, size: int | None, digest: str | None, binding: bytes = b'') -> bytes:
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


def _binding(run_id: str, after_seq: int, ledger_json: str) -> bytes:
    return json.dumps([run_id, after_seq, ledger_json]).encode()


def _monty_format(dump: bytes) -> int:
    if len(dump) < len(MONTY_MAGIC) + 2 or not dump.startswith(MONTY_MAGIC):
        raise ValueError("not a Monty dump: it does not start with b'MONTY\\x00' and a u16 version.")
    return int.from_bytes(dump[len(MONTY_MAGIC) : len(MONTY_MAGIC) + 2], 'little')
