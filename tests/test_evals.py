"""Evals (#17): the orchestrator scored on a pydantic-evals dataset, every case's run stored, evals diffed, and
calls answered from a baseline eval's journal (`reuse_calls`) so that only changed calls are paid for."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import Contains

from harness import (
    EvalError,
    Harness,
    MaxBudgetUsed,
    MaxCalls,
    MaxCost,
    MaxRefusals,
    MaxRetries,
    MaxTokens,
    MaxWallTime,
    MentionsExpected,
)
from harness._evals._run import load_dataset

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / 'examples' / 'evals' / 'review.yaml'


# -- a small world: a sub-agent that counts its runs, a summarizer Agent, a side-effecting tool ------------


class World:
    """Callees that count how often they really ran (the thing reuse must avoid)."""

    def __init__(self, h: Harness, *, version: str | None = None) -> None:
        self.reviews: list[tuple[str, str]] = []
        self.notified: list[str] = []
        self.summaries = 0
        reviews, notified = self.reviews, self.notified

        @h.subagent(version=version)
        async def reviewer(*, path: str, focus: str) -> list[str]:
            """Review one file; the findings as `path:line CODE`."""
            reviews.append((path, focus))
            found = {'a.py': ['a.py:3 S307', 'a.py:9 E711'], 'b.py': ['b.py:1 B006']}[path]
            return found if focus == 'all' else found[:1]

        def summary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.summaries += 1
            return ModelResponse(parts=[TextPart('summary of the findings')])

        h.add_agent(Agent(FunctionModel(summary), name='summarizer'), description='Summarize text.')

        @h.tool(side_effect=True)
        def notify(*, text: str) -> str:
            """Tell the team."""
            notified.append(text)
            return 'sent'


def review_script(paths: list[str], focus: str, notify: bool) -> str:
    lines = [
        'import asyncio',
        f'found = await asyncio.gather(*[reviewer(path=p, focus={focus!r}) for p in {paths!r}])',
        'flat = [f for fs in found for f in fs]',
        'summary = await summarizer(task="Summarise:\\n" + "\\n".join(flat))',
    ]
    if notify:
        lines += ['try:', '    await notify(text=summary)', 'except PermissionError:', '    pass']
    lines.append('{"findings": flat, "summary": summary}')
    return '\n'.join(lines) + '\n'


def orchestrator_model(*, bad_first: bool = False) -> FunctionModel:
    """Writes one script per prompt; reads its instructions: 'bugs only' reviews with focus='bugs', 'notify'
    adds a notification, 'terse' changes only the wording of the answer (the scripts stay the same)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        instructions = info.instructions or ''
        if returned and getattr(returned[-1], 'outcome', None) != 'retried':
            value = returned[-1].content
            findings = value['findings'] if isinstance(value, dict) else []
            head = 'Findings:' if 'terse' in instructions else 'The review found these problems:'
            return ModelResponse(parts=[TextPart('\n'.join([head, *findings]))])
        prompt = next(
            p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if p.part_kind == 'user-prompt'
        )
        paths = re.findall(r'\w+\.py', str(prompt))
        if bad_first and not returned:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': 'await no_such_agent()'})])
        focus = 'bugs' if 'bugs only' in instructions else 'all'
        code = review_script(paths, focus, notify='notify' in instructions)
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])

    return FunctionModel(respond, model_name='scripted-orchestrator')


def dataset() -> Dataset[Any, Any, Any]:
    return Dataset(
        name='reviews',
        cases=[
            Case(name='both', inputs='review a.py and b.py', expected_output=['a.py:3 S307', 'a.py:9 E711', 'b.py:1']),
            Case(name='one', inputs={'prompt': 'review b.py'}, expected_output=['b.py:1 B006']),
        ],
        evaluators=[MentionsExpected(), MaxCalls(max_calls=5), MaxRetries(), MaxRefusals(), MaxBudgetUsed(0.5)],
    )


