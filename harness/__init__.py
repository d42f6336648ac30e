"""A harness that lets a model orchestrate sub-agents by writing typed Python.

The model writes a script; the harness type-checks it against the catalog of sub-agents and tools,
runs it in the Monty sandbox, dispatches every call, and returns the final value. This module is
the public surface; everything else in the package is private (`_name.py`).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._catalog._callees import RegistrationError
    from ._catalog._rules import After
    from ._check._analysis import Analysis, CallSite
    from ._check._checker import CheckReport, Diagnostic
    from ._check._estimate import Estimate
    from ._dispatch._context import CallContext, RunScope
    from ._engine import Harness
    from ._errors import (
        BudgetExceeded,
        CatalogChange,
        CatalogChanged,
        NeedsDecision,
        PolicyViolation,
        ReplayDivergence,
        RunBusy,
        SandboxCrashed,
        SnapshotError,
        StoreError,
        WorkflowError,
        WorkflowRuntimeError,
        WorkflowTypeError,
    )
    from ._evals._evaluators import (
        HARNESS_EVALUATORS,
        MaxBudgetUsed,
        MaxCalls,
        MaxCost,
        MaxRefusals,
        MaxRetries,
        MaxTokens,
        MaxWallTime,
        MentionsExpected,
    )
    from ._evals._results import EvalResult
    from ._evals._run import EvalError, EvalOptions
    from ._records import CallEvent, CallRecord, Pending, RunRow, WorkflowResult

# The public names load on first use (PEP 562): `harness`'s command line imports this package for every
# command, and the ones that only read stored runs must not pay for pydantic-ai and logfire.
_WHERE = {
    'After': '._catalog._rules',
    'Analysis': '._check._analysis',
    'BudgetExceeded': '._errors',
    'CallContext': '._dispatch._context',
    'CallEvent': '._records',
    'CallRecord': '._records',
    'CallSite': '._check._analysis',
    'CatalogChange': '._errors',
    'CatalogChanged': '._errors',
    'CheckReport': '._check._checker',
    'Diagnostic': '._check._checker',
    'Estimate': '._check._estimate',
    'EvalError': '._evals._run',
    'EvalOptions': '._evals._run',
    'EvalResult': '._evals._results',
    'HARNESS_EVALUATORS': '._evals._evaluators',
    'Harness': '._engine',
    'MaxBudgetUsed': '._evals._evaluators',
    'MaxCalls': '._evals._evaluators',
    'MaxCost': '._evals._evaluators',
    'MaxRefusals': '._evals._evaluators',
    'MaxRetries': '._evals._evaluators',
    'MaxTokens': '._evals._evaluators',
    'MaxWallTime': '._evals._evaluators',
    'MentionsExpected': '._evals._evaluators',
    'NeedsDecision': '._errors',
    'Pending': '._records',
    'PolicyViolation': '._errors',
    'RegistrationError': '._catalog._callees',
    'ReplayDivergence': '._errors',
    'RunBusy': '._errors',
    'RunRow': '._records',
    'RunScope': '._dispatch._context',
    'SandboxCrashed': '._errors',
    'SnapshotError': '._errors',
    'StoreError': '._errors',
    'WorkflowError': '._errors',
    'WorkflowResult': '._records',
    'WorkflowRuntimeError': '._errors',
    'WorkflowTypeError': '._errors',
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    'HARNESS_EVALUATORS',
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
    'Estimate',
    'EvalError',
    'EvalOptions',
    'EvalResult',
    'Harness',
    'MaxBudgetUsed',
    'MaxCalls',
    'MaxCost',
    'MaxRefusals',
    'MaxRetries',
    'MaxTokens',
    'MaxWallTime',
    'MentionsExpected',
    'NeedsDecision',
    'Pending',
    'PolicyViolation',
    'RegistrationError',
    'ReplayDivergence',
    'RunBusy',
    'RunRow',
    'RunScope',
    'SandboxCrashed',
    'SnapshotError',
    'StoreError',
    'WorkflowError',
    'WorkflowResult',
    'WorkflowRuntimeError',
    'WorkflowTypeError',
]
