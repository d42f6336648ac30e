"""The `harness` command line (typer + rich): the one `app` with every command registered on it.

The commands live in modules by job and register on `_shared.app` as they are imported; this module imports
them, and the order of these imports is the order `harness --help` lists the commands in.

Imports are lazy on purpose: `--help`, `runs`, `show` and `trace` read only the run store, so they must
not pay for pydantic-ai, logfire or the sandbox (about two seconds); the engine, the models and the
sub-agents are imported inside the commands that run something. Keep new top-level imports of every command
module light (`tests/test_cli_fast.py` checks which modules a listing imports).
"""

# isort: off
from ._shared import app
from ._run_commands import agents, audit, check, exec_
from ._session_commands import ask, chat, temporal_dev, ui, worker
from ._stored_commands import approve, cancel, diff, fork, pending, reject, replay, resume, rm, runs, show, trace
from ._eval_commands import eval_, evals
# isort: on

__all__ = [
    'agents',
    'app',
    'approve',
    'ask',
    'audit',
    'cancel',
    'chat',
    'check',
    'diff',
    'eval_',
    'evals',
    'exec_',
    'fork',
    'pending',
    'reject',
    'replay',
    'resume',
    'rm',
    'runs',
    'show',
    'temporal_dev',
    'trace',
    'ui',
    'worker',
]