def results(result: Any) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per case: its scores and its assertions, as values."""
    return {
        c.name: ({k: v.value for k, v in c.scores.items()}, {k: v.value for k, v in c.assertions.items()})
        for c in result.report.cases
    }


@pytest.fixture
def world(make_harness):
    h = make_harness(max_agent_calls=10)
    return h, World(h)


# -- scoring, storing, comparing ------------------------------------------------------------------------


def test_every_case_is_run_scored_and_stored(world):
    h, w = world
    result = h.evaluate_sync(dataset(), model=orchestrator_model())
    assert not result.report.failures
    assert results(result) == {
        'both': (
            {'expected_found': 1.0},
            {
                'mentions_expected': True,
                'MaxCalls': True,
                'MaxRetries': True,
                'MaxRefusals': True,
                'MaxBudgetUsed': True,
            },
        ),
        'one': (
            {'expected_found': 1.0},
            {
                'mentions_expected': True,
                'MaxCalls': True,
                'MaxRetries': True,
                'MaxRefusals': True,
                'MaxBudgetUsed': True,
            },
        ),
    }
    both = next(c for c in result.report.cases if c.name == 'both')
    # 2 reviews + 1 summary; the summarizer's request and the orchestrator's two are counted with their tokens.
    assert both.metrics['calls'] == 3 and both.metrics['live_calls'] == 3 and both.metrics['reused_calls'] == 0
    assert both.metrics['requests'] == 3 and both.metrics['input_tokens'] > 0
    assert both.attributes['agent_calls'] == 3 and both.attributes['budget_used'] == 0.3
    assert sorted(w.reviews) == [('a.py', 'all'), ('b.py', 'all'), ('b.py', 'all')]
    # Every case's scripts are ordinary stored runs: shown, replayed (and so traced, forked) like any run.
    assert h.store is not None
    stored = {row['case_name']: row for row in h.store.eval_cases(result.eval_id)}
    assert set(stored) == {'both', 'one'}
    for case in result.cases:
        assert case.stats.run_ids and stored[case.name]['orchestrator_run_id'] == case.stats.orchestrator_run_id
        run = h.store.get_run(case.stats.run_ids[0])
        assert run is not None and run.status == 'completed'
        assert run.orchestrator_run_id == case.stats.orchestrator_run_id
        assert h.replay_sync(run.run_id).value == run.value
    assert len(w.reviews) == 3  # replay called nothing
    row = h.store.get_eval(result.eval_id[:9])
    assert row is not None and row['status'] == 'completed' and row['summary']['live_calls'] == 5


def test_changed_instructions_show_in_the_diff(world):
    """The issue's first "done when": two evals that differ in the orchestrator's instructions, and the diff."""
    h, _ = world
    before = h.evaluate_sync(dataset(), model=orchestrator_model())
    after = h.evaluate_sync(
        dataset(), model=orchestrator_model(), instructions='Review for bugs only.', baseline=before.eval_id
    )
    # With focus='bugs' the reviewer reports fewer findings: 'both' misses a.py:9, 'one' still finds b.py:1.
    assert results(after)['both'][0] == {'expected_found': pytest.approx(2 / 3)}
    assert results(after)['both'][1]['mentions_expected'] is False
    changes = after.changes()
    assert changes.worse == ('both',) and changes.unchanged == ('one',) and not changes.better
    text = after.render(width=200)
    assert f'Evaluation Diff: {before.eval_id[:7]} → {after.eval_id[:7]}' in text
    assert 'instructions: default → sha256:' in text
    assert 'expected_found: 1.00 → 0.667' in text
    assert f'against eval {before.eval_id}: worse: both · unchanged: 1' in text
    # The stored eval is the baseline: any later process compares with it the same way.
    assert h.store is not None
    again = h.evaluate_sync(dataset(), model=orchestrator_model(), baseline=after.eval_id[:8])
    assert again.changes().better == ('both',) and again.baseline_id == after.eval_id


def test_an_unknown_baseline_is_one_line_naming_the_listing(world):
    h, _ = world
    for option in ('baseline', 'reuse_calls'):
        with pytest.raises(EvalError, match=r"^no stored eval 'nope' in .*; `harness evals` lists them\.$"):
            h.evaluate_sync(dataset(), model=orchestrator_model(), **{option: 'nope'})


def test_reuse_calls_pays_only_for_the_calls_that_change(world):
    """The issue's second "done when": unchanged scripts make zero live sub-agent calls, and the scores equal
    the baseline's; a changed script runs only its changed calls."""
    h, w = world
    baseline = h.evaluate_sync(dataset(), model=orchestrator_model())
    runs_before, summaries_before = len(w.reviews), w.summaries
    reused = h.evaluate_sync(
        dataset(), model=orchestrator_model(), instructions='Be terse.', reuse_calls=baseline.eval_id
    )
    assert len(w.reviews) == runs_before and w.summaries == summaries_before  # counted at the callees
    assert reused.live_agent_calls == 0 and reused.live_calls == 0
    assert reused.reused_calls == baseline.calls == 5
    assert results(reused) == results(baseline)
    assert reused.baseline_id == baseline.eval_id and reused.changes().unchanged == ('both', 'one')
    both = next(c for c in reused.report.cases if c.name == 'both')
    assert both.metrics['reused_calls'] == 3 and both.metrics['requests'] == 2  # the orchestrator's own only
    assert both.output.startswith('Findings:')  # the new instructions did change the answer
    assert 'reused from eval' in reused.render(width=200)
    # The reused calls are journaled as answered from the baseline, and charged like live ones.
    assert h.store is not None
    calls = h.store.calls(reused.cases[0].stats.run_ids[0])
    assert {c.source for c in calls} == {'baseline'} and reused.cases[0].stats.agent_calls == 3
    # Changed scripts: focus='bugs' makes every review a new call, and the summary of 'both' too (fewer
    # findings); 'one' finds the same with either focus, so its summary is the same call and is reused.
    changed = h.evaluate_sync(
        dataset(), model=orchestrator_model(), instructions='bugs only', reuse_calls=reused.eval_id
    )
    assert changed.reused_calls == 1 and changed.live_agent_calls == 4
    one_more = h.evaluate_sync(
        dataset(), model=orchestrator_model(), instructions='bugs only, terse', reuse_calls=changed.eval_id
    )
    assert one_more.live_calls == 0 and results(one_more) == results(changed)


