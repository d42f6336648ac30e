"""The daily dollar budgets (`Harness(daily_cost=...)`): spent and reserved USD per `budget_key` per UTC day.

Each reservation and each settlement is one `BEGIN IMMEDIATE` transaction (`Database._write`): the check against the
limit and the write are one step for every process sharing the store, so concurrent runs can never reserve past the
limit between them. A reservation is a ceiling (`_dispatch._cost`); settling replaces it with what the call cost.
"""

from __future__ import annotations

import sqlite3

from ._connection import Database


class Spend(Database):
    """The `spend` table: one row per (budget key, UTC day)."""

    def reserve_spend(self, key: str, day: str, usd: float, limit: float) -> float | None:
        """Reserve `usd` on `key`'s `day` unless spent and reserved would pass `limit`: None when reserved, else
        what is left (and nothing is written)."""

        def write(conn: sqlite3.Connection) -> float | None:
            row = conn.execute('SELECT spent, reserved FROM spend WHERE budget_key = ? AND day = ?', (key, day))
            spent, reserved = row.fetchone() or (0.0, 0.0)
            left = limit - spent - reserved
            if usd > left + 1e-9:
                return max(left, 0.0)
            conn.execute(
                'INSERT INTO spend (budget_key, day, spent, reserved) VALUES (?, ?, 0, ?) '
                'ON CONFLICT (budget_key, day) DO UPDATE SET reserved = reserved + excluded.reserved',
                (key, day, usd),
            )
            return None

        return self._write(write)

    def settle_spend(self, key: str, day: str, reserved: float, cost: float) -> None:
        """A reservation of `reserved` on `key`'s `day` becomes `cost` spent (0: given back)."""
        self._write(
            lambda conn: conn.execute(
                'UPDATE spend SET reserved = MAX(reserved - ?, 0), spent = spent + ? WHERE budget_key = ? AND day = ?',
                (reserved, cost, key, day),
            )
        )

    def spend_of(self, key: str, day: str) -> tuple[float, float]:
        """(spent, reserved) USD of `key` on `day`."""
        row = self._read(
            lambda conn: conn.execute(
                'SELECT spent, reserved FROM spend WHERE budget_key = ? AND day = ?', (key, day)
            ).fetchone()
        )
        return (row[0], row[1]) if row else (0.0, 0.0)
