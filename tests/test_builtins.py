"""The built-in sub-agents: the reviewer's real findings, the writing agents' typed outputs, registration."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
    Score,
    builtin_agents,
    make_critic,
    make_drafter,
    make_editor,
    make_reviewer,
    make_summarizer,
    register_builtins,
    review_source,
)
from subagents.offline import parse_input
from subagents.writing import critique, draft, edit, summarize
from tools.workspace import register_workspace_tools

SAMPLE = Path(__file__).resolve().parents[1] / 'examples' / 'sample_project'


def sample(name: str) -> str:
    return (SAMPLE / name).read_text()


def line_of(name: str, snippet: str) -> int:
    """The 1-based line of the first line of sample file `name` containing `snippet`."""
    for number, line in enumerate(sample(name).splitlines(), start=1):
        if snippet in line:
            return number
    raise AssertionError(f'{snippet!r} is not in {name}')


# (file, a snippet on the offending line, a fragment of the message, severity)
PLANTED = [
    ('inventory.py', 'import os', 'unused import: `import os`', 'warning'),
    ('inventory.py', 'tags=[]', 'mutable default argument `tags=[]` in `add_item`', 'warning'),
    ('inventory.py', 'existing == None', 'comparison `== None` should be `is None`', 'warning'),
    ('inventory.py', 'except:', 'bare `except:`', 'warning'),
    ('inventory.py', 'def find(', 'public method `Inventory.find` has no docstring', 'info'),
    ('orders.py', 'assert subtotal', '`assert` used to validate arguments of `coupon_discount`', 'warning'),
    ('orders.py', 'except Exception:', '`except Exception: pass` silently swallows every error', 'warning'),
    ('orders.py', 'def process_order', 'function `process_order` is', 'warning'),
    ('order_parser.py', 'eval(text)', '`eval()` runs arbitrary code', 'error'),
    ('order_parser.py', 'match != None', 'comparison `!= None` should be `is not None`', 'warning'),
    (
        'order_parser.py',
        'def parse_orders(input',
        'parameter `input` shadows the builtin `input()`',
        'warning',
    ),
    ('order_parser.py', "open(path, encoding='utf-8')", '`open()` outside a `with` block', 'warning'),
]
FLAWED = sorted({name for name, *_ in PLANTED})
CLEAN = ['cli.py', 'utils.py']


def findings_of(review: Review | dict[str, Any]) -> list[tuple[int, str, str]]:
    data = review.model_dump() if isinstance(review, Review) else review
    return [(f['line'], f['severity'], f['message']) for f in data['findings']]


def has_finding(review: Review | dict[str, Any], line: int, fragment: str, severity: str) -> bool:
    return any(ln == line and sev == severity and fragment in msg for ln, sev, msg in findings_of(review))


# -- the reviewer's rules on the sample project -----------------------------------------------------------


def test_the_sample_project_is_what_the_readme_says() -> None:
    files = sorted(p.name for p in SAMPLE.glob('*.py'))
    assert files == sorted(FLAWED + CLEAN)
    assert (SAMPLE / 'README.md').read_text().startswith('# sample_project: a deliberately flawed')
    for name in files:
        assert 40 <= len(sample(name).splitlines()) <= 120, name


@pytest.mark.parametrize(('name', 'snippet', 'fragment', 'severity'), PLANTED)
def test_reviewer_rules_find_each_planted_issue_at_its_line(
    name: str, snippet: str, fragment: str, severity: str
) -> None:
    review = review_source(name, sample(name))
    line = line_of(name, snippet)
    assert has_finding(review, line, fragment, severity), findings_of(review)


@pytest.mark.parametrize('name', FLAWED)
def test_flawed_files_need_work_and_report_nothing_else(name: str) -> None:
    review = review_source(name, sample(name))
    assert review.verdict == 'needs_work'
    assert review.path == name
    expected = {(line_of(n, s), sev) for n, s, _, sev in PLANTED if n == name}
    assert {(line, sev) for line, sev, _ in findings_of(review)} == expected
    assert review.summary.startswith(f'{name} needs work:')


@pytest.mark.parametrize('name', CLEAN)
def test_clean_files_are_ok(name: str) -> None:
    review = review_source(name, sample(name))
    assert review.verdict == 'ok'
    assert review.findings == []
    assert review.summary.startswith(f'{name}: no issues found')


def test_long_function_reports_its_real_length() -> None:
    review = review_source('orders.py', sample('orders.py'))
    (message,) = [m for _, _, m in findings_of(review) if 'process_order' in m]
    start = line_of('orders.py', 'def process_order')
    length = len(sample('orders.py').splitlines()) - start + 1  # it runs to the end of the file
    assert f'is {length} lines long (limit 50)' in message


def test_summary_leads_with_the_most_serious_findings() -> None:
    review = review_source('order_parser.py', sample('order_parser.py'))
    assert review.summary.startswith(
        'order_parser.py needs work: 1 error, 3 warnings. Most important: line 22: `eval()`'
    )


def test_focus_selects_bugs_or_style() -> None:
    source = sample('inventory.py')
    bugs = review_source('inventory.py', source, focus='bugs')
    style = review_source('inventory.py', source, focus='style')
    bug_messages = ' '.join(m for *_, m in findings_of(bugs))
    style_messages = ' '.join(m for *_, m in findings_of(style))
    assert 'mutable default' in bug_messages and 'bare `except:`' in bug_messages
    assert 'unused import' not in bug_messages and '== None' not in bug_messages
    assert 'unused import' in style_messages and 'docstring' in style_messages
    assert 'mutable default' not in style_messages
    assert '(bugs only)' in bugs.summary


def test_syntax_error_is_one_error_at_its_line() -> None:
    source = 'def ok():\n    return 1\n\n\ndef broken(:\n    pass\n'
    review = review_source('broken.py', source)
    assert review.verdict == 'needs_work'
    assert len(review.findings) == 1
    (finding,) = review.findings
    assert finding.line == 5
    assert finding.severity == 'error'
    assert finding.message.startswith('syntax error')
    # Syntax errors are reported whatever the focus.
    assert len(review_source('broken.py', source, focus='style').findings) == 1


RULES_SOURCE = '''\
"""Module."""

import json
import typing
from collections import OrderedDict as OD
from os import path as path

__all__ = ['exported']

from sys import argv as exported


def annotated(x: "typing.Any") -> None:
    """Uses typing only in a string annotation."""


def identity(value):
    """Compares by identity."""
    if value is 1:
        return True
    if value == True:
        return False
    return None


def after_return():
    """Has dead code."""
    return 1
    print('never')


def loops(items):
    """Swallows with continue."""
    for item in items:
        try:
            item()
        except (ValueError, Exception):
            continue


class Record:
    """A record with an `id` field, which is not shadowing."""

    id: int = 0
    type = 'record'

    def list(self):
        """A method named list is fine."""
        return [self.id]


def lam():
    """A lambda with a mutable default."""
    return lambda acc={}: acc


def runs(code):
    """Executes code."""
    exec(code)
    id = 3
    return id
'''


def rule_lines(source: str, path: str = 'rules.py') -> dict[int, str]:
    return {f.line: f.message for f in review_source(path, source).findings}


def test_more_rules_with_correct_lines() -> None:
    found = rule_lines(RULES_SOURCE)
    lines = RULES_SOURCE.splitlines()

    def at(snippet: str) -> int:
        return next(i for i, ln in enumerate(lines, start=1) if snippet in ln)

    assert 'unused import: `import json`' in found[at('import json')]
    assert at('import typing') not in found  # used in a string annotation
    assert 'OrderedDict as OD' in found[at('OrderedDict as OD')]
    assert at('path as path') not in found  # an explicit re-export
    assert at('argv as exported') not in found  # listed in __all__
    assert '`is` compares identity' in found[at('value is 1')]
    assert '== True/False' in found[at('value == True')]
    assert 'unreachable code: it follows a `return` on line' in found[at("print('never')")]
    assert 'silently swallows' in found[at('except (ValueError, Exception)')]
    assert at('id: int = 0') not in found and at("type = 'record'") not in found
    assert at('def list(self)') not in found
    assert 'mutable default argument `acc={}` in a lambda' in found[at('lambda acc={}')]
    assert '`exec()` runs arbitrary code' in found[at('exec(code)')]
    assert 'variable `id` shadows the builtin' in found[at('id = 3')]


def test_asserts_in_tests_and_imports_in_init_files_are_fine() -> None:
    assert rule_lines('from .core import thing\n', 'pkg/__init__.py') == {}  # a re-export
    source = 'from .core import thing\n\n\ndef test_it(x):\n    assert x == 1\n'
    assert rule_lines(source, 'tests/test_core.py') == {
        1: 'unused import: `from .core import thing`; remove it'
    }
    assert 5 in rule_lines(source, 'core.py')  # outside tests, the same assert validates an argument


def test_guarded_imports_and_todo_comments() -> None:
    source = (
        '"""Optional speedups."""\n\ntry:\n    import ujson\nexcept ImportError:\n    ujson = None\n\n'
        '# TODO: drop this once 3.13 is the minimum\nX = 1\n'
    )
    found = rule_lines(source)
    assert 4 not in found
    assert found[8] == 'TODO comment left in the code: "TODO: drop this once 3.13 is the minimum"'


def test_text_files_get_a_light_review() -> None:
    review = review_source('README.md', '# Title\n\nFIXME: write this   \n' + 'x' * 130 + '\n')
    assert review.verdict == 'ok'
    assert findings_of(review) == [
        (3, 'info', 'FIXME marker left in the file'),
        (3, 'info', 'trailing whitespace'),
        (4, 'info', 'line is 130 characters long (over 120)'),
    ]


# -- the reviewer as an agent ---------------------------------------------------------------------------


def test_reviewer_agent_parses_the_xml_prompt_the_harness_renders() -> None:
    agent = make_reviewer()
    request = ReviewRequest(path='order_parser.py', source=sample('order_parser.py'))
    result = agent.run_sync(format_as_xml(request, root_tag='input'))
    assert isinstance(result.output, Review)
    assert result.output == review_source('order_parser.py', sample('order_parser.py'))


def test_reviewer_agent_survives_markup_in_the_source() -> None:
    source = 'def f(a, b):\n    """<b>&amp; ]]> é"""\n    return a < b and eval("1 & 2")\n'
    request = ReviewRequest(path='odd.py', source=source, focus='bugs')
    output = make_reviewer().run_sync(format_as_xml(request, root_tag='input')).output
    assert output.path == 'odd.py'
    assert findings_of(output) == [(3, 'error', findings_of(review_source('odd.py', source))[0][2])]


def test_reviewer_agent_takes_a_plain_prompt_too() -> None:
    output = make_reviewer().run_sync('x = eval(input())\n').output
    assert output.path == '<input>'
    assert [f.line for f in output.findings] == [1]


def test_parse_input_is_robust() -> None:
    xml = format_as_xml(EditRequest(draft='a < b', feedback='none & all'), root_tag='input')
    assert parse_input(f'Please help.\n{xml}\nThanks') == {'draft': 'a < b', 'feedback': 'none & all'}
    assert parse_input('<input><draft>a < b</draft><feedback>x</feedback></input>') == {
        'draft': 'a < b',
        'feedback': 'x',
    }
    assert parse_input('no xml here') is None
    assert parse_input('<input><items><item>1</item><item>2</item></items></input>') == {'items': ['1', '2']}


# -- through the harness, as a script would use them -----------------------------------------------------


@pytest.fixture(scope='module')
def h() -> Iterator[Harness]:
    harness = Harness(store=':memory:')
    register_builtins(harness)
    register_workspace_tools(harness, SAMPLE)
    try:
        yield harness
    finally:
        harness.close()


def test_register_builtins_shows_all_five_typed_in_the_stubs(h: Harness) -> None:
    stubs = h.stubs()
    reviewer = "async def reviewer(*, path: str, source: str, focus: Literal['bugs', 'style', 'all'] = 'all')"
    assert f'{reviewer} -> Review:' in stubs
    assert 'async def summarizer(*, task: str) -> str:' in stubs
    assert 'async def critic(*, question: str, answer: str) -> Score:' in stubs
    assert 'async def drafter(*, task: str) -> str:' in stubs
    assert 'async def editor(*, draft: str, feedback: str) -> str:' in stubs
    for type_def in ('class Review(TypedDict):', 'class Finding(TypedDict):', 'class Score(TypedDict):'):
        assert type_def in stubs
    assert 'Review one Python file for bugs and style problems.' in stubs
    kinds = {name: c.kind for name, c in h.callees.items()}
    assert {k: v for k, v in kinds.items() if v == 'agent'} == dict.fromkeys(
        ['reviewer', 'summarizer', 'critic', 'drafter', 'editor'], 'agent'
    )


def test_a_script_reads_a_file_and_reviews_it(h: Harness) -> None:
    code = (
        'source = await read_file(path="inventory.py")\n'
        'review = await reviewer(path="inventory.py", source=source)\n'
        'review\n'
    )
    result = h.run_sync(code)
    review = result.value
    assert review['verdict'] == 'needs_work'
    for name, snippet, fragment, severity in PLANTED:
        if name == 'inventory.py':
            assert has_finding(review, line_of(name, snippet), fragment, severity)
    assert [c.callee for c in result.calls] == ['read_file', 'reviewer']
    assert result.calls[1].arguments == {
        'path': 'inventory.py',
        'source': sample('inventory.py'),
        'focus': 'all',
    }


def test_a_script_reviews_the_whole_project_and_summarizes(h: Harness) -> None:
    code = """\
