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
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack

from pydantic import ValidationError
from pydantic_ai import DeferredToolRequests
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EvaluatorContext
from pydantic_evals.lifecycle import CaseLifecycle
from pydantic_evals.reporting import EvaluationReport, EvaluationReportAdapter, ReportCase, ReportCaseFailure

from .._agent._usage import Totals, of_responses
from .._catalog._callees import Callee
from .._dispatch._recorded import RecordedCalls, answering_from
from .._records import CallRecord, RunRow, new_run_id
from .._store import RunStore, lookup
from .._tracing._setup import configure_tracing
from .._ui._models import choose_model
from ._evaluators import HARNESS_EVALUATORS
from ._results import CaseStats, EvalCase, EvalResult, case_stats


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
        raise EvalError(
            f'{path} is not valid YAML{where}: {problem}; put a value holding [ ] {{ }} : or # in quotes.'
        ) from None
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
                raise EvalError(
                    'the orchestrator stopped at a call that needs approval; evals cannot approve it '
                    '(`harness pending` lists it)'
                )
            return result.output
        finally:
            self.stats = case_stats(
                ev.store,
                self.stats.orchestrator_run_id,
                ev.kinds,
                ev.harness.max_agent_calls,
                orchestrator,
                time.perf_counter() - started,
            )

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
        self.evaluation.store.add_eval_case(
            self.evaluation.eval_id, case.name, case.stats.orchestrator_run_id, error, case.stats.totals.as_json()
        )


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
                for run in sorted(
                    self.store.list_runs(10_000, orchestrator_run_id=row['orchestrator_run_id']),
                    key=lambda r: r.created,
                ):
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


async def evaluate(
    harness: EvalHost, dataset: Dataset[Any, Any, Any] | str | Path, **options: Unpack[EvalOptions]
) -> EvalResult:
    check_options(options)
    model, model_label = orchestrator_model(options.get('model'), options.get('model_label'))
    instructions, name, source = options.get('instructions'), options.get('name'), options.get('source')
    baseline, reuse_calls = options.get('baseline'), options.get('reuse_calls')
    store = harness.store
    if store is None:
        raise EvalError(
            'evaluate stores every case\'s run: make the Harness with a store (":memory:" or a file), not store=None'
        )
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
        harness=harness,
        store=store,
        agent=harness.orchestrator(
            model,
            instructions=instructions,
            allow=options.get('allow'),
            deny=options.get('deny'),
            **options.get('agent_options', {}),
        ),
        eval_id=eval_id,
        reuse_from=reused['eval_id'] if reused else None,
        reuse_side_effects=frozenset(options.get('reuse_side_effects', ())),
        kinds={n: c.kind for n, c in harness.callees.items()},
    )
    store.create_eval(
        {
            'eval_id': eval_id,
            'name': name or eval_id[:7],
            'dataset': dataset.name,
            'source': source,
            'model': label,
            'instructions': instructions,
            'baseline_id': compared['eval_id'] if compared else None,
            'reused_from': evaluation.reuse_from,
        }
    )
    try:
        report = await dataset.evaluate(
            orchestrator,
            name=name or eval_id[:7],
            max_concurrency=options.get('max_concurrency', 4),
            progress=options.get('progress', False),
            metadata=metadata,
            lifecycle=lambda case: CaseRun(case, evaluation),
        )
    except BaseException:
        store.finish_eval(eval_id, status='interrupted')
        raise
    order = {c.name: i for i, c in enumerate(dataset.cases)}
    cases = sorted(evaluation.cases, key=lambda c: order.get(c.name, len(order)))
    result = EvalResult(
        eval_id,
        report,
        cases,
        baseline=baseline_report,
        baseline_id=compared['eval_id'] if compared else None,
        reused_from=evaluation.reuse_from,
    )
    store.finish_eval(
        eval_id,
        status='completed',
        report_json=EvaluationReportAdapter.dump_json(report).decode(),
        summary=_summary(result),
    )
    return result


def check_options(options: Mapping[str, Any]) -> None:
    """A TypedDict is not checked at run time: a misspelt option would be dropped without a word."""
    unknown = sorted(set(options) - set(EvalOptions.__annotations__))
    if unknown:
        raise TypeError(
            f'evaluate() got unknown option(s) {", ".join(unknown)}; its options are '
            f'{", ".join(EvalOptions.__annotations__)} (Agent options go in agent_options={{...}})'
        )


def orchestrator_model(model: Any, label: str | None) -> tuple[Any, str | None]:
    """The orchestrator's model and its label: the one given, else as the command line chooses it
    (`HARNESS_MODEL`, `HARNESS_BASE_URL`, a provider key); never the offline demo model unasked."""
    if model is not None:
        return model, label
    choice = choose_model()
    if choice.demo:
        raise EvalError(
            "evaluate needs the orchestrator's model: pass model='openai:gpt-4.1-mini' (or any "
            'pydantic-ai model), or set HARNESS_MODEL; offline, subagents.planner.demo_model()'
        )
    return choice.model, label or choice.label


def _summary(result: EvalResult) -> dict[str, Any]:
    """What the evals' table keeps of a finished eval (`harness evals` lists it)."""
    report = result.report
    return {
        'cases': len(result.cases),
        'failures': len(report.failures),
        'failed': len(report.failures) + len(result.failed_assertions),
        'calls': result.calls,
        'live_calls': result.live_calls,
        'reused_calls': result.reused_calls,
        'assertions': _assertions(report),
        **result.totals.as_json(),
    }


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
        raise EvalError(
            f'eval {row["eval_id"]} did not finish ({row["status"]}), so it has no report to compare '
            'with; pick a finished one (`harness evals`).'
        )
    return EvaluationReportAdapter.validate_json(row['report_json'])
