"""The built-in sub-agents and their offline stand-ins: what the stand-ins really do, and registration.

Offline, the reviewer reports what ruff finds; the summarizer, critic, drafter and editor are canned;
the demo planner writes real scripts against the catalog.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic_ai import Agent, format_as_xml
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from harness import Harness
from subagents import (
    BuiltinAgent,
    CritiqueRequest,
    EditRequest,
    Review,
    ReviewRequest,
    builtin_agents,
    demo_model,
    make_reviewer,
    make_summarizer,
    register_builtins,
    review_source,
)
from subagents.offline import critique, summarize
from subagents.planner import HELP, write_script
from tools.workspace import register_workspace_tools

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / 'examples' / 'sample_project'


def line_of(name: str, snippet: str) -> int:
    """The 1-based line of the first line of sample file `name` containing `snippet`."""
    lines = (SAMPLE / name).read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if snippet in line)


def codes(review: Review) -> list[tuple[int, str, str]]:
    return [(f.line, f.severity, f.message.split(' ')[0]) for f in review.findings]


# -- the reviewer: ruff ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('name', 'snippet', 'severity', 'code'),
    [
        ('order_parser.py', 'eval(', 'error', 'S307'),  # eval() on input: code injection
        ('inventory.py', 'tags=[]', 'warning', 'B006'),  # mutable default argument
        ('inventory.py', 'except:', 'warning', 'E722'),  # bare except
        ('inventory.py', 'existing == None', 'warning', 'E711'),
        ('orders.py', 'except Exception:', 'warning', 'BLE001'),
        ('inventory.py', 'import os', 'info', 'F401'),
    ],
)
def test_reviewer_reports_what_ruff_finds_in_the_sample_project(name: str, snippet: str, severity: str, code: str):
    review = review_source(name, (SAMPLE / name).read_text())
    assert (line_of(name, snippet), severity, code) in codes(review)
    assert review.verdict == 'needs_work'
    assert code in review.summary


def test_reviewer_quotes_the_offending_line_and_passes_clean_files():
    review = review_source('order_parser.py', (SAMPLE / 'order_parser.py').read_text())
    assert review.findings[0].message.startswith('S307 suspicious-eval-usage: ')
    assert review.findings[0].message.endswith('(`return int(eval(text))`)')
    for clean in ('cli.py', 'utils.py'):
        assert review_source(clean, (SAMPLE / clean).read_text()) == Review(
            path=clean, verdict='ok', findings=[], summary='ruff finds no problem.'
        )


def test_reviewer_focus_syntax_errors_and_other_files():
    assert codes(review_source('a.py', 'import os\n', 'bugs')) == [(1, 'info', 'F401')]
    assert review_source('a.py', 'import os\n', 'style').findings == []
    broken = review_source('b.py', 'x = 1\ndef f(:\n    pass\n')
    assert broken.verdict == 'needs_work'
    assert broken.findings[0].line == 2 and broken.findings[0].message.startswith('invalid-syntax: ')
    assert review_source('notes.md', '# not python') == Review(
        path='notes.md',
        verdict='ok',
        findings=[],
        summary='Not a Python file: the offline reviewer only runs ruff on Python source.',
    )


def test_reviewer_agent_reads_the_xml_prompt_the_harness_renders_and_plain_prompts():
    source = 'def f(a, b):\n    if a < b & 1:\n        return eval(a)\n'  # markup characters survive
    prompt = format_as_xml(ReviewRequest(path='m.py', source=source), root_tag='input')
    output = make_reviewer().run_sync(prompt).output
    assert isinstance(output, Review) and output.path == 'm.py'
    assert codes(output) == [(3, 'error', 'S307')]
    plain = make_reviewer().run_sync('x = eval(input())\n').output
    assert plain.path == 'input.py' and [f.line for f in plain.findings] == [1]


# -- the canned ones --------------------------------------------------------------------------------------


def test_summarizer_keeps_the_first_sentence_of_the_first_lines():
    text = 'Summarise these notes:\nA snapshot is small. It is stored.\nReplay calls nothing! Really.\n'
    assert summarize(text) == 'A snapshot is small. Replay calls nothing!'
    assert summarize('') == '(nothing to summarize)'


def test_critic_applies_a_fixed_rubric():
    good = critique('What does replay call?', 'What replay does: it calls nothing, it answers from the journal.')
    assert good.score == 10 and all(r.startswith('yes: ') for r in good.reasons)
    bad = critique('What does replay call?', '[TODO]')
    assert bad.score == 5 and len(bad.reasons) == 4
    assert 'no: it has no [placeholders]' in bad.reasons


# -- through the harness ----------------------------------------------------------------------------------


@pytest.fixture(scope='module')
def h() -> Iterator[Harness]:
    harness = Harness(store=':memory:')
    register_builtins(harness)
    register_workspace_tools(harness, SAMPLE)
    try:
        yield harness
    finally:
        harness.close()


def test_register_builtins_shows_all_five_typed_in_the_stubs(h: Harness):
    stubs = h.stubs()
    reviewer = "async def reviewer(*, path: str, source: str, focus: Literal['bugs', 'style', 'all'] = 'all')"
    assert f'{reviewer} -> Review:' in stubs
    assert 'async def summarizer(*, task: str) -> str:' in stubs
    assert 'async def critic(*, question: str, answer: str) -> Score:' in stubs
    assert 'async def drafter(*, task: str) -> str:' in stubs
    assert 'async def editor(*, draft: str, feedback: str) -> str:' in stubs
    for type_def in ('class Review(TypedDict):', 'class Finding(TypedDict):', 'class Score(TypedDict):'):
        assert type_def in stubs


def test_a_script_reviews_a_file_and_the_canned_agents_answer(h: Harness):
    code = """\