import asyncio
import json

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])
digest = await summarizer(task="Summarize these code reviews:\\n" + json.dumps(reviews))
grade = await critic(question="Which files in the project need work, and why?", answer=digest)
{"verdicts": {r["path"]: r["verdict"] for r in reviews}, "digest": digest, "grade": grade}
"""
    value = h.run_sync(code).value
    assert value['verdicts'] == {
        'cli.py': 'ok',
        'inventory.py': 'needs_work',
        'order_parser.py': 'needs_work',
        'orders.py': 'needs_work',
        'utils.py': 'ok',
    }
    digest = value['digest']
    assert digest.startswith(
        'Reviewed 5 files: 3 need work, 2 look fine. Findings: 1 error, 10 warnings, 1 info.'
    )
    assert (
        f'- order_parser.py:{line_of("order_parser.py", "eval(")} (error) `eval()` runs arbitrary code'
        in digest
    )
    assert 'Clean: cli.py, utils.py.' in digest
    assert set(value['grade']) == {'score', 'reasons'}
    assert 0 <= value['grade']['score'] <= 10


def test_writing_agents_from_a_script(h: Harness) -> None:
    code = """\
task = "Write an email to the team about the release, mention the new CLI and the faster search"
d = await drafter(task=task)
e = await editor(draft=d, feedback="Make it more formal and shorter")
s = await critic(question="What is in the release?", answer=e)
{"draft": d, "edited": e, "score": s}
"""
    value = h.run_sync(code).value
    assert value['draft'].startswith('Subject: The release\n\nHi team,')
    assert '- The new CLI.\n- The faster search.' in value['draft']
    assert 'Hello team,' in value['edited']
    assert isinstance(value['score']['score'], int)
    assert value['score']['reasons']


# -- the writing agents' typed outputs --------------------------------------------------------------------


def test_critic_scores_are_typed_and_ordered() -> None:
    agent = make_critic()
    question = 'How do I reverse a list in Python?'
    good = (
        'Use reversed(my_list) for an iterator or my_list[::-1] for a new list, for example [3, 2, 1] from '
        '[1, 2, 3]. my_list.reverse() reverses the list in place.'
    )
    scores = {}
    for label, answer in {
        'good': good,
        'restated': 'You reverse a list in Python.',
        'refusal': 'I do not know.',
        'empty': '',
    }.items():
        output = agent.run_sync(
            format_as_xml(CritiqueRequest(question=question, answer=answer), root_tag='input')
        ).output
        assert isinstance(output, Score)
        assert 0 <= output.score <= 10 and output.reasons
        scores[label] = output.score
    assert scores['good'] >= 8
    assert scores['good'] > scores['restated'] > scores['refusal']
    assert scores['empty'] == 0
    assert critique(question, good) == critique(question, good)  # deterministic


def test_summarizer_on_prose_keeps_the_lead() -> None:
    text = (
        'The release is delayed by two weeks. The payment provider changed its API in March and our '
        'integration broke. We fixed the integration but the fix needs a security review. The security team '
        'is busy with the audit until the 14th. Marketing has been told. Customers with pre-orders will get '
        'an email on Monday. The new date is the 28th.'
    )
    output = make_summarizer().run_sync(f'Summarize this:\n{text}').output
    assert isinstance(output, str)
    assert output.startswith('The release is delayed by two weeks.')
    assert len(output) < len(text)


def test_summarizer_digests_review_data_in_python_repr_too() -> None:
    reviews = [review_source(n, sample(n)).model_dump() for n in ('orders.py', 'utils.py')]
    digest = summarize(f'Summarize: {reviews!r}')
    assert digest.startswith('Reviewed 2 files: 1 need work, 1 look fine. Findings: 3 warnings.')
    assert 'Needs work: orders.py (3 findings).' in digest
    assert summarize('') == 'Nothing to summarize: the input is empty.'
    assert summarize(json.dumps([{'name': 'a', 'qty': 1}, {'name': 'b', 'qty': 2}])).startswith(
        '2 records with fields name, qty.'
    )


def test_drafter_shapes_the_draft_by_form() -> None:
    agent = make_drafter()
    plan = agent.run_sync(
        'Draft a plan for moving to Postgres: back up the data, test on staging, switch over'
    ).output
    assert plan.startswith('# Plan: Moving to Postgres')
    assert '1. Back up the data.\n2. Test on staging.\n3. Switch over.' in plan
    readme = draft('Write a README for the shop CLI covering installation, usage and configuration')
    assert readme.startswith('# The shop CLI')
    assert '## Installation' in readme and '## Usage' in readme and '## Configuration' in readme
    reviews = [review_source('orders.py', sample('orders.py')).model_dump()]
    report = draft(f'Write a report on the review: {json.dumps(reviews)}')
    assert '## orders.py: needs work' in report
    assert f'- line {line_of("orders.py", "assert subtotal")} (warning)' in report


def test_editor_applies_feedback() -> None:
    agent = make_editor()
    request = EditRequest(
        draft="Hey guys! We're gonna ship teh release tomorrow. It's really great.",
        feedback='make it formal and fix typos',
    )
    output = agent.run_sync(format_as_xml(request, root_tag='input')).output
    assert output == 'Hello everyone. We are going to ship the release tomorrow. It is really great.'
    assert edit('One. Two. Three.', 'as bullet points') == '- One.\n- Two.\n- Three.'
    assert edit('- one\n- two', 'as prose') == 'One. Two.'
    assert edit('We ship on Monday. The price is high.', 'remove "price"') == 'We ship on Monday.'
    assert edit('We ship on Monday.', 'replace Monday with Friday') == 'We ship on Friday.'
    assert edit('It is very important in order to win.', 'shorter') == 'It is important to win.'
    titled = edit('The release is late. We will ship soon.', 'add a title')
    assert titled.startswith('# Release Late\n\nThe release is late.')
    assert edit('', 'anything') == 'Nothing to edit: the draft is empty.'


# -- construction and models ------------------------------------------------------------------------------


def test_builtin_agents_run_offline_by_default() -> None:
    agents = builtin_agents()
    assert [b.name for b in agents] == ['reviewer', 'summarizer', 'critic', 'drafter', 'editor']
    assert [b.params for b in agents] == [ReviewRequest, None, CritiqueRequest, None, EditRequest]
    for b in agents:
        assert isinstance(b, BuiltinAgent)
        assert isinstance(b.agent, Agent)
        assert isinstance(b.agent.model, FunctionModel)
        assert b.agent.model.model_name == f'offline-rules:{b.name}'
        assert b.description == b.agent.description
        assert b.agent.name == b.name


def test_builtin_agents_use_the_given_model() -> None:
    model = TestModel()
    agents = builtin_agents(model)
    assert all(b.agent.model is model for b in agents)
    output = (
        agents[0]
        .agent.run_sync(format_as_xml(ReviewRequest(path='a.py', source='x = 1'), root_tag='input'))
        .output
    )
    assert isinstance(output, Review)
    # A model string needs no API key until the agent runs.
    assert all(b.agent.model == 'openai:gpt-4o' for b in builtin_agents('openai:gpt-4o'))


def test_register_builtins_with_a_model_and_replacing_one(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    register_builtins(harness, model=TestModel())
    assert {'reviewer', 'summarizer', 'critic', 'drafter', 'editor'} == set(harness.callees)
    harness.remove('summarizer')
    harness.add_agent(make_summarizer(), name='summarizer')
    assert 'async def summarizer(*, task: str) -> str:' in harness.stubs()
    value = harness.run_sync('await summarizer(task="One. Two. Three. Four. Five.")').value
    assert isinstance(value, str)


def test_summarizer_reads_one_finding_per_line_digests() -> None:
    digest = (
        'Summarise this code review for the developer:\n'
        'app/parser.py:22 [error] `eval()` runs arbitrary code\n'
        'app/inventory.py:4 [warning] unused import: `import os`\n'
        'app/inventory.py:42 [info] public method `Inventory.find` has no docstring\n'
    )
    assert summarize(digest) == (
        '3 findings in 2 files (1 error, 1 warning, 1 info).\n'
        'Most important:\n'
        '- app/parser.py:22 (error) `eval()` runs arbitrary code\n'
        '- app/inventory.py:4 (warning) unused import: `import os`\n'
        '- app/inventory.py:42 (info) public method `Inventory.find` has no docstring\n'
        'By file: app/inventory.py (2), app/parser.py (1).'
    )


def test_drafter_answers_questions_with_placeholders_and_honours_tone() -> None:
    answer = draft('What is the difference between a list and a tuple? Focus on the basics.')
    question = 'What is the difference between a list and a tuple?'
    assert answer.startswith(f'Q: {question}\n\nA (focusing on the basics):')
    assert '- List: [' in answer and '- Tuple: [' in answer
    concise = draft('Write an email to Ada about the launch (tone: concise)')
    friendly = draft('Write an email to Ada about the launch (tone: friendly)')
    assert concise.startswith('Subject: The launch\n\nHi Ada,')
    assert friendly.startswith('Subject: The launch\n\nHi Ada!')
    assert '(tone' not in concise + friendly
    assert len(concise) < len(friendly)


def test_editor_acts_on_critic_reasons() -> None:
    question = 'How do I reverse a list in Python?'
    answer = 'Call reverse() on it.'
    reasons = '; '.join(critique(question, answer).reasons)
    assert 'missing: list, python' in reasons
    revised = edit(answer, reasons)
    assert revised == 'Call reverse() on it. This also covers list and python.'
    assert critique(question, revised).score > critique(question, answer).score