def test_side_effecting_callees_run_live_unless_marked_safe(world):
    h, w = world
    baseline = h.evaluate_sync(dataset(), model=orchestrator_model(), instructions='notify')
    assert len(w.notified) == 2
    again = h.evaluate_sync(dataset(), model=orchestrator_model(), instructions='notify', reuse_calls=baseline.eval_id)
    assert len(w.notified) == 4 and again.live_calls == 2 and again.live_agent_calls == 0
    safe = h.evaluate_sync(
        dataset(),
        model=orchestrator_model(),
        instructions='notify',
        reuse_calls=baseline.eval_id,
        reuse_side_effects=['notify'],
    )
    assert len(w.notified) == 4 and safe.live_calls == 0


def test_a_changed_callee_is_not_reused(make_harness):
    h = make_harness()
    w = World(h, version='1')
    baseline = h.evaluate_sync(dataset(), model=orchestrator_model())
    h.remove('reviewer')
    w2 = World.__new__(World)
    w2.reviews = []

    @h.subagent(version='2')  # new behaviour, same signature: its old results are not this callee's
    async def reviewer(*, path: str, focus: str) -> list[str]:
        w2.reviews.append((path, focus))
        return [f'{path}:1 X']

    again = h.evaluate_sync(dataset(), model=orchestrator_model(), reuse_calls=baseline.eval_id)
    assert len(w2.reviews) == 3 and again.reused_calls == 0  # and the summaries differ: other findings went in
    assert again.live_agent_calls == 5
    assert len(w.reviews) == 3


