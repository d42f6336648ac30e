"""The errors a run can end in: each carries a message a model can act on, and what was salvaged."""

from __future__ import annotations

from typing import Any

from ._records import CallRecord


class WorkflowError(Exception):
    """Base of every failure of a workflow run.

    `str(error)` is written for the model that wrote the script: it says what went wrong and what
    to change, and never holds host paths, reprs or secrets. `completed` and `printed` keep what the
    script achieved before it failed.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        completed: list[CallRecord] | None = None,
        printed: str = '',
    ) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.completed: list[CallRecord] = completed or []
        self.printed = printed


class WorkflowTypeError(WorkflowError):
    """The script failed the type check against the catalog; nothing ran."""

    def __init__(self, message: str, *, diagnostics: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.diagnostics = diagnostics or []


class WorkflowRuntimeError(WorkflowError):
    """The script raised (or hit a sandbox limit) while running."""


class PolicyViolation(WorkflowRuntimeError):
    """The script did not catch the `PermissionError` of a call a rule refused (the call never ran)."""


class SandboxCrashed(WorkflowRuntimeError):
    """The sandbox worker died under the script; the run can be retried (or resumed, with a store)."""


class BudgetExceeded(WorkflowError):
    """The script ended because a call budget (`max_agent_calls`, `max_tool_calls`, `call_caps`) ran out."""


class NeedsDecision(WorkflowError):
    """A side-effecting call's outcome is unknown (it was in flight at a crash): it is not re-run silently."""

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class ReplayDivergence(WorkflowError):
    """A replay asked for a call that the journal does not hold at that position."""


class SnapshotError(WorkflowError):
    """A stored snapshot is corrupt, tampered with, or from an incompatible version."""
