"""Lease renewal: the runs this process holds in one store, renewed on a thread of their own.

A run's lease (`Runs.claim`) lasts `RunStore.lease_seconds` unless renewed. Invariants:

- Renewal never waits behind a callee: it runs on one daemon thread per store (not the event loop's default
  executor, which blocking sync tools fill), every `lease_seconds / 3`, so a lease survives any number of
  blocked calls. A store file is renewed over a connection of the thread's own, so not even a long write on
  the store's connection (one waiting for another process's lock) holds it up.
- The thread lives while the store holds a lease here: it starts with the first `hold` and ends (closing its
  connection) once the last run is dropped.
- A renewal that fails (the file locked past its busy timeout) is tried again at the next beat; a lease another
  process took over is not renewed (the renewal is conditioned on the owner), and the journal's next write,
  conditioned the same way, stops the run (`RunBusy`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from typing import TYPE_CHECKING

from .._records import Owner

if TYPE_CHECKING:
    from ._runs import Runs

RENEW = 'UPDATE runs SET lease_until = ? WHERE run_id = ? AND owner = ?'


class Renewer:
    """The leases one store holds in this process, and the thread that renews them."""

    def __init__(self, store: Runs) -> None:
        self._store = weakref.ref(store)
        self.pid = os.getpid()
        self.path = store.path
        self._held: dict[tuple[str, str], int] = {}
        """(run id, owner) -> how many holders (a run may be held by nested blocks)."""
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self, run_id: str, owner: Owner) -> None:
        with self._wake:
            key = (run_id, str(owner))
            self._held[key] = self._held.get(key, 0) + 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name='harness-lease-renewer', daemon=True)
                self._thread.start()

    def drop(self, run_id: str, owner: Owner) -> None:
        with self._wake:
            key = (run_id, str(owner))
            left = self._held.get(key, 0) - 1
            if left > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)
            if not self._held:
                self._wake.notify_all()

    def _beat(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                store = self._store()
                interval = store.lease_seconds / 3 if store is not None else 1.0
                del store
                with self._wake:
                    if self._held:
                        self._wake.wait(interval)
                    if not self._held or self._store() is None:
                        self._thread = None
                        return
                    held = list(self._held)
                conn = self._renew(conn, held)
        finally:
            if conn is not None:
                conn.close()

    def _renew(self, conn: sqlite3.Connection | None, held: list[tuple[str, str]]) -> sqlite3.Connection | None:
        """Renew every lease held; return the connection to reuse (None after a failure: a fresh one next time)."""
        store = self._store()
        if store is None:
            return conn
        ttl = store.lease_seconds
        if self.path == ':memory:':  # nobody else can open it: the store's own connection is the only one
            for run_id, owner in held:
                parsed = Owner.parse(owner)
                if parsed is not None:
                    try:
                        store.renew(run_id, parsed, ttl=ttl)
                    except Exception:  # closed meanwhile: nothing left to renew
                        return None
            return None
        try:
            if conn is None:
                conn = sqlite3.connect(self.path, timeout=store._busy_ms / 1000, isolation_level=None)
                conn.execute('PRAGMA synchronous = NORMAL')  # a lease outlives no crash: it need not be fsynced
            for run_id, owner in held:
                conn.execute(RENEW, (time.time() + ttl, run_id, owner))
        except sqlite3.Error:
            if conn is not None:
                conn.close()
            return None
        return conn


_renewers: weakref.WeakKeyDictionary[Runs, Renewer] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def renewer(store: Runs) -> Renewer:
    """The store's renewer (one per store object in this process; a forked child makes its own, as it holds
    no lease of its parent's and has no copy of its thread)."""
    with _guard:
        found = _renewers.get(store)
        if found is None or found.pid != os.getpid():
            found = _renewers[store] = Renewer(store)
        return found