source = await read_file(path="inventory.py")
review = await reviewer(path="inventory.py", source=source)
d = await drafter(task="Tell the team about the fix")
e = await editor(draft=d, feedback="shorter")
s = await critic(question="What was fixed?", answer=e)
{"review": review, "draft": d, "edited": e, "score": s}
"""
    value = h.run_sync(code).value
    assert value['review']['verdict'] == 'needs_work'
    found = [(f['line'], f['severity']) for f in value['review']['findings']]
    assert (line_of('inventory.py', 'tags=[]'), 'warning') in found
    assert value['draft'].startswith('Subject: Tell the team about the fix\n\nHi team,')
    assert value['edited'].endswith('[offline edit: a real model would apply: shorter]')
    assert 0 <= value['score']['score'] <= 10 and len(value['score']['reasons']) == 4


def test_builtin_agents_run_offline_by_default_and_on_a_given_model(make_harness: Callable[..., Harness]):
    agents = builtin_agents()
    assert [b.name for b in agents] == ['reviewer', 'summarizer', 'critic', 'drafter', 'editor']
    assert [b.params for b in agents] == [ReviewRequest, None, CritiqueRequest, None, EditRequest]
    for b in agents:
        assert isinstance(b, BuiltinAgent) and isinstance(b.agent, Agent)
        assert isinstance(b.agent.model, FunctionModel) and b.agent.model.model_name == f'offline:{b.name}'
        assert b.description == b.agent.description
    model = TestModel()
    assert all(b.agent.model is model for b in builtin_agents(model))
    assert all(b.agent.model == 'openai:gpt-4o' for b in builtin_agents('openai:gpt-4o'))  # no key needed yet
    harness = make_harness()
    register_builtins(harness, model=model)
    harness.remove('summarizer')
    harness.add_agent(make_summarizer(), name='summarizer')
    assert harness.run_sync('await summarizer(task="Notes:\\nOne. Two.")').value == 'One.'


# -- the demo planner -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    'prompt',
    ['review the code in examples/sample_project', 'Write an email about the release', 'How does replay work?'],
)
def test_planner_scripts_pass_the_type_check(h: Harness, prompt: str):
    script = write_script(prompt, h.stubs())
    assert script is not None
    report = h.check(script)
    assert report.ok, report.errors


SAMPLE_GLOB = '"examples/sample_project/**/*.py"'


@pytest.mark.parametrize(
    ('prompt', 'files'),
    [
        ('review examples/sample_project/utils.py', 'files = ["examples/sample_project/utils.py"]'),
        ('Please review ./src/app.py for bugs.', 'files = ["src/app.py"]'),
        ('review utils.py', 'files = ["utils.py"]'),
        ('review /etc/app.py', 'files = ["/etc/app.py"]'),  # as named: read_file refuses a path outside
        ('review examples/sample_project', f'files = await list_files(pattern={SAMPLE_GLOB})'),
        ('review the code in examples/sample_project/', f'files = await list_files(pattern={SAMPLE_GLOB})'),
        ('review the code in src', 'files = await list_files(pattern="src/**/*.py")'),
        ('review my code', 'files = await list_files(pattern="**/*.py")'),
    ],
)
def test_planner_reviews_the_file_or_folder_the_prompt_names(h: Harness, prompt: str, files: str):
    """A named file is reviewed alone (never found by listing the whole workspace); a named folder is listed
    under that folder; only a prompt naming no path lists the whole workspace."""
    script = write_script(prompt, h.stubs())
    assert script is not None and files in script.splitlines(), script
    assert h.check(script).ok


def test_planner_needs_its_callees_and_a_known_request(h: Harness):
    assert write_script('what is the weather like', '') is None
    assert write_script('tell me a joke', h.stubs()) is None
    result = Agent(demo_model()).run_sync('review the code in .')  # no run_workflow tool: the help text
    assert result.output == HELP


def test_demo_orchestrator_reviews_the_sample_project(h: Harness):
    answer = h.orchestrator(demo_model()).run_sync('review the code in .').output
    assert answer.startswith('Reviewed 5 file(s); 13 finding(s); needs work: inventory.py, order_parser.py, orders.py.')
    for needle in ('order_parser.py:22 [error] S307', 'B006 mutable-argument-default', 'E722 bare-except'):
        assert needle in answer
    assert '\nSummary: cli.py: ruff finds no problem.' in answer


def test_subagents_and_tools_do_not_import_the_engine():
    for path in [*(ROOT / 'subagents').glob('*.py'), *(ROOT / 'tools').glob('*.py')]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or '']
            assert not any(n == 'harness' or n.startswith('harness.') for n in names), f'{path.name} imports {names}'
