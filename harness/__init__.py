"""A harness that lets a model orchestrate sub-agents by writing typed Python.

The model writes a script; the harness type-checks it against the catalog of sub-agents and tools,
runs it in the Monty sandbox, dispatches every call, and returns the final value.
"""

from .budget import Budget
from .check import CheckReport, Diagnostic
from .context import CallContext, RunScope
from .errors import (
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
from .events import CallEvent
from .harness import Harness
from .result import CallRecord, WorkflowResult

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
