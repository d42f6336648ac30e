"""The records of the terminal and the studio: offline traces, token and cost totals, conversations and
their turns, requests to cancel a run another process runs, and the deletion of a run with all of them.

Spans are kept under the run they belong to, an orchestrator's own (a chat turn's model requests) under its
agent run ids, while a run of that turn is stored: the turn's last run deleted takes them with it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._records import SpanDict
from ._connection import Database, StoreError, decode, encode, encode_required, marks


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


_HOLDS_AGENT_RUN = 'agent_run_id = ? OR ? IN (SELECT value FROM json_each(agent_run_ids_json))'
"""A turn one of whose agent runs is the parameter (bound twice)."""


class Terminal(Database):
    """The tables `harness trace`, `chat`, `cancel`, `runs` and the studio read and write."""

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

    # -- usage, conversations, cancel requests, deletion -----------------------------------------

    def set_usage(self, run_id: str, usage: dict[str, Any]) -> None:
        """Store a run's token and cost totals (`_usage.Totals.as_json()`), replacing earlier ones."""
        usage_json = encode_required(usage, 'run usage')
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO run_usage (run_id, usage_json) VALUES (?, ?)', (run_id, usage_json)
            )
        )

    def usage(self, run_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored totals of those runs that have any, by run id."""
        ids = list(run_ids)
        if not ids:
            return {}
        rows = self._read(
            lambda conn: conn.execute(
                f'SELECT run_id, usage_json FROM run_usage WHERE run_id IN ({marks(ids)})', ids
            ).fetchall()
        )
        return {run_id: json.loads(text) for run_id, text in rows}

    def short_ids(self, run_ids: Iterable[str], minimum: int = 7) -> dict[str, str]:
        """The shortest prefix of each id (at least `minimum` characters) that names no other run, as git
        abbreviates: one more character than the longest prefix it shares with its neighbours in id order."""

        def read(conn: sqlite3.Connection) -> dict[str, str]:
            short = {}
            for run_id in run_ids:
                shared = 0
                for sql in (
                    'SELECT max(run_id) FROM runs WHERE run_id < ?',
                    'SELECT min(run_id) FROM runs WHERE run_id > ?',
                ):
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
                conn.execute(f'DELETE FROM spans WHERE run_id IN ({marks(agent_runs)})', agent_runs)

        self._write(write)

    def request_cancel(self, run_id: str) -> None:
        """Ask the process that runs `run_id` to cancel it (it looks at each pause of the script)."""
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO cancel_requests (run_id, requested) VALUES (?, ?)', (run_id, time.time())
            )
        )

    def cancel_requested(self, run_id: str) -> bool:
        return (
            self._read(
                lambda conn: conn.execute('SELECT 1 FROM cancel_requests WHERE run_id = ?', (run_id,)).fetchone()
            )
            is not None
        )

    def clear_cancel(self, run_id: str) -> None:
        self._write(lambda conn: conn.execute('DELETE FROM cancel_requests WHERE run_id = ?', (run_id,)))

    def save_conversation(self, conversation: Conversation) -> None:
        """Insert or replace a conversation (its whole message history, as pydantic-ai's JSON)."""
        row = (
            conversation.conversation_id,
            conversation.created,
            conversation.updated,
            conversation.title,
            conversation.model,
            conversation.messages_json,
        )
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO conversations (conversation_id, created, updated, title, model, messages_json) '
                'VALUES (?, ?, ?, ?, ?, ?)',
                row,
            )
        )

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

    def list_conversations(self, limit: int = 50) -> list[dict[str, Any]]:
        """Stored conversations, the latest updated first: conversation_id, created, updated, title, model and
        their number of turns (not their messages)."""
        rows = self._read(
            lambda conn: conn.execute(
                'SELECT c.conversation_id, c.created, c.updated, c.title, c.model, '
                '(SELECT count(*) FROM turns t WHERE t.conversation_id = c.conversation_id) '
                'FROM conversations c ORDER BY c.updated DESC LIMIT ?',
                (limit,),
            ).fetchall()
        )
        keys = ('conversation_id', 'created', 'updated', 'title', 'model', 'turns')
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def add_turn(self, turn: Turn) -> None:
        agent_runs = list(dict.fromkeys(a for a in (turn.agent_run_id, *turn.agent_run_ids) if a))
        row = (
            turn.conversation_id,
            turn.turn,
            turn.agent_run_id,
            turn.prompt,
            turn.answer,
            turn.status,
            turn.error,
            encode(turn.usage, 'turn usage'),
            turn.trace_id,
            turn.created,
            encode(agent_runs or None, 'turn runs'),
        )
        self._write(
            lambda conn: conn.execute(
                'INSERT OR REPLACE INTO turns (conversation_id, turn, agent_run_id, prompt, answer, status, error, '
                'usage_json, trace_id, created, agent_run_ids_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                row,
            )
        )

    def turns(self, conversation_id: str | None = None, *, agent_run_id: str | None = None) -> list[Turn]:
        """A conversation's turns in order, or the turn one orchestrator agent run (any of a turn's) belongs to."""
        columns = (
            'conversation_id, turn, agent_run_id, prompt, answer, status, error, usage_json, trace_id, created, '
            'agent_run_ids_json'
        )
        if agent_run_id is not None:
            sql, params = f'SELECT {columns} FROM turns WHERE {_HOLDS_AGENT_RUN}', (agent_run_id, agent_run_id)
        else:
            sql, params = f'SELECT {columns} FROM turns WHERE conversation_id = ? ORDER BY turn', (conversation_id,)
        rows = self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [
            Turn(
                *row[:7],
                usage=decode(row[7]),
                trace_id=row[8],
                created=row[9],
                agent_run_ids=decode(row[10]) or ([row[2]] if row[2] else []),
            )
            for row in rows
        ]


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _insert_spans(conn: sqlite3.Connection, run_id: str, spans: list[SpanDict]) -> None:
    spans_json = json.dumps(spans, ensure_ascii=False, separators=(',', ':'), default=str)
    conn.execute('INSERT INTO spans (run_id, spans_json, created) VALUES (?, ?, ?)', (run_id, spans_json, time.time()))


def _spans_of(conn: sqlite3.Connection, keys: list[str]) -> list[SpanDict]:
    """The spans stored under any of `keys`, batches in the order they were added."""
    batches = conn.execute(f'SELECT spans_json FROM spans WHERE run_id IN ({marks(keys)}) ORDER BY id', keys)
    return [span for (text,) in batches.fetchall() for span in json.loads(text)]


def _turn_agent_runs(conn: sqlite3.Connection, agent_run_id: str) -> list[str]:
    """Every agent run of the turn `agent_run_id` is one of; just it when no stored turn has it."""
    row = conn.execute(
        f'SELECT agent_run_id, agent_run_ids_json FROM turns WHERE {_HOLDS_AGENT_RUN} LIMIT 1',
        (agent_run_id, agent_run_id),
    ).fetchone()
    return (decode(row[1]) or [row[0]]) if row is not None else [agent_run_id]


def _referenced(conn: sqlite3.Connection, agent_runs: list[str]) -> bool:
    """Whether a stored run (script) was written by one of these orchestrator agent runs."""
    sql = f'SELECT 1 FROM runs WHERE orchestrator_run_id IN ({marks(agent_runs)}) LIMIT 1'
    return conn.execute(sql, agent_runs).fetchone() is not None