def test_a_journal_edited_in_the_store_is_not_reused(make_harness, tmp_path):
    """A reused result enters the sandbox as a replayed one does: only from a journal whose seals verify."""
    h = make_harness(store=str(tmp_path / 'runs.db'))
    w = World(h)
    baseline = h.evaluate_sync(dataset(), model=orchestrator_model())
    forged = next(c for c in baseline.cases if c.name == 'one').stats.run_ids[0]
    with sqlite3.connect(tmp_path / 'runs.db') as db:
        db.execute(
            "UPDATE calls SET result_json = '[\"b.py:1 FORGED\"]' WHERE run_id = ? AND callee = 'reviewer'", (forged,)
        )
    again = h.evaluate_sync(dataset(), model=orchestrator_model(), reuse_calls=baseline.eval_id)
    one = next(c for c in again.cases if c.name == 'one')
    assert one.stats.reused_calls == 0 and one.stats.live_agent_calls == 2  # its whole run was distrusted
    assert next(c for c in again.cases if c.name == 'both').stats.reused_calls == 3
    assert 'FORGED' not in str([c.output for c in again.report.cases]) and len(w.reviews) == 4


def test_identical_calls_are_answered_in_the_order_they_were_recorded(make_harness):
    """A sampled sub-agent called twice with the same arguments keeps both of its recorded answers."""
    h = make_harness()
    ran: list[int] = []

    @h.subagent
    async def sample(*, prompt: str) -> int:
        ran.append(len(ran) + 1)
        return len(ran)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart(json.dumps(last.parts[-1].content))])
        code = 'import asyncio\nawait asyncio.gather(sample(prompt="x"), sample(prompt="x"), sample(prompt="y"))'
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])

    cases = Dataset(name='samples', cases=[Case(name='s', inputs='sample')])
    first = h.evaluate_sync(cases, model=FunctionModel(model))
    second = h.evaluate_sync(cases, model=FunctionModel(model), reuse_calls=first.eval_id)
    assert first.report.cases[0].output == second.report.cases[0].output == '[1, 2, 3]'
    assert len(ran) == 3 and second.live_calls == 0


# -- the harness's evaluators ---------------------------------------------------------------------------


def test_refusals_retries_and_limits_are_scored(make_harness):
    h = make_harness(max_agent_calls=4)
    World(h)
    cases = Dataset(
        name='limits',
        cases=[Case(name='both', inputs='review a.py and b.py', expected_output='a.py:3 S307')],
        evaluators=[
            MaxRetries(),
            MaxRefusals(),
            MaxCalls(max_calls=3, kind='agent'),
            MaxTokens(max_tokens=1),
            MaxWallTime(max_seconds=600),
            MaxBudgetUsed(max_fraction=0.5),
            MaxCost(max_usd=1.0),
            MentionsExpected(),
            Contains(value='problems'),
        ],
    )
    result = h.evaluate_sync(cases, model=orchestrator_model(bad_first=True), instructions='notify', deny=['notify'])
    assert not result.report.failures, result.report.failures
    case = result.report.cases[0]
    assertions = {name: (r.value, r.reason) for name, r in case.assertions.items()}
    assert assertions['MaxRetries'] == (False, '1 failed script(s), at most 0')  # its first script fails the check
    assert assertions['MaxRefusals'] == (False, '1 refused call(s), at most 0')
    assert assertions['MaxCalls'] == (True, '3 sub-agent call(s), at most 3')
    assert assertions['MaxTokens'][0] is False and assertions['MaxWallTime'][0] is True
    assert assertions['MaxBudgetUsed'] == (False, '75% of the sub-agent budget, at most 50%')
    assert 'MaxCost' not in assertions  # nothing could be priced: no verdict either way
    assert case.metrics['refused'] == 1 and case.metrics['retries'] == 1


def test_harness_evaluators_name_what_they_need_elsewhere():
    plain = Dataset(name='plain', cases=[Case(name='c', inputs='x')], evaluators=[MaxCalls(max_calls=1)])
    report = plain.evaluate_sync(lambda inputs: inputs, progress=False)
    failure = report.cases[0].evaluator_failures[0]
    assert "no 'calls' measurement" in failure.error_message and 'Harness.evaluate' in failure.error_message


# -- the command line and the example dataset -----------------------------------------------------------


def ok(result: Any) -> str:
    assert result.exit_code == 0 and not result.traceback, result.describe()
    return result.stdout


