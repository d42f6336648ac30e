"""The harness's evaluators for pydantic-evals: what an orchestrator run did and what it cost.

They read what `Harness.evaluate` records for each case (`CaseStats.metrics` in `_evals._run`): the metrics shown in the
report (`calls`, `live_calls`, `reused_calls`, `refused`, `retries`, `requests`, `input_tokens`,
`output_tokens`, `cost`) and the attributes beside them (`agent_calls`, `tool_calls`, `budget_used`,
`wall_time`, the case's run ids). Each is an assertion with a reason, so a limit that is kept still
passes when `reuse_calls` makes a case cheaper: only what the orchestrator did is compared.

Use them in a dataset file by name (`harness eval` and `Harness.evaluate` register them), or in Python:

```yaml
evaluators:
  - MaxCalls: 20                      # a single argument may be given bare
  - MaxRetries: {max_retries: 0}
cases:
  - name: review
    inputs: review the code in examples/sample_project
    expected_output: [order_parser.py:22, S307]
    evaluators: [MentionsExpected]
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext, EvaluatorOutput


class NotAHarnessEval(RuntimeError):
    """A harness evaluator ran on a case `Harness.evaluate` did not run (its metrics are missing)."""


def measured(ctx: EvaluatorContext[Any, Any, Any], name: str) -> float:
    """A metric or attribute `Harness.evaluate` recorded for the case."""
    for source in (ctx.metrics, ctx.attributes):
        value = source.get(name)
        if isinstance(value, int | float):
            return value
    raise NotAHarnessEval(
        f'the case has no {name!r} measurement: harness evaluators score cases run by `harness eval` or '
        '`Harness.evaluate`, not by Dataset.evaluate with another task.'
    )


def _count(n: float) -> str:
    return f'{n:g}'


@dataclass(repr=False)
class MaxCalls(Evaluator[object, object, object]):
    """At most `max_calls` calls by the case's scripts (`kind`: every call, `agent` sub-agents, `tool` tools).

    Counts the calls that spent budget (a reused or refused call spends none; see `MaxRefusals`)."""

    max_calls: int
    kind: Literal['all', 'agent', 'tool'] = 'all'

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluationReason:
        name = {'all': 'calls', 'agent': 'agent_calls', 'tool': 'tool_calls'}[self.kind]
        n = measured(ctx, name)
        what = {'all': 'call(s)', 'agent': 'sub-agent call(s)', 'tool': 'tool call(s)'}[self.kind]
        return EvaluationReason(n <= self.max_calls, f'{_count(n)} {what}, at most {self.max_calls}')


@dataclass(repr=False)
class MaxBudgetUsed(Evaluator[object, object, object]):
    """At most `max_fraction` of the orchestrator run's sub-agent budget (`max_agent_calls`) spent."""

    max_fraction: float = 1.0

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluationReason:
        used = measured(ctx, 'budget_used')
        return EvaluationReason(
            used <= self.max_fraction, f'{used:.0%} of the sub-agent budget, at most {self.max_fraction:.0%}'
        )


@dataclass(repr=False)
class MaxRefusals(Evaluator[object, object, object]):
    """At most `max_refusals` calls refused by a rule (`requires=`, allow/deny) or a spent budget."""

    max_refusals: int = 0

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluationReason:
        n = measured(ctx, 'refused')
        return EvaluationReason(n <= self.max_refusals, f'{_count(n)} refused call(s), at most {self.max_refusals}')


@dataclass(repr=False)
class MaxRetries(Evaluator[object, object, object]):
    """At most `max_retries` failed scripts (a failed type check or an error) the model had to retry."""

    max_retries: int = 0

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluationReason:
        n = measured(ctx, 'retries')
        return EvaluationReason(n <= self.max_retries, f'{_count(n)} failed script(s), at most {self.max_retries}')


@dataclass(repr=False)
class MaxTokens(Evaluator[object, object, object]):
    """At most `max_tokens` tokens (input and output) paid for: the orchestrator's and its sub-agents'."""

    max_tokens: int

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluationReason:
        n = measured(ctx, 'input_tokens') + measured(ctx, 'output_tokens')
        return EvaluationReason(n <= self.max_tokens, f'{n:,.0f} token(s), at most {self.max_tokens:,}')


@dataclass(repr=False)
class MaxCost(Evaluator[object, object, object]):
    """At most `max_usd` dollars paid for model requests (as genai-prices prices them).

    No result at all when no request of the case could be priced: an unknown cost neither passes nor fails."""

    max_usd: float

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluatorOutput:
        measured(ctx, 'requests')  # a harness case, priced or not
        cost = ctx.metrics.get('cost')
        if cost is None:
            return {}
        lower = ' (at least: some requests had no price)' if ctx.attributes.get('unpriced_requests') else ''
        return EvaluationReason(cost <= self.max_usd, f'${cost:.4f}{lower}, at most ${self.max_usd:.4f}')


@dataclass(repr=False)
class MaxWallTime(Evaluator[object, object, object]):
    """At most `max_seconds` from the orchestrator run's start to its answer (model requests, scripts, calls)."""

    max_seconds: float

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> EvaluationReason:
        seconds = measured(ctx, 'wall_time')
        return EvaluationReason(seconds <= self.max_seconds, f'{seconds:.2f}s, at most {self.max_seconds:g}s')


@dataclass(repr=False)
class MentionsExpected(Evaluator[object, object, object]):
    """Every text in the case's `expected_output` (a string or a list of them) appears in the answer.

    Gives an assertion (`mentions_expected`: all of them appear) and a score (`expected_found`: the share
    that does), so a diff shows a case that finds more or fewer of its expected findings."""

    case_sensitive: bool = True

    def evaluate(self, ctx: EvaluatorContext[object, object, object]) -> Mapping[str, Any]:
        expected = ctx.expected_output
        if isinstance(expected, str):
            wanted = [expected]
        elif isinstance(expected, list | tuple):
            wanted = [str(e) for e in expected]
        elif expected is None:
            wanted = []
        else:
            raise TypeError('MentionsExpected needs expected_output to be a string or a list of strings.')
        answer = str(ctx.output)
        if not self.case_sensitive:
            answer = answer.lower()
        missing = [w for w in wanted if (w if self.case_sensitive else w.lower()) not in answer]
        found = 1.0 if not wanted else (len(wanted) - len(missing)) / len(wanted)
        reason = f'missing: {", ".join(missing)}' if missing else f'all {len(wanted)} found'
        return {'mentions_expected': EvaluationReason(not missing, reason), 'expected_found': found}


HARNESS_EVALUATORS: tuple[type[Evaluator[Any, Any, Any]], ...] = (
    MaxCalls,
    MaxBudgetUsed,
    MaxRefusals,
    MaxRetries,
    MaxTokens,
    MaxCost,
    MaxWallTime,
    MentionsExpected,
)
"""Registered whenever the harness loads a dataset file."""
