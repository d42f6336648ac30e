"""The worst case of a script before anything runs: per callee the most calls it can make (the analysis'
`bounds`) times the most one call can cost (`_catalog._prices.call_ceiling`), summed.

Invariants: `Estimate.cost_usd` is a number only when every callee the script can reach has both a bound
and a price (or costs nothing per call), and the analysis is complete; otherwise it is None and `reasons` says
why. An unpriced callee is named in `unpriced`, never counted as free. A callee the run's allow/deny refuses
costs nothing (each of its calls is refused before it runs). Unbounded calls of a callee that costs nothing
cost nothing.

It bounds one run of the script as written: a resume runs again the calls that were in flight when a run
stopped, and a call can go past its ceiling by its last response (`_prices` says why).

The `Harness` facade's `estimate(code)` (`_review`) is this, and `check` puts the estimate in its report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic_ai.usage import UsageLimits

from .._catalog._callees import Callee
from .._catalog._prices import Ceiling, call_ceiling
from .._catalog._rules import Access
from ._analysis import Analysis


@dataclass(frozen=True)
class CalleeEstimate:
    """One callee's part of an `Estimate`: its most calls, the most one call costs and where that comes from."""

    callee: str
    calls: int | None
    """The most calls the script can make of it; None: unbounded."""
    per_call: float | None
    """USD, at most, per call; None: unpriced, or a call has no bound (`reason` says which)."""
    source: str
    """Where `per_call` comes from: 'cost=', '<model> (genai-prices)', 'host tool', 'refused'."""
    unpriced: bool = False
    reason: str | None = None

    @property
    def cost_usd(self) -> float | None:
        """The most this callee can cost in the script; None when unbounded or unpriced."""
        if self.per_call == 0:
            return 0.0
        if self.per_call is None or self.calls is None:
            return None
        return self.calls * self.per_call


@dataclass(frozen=True)
class Estimate:
    """What a script can cost at worst, known before it runs (see the module docstring)."""

    calls: dict[str, int | None]
    """Per callee the script can reach, the most calls it can make (None: unbounded)."""
    cost_usd: float | None
    """USD, at most, for the whole script; None when the analysis is incomplete or a reachable callee is unpriced,
    or unbounded and not free."""
    unpriced: list[str]
    """The reachable callees whose price is not known (no `cost=`, and no price for their model)."""
    per_callee: dict[str, CalleeEstimate] = field(default_factory=dict)
    incomplete: list[tuple[int, str]] = field(default_factory=list)
    """What the analysis could not follow: calls may be missing, so there is no worst case."""

    @property
    def reasons(self) -> list[str]:
        """Why `cost_usd` is None, one line each (empty when it is a number)."""
        found = [f'line {line}: {reason}' for line, reason in self.incomplete]
        for part in self.per_callee.values():
            if part.cost_usd is not None:
                continue
            if part.per_call is None:
                found.append(f'{part.callee}: {"unpriced" if part.unpriced else "unbounded per call"}: {part.reason}')
            else:
                found.append(
                    f'{part.callee}: unbounded calls (a loop without a literal bound, recursion, or a '
                    'function used as a value)'
                )
        return found

    @property
    def worst_case(self) -> str:
        """`cost_usd` as a person reads it: dollars, 'unpriced' (only prices are missing) or 'unbounded'."""
        bounded = not self.incomplete and all(p.unpriced or p.cost_usd is not None for p in self.per_callee.values())
        return usd(self.cost_usd, unpriced=bool(self.unpriced) and bounded)

    def text(self) -> str:
        """The estimate as lines a person reads."""
        lines = [f'worst case: {self.worst_case}']
        for part in self.per_callee.values():
            lines.append(
                f'  {part.callee}: {most(part.calls)} x {usd(part.per_call, part.unpriced)} ({part.source}) '
                f'= {usd(part.cost_usd, part.unpriced)}'
            )
        lines.extend(f'  {reason}' for reason in self.reasons)
        return '\n'.join(lines)


def usd(value: float | None, unpriced: bool = False) -> str:
    """Dollars; None is 'unpriced' when the price is what is missing, else 'unbounded'."""
    if value is None:
        return 'unpriced' if unpriced else 'unbounded'
    return f'${value:.4f}' if value < 1 else f'${value:,.2f}'


def most(calls: int | None) -> str:
    return 'unbounded' if calls is None else f'{calls} call{"" if calls == 1 else "s"}'


def estimate(
    analysis: Analysis, callees: Mapping[str, Callee], limits: UsageLimits | None, access: Access | None = None
) -> Estimate:
    """The worst case of the script `analysis` describes, against the catalog `callees`, each sub-agent run
    bounded by `limits`."""
    access = access or Access()
    bounds = analysis.bounds
    parts = {name: _part(name, bounds[name], callees.get(name), limits, access) for name in sorted(bounds)}
    costs = [part.cost_usd for part in parts.values()]
    total = None if analysis.incomplete or None in costs else math.fsum(c for c in costs if c is not None)
    return Estimate(
        calls=dict(sorted(bounds.items())),
        cost_usd=total,
        unpriced=[n for n, p in parts.items() if p.unpriced],
        per_callee=parts,
        incomplete=list(analysis.incomplete),
    )


def _part(
    name: str, calls: int | None, callee: Callee | None, limits: UsageLimits | None, access: Access
) -> CalleeEstimate:
    if access.refusal(name) is not None:
        ceiling = Ceiling(0.0, 'refused')
    elif callee is None:  # the analysis only counts catalog names; kept unpriced rather than free if not
        ceiling = Ceiling(None, 'not registered', unpriced=True, reason='not in the catalog')
    else:
        ceiling = call_ceiling(callee, limits)
    return CalleeEstimate(name, calls, ceiling.usd, ceiling.source, ceiling.unpriced, ceiling.reason)
