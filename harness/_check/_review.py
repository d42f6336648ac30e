"""The review of a script before it runs, as the `Harness` facade offers it: the type check, the static analysis,
strict mode's refusals and the worst-case estimate, over the Harness's catalog and settings.

The facade is a `Review` (as it is a `DurableRuns` and `Approvals`), and a `Review` is a `Registry`: it reviews
against the catalog it holds. The work is in `_checker`, `_analysis`, `_audit`, `_estimate` and `_plan`; this only puts
them together. Nothing here runs a callee or writes the store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from pydantic_ai.usage import UsageLimits

from .._catalog._callees import Callee
from .._catalog._registry import Registry
from .._catalog._rules import Access
from .._catalog._stubs import render_inputs
from .._errors import WorkflowTypeError
from .._sandbox._values import NotPlainData, plain
from ._analysis import Analysis, analyze
from ._checker import Checker, CheckReport, failed_report
from ._estimate import Estimate, estimate
from ._parse import ScriptTooComplex, bound_script
from ._plan import ReviewPlan, ReviewPolicy, meets, plan_of

T = TypeVar('T')


def script_text(code: str) -> None:
    """A script must be text the sandbox, the checker and the store can all hold, within the host's parse limits
    (`_parse`: its size and nesting; `ScriptTooComplex`, a `WorkflowTypeError`, names the limit)."""
    try:
        plain(code)
    except NotPlainData as exc:
        raise WorkflowTypeError(f'The script is not valid text: it holds {exc.type_name}. Nothing ran.') from None
    bound_script(code)


class Review(Registry):
    """`check`, `analyze` and `estimate` of a Harness (declared attributes are the Harness's settings)."""

    _checker: Checker
    strict: bool
    type_check: bool
    allow_unguarded: frozenset[str]
    sub_agent_usage_limits: UsageLimits | None
    review: ReviewPolicy | None

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Declared here, defined by the Harness this is part of."""
        raise TypeError('Review is a part of a Harness, which defines _sync')

    async def acheck(self, code: str, *, inputs: Mapping[str, Any] | None = None) -> CheckReport:
        """Type check `code` against the catalog without running any of it, then check it against the
        catalog's rules (`warnings`; errors with `strict=True`); an ok report has its worst case (`estimate`)."""
        try:
            script_text(code)
        except ScriptTooComplex as exc:
            return failed_report(exc.diagnostic())
        report = await self._checker.check(self.stubs() + render_inputs(inputs or {}), code)
        if not report.ok:
            return report
        analysis = self.analyze(code)
        if self.strict and (refused := self._strict_refusals(analysis)):
            return dataclasses.replace(report, ok=False, errors='\n'.join(f'workflow.py:{v}' for v in refused))
        return dataclasses.replace(report, warnings=analysis.findings, estimate=self.estimate_of(analysis))

    def check(self, code: str, *, inputs: Mapping[str, Any] | None = None) -> CheckReport:
        """Blocking twin of `acheck`; usable from sync and async code."""
        return self._sync(self.acheck(code, inputs=inputs))

    def analyze(self, code: str, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None) -> Analysis:
        """What `code` can do, before anything runs: every call it can make, where, and the rules
        some path of it can break (an upper bound; see `Analysis`). Raises `SyntaxError` if it does
        not parse, `ScriptTooComplex` (a `WorkflowTypeError`) past the host's limits of size and nesting."""
        self.stubs()  # validates the rules
        return analyze(
            code,
            self._callees,
            requires={name: c.requires for name, c in self._callees.items() if c.requires},
            side_effects=[name for name, c in self._callees.items() if c.side_effect],
            access=Access.of(allow, deny),
        )

    def _rule_errors(self, code: str, access: Access) -> list[str]:
        """Strict mode's refusals of a script about to run under `access` (none without strict or the type check)."""
        if not (self.strict and self.type_check):
            return []
        try:
            analysis = self.analyze(code, allow=access.allow, deny=access.deny)
        except SyntaxError:
            return []  # the type check reports it, with ty's message
        return self._strict_refusals(analysis, access)

    def _strict_refusals(self, analysis: Analysis, access: Access | None = None) -> list[str]:
        """What strict mode refuses of an analysed script: its findings (no path may break a rule, every call is
        accounted for), then each unguarded irreversible callee it can reach that `access` lets it call."""
        return [*analysis.findings, *unguarded_reach(analysis, self._callees, self.allow_unguarded, access)]

    def estimate(self, code: str, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None) -> Estimate:
        """The most `code` can call and cost, before anything runs: per callee the analysis' bound times the
        most one call costs (`cost=`, else a sub-agent's model price times `sub_agent_usage_limits`; host tools
        nothing). `cost_usd` is None when something is unbounded or unpriced. Raises `SyntaxError` if it does
        not parse."""
        return self.estimate_of(self.analyze(code, allow=allow, deny=deny), Access.of(allow, deny))

    def estimate_of(self, analysis: Analysis, access: Access | None = None) -> Estimate:
        """The estimate of a script already analysed."""
        return estimate(analysis, self._callees, self.sub_agent_usage_limits, access)

    def _review_plan(self, code: str, access: Access | None = None) -> ReviewPlan:
        """What a person reviews of `code` before it runs under `access`: its analysis and its estimate."""
        access = access or Access()
        analysis = self.analyze(code, allow=access.allow, deny=access.deny)
        return plan_of(code, analysis, self.estimate_of(analysis, access), self._callees)

    async def plan_for_review(self, code: str, inputs: Mapping[str, Any] | None, access: Access) -> ReviewPlan | None:
        """The plan of a new run when `review=` says it waits for a person, else None (also for a script the
        check refuses: running it reports why, as without review)."""
        if self.review is None:
            return None
        if self.type_check and not (await self.acheck(code, inputs=inputs)).ok:
            return None
        try:
            plan = self._review_plan(code, access)
        except SyntaxError:
            return None  # the run reports it, with ty's message
        return plan if meets(self.review, plan) else None


def unguarded_reach(
    analysis: Analysis, callees: Mapping[str, Callee], allowed: frozenset[str], access: Access | None = None
) -> list[str]:
    """Strict mode's refusal: the unguarded irreversible callees (`Callee.unguarded`) the script can reach and
    the run may call, unless `allowed` names them; one line each, at its first call site, naming the fix."""
    found = []
    for name in sorted(analysis.callees - allowed):
        callee = callees.get(name)
        if callee is None or not callee.unguarded or (access is not None and access.refusal(name) is not None):
            continue
        line = min(site.line for site in (*analysis.calls, *analysis.dynamic) if site.callee == name)
        found.append(  # the script's fix first: a model reads this and cannot change the Harness
            f'line {line}: {name} is irreversible (side_effect=True) and has no guard and no approval, so strict mode '
            f'refuses every script that can reach it: leave {name} out of the script. (Its owner can give it '
            f'requires= or approval=True where it is registered, or allow it by name: '
            f'Harness(strict=True, allow_unguarded=[{name!r}]).)'
        )
    return found
