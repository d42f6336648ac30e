"""What the model reads: the tool description, and the messages that get a script right.

`model_scripts/` holds 64 scripts a model wrote on its first attempt for ordinary requests, from
nothing but the orchestrator's instructions and the `run_workflow` description (it saw no code and
no feedback): `NN.py` from the description before its rewrite, `fresh_NN.py` for fresh requests
from the rewritten one. Each must pass the check and run against the built-in catalog. `MISTAKES` are the
mistakes models make: each must fail with a hint, and the fix the hint names must then pass.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness import Harness, WorkflowError, WorkflowTypeError
from harness._agent._toolset import WorkflowToolset
from harness._check._checker import script_messages
from subagents import register_builtins
from tools.workspace import register_workspace_tools

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((Path(__file__).parent / 'model_scripts').glob('*.py'))


@pytest.fixture(scope='module')
def h() -> Harness:
    harness = Harness(store=':memory:')
    register_builtins(harness)
    register_workspace_tools(harness, ROOT / 'examples' / 'sample_project')
    yield harness
    harness.close()


@pytest.mark.parametrize('path', SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_scripts_a_model_wrote_check_and_run(h: Harness, path: Path) -> None:
    code = path.read_text()
    report = h.check(code)
    assert report.ok, report.errors
    h.run_sync(code)
    assert len(SCRIPTS) >= 30


# (the mistake, a piece of the hint it must get, the script as the hint says to write it)
MISTAKES = [
    (
        'counts = {"a.py": 2, "b.py": 1}\nmax(counts, key=counts.get)',
        'write `key=lambda k: d[k]`',
        'counts = {"a.py": 2, "b.py": 1}\nmax(counts, key=lambda k: counts[k])',
    ),
    (
        'counts = {"a.py": 2, "b.py": 1}\nsorted(counts, key=counts.get, reverse=True)',
        'write `key=lambda k: d[k]`',
        'counts = {"a.py": 2, "b.py": 1}\nsorted(counts, key=lambda k: counts[k], reverse=True)',
    ),
    (
        'r = await reviewer(path="utils.py", source=await read_file(path="utils.py"))\nr.verdict',
        'write `x["verdict"]`, not `x.verdict`',
        'r = await reviewer(path="utils.py", source=await read_file(path="utils.py"))\nr["verdict"]',
    ),
    (
        'import asyncio\n'
        'rs = await asyncio.gather(read_file(path="utils.py"), read_file(path="nope.py"), return_exceptions=True)\n'
        'len(rs)',
        'use `settle_all(...)`',
        'rs = await settle_all(read_file(path="utils.py"), read_file(path="nope.py"))\nlen(rs)',
    ),
    (
        'await read_file("utils.py")',
        '`read_file(*, path: str) -> str`',
        'await read_file(path="utils.py")',
    ),
    (
        'await reviewer(task="review utils.py")',
        "`reviewer(*, path: str, source: str, focus: Literal['bugs', 'style', 'all'] = 'all') -> Review`",
        'await reviewer(path="utils.py", source=await read_file(path="utils.py"))',
    ),
    (
        'import asyncio\nt = asyncio.create_task(read_file(path="utils.py"))\nawait t',
        'fan out with `await asyncio.gather(...)`',
        'import asyncio\n(t,) = await asyncio.gather(read_file(path="utils.py"))\nt',
    ),
    (
        'import asyncio\nawait asyncio.wait_for(read_file(path="utils.py"), 5)',
        'the sandbox has no asyncio.wait_for',
        'await read_file(path="utils.py")',
    ),
    (
        'open("utils.py").read()',
        'use `read_file(path=...)`',
        'await read_file(path="utils.py")',
    ),
    (
        'import statistics\nstatistics.mean([1, 2, 3])',
        'the sandbox can import: asyncio, json, math',
        'import math\nmath.fsum([1, 2, 3]) / 3',
    ),
    (
        'class Base:\n    pass\nclass Item(Base):\n    pass\nItem()',
        'use plain dicts',
        '{"kind": "item"}',
    ),
    (
        'def numbers():\n    yield 1\nlist(numbers())',
        'build and return a list instead of a generator',
        'def numbers() -> list[int]:\n    return [1]\nnumbers()',
    ),
    (
        'sizes = [3, 4]\n", ".join(sizes)',
        'join takes strings only',
        'sizes = [3, 4]\n", ".join(str(x) for x in sizes)',
    ),
    (
        'counts: dict[str, int] = {}\ncounts.get("a") + 1',
        '`d.get(k, 0)`',
        'counts: dict[str, int] = {}\ncounts.get("a", 0) + 1',
    ),
    (
        'tickets = ["a.py", "b.py"]\nnext((t for t in tickets if t.startswith("b")), None)',
        "write `next(iter([t for t in tickets if t.startswith('b')]), None)`",
        'tickets = ["a.py", "b.py"]\nnext(iter([t for t in tickets if t.startswith("b")]), None)',
    ),
    (
        'sizes = [3, 4]\ndoubled = (s * 2 for s in sizes)\n[next(doubled), next(doubled)]',
        'where it is made (line 2): `doubled = iter([s * 2 for s in sizes])`',
        'sizes = [3, 4]\ndoubled = iter([s * 2 for s in sizes])\n[next(doubled), next(doubled)]',
    ),
    (
        'files = ["a.py", "b.py"]\nrows = [{"path": f, "findings": 2} for f in files]\n'
        'for r in rows:\n    r["notes"] = ["x"]\nrows',
        'the dict literal on line 2 (from its values): annotate it, `rows: list[dict[str, Any]] = [...]`',
        'from typing import Any\nfiles = ["a.py", "b.py"]\n'
        'rows: list[dict[str, Any]] = [{"path": f, "findings": 2} for f in files]\n'
        'for r in rows:\n    r["notes"] = ["x"]\nrows',
    ),
    (
        'd = {"path": "a.py", "findings": 2}\ndef note() -> None:\n    d["notes"] = ["x"]\nnote()\nd',
        'the dict literal on line 1 (from its values): annotate it, `d: dict[str, Any] = {...}`',
        'from typing import Any\nd: dict[str, Any] = {"path": "a.py", "findings": 2}\n'
        'def note() -> None:\n    d["notes"] = ["x"]\nnote()\nd',
    ),
    (
        'summary = {"total": 0, "files": {"a.py": 1}}\nsummary["files"]["b.py"] = "x"\nsummary',
        'the dict literal on line 1 (from its values): give it a variable of its own, annotated: '
        '`files: dict[str, Any] = {...}`, used in its place',
        'from typing import Any\nfiles: dict[str, Any] = {"a.py": 1}\nsummary = {"total": 0, "files": files}\n'
        'summary["files"]["b.py"] = "x"\nsummary',
    ),
    (
        'd: dict[str, Any] = {"n": 1, "tag": "x"}\nd["more"] = [1]\nd',
        'write `from typing import Any` first',
        'from typing import Any\nd: dict[str, Any] = {"n": 1, "tag": "x"}\nd["more"] = [1]\nd',
    ),
    (
        'd = {"n": 1, "tag": "x"}\nd[0]',
        'the dict literal on line 1 has `str` keys',
        'd = {"n": 1, "tag": "x"}\nd["n"]',
    ),
    (
        'names = ["a", "b"]\nnext(enumerate(names))',
        'write `next(iter(enumerate(names)))`',
        'names = ["a", "b"]\nnext(iter(enumerate(names)))',
    ),
]


@pytest.mark.parametrize(('mistake', 'hint', 'fixed'), MISTAKES, ids=range(len(MISTAKES)))
def test_a_mistake_gets_a_hint_that_fixes_it(h: Harness, mistake: str, hint: str, fixed: str) -> None:
    with pytest.raises(WorkflowTypeError) as info:
        h.run_sync(mistake)
    message = info.value.message
    assert re.search(r'^  hint: ', message, re.M), message
    assert hint in message, message
    assert h.check(fixed).ok, h.check(fixed).errors
    h.run_sync(fixed)


def test_next_of_a_generator_expression_is_refused_and_the_fix_named_runs_as_python_would(h: Harness) -> None:
    # The sandbox makes a generator expression a list, so `next()` of one fails only at run time.
    tickets = 'tickets = ["a.py", "b.py"]\n'
    diagnostics = h.check(tickets + 'next((t for t in tickets if t.startswith("c")), None)').diagnostics
    assert [(d.line, d.rule) for d in diagnostics] == [(2, 'unsupported-call')]
    assert h.run_sync(tickets + 'next(iter([t for t in tickets if t.startswith("c")]), None)').value is None
    assert h.run_sync(tickets + 'next(iter([t for t in tickets if t.endswith("y")]))').value == 'a.py'
    made = 'sizes = [3, 4]\nd = iter([s * 2 for s in sizes])\n'
    assert h.run_sync(made + '[next(d), next(d), next(d, 0)]').value == [6, 8, 0]
    assert h.check('sizes = [3, 4]\nsum(s for s in sizes) + max(s for s in sizes)').ok  # other uses are fine


@pytest.mark.parametrize(
    'text',
    ['\n' + '- x\n' * 200, '-x' * 200, 'not ' * 200 + 'x', '-x' * 200 + '\\N{BULLET} \\x41 \\\\ \\\n'],
    ids=['markdown', 'dashes', 'words', 'escapes'],
)
def test_a_long_string_that_reads_as_deeply_nested_python_checks_and_runs(h: Harness, text: str) -> None:
    # ty (in the checking session) parses a string's text as if it could be an annotation, and
    # refused one nested past ~200 levels ("Source is too deeply nested"): a Markdown list pasted in.
    for literal in (f'"""{text}"""', f'r"""{text}"""', f'f"""{{n}}{text}"""'):
        code = f'n = 1\nnotes = {literal}\nmissing: int = "x"\nnotes'
        report = h.check(code)
        line = code[: code.index('missing')].count('\n') + 1
        assert [(d.line, d.rule) for d in report.diagnostics] == [(line, 'invalid-assignment')], report.errors
        assert h.check(code.replace('missing: int = "x"', 'missing = "x"')).ok
    value = h.run_sync(f'notes = """{text}"""\nnotes').value
    assert value == eval(f'"""{text}"""')  # the literal this test wrote


def test_source_nested_too_deeply_is_one_line_that_names_the_fix(h: Harness) -> None:
    report = h.check('x = 1\ny = ' + '-' * 250 + 'x\ny')
    assert [(d.line, d.rule) for d in report.diagnostics] == [(2, 'invalid-syntax')], report.errors
    assert 'Traceback' not in report.errors
    assert 'split it into steps' in report.errors


def test_a_parser_refusal_is_one_line_even_when_its_source_line_reads_like_a_location(h: Harness) -> None:
    # The refusal's traceback shows the line: `"a:1:2:"` in it once passed for one of ty's `file:line:col:`,
    # `"line 7"` for the traceback's `line 3`.
    for text in ('a:1:2:', 'line 7'):
        report = h.check(f'x = 1\ny = "{text}" + ' + '-' * 250 + 'x\ny')
        assert [(d.line, d.rule) for d in report.diagnostics] == [(2, 'invalid-syntax')], report.errors
        assert 'Traceback' not in report.errors


@pytest.mark.parametrize('unlocated', [
    'error[panic] Panicked when checking the script',  # ty's concise line for a diagnostic with no span
    'workflow.py: fatal[io] Failed to read the file',  # ... with a file but no range
])
def test_a_checker_message_without_a_place_is_kept_as_ty_wrote_it(unlocated: str) -> None:
    """Only the parser's refusal (a `SyntaxError`) is labelled invalid-syntax; ty's other messages with
    no line:col stay as written, beside the located ones moved to the script's lines."""
    assert script_messages(unlocated + '\n') == unlocated + '\n'
    located = 'workflow.py:3:9: error[invalid-assignment] Object of type `str` is not assignable to `int`\n'
    assert script_messages(unlocated + '\n' + located) == unlocated + '\n' + located.replace(':3:9:', ':2:5:')
    refusal = ('Traceback (most recent call last):\n  File "workflow.py", line 3\n'
               'SyntaxError: Source is too deeply nested')
    assert script_messages(refusal) == 'workflow.py:2:1: error[invalid-syntax] Source is too deeply nested'