def one_line_error(result: Any, *needles: str) -> str:
    assert result.exit_code == 1 and not result.traceback, result.describe()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: '), result.describe()
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_the_example_eval_runs_offline_then_reuses_every_call(cli, tmp_path):
    store = str(tmp_path / 'runs.db')
    first = ok(cli(['eval', str(EXAMPLE), '--store', store], cwd=REPO, columns=200))
    assert 'Offline demo mode' in first and 'Evaluation Summary' in first
    for case in ('whole_project', 'order_parser', 'inventory', 'clean_file'):
        assert case in first
    summary = re.search(
        r'eval (\w+) · 4 case\(s\), 0 failed · assertions 100% · (\d+) call\(s\): (\d+) live, 0 reused', first
    )
    assert summary is not None and summary[2] == summary[3], first
    eval_id, calls = summary[1], summary[2]
    run = re.search(r'whole_project: run (\w+)', first)
    assert run is not None
    assert 'S307' in ok(cli(['show', run[1], '--store', store], cwd=REPO))
    assert 'call reviewer' in ok(cli(['trace', run[1], '--store', store], cwd=REPO))

    # New instructions from a file, and the first eval's calls reused: the demo planner writes the same
    # scripts, so nothing runs live, and the scores are the first eval's.
    (tmp_path / 'instructions.md').write_text('You review code. Be brief.\n')
    second = ok(
        cli(
            [
                'eval',
                str(EXAMPLE),
                '--store',
                store,
                '--reuse-calls',
                eval_id[:7],
                '--instructions',
                str(tmp_path / 'instructions.md'),
            ],
            cwd=REPO,
            columns=200,
        )
    )
    assert f'Evaluation Diff: {eval_id[:7]} →' in second and 'instructions: default → sha256:' in second
    assert f'{calls} call(s): 0 live, {calls} reused from eval {eval_id}' in second
    assert f'against eval {eval_id}: unchanged: 4' in second
    listed = json.loads(ok(cli(['evals', '--json', '--store', store], cwd=REPO)))
    assert [row['summary']['reused_calls'] for row in listed] == [int(calls), 0]
    assert listed[0]['instructions'] == 'You review code. Be brief.\n'
    assert eval_id[:7] in ok(cli(['evals', '--store', store], cwd=REPO, columns=200))


def test_eval_mistakes_are_one_line_errors(cli, tmp_path):
    store = str(tmp_path / 'runs.db')
    one_line_error(cli(['eval', 'missing.yaml', '--store', store], cwd=tmp_path), 'no dataset file missing.yaml')
    (tmp_path / 'bad.yaml').write_text('name: bad\ncases:\n  - name: a\n    inputs: x\n    evaluators: [NoSuchCheck]\n')
    one_line_error(cli(['eval', 'bad.yaml', '--store', store], cwd=tmp_path), 'bad.yaml', 'NoSuchCheck')
    (tmp_path / 'broken.yaml').write_text('name: b\ncases:\n  - name: a\n    expected_output: [a:1 [x] B, c]\n')
    one_line_error(
        cli(['eval', 'broken.yaml', '--store', store], cwd=tmp_path), 'broken.yaml is not valid YAML', 'line 4'
    )
    (tmp_path / 'junk.yaml').write_text('cases: 3\n')
    one_line_error(cli(['eval', 'junk.yaml', '--store', store], cwd=tmp_path), 'junk.yaml is not a pydantic-evals')
    (tmp_path / 'ok.yaml').write_text('name: ok\ncases:\n  - name: a\n    inputs: {question: x}\n')
    one_line_error(
        cli(['eval', 'ok.yaml', '--store', store, '--baseline', 'nope'], cwd=tmp_path),
        "no stored eval 'nope'",
        'harness evals',
    )
    # A case whose inputs are not a prompt fails on its own; the eval still ends, stored, and exits 1.
    result = cli(['eval', 'ok.yaml', '--store', store], cwd=tmp_path, columns=200)
    assert result.exit_code == 1 and not result.traceback, result.describe()
    assert 'inputs must be the prompt' in result.stdout and '1 case(s), 1 failed' in result.stdout


