"""Evals: the orchestrator scored on a pydantic-evals dataset, each case's run stored, evals compared.

`Harness.evaluate(dataset)` runs the orchestrator on every case (at most `max_concurrency` at once), lets
pydantic-evals score each with the dataset's evaluators (its own and the harness's, `_evaluators`), and
stores the eval: pydantic-evals' report, and per case the orchestrator run, whose scripts are ordinary
stored runs (`harness show`, `trace`, `replay`, `fork`). pydantic-evals does the running, the scoring and
the rendering; this module gives it a task (one orchestrator run per case), measures each run from the
store (`case_stats`), and keeps the evals.

- `baseline=EVAL_ID` renders the report as pydantic-evals' diff against a stored eval, and says which
  cases got better or worse and what the eval cost against the baseline's.
- `reuse_calls=EVAL_ID` answers a call from that eval's journal of the same case when the callee is called
  with the same arguments (`_recorded`), so changing the orchestrator's prompt or model pays only for the
  calls that change. It is also the baseline unless another is given.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack

from pydantic import ValidationError
from pydantic_ai import DeferredToolRequests
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EvaluatorContext
from pydantic_evals.lifecycle import CaseLifecycle
from pydantic_evals.reporting import EvaluationReport, EvaluationReportAdapter, ReportCase, ReportCaseFailure

from .._agent._usage import Totals, format_cost, of_responses
from .._catalog._callees import Callee
from .._dispatch._dispatcher import charged
from .._dispatch._recorded import RecordedCalls, answering_from
from .._records import CallRecord, RunRow, new_run_id
from .._store import RunStore, lookup
from .._tracing._setup import configure_tracing
from .._ui._models import choose_model
from ._evaluators import HARNESS_EVALUATORS


class EvalHost(Protocol):
    """What an eval needs of a `Harness`: its store, its catalog and budget, and its orchestrator."""

    @property
    def tracing(self) -> bool: ...

    @property
    def max_agent_calls(self) -> int: ...

    @property
    def store(self) -> RunStore | None: ...

    @property
    def callees(self) -> Mapping[str, Callee]: ...

    def orchestrator(self, model: Any = None, *, instructions: str | None = None, **agent_kwargs: Any) -> Any: ...


class EvalError(ValueError):
    """An eval cannot run as asked (a dataset that does not load, an unknown eval id); the message says why."""


# -- the dataset -----------------------------------------------------------------------------------


def load_dataset(path: str | Path) -> Dataset[Any, Any, Any]:
    """A pydantic-evals dataset file (YAML or JSON) with the harness's evaluators registered."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f'no dataset file {path}: pass a pydantic-evals dataset (.yaml, .yml or .json).')
    import yaml  # pydantic-evals reads YAML with PyYAML

    try:
        return Dataset[Any, Any, Any].from_file(path, custom_evaluator_types=HARNESS_EVALUATORS)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = f' (line {mark.line + 1}, column {mark.column + 1})' if mark is not None else ''
        problem = getattr(exc, 'problem', None) or 'it does not parse'
        raise EvalError(f'{path} is not valid YAML{where}: {problem}; put a value holding [ ] {{ }} : or # in '
                        'quotes.') from None
    except ExceptionGroup as group:  # evaluators it names that are not registered, or bad arguments
        first = group.exceptions[0]
        raise EvalError(f'{path}: {" ".join(str(first).split())}') from None
    except (ValueError, ValidationError, OSError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise EvalError(f'{path} is not a pydantic-evals dataset: {" ".join(lines[:4])}') from None


def prompt_of(inputs: Any) -> str:
    """A case's prompt: its inputs when they are a string, else their `prompt` entry."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping) and isinstance(inputs.get('prompt'), str):
        return inputs['prompt']
    raise EvalError(f"a case's inputs must be the prompt (a string) or a mapping with 'prompt'; got {inputs!r:.80}")


# -- what a case's run did, measured from the store ---------------------------------------------------


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
            'calls': self.calls, 'live_calls': self.live_calls, 'reused_calls': self.reused_calls,
            'refused': self.refused, 'retries': self.retries, 'requests': self.totals.requests,
            'input_tokens': self.totals.input_tokens, 'output_tokens': self.totals.output_tokens,
        }
        if self.totals.cost is not None:
            shown['cost'] = float(self.totals.cost)
        return shown

    def attributes(self) -> dict[str, Any]:
        return {
            'agent_calls': self.agent_calls, 'tool_calls': self.tool_calls, 'live_agent_calls': self.live_agent_calls,
            'budget_used': self.budget_used, 'wall_time': self.wall_time, 'unpriced_requests': self.totals.unpriced,
            'orchestrator_run_id': self.orchestrator_run_id, 'run_ids': self.run_ids,
        }


def case_stats(
    store: RunStore, orchestrator_run_id: str | None, kinds: Mapping[str, str], max_agent_calls: int,
    orchestrator: Totals, wall_time: float,
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
        table = self.report.render(width=width, baseline=self.baseline, include_averages=True,
                                   include_removed_cases=self.baseline is not None)
        return table + '\n'.join(self.summary()) + '\n'

    def summary(self) -> list[str]:
        """The eval in a few lines: its id, how many cases failed (an error, or an assertion that did not hold)
        and why, its calls (live and reused), and against the baseline what changed."""
        errors, asserted = len(self.report.failures), len(self.failed_assertions)
        why = [part for n, part in ((errors, f'{errors} with an error'),
                                    (asserted, f'{asserted} failed an assertion')) if n]
        failed = f'{errors + asserted} failed' + (f' ({", ".join(why)})' if why else '')
        averages = self.report.averages()
        rate = f' · assertions {averages.assertions:.0%}' if averages and averages.assertions is not None else ''
        lines = [f'eval {self.eval_id} · {len(self.cases)} case(s), {failed}{rate} · {self.calls} call(s): '
                 f'{self.live_calls} live, {self.reused_calls} reused'
                 + (f' from eval {self.reused_from}' if self.reused_from else '')
                 + f' · {self.totals.text()}']
        lines.extend(self.verdicts())
        if self.baseline is not None:
            found = self.changes()
            parts = [f'{label}: {", ".join(names)}' for label, names in (
                ('better', found.better), ('worse', found.worse), ('mixed', found.mixed),
                ('new', found.added), ('gone', found.removed)) if names]
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
            lines.extend(f'  {case.name}: ✗ {failure.name} could not run: {" ".join(failure.error_message.split())}'
                         for failure in case.evaluator_failures)
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


# -- running it ------------------------------------------------------------------------------------

_case: contextvars.ContextVar[CaseRun | None] = contextvars.ContextVar('harness_eval_case', default=None)


class CaseRun(CaseLifecycle[Any, Any, Any]):
    """One case: pydantic-evals creates it, `setup` makes it the case the task runs, `prepare_context` hands
    its measurements to the evaluators, `teardown` stores it with the eval."""

    def __init__(self, case: Case[Any, Any, Any], evaluation: Evaluation) -> None:
        super().__init__(case)
        self.evaluation = evaluation
        self.stats = CaseStats()

    async def setup(self) -> None:
        # pydantic-evals awaits the task in this same context right after setup, so the task finds its case here.
        _case.set(self)

    async def run(self, inputs: Any) -> Any:
        """The orchestrator on the case's prompt; its answer is the case's output."""
        ev = self.evaluation
        prompt = prompt_of(inputs)
        recorded = ev.recorded(self.case.name)
        orchestrator = Totals()
        started = time.perf_counter()
        try:
            with answering_from(recorded):
                async with ev.agent.iter(prompt) as run:
                    self.stats.orchestrator_run_id = run.run_id
                    async for _node in run:
                        pass
            result = run.result
            assert result is not None
            orchestrator = of_responses(result.new_messages())
            if isinstance(result.output, DeferredToolRequests):
                raise EvalError('the orchestrator stopped at a call that needs approval; evals cannot approve it '
                                '(`harness pending` lists it)')
            return result.output
        finally:
            self.stats = case_stats(ev.store, self.stats.orchestrator_run_id, ev.kinds, ev.harness.max_agent_calls,
                                    orchestrator, time.perf_counter() - started)

    async def prepare_context(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluatorContext[Any, Any, Any]:
        # The harness's first, in a fixed order; they replace pydantic-evals' counts from the spans (the same
        # requests and tokens, read from the store), and any other metric a callee recorded follows them.
        ours = self.stats.metrics()
        others = {name: value for name, value in ctx.metrics.items() if name not in ours}
        ctx.metrics.clear()
        ctx.metrics.update({**ours, **others})
        ctx.attributes.update(self.stats.attributes())
        return ctx

    async def teardown(self, result: ReportCase[Any, Any, Any] | ReportCaseFailure[Any, Any, Any] | None) -> None:
        error = result.error_message if isinstance(result, ReportCaseFailure) else None
        if result is None:
            error = 'interrupted'
        case = EvalCase(self.case.name or '', self.stats, error)
        self.evaluation.cases.append(case)
        self.evaluation.store.add_eval_case(self.evaluation.eval_id, case.name, case.stats.orchestrator_run_id,
                                            error, case.stats.totals.as_json())


async def orchestrator(inputs: Any) -> Any:
    """The task pydantic-evals runs per case (its name labels the progress bar and the report)."""
    case = _case.get()
    if case is None:
        raise RuntimeError('an eval case ran without its lifecycle (pydantic-evals changed how it calls setup)')
    return await case.run(inputs)


@dataclass
class Evaluation:
    """One eval in progress: the orchestrator under test, and what it reuses and records."""

    harness: EvalHost
    store: RunStore
    agent: Any
    eval_id: str
    reuse_from: str | None
    reuse_side_effects: frozenset[str]
    kinds: dict[str, str]
    cases: list[EvalCase] = field(default_factory=list)

    def recorded(self, case_name: str | None) -> RecordedCalls | None:
        """The reused eval's calls for this case (a fresh count per case), or None when not reusing."""
        if self.reuse_from is None:
            return None
        recorded = RecordedCalls(safe=self.reuse_side_effects)
        for row in self.store.eval_cases(self.reuse_from):
            if row['case_name'] == case_name and row['orchestrator_run_id']:
                for run in sorted(self.store.list_runs(10_000, orchestrator_run_id=row['orchestrator_run_id']),
                                  key=lambda r: r.created):
                    recorded.add_run(trusted_calls(self.store, run), run.catalog)
        return recorded


def trusted_calls(store: RunStore, run: RunRow) -> list[CallRecord]:
    """A baseline run's journal when its seals verify (a reused result enters the sandbox as a replayed one
    does, so it is trusted as much); none of it otherwise, and those calls run live."""
    return [] if store.verify(run.run_id) else store.calls(run.run_id)


class EvalOptions(TypedDict, total=False):
    """The keyword options of `Harness.evaluate` (its docstring says what each does)."""

    model: Any
    instructions: str | None
    name: str | None
    max_concurrency: int | None
    progress: bool
    baseline: str | None
    reuse_calls: str | None
    reuse_side_effects: Iterable[str]
    source: str | None
    """Where the dataset came from, for the stored eval (a dataset file's path is taken by default)."""
    model_label: str | None
    allow: Iterable[str] | None
    deny: Iterable[str] | None
    agent_options: Mapping[str, Any]
    """Further keyword arguments of `Harness.orchestrator` (pydantic-ai `Agent` options)."""


async def evaluate(harness: EvalHost, dataset: Dataset[Any, Any, Any] | str | Path,
                   **options: Unpack[EvalOptions]) -> EvalResult:
    unknown = sorted(set(options) - set(EvalOptions.__annotations__))
    if unknown:  # a TypedDict is not checked at run time: a misspelt option would be dropped without a word
        raise TypeError(f'evaluate() got unknown option(s) {", ".join(unknown)}; its options are '
                        f'{", ".join(EvalOptions.__annotations__)} (Agent options go in agent_options={{...}})')
    model, model_label = options.get('model'), options.get('model_label')
    instructions, name, source = options.get('instructions'), options.get('name'), options.get('source')
    baseline, reuse_calls = options.get('baseline'), options.get('reuse_calls')
    if model is None:  # as the command line chooses it: HARNESS_MODEL, HARNESS_BASE_URL, a provider key
        choice = choose_model()
        if choice.demo:
            raise EvalError("evaluate needs the orchestrator's model: pass model='openai:gpt-4.1-mini' (or any "
                            'pydantic-ai model), or set HARNESS_MODEL; offline, subagents.planner.demo_model()')
        model, model_label = choice.model, model_label or choice.label
    store = harness.store
    if store is None:
        raise EvalError('evaluate stores every case\'s run: make the Harness with a store (":memory:" or a file), '
                        'not store=None')
    if not isinstance(dataset, Dataset):
        source = source or str(dataset)
        dataset = load_dataset(dataset)
    reused = find_eval(store, reuse_calls) if reuse_calls else None
    compared = find_eval(store, baseline) if baseline else reused
    baseline_report = stored_report(compared) if compared is not None else None
    if harness.tracing:  # pydantic-evals' spans tree (ctx.span_tree) comes from logfire
        configure_tracing()
    eval_id = new_run_id()
    label = model_label or getattr(model, 'model_name', None) or str(model)
    metadata = {'model': label, 'instructions': digest_of(instructions)}
    if reused is not None:
        metadata['reuse_calls'] = reused['eval_id']
    evaluation = Evaluation(
        harness=harness, store=store,
        agent=harness.orchestrator(model, instructions=instructions, allow=options.get('allow'),
                                   deny=options.get('deny'), **options.get('agent_options', {})),
        eval_id=eval_id, reuse_from=reused['eval_id'] if reused else None,
        reuse_side_effects=frozenset(options.get('reuse_side_effects', ())),
        kinds={n: c.kind for n, c in harness.callees.items()},
    )
    store.create_eval({
        'eval_id': eval_id, 'name': name or eval_id[:7], 'dataset': dataset.name, 'source': source, 'model': label,
        'instructions': instructions, 'baseline_id': compared['eval_id'] if compared else None,
        'reused_from': evaluation.reuse_from,
    })
    try:
        report = await dataset.evaluate(
            orchestrator, name=name or eval_id[:7], max_concurrency=options.get('max_concurrency', 4),
            progress=options.get('progress', False),
            metadata=metadata, lifecycle=lambda case: CaseRun(case, evaluation),
        )
    except BaseException:
        store.finish_eval(eval_id, status='interrupted')
        raise
    order = {c.name: i for i, c in enumerate(dataset.cases)}
    cases = sorted(evaluation.cases, key=lambda c: order.get(c.name, len(order)))
    result = EvalResult(eval_id, report, cases, baseline=baseline_report,
                        baseline_id=compared['eval_id'] if compared else None, reused_from=evaluation.reuse_from)
    totals = result.totals
    store.finish_eval(eval_id, status='completed', report_json=EvaluationReportAdapter.dump_json(report).decode(),
                      summary={'cases': len(cases), 'failures': len(report.failures),
                               'failed': len(report.failures) + len(result.failed_assertions), 'calls': result.calls,
                               'live_calls': result.live_calls, 'reused_calls': result.reused_calls,
                               'assertions': _assertions(report), **totals.as_json()})
    return result


def _assertions(report: EvaluationReport[Any, Any, Any]) -> float | None:
    averages = report.averages()
    return averages.assertions if averages is not None else None


def digest_of(instructions: str | None) -> str:
    """How the report's header names the instructions: `default`, or a short digest of the given text."""
    if instructions is None:
        return 'default'
    return 'sha256:' + hashlib.sha256(instructions.encode()).hexdigest()[:10]


def find_eval(store: RunStore, eval_id: str) -> dict[str, Any]:
    missing = f'no stored eval {eval_id!r} in {store.path}; `harness evals` lists them.'
    return lookup(store.get_eval, eval_id, missing=missing, error=EvalError)


def stored_report(row: Mapping[str, Any]) -> EvaluationReport[Any, Any, Any]:
    if not row.get('report_json'):
        raise EvalError(f'eval {row["eval_id"]} did not finish ({row["status"]}), so it has no report to compare '
                        'with; pick a finished one (`harness evals`).')
    return EvaluationReportAdapter.validate_json(row['report_json'])
