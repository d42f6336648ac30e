"""A harness that lets a model orchestrate sub-agents by writing typed Python.

The model writes a script; the harness type-checks it against the catalog of sub-agents and tools,
runs it in the Monty sandbox, dispatches every call, and returns the final value. This module is
the public surface; everything else in the package is private (`_name.py`).
"""

from ._analysis import Analysis, CallSite
from ._catalog import RegistrationError
from ._check import CheckReport, Diagnostic
from ._context import CallContext, RunScope
from ._engine import Harness
from ._errors import (
    BudgetExceeded,
    NeedsDecision,
    PolicyViolation,
    ReplayDivergence,
    SandboxCrashed,
    SnapshotError,
    WorkflowError,
    WorkflowRuntimeError,
    WorkflowTypeError,
)
from ._manifest import CatalogChange, CatalogChanged
from ._records import CallEvent, CallRecord, WorkflowResult
from ._rules import After
from ._store import RunRow

__all__ = [
    'After',
    'Analysis',
    'BudgetExceeded',
    'CallContext',
    'CallEvent',
    'CallRecord',
    'CallSite',
    'CatalogChange',
    'CatalogChanged',
    'CheckReport',
    'Diagnostic',
    'Harness',
    'NeedsDecision',
    'PolicyViolation',
    'RegistrationError',
    'ReplayDivergence',
    'RunRow',
    'RunScope',
    'SandboxCrashed',
    'SnapshotError',
    'WorkflowError',
    'WorkflowResult',
    'WorkflowRuntimeError',
    'WorkflowTypeError',
]
