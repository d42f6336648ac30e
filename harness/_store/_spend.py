"""The dollar budgets kept in the store: spent and reserved USD per window (`Harness(daily_cost=...)`: a `budget_key`'s
UTC day; `Harness(conversation_cost=...)`: one conversation), and the holds of the calls that reserved them.

A window is a row of `spend`, keyed by (key, period): a budget key and a UTC day ('2026-12-02'), or a conversation id
and 'conversation' (`_dispatch._cost.CONVERSATION`: never a day, so the two kinds cannot meet). Each reservation and
each settlement is one `BEGIN IMMEDIATE` transaction (`Database._write`) over every window a call spends: the check
against each limit and the writes are one step for every process sharing the store, so concurrent runs can never
reserve past a limit between them. A reservation is a call's ceiling (`_dispatch._cost`), held in `spend_holds` by
(run id, seq), so whichever process ends the call (a Temporal worker's `call` activity too) settles it to what it
cost. A hold left by an attempt that died (reserved again by the call's re-run) is spent at its ceiling: never given
back on a guess.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ._connection import Database


class Spend(Database):
    """The `spend` table (one row per window) and `spend_holds` (what each call in flight reserved on each)."""

    def reserve_spend(
        self, run_id: str, seq: int, windows: Sequence[tuple[str, str, float]], usd: float
    ) -> tuple[int, float] | None:
        """Reserve `usd` for call `seq` of `run_id` on every (key, period, limit) of `windows`, unless spent and
        reserved would pass a limit: None when reserved on all, else (the index of the first window that refused,
        what it has left), and nothing is written."""

        def write(conn: sqlite3.Connection) -> tuple[int, float] | None:
            for i, (key, period, limit) in enumerate(windows):
                row = conn.execute('SELECT spent, reserved FROM spend WHERE budget_key = ? AND day = ?', (key, period))
                spent, reserved = row.fetchone() or (0.0, 0.0)
                left = limit - spent - reserved
                if usd > left + 1e-9:
                    return i, max(left, 0.0)
            for key, period, _ in windows:
                _settle(conn, run_id, seq, None, only=(key, period))  # an earlier attempt's hold: spent at its ceiling
                conn.execute(
                    'INSERT INTO spend (budget_key, day, spent, reserved) VALUES (?, ?, 0, ?) '
                    'ON CONFLICT (budget_key, day) DO UPDATE SET reserved = reserved + excluded.reserved',
                    (key, period, usd),
                )
                conn.execute(
                    'INSERT INTO spend_holds (run_id, seq, budget_key, day, usd) VALUES (?, ?, ?, ?, ?)',
                    (run_id, seq, key, period, usd),
                )
            return None

        return self._write(write)

    def settle_spend(self, run_id: str, seq: int, cost: float | None) -> bool:
        """Call `seq` of `run_id` ended: each of its holds becomes `cost` spent (None: the ceiling it held; 0: given
        back). False when it held nothing."""
        return self._write(lambda conn: _settle(conn, run_id, seq, cost))

    def spend_of(self, key: str, period: str) -> tuple[float, float]:
        """(spent, reserved) USD of the window (`key`, `period`: a UTC day, or 'conversation')."""
        row = self._read(
            lambda conn: conn.execute(
                'SELECT spent, reserved FROM spend WHERE budget_key = ? AND day = ?', (key, period)
            ).fetchone()
        )
        return (row[0], row[1]) if row else (0.0, 0.0)


def _settle(
    conn: sqlite3.Connection, run_id: str, seq: int, cost: float | None, *, only: tuple[str, str] | None = None
) -> bool:
    query = 'SELECT budget_key, day, usd FROM spend_holds WHERE run_id = ? AND seq = ?'
    args: tuple[object, ...] = (run_id, seq)
    if only is not None:
        query, args = query + ' AND budget_key = ? AND day = ?', (*args, *only)
    holds = conn.execute(query, args).fetchall()
    for key, period, held in holds:
        conn.execute(
            'UPDATE spend SET reserved = MAX(reserved - ?, 0), spent = spent + ? WHERE budget_key = ? AND day = ?',
            (held, held if cost is None else cost, key, period),
        )
        conn.execute(
            'DELETE FROM spend_holds WHERE run_id = ? AND seq = ? AND budget_key = ? AND day = ?',
            (run_id, seq, key, period),
        )
    return bool(holds)