def test_a_failed_assertion_says_which_and_why(cli, tmp_path):
    """A case whose assertions do not all hold is a failed case, and the output names each assertion that failed
    with the evaluator's reason (the report's table shows only a cross)."""
    store = str(tmp_path / 'runs.db')
    (tmp_path / 'tight.yaml').write_text(
        'name: tight\ncases:\n  - name: inventory\n'
        '    inputs: review the code in examples/sample_project/inventory.py\n'
        '    expected_output: [inventory.py:25, nothing like this]\n'
        '    evaluators: [MentionsExpected, {MaxCalls: 1}, MaxRetries]\n'
    )
    result = cli(['eval', str(tmp_path / 'tight.yaml'), '--store', store], cwd=REPO, columns=200)
    assert result.exit_code == 1 and not result.traceback, result.describe()
    out = result.stdout
    assert '1 case(s), 1 failed (1 failed an assertion)' in out and '0 failed' not in out, out
    calls = re.search(r'inventory: ✗ MaxCalls: (\d+) call\(s\), at most 1', out)
    assert calls is not None and int(calls[1]) > 1, out
    assert 'inventory: ✗ mentions_expected: missing: nothing like this' in out, out
    assert '✗ MaxRetries' not in out  # it held: not listed
    listed = ok(cli(['evals', '--store', store], cwd=REPO, columns=200))
    assert re.search(r'\btight\s.*\s1 \(1 failed\)\s', listed), listed


def test_the_example_dataset_loads_with_its_schema():
    dataset = load_dataset(EXAMPLE)
    assert [c.name for c in dataset.cases] == ['whole_project', 'order_parser', 'inventory', 'clean_file']
    schema = json.loads((EXAMPLE.parent / 'review_schema.json').read_text())
    names = json.dumps(schema)
    for evaluator in (
        'MentionsExpected',
        'MaxCalls',
        'MaxBudgetUsed',
        'MaxRefusals',
        'MaxRetries',
        'MaxTokens',
        'MaxCost',
        'MaxWallTime',
    ):
        assert f'"{evaluator}"' in names, f'{evaluator} is missing from review_schema.json: regenerate it'
    with pytest.raises(EvalError, match='no dataset file'):
        load_dataset(EXAMPLE.parent / 'nope.yaml')


def test_the_model_is_chosen_as_the_command_line_chooses_it(make_harness, monkeypatch):
    h = make_harness()
    World(h)
    for name in (
        'HARNESS_MODEL',
        'HARNESS_BASE_URL',
        'OPENAI_API_KEY',
        'ANTHROPIC_API_KEY',
        'GEMINI_API_KEY',
        'GROQ_API_KEY',
        'MISTRAL_API_KEY',
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(EvalError, match="needs the orchestrator's model: pass model="):
        h.evaluate_sync(dataset())
    monkeypatch.setenv('HARNESS_MODEL', 'test')  # pydantic-ai's TestModel
    result = h.evaluate_sync(dataset(), max_concurrency=1)
    assert result.report.experiment_metadata == {'model': 'test', 'instructions': 'default'}


def test_cases_run_at_most_max_concurrency_at_once(make_harness):
    h = make_harness()
    World(h)
    inner = orchestrator_model().function
    assert inner is not None
    open_cases: set[str] = set()
    most = 0

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal most
        prompt = str(messages[0].parts[-1].content) if isinstance(messages[0], ModelRequest) else ''
        response = inner(messages, info)
        if any(isinstance(p, ToolCallPart) for p in response.parts):
            open_cases.add(prompt)
            most = max(most, len(open_cases))
        else:
            open_cases.discard(prompt)
        return response

    h.evaluate_sync(dataset(), model=FunctionModel(respond), max_concurrency=1)
    assert most == 1


def test_an_unknown_evaluate_option_is_refused_by_name(make_harness):
    """The options are a TypedDict (one definition for `Harness.evaluate` and its implementation); a misspelt one is
    a TypeError naming it, not silently dropped."""
    h = make_harness()
    with pytest.raises(TypeError, match=r'unknown option.*max_concurency.*agent_options'):
        h.evaluate_sync(dataset(), model=orchestrator_model(), max_concurency=1)  # type: ignore[call-arg]
