"""The errors a caller of the harness can see, in one place. Each `WorkflowError` carries a message a model can
act on (never a host path, repr or secret) and what was salvaged (`completed`, `printed`).

    Exception
    ├── WorkflowError                 a workflow run failed; `str()` is written for the model
    │   ├── WorkflowTypeError         the check failed: nothing ran
    │   ├── WorkflowRuntimeError      the script raised, or hit a sandbox limit
    │   │   ├── PolicyViolation       it did not catch the refusal of a call a rule refused
    │   │   └── SandboxCrashed        the sandbox worker died under it (a retry; resumable)
    │   ├── BudgetExceeded            a call budget ran out
    │   ├── NeedsDecision             a side-effecting call's outcome is unknown after a crash
    │   ├── RunBusy                   another holder has the run (or this process lost it)
    │   ├── ReplayDivergence          a replay asked for a call the journal does not hold
    │   ├── SnapshotError             a stored snapshot is corrupt, tampered with or incompatible
    │   └── CatalogChanged            resume/replay/fork under a catalog that changed
    ├── StoreError                    the run store cannot do what was asked (the message names the fix)
    └── RunWaiting                    internal: a run stops to wait for a person (never reaches a caller)
    pydantic_ai.UserError
    └── RegistrationError             a callee cannot be registered as given (`harness._catalog`)
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Literal

from ._records import CallRecord


class WorkflowError(Exception):
    """Base of every failure of a workflow run.

    `str(error)` is written for the model that wrote the script: it says what went wrong and what
    to change, and never holds host paths, reprs or secrets. `completed` and `printed` keep what the
    script achieved before it failed.
    """

    def __init__(
        self, message: str, *, run_id: str | None = None, completed: list[CallRecord] | None = None, printed: str = ''
    ) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.completed: list[CallRecord] = completed or []
        self.printed = printed
        self.note: str | None = None
        """Set by the engine when some of the script's side effects were answered from earlier scripts (`_effects`)."""


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


class PlanRejected(WorkflowError):
    """A person rejected the run's plan (`Harness(review=...)`): nothing of it ran."""


class NeedsDecision(WorkflowError):
    """A side-effecting call's outcome is unknown (it was in flight at a crash): it is not re-run silently."""

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class RunWaiting(Exception):
    """Raised inside the engine when a script can only go on once a person decided on its calls."""

    def __init__(self, pending: list[Any]) -> None:
        super().__init__(pending)
        self.pending = pending


class RunBusy(WorkflowError):
    """Another live process holds the run (it is running, resuming or finishing it); or, with
    `lost=True`, this process lost its hold on the run and must not write its outcome; or, with `changed=True`,
    the run was written by another process between reading it and taking it."""

    def __init__(self, run_id: str, holder: Any, *, lost: bool = False, changed: bool = False) -> None:
        who = f'pid {holder.pid} on host {holder.host}' if holder is not None else 'another process'
        if changed:
            message = (
                f'run {run_id} changed while this resume was being prepared (another process went on with '
                'it); look at it again (`harness show`), and resume it again if it still needs it.'
            )
        elif lost:
            message = (
                f'run {run_id} was taken over by another process ({who}) while this one ran it; '
                'this process stopped without recording its outcome.'
            )
        elif holder is not None and (holder.host, holder.pid) == (socket.gethostname(), os.getpid()):
            message = (
                f'run {run_id} is active in this process (another run, resume or decision of it is under '
                'way); wait for it to finish.'
            )
        else:
            message = (
                f'run {run_id} is active in another process ({who}); wait for it to finish, or resume '
                'it after that process has stopped (its hold expires 30 s after it stops renewing it).'
            )
        super().__init__(message, run_id=run_id)
        self.holder = holder


class ReplayDivergence(WorkflowError):
    """A replay asked for a call that the journal does not hold at that position."""


class SnapshotError(WorkflowError):
    """A stored snapshot is corrupt, tampered with, or from an incompatible version."""


def raised_as(name: str | None) -> type[WorkflowError]:
    """The class a failure reported by its class name (by a Temporal worker's advance, in another process) is raised
    as in the caller: the `WorkflowError` subclass of that name, else `WorkflowRuntimeError` (the script failed)."""
    found: list[type[WorkflowError]] = [WorkflowError]
    for cls in found:
        if cls.__name__ == name and cls.__init__ in (WorkflowError.__init__, WorkflowTypeError.__init__):
            return cls  # (one made from a message alone: not RunBusy or NeedsDecision, which hold more)
        found.extend(cls.__subclasses__())
    return WorkflowRuntimeError


@dataclass(frozen=True)
class CatalogChange:
    """One difference between a run's catalog and today's (`CatalogChanged.changes`)."""

    callee: str
    kind: Literal['added', 'removed', 'changed', 'rules', 'version']
    detail: str = ''

    def __str__(self) -> str:
        text = {
            'added': 'added',
            'removed': 'removed',
            'changed': 'signature changed',
            'rules': 'rules changed',
            'version': 'version changed',
        }
        return f'{self.callee}: {text[self.kind]}' + (f' ({self.detail})' if self.detail else '')


class CatalogChanged(WorkflowError):
    """The catalog differs from the one the run ran against; `changes` lists each callee added,
    removed or changed. Resume, replay and fork refuse to continue unless the only changes are added
    callees and the stored script still type-checks against the new stubs (checked on its own), or they
    are told `recheck=True` (the same check for any change but a version change) or
    `accept_changes=True` (continue without the type check)."""

    def __init__(self, run_id: str, found: list[CatalogChange], *, errors: str | None = None) -> None:
        lines = '\n'.join(f'- {change}' for change in found)
        checked = (
            f'The stored script no longer type-checks against the new stubs:\n{errors}\n' if errors is not None else ''
        )
        if any(change.kind in ('rules', 'version') for change in found):  # no type check vouches for those
            fix = (
                'Continue anyway with accept_changes=True (CLI: --accept-changes) if the run may go on under '
                "today's behaviour and rules"
            )
        else:
            fix = (
                'Continue anyway with recheck=True (if the script still type-checks against the new stubs) or '
                'accept_changes=True (CLI: --recheck, --accept-changes)'
            )
        super().__init__(
            f'The catalog changed since run {run_id} ran:\n{lines}\n{checked}{fix}; `harness diff RUN` shows the '
            'differences. Nothing ran.',
            run_id=run_id,
        )
        self.changes = found


class StoreError(Exception):
    """The run store cannot do what was asked; the message says why and, where there is one, the fix."""
