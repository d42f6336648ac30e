"""The run store as one object: `RunStore`, every table's reads and writes over one SQLite connection.

Its parts, by job (each module states its invariants): `_connection` (the file, its transactions, the schema
and its migrations, JSON columns), `_runs` (runs, the call journal, decisions, leases, seals), `_snapshots`
(sealed interpreter snapshots), `_terminal` (traces, usage, conversations, cancel requests, deletion),
`_evals` (the evals' tables) and `_spend` (the daily dollar budgets).
"""

from __future__ import annotations

from ._evals import Evals
from ._runs import Runs
from ._spend import Spend
from ._terminal import Terminal


class RunStore(Runs, Terminal, Evals, Spend):
    """Runs, call journal, snapshots, spans and the consumers' records in one SQLite file."""
