"""What an eval measured: each case's run (`CaseStats`, read from the store), the cases, and the eval's result
with its comparison against a baseline. Plain records and the functions that fill them; running an eval is
`_run`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic_evals.reporting import EvaluationReport, ReportCase, ReportCaseFailure

from .._agent._usage import Totals, format_cost
from .._dispatch._dispatcher import charged
from .._store import RunStore


@dataclass
class CaseStats:
    """One case's orchestrator run: its scripts and calls as journaled, and what its model requests cost."""

    orchestrator_run_id: str | None = None
    run_ids: list[str] = field(default_factory=list)
    calls: int = 0
    """Calls that spent budget (not reused within the run, refused or skipped)."""
    agent_calls: int = 0
    tool_calls: int = 0
    live_calls: int = 0
    """Calls that ran their callee in this eval."""
    live_agent_calls: int = 0
    reused_calls: int = 0
    """Calls answered from the `reuse_calls` eval's journal."""
    refused: int = 0
    retries: int = 0
    """Scripts that failed (check or run), each a retry for the model."""
    budget_used: float = 0.0
    totals: Totals = field(default_factory=Totals)
    wall_time: float = 0.0

    def metrics(self) -> dict[str, int | float]:
        """What the report shows per case (and diffs)."""
        shown: dict[str, int | float] = {
            'calls': self.calls,
            'live_calls': self.live_calls,
            'reused_calls': self.reused_calls,
            'refused': self.refused,
            'retries': self.retries,
            'requests': self.totals.requests,
            'input_tokens': self.totals.input_tokens,
            'output_tokens': self.totals.output_tokens,
        }
        if self.totals.cost is not None:
            shown['cost'] = float(self.totals.cost)
        return shown

    def attributes(self) -> dict[str, Any]:
        return {
            'agent_calls': self.agent_calls,
            'tool_calls': self.tool_calls,
            'live_agent_calls': self.live_agent_calls,
            'budget_used': self.budget_used,
            'wall_time': self.wall_time,
            'unpriced_requests': self.totals.unpriced,
            'orchestrator_run_id': self.orchestrator_run_id,
            'run_ids': self.run_ids,
        }


def case_stats(
    store: RunStore,
    orchestrator_run_id: str | None,
    kinds: Mapping[str, str],
    max_agent_calls: int,
    orchestrator: Totals,
    wall_time: float,
) -> CaseStats:
    """Count a case's calls from the journal of every script its orchestrator run wrote."""
    stats = CaseStats(orchestrator_run_id=orchestrator_run_id, wall_time=wall_time)
    stats.totals.add(orchestrator)
    if orchestrator_run_id is None:
        return stats
    runs = sorted(store.list_runs(10_000, orchestrator_run_id=orchestrator_run_id), key=lambda r: r.created)
    stats.run_ids = [run.run_id for run in runs]
    stats.retries = sum(run.status == 'failed' for run in runs)
    for usage in store.usage(stats.run_ids).values():
        stats.totals.add(Totals.from_json(usage))
    for run in runs:
        for call in store.calls(run.run_id):
            kind = kinds.get(call.callee)
            if kind is None:  # a granted host value (the clock, entropy), not a callee
                continue
            stats.refused += call.status == 'refused'
            stats.reused_calls += call.source == 'baseline'
            if not charged(call):
                continue
            stats.calls += 1
            stats.agent_calls += kind == 'agent'
            stats.tool_calls += kind == 'tool'
            if call.source == 'live':
                stats.live_calls += 1
                stats.live_agent_calls += kind == 'agent'
    stats.budget_used = stats.agent_calls / max_agent_calls
    return stats


# -- the eval --------------------------------------------------------------------------------------


@dataclass
class EvalCase:
    """One case of a stored eval, with where to find its runs."""

    name: str
    stats: CaseStats
    error: str | None = None


@dataclass(frozen=True)
class CaseChanges:
    """How an eval's cases compare with the baseline's: the names of the cases in each bucket."""

    better: tuple[str, ...] = ()
    worse: tuple[str, ...] = ()
    mixed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass
class EvalResult:
    """What `Harness.evaluate` returns: pydantic-evals' report, the stored eval's id, and each case's runs."""

    eval_id: str
    report: EvaluationReport[Any, Any, Any]
    cases: list[EvalCase]
    baseline: EvaluationReport[Any, Any, Any] | None = None
    baseline_id: str | None = None
    reused_from: str | None = None

    @property
    def live_calls(self) -> int:
        return sum(c.stats.live_calls for c in self.cases)

    @property
    def live_agent_calls(self) -> int:
        return sum(c.stats.live_agent_calls for c in self.cases)

    @property
    def reused_calls(self) -> int:
        return sum(c.stats.reused_calls for c in self.cases)

    @property
    def calls(self) -> int:
        return sum(c.stats.calls for c in self.cases)

    @property
    def totals(self) -> Totals:
        totals = Totals()
        for case in self.cases:
            totals.add(case.stats.totals)
        return totals

    @property
    def failed_assertions(self) -> list[str]:
        """The cases that ran but not every assertion of which held (a case that raised is in `report.failures`)."""
        return [case.name for case in self.report.cases if not all(a.value for a in case.assertions.values())]

    def changes(self) -> CaseChanges:
        """Which cases got better or worse than in the baseline (empty without one)."""
        return compare(self.report, self.baseline) if self.baseline is not None else CaseChanges()

    def render(self, width: int | None = None) -> str:
        """pydantic-evals' report (its diff against the baseline when there is one), then the harness's lines."""
        table = self.report.render(
            width=width, baseline=self.baseline, include_averages=True, include_removed_cases=self.baseline is not None
        )
        return table + '\n'.join(self.summary()) + '\n'

    def summary(self) -> list[str]:
        """The eval in a few lines: its id, how many cases failed (an error, or an assertion that did not hold)
        and why, its calls (live and reused), and against the baseline what changed."""
        errors, asserted = len(self.report.failures), len(self.failed_assertions)
        why = [
            part
            for n, part in ((errors, f'{errors} with an error'), (asserted, f'{asserted} failed an assertion'))
            if n
        ]
        failed = f'{errors + asserted} failed' + (f' ({", ".join(why)})' if why else '')
        averages = self.report.averages()
        rate = f' · assertions {averages.assertions:.0%}' if averages and averages.assertions is not None else ''
        lines = [
            f'eval {self.eval_id} · {len(self.cases)} case(s), {failed}{rate} · {self.calls} call(s): '
            f'{self.live_calls} live, {self.reused_calls} reused'
            + (f' from eval {self.reused_from}' if self.reused_from else '')
            + f' · {self.totals.text()}'
        ]
        lines.extend(self.verdicts())
        if self.baseline is not None:
            found = self.changes()
            parts = [
                f'{label}: {", ".join(names)}'
                for label, names in (
                    ('better', found.better),
                    ('worse', found.worse),
                    ('mixed', found.mixed),
                    ('new', found.added),
                    ('gone', found.removed),
                )
                if names
            ]
            parts.append(f'unchanged: {len(found.unchanged)}')
            before = report_totals(self.baseline)
            now = report_totals(self.report)
            tokens = f'tokens {before.input_tokens + before.output_tokens:,} → {now.input_tokens + now.output_tokens:,}'
            cost = f'cost {format_cost(before.cost)} → {format_cost(now.cost)}'
            lines.append(f'against eval {self.baseline_id}: ' + ' · '.join([*parts, tokens, cost]))
        return lines

    def verdicts(self) -> list[str]:
        """Per case, each assertion that did not hold, named with the evaluator's reason, and each evaluator that
        could not run, with its error (the report's table shows a cross and no more)."""
        lines = []
        for case in self.report.cases:
            for name, result in case.assertions.items():
                if not result.value:
                    lines.append(f'  {case.name}: ✗ {name}' + (f': {result.reason}' if result.reason else ''))
            lines.extend(
                f'  {case.name}: ✗ {failure.name} could not run: {" ".join(failure.error_message.split())}'
                for failure in case.evaluator_failures
            )
        return lines


def compare(report: EvaluationReport[Any, Any, Any], baseline: EvaluationReport[Any, Any, Any]) -> CaseChanges:
    """Per case, by name: better when an assertion now passes or a score rose and nothing got worse."""
    old = {c.name: c for c in [*baseline.cases, *baseline.failures]}
    new = {c.name: c for c in [*report.cases, *report.failures]}
    buckets: dict[str, list[str]] = {'removed': [name for name in old if name not in new]}
    for name, case in new.items():
        before = old.get(name)
        if before is None:
            bucket = 'added'
        else:
            up, down = _movement(before, case)
            bucket = 'mixed' if up and down else 'better' if up else 'worse' if down else 'unchanged'
        buckets.setdefault(bucket, []).append(name)
    return CaseChanges(**{bucket: tuple(names) for bucket, names in buckets.items()})


def _movement(
    before: ReportCase[Any, Any, Any] | ReportCaseFailure[Any, Any, Any],
    after: ReportCase[Any, Any, Any] | ReportCaseFailure[Any, Any, Any],
) -> tuple[int, int]:
    """How many results improved and how many got worse (a case that failed to run is worse than any result)."""
    if isinstance(before, ReportCaseFailure) or isinstance(after, ReportCaseFailure):
        ran_before, ran_after = isinstance(before, ReportCase), isinstance(after, ReportCase)
        return int(ran_after and not ran_before), int(ran_before and not ran_after)
    up = down = 0
    for results_before, results_after in ((before.assertions, after.assertions), (before.scores, after.scores)):
        for key, result in results_after.items():
            if key not in results_before:
                continue
            a, b = results_before[key].value, result.value
            up += b > a
            down += b < a
    return up, down


def report_totals(report: EvaluationReport[Any, Any, Any]) -> Totals:
    """The tokens and cost an eval paid, from its cases' metrics (so a stored report is enough)."""
    totals = Totals()
    for case in report.cases:
        totals.input_tokens += int(case.metrics.get('input_tokens', 0))
        totals.output_tokens += int(case.metrics.get('output_tokens', 0))
        totals.requests += int(case.metrics.get('requests', 0))
        if 'cost' in case.metrics:
            totals.cost = (totals.cost or Decimal(0)) + Decimal(str(case.metrics['cost']))
    return totals
