"""A harness that lets a model orchestrate sub-agents by writing typed Python.

The model writes a script; the harness type-checks it against the catalog of sub-agents and tools,
runs it in the Monty sandbox, dispatches every call, and returns the final value.
"""

from ._budget import Budget
from ._check import CheckReport, Diagnostic
from ._context import CallContext, RunScope
from ._errors import (
    BudgetExceeded,
    CompletedCall,
    NeedsDecision,
    RegistrationError,
    ReplayDivergence,
    SandboxCrashed,
    SnapshotError,
    WorkflowError,
    WorkflowRuntimeError,
    WorkflowTypeError,
)
from ._events import CallEvent
from ._engine import Harness
from ._result import CallRecord, WorkflowResult

__all__ = [
    'Budget',
    'BudgetExceeded',
    'CallContext',
    'CallEvent',
    'CallRecord',
    'CheckReport',
    'CompletedCall',
    'Diagnostic',
    'Harness',
    'NeedsDecision',
    'RegistrationError',
    'ReplayDivergence',
    'RunScope',
    'SandboxCrashed',
    'SnapshotError',
    'WorkflowError',
    'WorkflowResult',
    'WorkflowRuntimeError',
    'WorkflowTypeError',
]
