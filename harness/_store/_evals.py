"""The evals' tables (`harness eval`): pydantic-evals' report of each eval, and per case the orchestrator run
whose scripts are ordinary runs, so a later eval can diff against it or answer calls from its journal.

Rows are dicts with the column names as keys (`harness._evals` gives them their shape); JSON columns are
`summary` (plain data) and `report_json` (pydantic-evals' own JSON of its report, kept as text).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from ._connection import Database, StoreError, decode, encode


class Evals(Database):
    """The `evals` and `eval_cases` tables."""

    _EVAL_COLUMNS = (
        'eval_id, created, updated, status, name, dataset, source, model, instructions, baseline_id, '
        'reused_from, report_json, summary_json'
    )

    def create_eval(self, row: dict[str, Any]) -> None:
        """Insert an eval as `running`: eval_id, name, dataset, and optionally source, model, instructions,
        baseline_id, reused_from."""
        now = time.time()
        values = (
            row['eval_id'],
            now,
            now,
            'running',
            row['name'],
            row['dataset'],
            row.get('source'),
            row.get('model'),
            row.get('instructions'),
            row.get('baseline_id'),
            row.get('reused_from'),
        )
        self._write(
            lambda conn: conn.execute(
                'INSERT INTO evals (eval_id, created, updated, status, name, dataset, source, model, instructions, '
                'baseline_id, reused_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                values,
            )
        )

    def finish_eval(
        self, eval_id: str, *, status: str, report_json: str | None = None, summary: dict[str, Any] | None = None
    ) -> None:
        """Record how an eval ended: `completed` with its report and summary, or `interrupted`."""
        summary_json = encode(summary, 'eval summary')
        self._write(
            lambda conn: conn.execute(
                'UPDATE evals SET status = ?, updated = ?, report_json = coalesce(?, report_json), '
                'summary_json = coalesce(?, summary_json) WHERE eval_id = ?',
                (status, time.time(), report_json, summary_json, eval_id),
            )
        )

    def add_eval_case(
        self,
        eval_id: str,
        case_name: str,
        orchestrator_run_id: str | None,
        error: str | None,
        usage: dict[str, Any] | None,
    ) -> None:
        """One case of an eval: the orchestrator run it made (its scripts are runs with that
        `orchestrator_run_id`), its failure if it failed, and its tokens and cost."""
        values = (eval_id, case_name, orchestrator_run_id, error, encode(usage, 'eval case usage'))
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO eval_cases (eval_id, case_name, orchestrator_run_id, error, usage_json) '
                'VALUES (?, ?, ?, ?, ?)',
                values,
            )
        )

    def get_eval(self, eval_id: str) -> dict[str, Any] | None:
        """The eval with this id or unique id prefix; `StoreError` naming the candidates when ambiguous."""
        if not eval_id:
            return None

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            exact = conn.execute(f'SELECT {self._EVAL_COLUMNS} FROM evals WHERE eval_id = ?', (eval_id,)).fetchall()
            return (
                exact
                or conn.execute(
                    f'SELECT {self._EVAL_COLUMNS} FROM evals WHERE substr(eval_id, 1, ?) = ? ORDER BY eval_id LIMIT 11',
                    (len(eval_id), eval_id),
                ).fetchall()
            )

        rows = self._read(read)
        if len(rows) > 1:
            shown = ', '.join(r[0] for r in rows[:10]) + (', ...' if len(rows) > 10 else '')
            raise StoreError(f'eval id prefix {eval_id!r} is ambiguous: it matches {shown}. Give more characters.')
        return self._eval_row(rows[0]) if rows else None

    def list_evals(self, limit: int = 50) -> list[dict[str, Any]]:
        """Stored evals, newest first."""
        rows = self._read(
            lambda conn: conn.execute(
                f'SELECT {self._EVAL_COLUMNS} FROM evals ORDER BY created DESC, rowid DESC LIMIT ?', (limit,)
            ).fetchall()
        )
        return [self._eval_row(row) for row in rows]

    def eval_cases(self, eval_id: str) -> list[dict[str, Any]]:
        """An eval's cases as they finished: case_name, orchestrator_run_id, error, usage."""
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT case_name, orchestrator_run_id, error, usage_json FROM eval_cases '
                'WHERE eval_id = ? ORDER BY rowid',
                (eval_id,),
            ).fetchall()
        )
        return [
            {'case_name': name, 'orchestrator_run_id': run, 'error': error, 'usage': decode(usage)}
            for name, run, error, usage in rows
        ]

    @classmethod
    def _eval_row(cls, row: tuple[Any, ...]) -> dict[str, Any]:
        found = dict(zip(cls._EVAL_COLUMNS.split(', '), row, strict=True))
        found['summary'] = decode(found.pop('summary_json'))
        return found