def test_a_dataclass_final_value_is_plain_data_and_other_objects_are_refused(h: Harness) -> None:
    script = (
        'from dataclasses import dataclass\n'
        '@dataclass\n'
        'class Item:\n'
        '    path: str\n'
        '    findings: int\n'
        '[Item(path="a.py", findings=2), {"nested": Item(path="b.py", findings=0)}]'
    )
    assert h.run_sync(script).value == [{'path': 'a.py', 'findings': 2}, {'nested': {'path': 'b.py', 'findings': 0}}]
    with pytest.raises(WorkflowError, match='holds an instance of class Box, which is not plain data') as info:
        h.run_sync('class Box:\n    x = 1\nBox()')  # (a class with methods is refused by the check)
    assert 'MontyClassProxy' not in info.value.message


def test_a_dataclass_argument_is_passed_as_a_dict(make_harness: Any) -> None:
    harness = make_harness()
    seen: list[Any] = []

    @harness.tool
    def keep(*, item: Any) -> str:
        seen.append(item)
        return 'kept'

    script = 'from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nawait keep(item=P(x=1))'
    assert harness.run_sync(script).value == 'kept'
    assert seen == [{'x': 1}]


def test_a_callee_used_as_a_value_is_dispatched(h: Harness) -> None:
    result = h.run_sync('read = read_file\nfns = [list_files]\n[len(await read(path="utils.py")) > 0, await fns[0]()]')
    assert result.value[0] is True and 'utils.py' in result.value[1]
    assert [c.callee for c in result.calls] == ['read_file', 'list_files']


def test_the_description_is_written_from_the_catalog_and_stays_short(h: Harness) -> None:
    description = WorkflowToolset(h).description()
    rules = description[: description.index('The functions (stubs):')]
    assert len(rules) / 4 < 1500  # about four characters a token
    assert '`r = await critic(question="...", answer="...")`' in rules  # a real signature of this catalog
    assert 'sub-agent calls (critic, drafter, editor, reviewer, summarizer): at most 50 in all.' in rules
    assert 'host tool calls (list_files, read_file, search_text): at most 1000 in all.' in rules
    assert 'answered from its stored result and costs nothing' in rules
    assert 'Importable: asyncio, json, math, re, typing, collections' in rules
    assert 'Results are plain data' in rules and 'stricter than Python' in rules
    assert description.endswith(f'```python\n{h.stubs()}```')
