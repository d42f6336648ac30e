"""Plan review: what a script can do and cost, shown to a person before its first call, and the policy that says
which scripts wait for that.

`Harness(review=...)` is a policy on a `ReviewPlan` (the script, its analysis and its estimate): 'side_effects'
(any reachable callee that is `side_effect=True` or needs approval), 'always', or a callable(plan) -> bool.
A script that meets it is stored `waiting` before anything runs (`_store._approvals.Approvals.hold_plan`),
holding no sandbox worker. The plan is stored with the run, in its sealed `access` (`ReviewPlan.stored`), so
what a person approves is what is enforced, from any process: once approved, a call past the plan's `bounds`
for its callee is refused (`_catalog._rules.Access.over_plan`). The decision on the plan is a decision row at
`PLAN_SEQ` (0: before the first call, whose seq is 1), beside the decisions on calls.

Nothing here runs a callee or writes the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._catalog._callees import Callee
from .._records import Decision
from .._settings import ReviewPolicy
from ._analysis import Analysis
from ._estimate import Estimate, most

PLAN_SEQ = 0
"""The seq of the decision on a run's plan: before the first call."""

"""What `Harness(review=...)` takes."""


@dataclass(frozen=True)
class ReviewPlan:
    """What a script can do before it runs, as a person reviews it (`WorkflowResult.plan`)."""

    code: str
    analysis: Analysis
    estimate: Estimate
    irreversible: tuple[str, ...] = ()
    """The reachable callees that are `side_effect=True` or need approval, in name order."""

    @property
    def bounds(self) -> dict[str, int | None]:
        """Per reachable callee the most calls the script can make (None: unbounded): what approval allows."""
        return self.analysis.bounds

    def stored(self) -> dict[str, Any]:
        """The plan as kept with the run (plain data): what is enforced once approved and what views print."""
        return {
            'bounds': self.bounds,
            'complete': self.analysis.complete,
            'irreversible': list(self.irreversible),
            'worst_case': self.estimate.worst_case,
            'estimate': self.estimate.text(),
        }


def plan_of(code: str, analysis: Analysis, estimate: Estimate, callees: Mapping[str, Callee]) -> ReviewPlan:
    """The plan of a script already analysed and estimated, against the catalog `callees`."""
    risky = sorted(name for name in analysis.bounds if (c := callees.get(name)) and (c.side_effect or c.approval))
    return ReviewPlan(code, analysis, estimate, tuple(risky))


def meets(review: ReviewPolicy, plan: ReviewPlan) -> bool:
    """Whether the script must wait for a person's approval of its plan. A policy that raises holds it: a person
    then decides, rather than a bug in the policy letting everything through."""
    if review == 'always':
        return True
    if review == 'side_effects':
        return bool(plan.irreversible)
    try:
        return bool(review(plan))
    except Exception:
        return True


def plan_text(stored: Mapping[str, Any], code: str, *, lines: int | None = None) -> str:
    """A stored plan as a person reads it: the script (its first `lines`; 0: none), per-callee bounds, what cannot be
    undone, the worst case."""
    script = code.strip('\n').splitlines()
    shown = script if lines is None else script[:lines]
    out = ['script:', *(f'  | {line}' for line in shown)] if lines != 0 else []
    if lines != 0 and len(shown) < len(script):
        out.append(f'  | ... ({len(script) - len(shown)} more line(s))')
    bounds = stored.get('bounds') or {}
    out.append('bounds: ' + (', '.join(f'{name} {most(n)}' for name, n in sorted(bounds.items())) or 'no calls'))
    if not stored.get('complete', True):
        out.append('  (the analysis could not follow everything: callees it does not name are not capped)')
    out.append('irreversible: ' + (', '.join(stored.get('irreversible') or ()) or 'none'))
    out.extend(str(stored.get('estimate') or f'worst case: {stored.get("worst_case")}').splitlines())
    return '\n'.join(out)


def plan_refusal(run_id: str, decision: Decision) -> str:
    """The error of a run whose plan a person rejected."""
    why = f': {decision.reason}' if decision.reason else ''
    return f'The plan of run {run_id} was rejected by {decision.decided_by or "a person"}{why}. Nothing ran.'


ESTIMATE_HINT = 'Write a smaller script: fewer calls (a literal bound on each loop), each within what is left.'


def estimate_section(estimate_text: str, *, ran: bool) -> str:
    """The worst case of a script as the model that wrote it reads it when a budget or a person refused it, so it can
    write a smaller one: `Estimate.text()` (per callee the most calls, the most each costs, unbounded or unpriced)."""
    when = 'before it ran' if ran else 'nothing of it ran'
    return f'\n\nThe worst case of that script, from its static bounds ({when}):\n{estimate_text}\n{ESTIMATE_HINT}'


def plan_denied(plan: Mapping[str, Any], reason: str) -> str:
    """What the model reads when a person rejects its script's plan (pydantic-ai's `ToolDenied`): why, and the
    plan's worst case."""
    estimate = str(plan.get('estimate') or f'worst case: {plan.get("worst_case")}')
    return f'The person rejected the plan of this script: {reason}. Nothing of it ran.' + estimate_section(
        estimate, ran=False
    )
