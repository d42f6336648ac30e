"""The `harness` command line, offline (no keys: the demo planner and the built-in offline sub-agents).

Everything runs in this process through typer's runner (`cli` in conftest.py: no model key, no
tracing setup, the store each test names, every sandbox worker closed after each command); the
stored-run tests share one store and one run (module-scoped fixtures). Two tests keep a real process,
because the process is what they test: the installed `harness` console script, and `harness chat` on
a pseudo-terminal where Ctrl-C is a real SIGINT.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from harness._cli._shared import Where, catalog_options  # module level: typer resolves the annotations here

HARNESS = str(Path(sys.executable).with_name('harness'))
REPO = Path(__file__).resolve().parents[1]
RUN_LINE = re.compile(r'^run (?P<id>[0-9a-f]{7,}) · (?P<calls>\d+) call\(s\)$', re.MULTILINE)
Cli = Callable[..., Any]

GOOD_SCRIPT = """\
files = await list_files(pattern="*.py")
summary = await summarizer(task="Tests keep the code honest.")
{"files": files, "summary": summary}
"""
# A plain type error: the checker must reject it before anything runs.
BAD_SCRIPT = """\
n = 1
summary = await summarizer(task=n)
summary
"""

CUSTOM_MODULE = '''\
"""Custom sub-agents for the CLI tests: a Harness entry with typed parameters, and a pydantic-ai Agent."""

from typing import Literal

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import Harness

extras = Harness(store=":memory:")


@extras.subagent
async def translate(*, text: str, to: Literal["fr", "de"]) -> str:
    """Translate a short English greeting."""
    return {"fr": "bonjour", "de": "hallo"}[to] if text == "hello" else f"[{to}] {text}"


def _shout(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)][-1]
    return ModelResponse(parts=[TextPart(str(prompt).upper() + "!")])


shouter = Agent(FunctionModel(_shout), name="shouter")
agents = [shouter]
'''

SLOW_MODULE = '''\
"""A drafter that replaces the built-in one: slow (and cancellable) for poems, instant otherwise."""

import asyncio
from pathlib import Path


async def drafter(*, task: str) -> str:
    """Write a first draft."""
    if "poem" in task:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            Path("drafter-cancelled.txt").write_text(task)
            raise
    return "draft: " + task
'''


def ok(result: Any) -> str:
    """Exit 0, nothing escaped; the command's stdout."""
    assert result.exit_code == 0 and not result.traceback, result.describe()
    assert 'Traceback' not in result.stderr, result.describe()
    return result.stdout


def failed(result: Any) -> Any:
    """Exit 1 by the command's own choice: no exception escaped, no traceback printed."""
    assert result.exit_code == 1, result.describe()
    assert isinstance(result.exception, SystemExit) and not result.traceback, result.describe()
    assert 'Traceback' not in result.stderr + result.stdout, result.describe()
    return result


def one_line_error(result: Any, *needles: str) -> str:
    """Exit 1 with a single `error: ...` line on stderr and no Python traceback."""
    failed(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: '), result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


# -- shared store, scripts and one run -------------------------------------------------------------


@pytest.fixture(scope='module')
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp('cli')
    (work / 'good.py').write_text(GOOD_SCRIPT)
    (work / 'bad.py').write_text(BAD_SCRIPT)
    return work


@pytest.fixture(scope='module')
def env(work: Path) -> dict[str, str]:
    return {'HARNESS_STORE': str(work / 'store' / 'runs.db')}


@pytest.fixture(scope='module')
def first_run(cli: Cli, work: Path, env: dict[str, str]) -> tuple[str, Any]:
    """`harness exec good.py`, whose run the stored-run commands then work on."""
    result = cli(['exec', 'good.py'], cwd=work, env=env)
    match = RUN_LINE.search(ok(result))
    assert match, result.stdout
    return match['id'], result


# -- the installed console script, as a real process ------------------------------------------------


def test_the_console_script_runs_a_workflow(
    work: Path, offline_env: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    """The entry point itself: `harness` on PATH, its exit status and its two streams."""
    proc = subprocess.run(
        [HARNESS, 'exec', 'good.py'],
        cwd=work,
        env=offline_env(HARNESS_STORE=str(tmp_path / 'r.db')),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and 'Traceback' not in proc.stderr, f'{proc.returncode}\n{proc.stdout}\n{proc.stderr}'
    assert '→ #1 list_files' in proc.stdout and '✓ #2 summarizer' in proc.stdout
    match = RUN_LINE.search(proc.stdout)
    assert match and match['calls'] == '2', proc.stdout
    value = json.loads(proc.stdout[proc.stdout.index('{') : proc.stdout.index(f'run {match["id"]}')])
    assert value['files'] == ['bad.py', 'good.py']


# -- exec and check ---------------------------------------------------------------------------------


def test_exec_prints_the_value_live_calls_and_run_id(first_run: tuple[str, Any]) -> None:
    run_id, result = first_run
    out = result.stdout
    assert '→ #1 list_files' in out and '→ #2 summarizer' in out
    assert '✓ #2 summarizer' in out
    # The value, pretty-printed JSON between the live lines and the run line.
    body = out[out.index('{') : out.index(f'run {run_id}')]
    value = json.loads(body)
    assert value['files'] == ['bad.py', 'good.py']
    assert 'Tests keep the code honest' in value['summary']
    assert RUN_LINE.search(out)['calls'] == '2'  # type: ignore[index]


def test_exec_json_and_type_errors(cli: Cli, work: Path, env: dict[str, str]) -> None:
    as_json = cli(['exec', 'good.py', '--json'], cwd=work, env=env)
    data = json.loads(ok(as_json))  # the whole of stdout is one JSON document: no live lines
    assert set(data) >= {'run_id', 'value', 'printed'}
    assert re.fullmatch(r'[0-9a-f]{12,}', data['run_id'])
    assert data['value']['files'] == ['bad.py', 'good.py']

    bad = failed(cli(['exec', 'bad.py'], cwd=work, env=env))
    assert 'nothing ran' in bad.stderr
    assert 'bad.py:2:' in bad.stderr and 'error[invalid-argument-type]' in bad.stderr
    assert '→' not in bad.stdout  # no call was made


def test_check_passes_a_good_script_and_reports_ty_errors(cli: Cli, work: Path, env: dict[str, str]) -> None:
    assert 'ok' in ok(cli(['check', 'good.py'], cwd=work, env=env))
    bad = failed(cli(['check', 'bad.py'], cwd=work, env=env))
    # ty's diagnostic: the script's name, the line, the rule name and the types, on one line.
    [diagnostic] = [line for line in bad.stdout.splitlines() if 'error[' in line]
    assert re.match(r'bad\.py:2:\d+: error\[invalid-argument-type\]', diagnostic), bad.stdout
    assert 'Expected `str`' in diagnostic and 'Literal[1]' in diagnostic
    one_line_error(cli(['check', 'nope.py'], cwd=work, env=env), 'cannot read nope.py')


# -- the catalog and custom sub-agents ---------------------------------------------------------------

BUILTIN_SIGNATURES = [
    'async def summarizer(*, task: str) -> str:',
    'async def critic(*, question: str, answer: str) -> Score:',
    'async def drafter(*, task: str) -> str:',
    'async def editor(*, draft: str, feedback: str) -> str:',
    "async def list_files(*, pattern: str = '**/*') -> list[str]:",
    'async def read_file(*, path: str) -> str:',
    "async def search_text(*, pattern: str, glob: str = '**/*') -> list[Match]:",
]


def test_agents_prints_the_catalog(cli: Cli, work: Path, env: dict[str, str]) -> None:
    out = ok(cli(['agents'], cwd=work, env=env))
    lines = out.splitlines()
    for signature in BUILTIN_SIGNATURES:
        assert signature in lines, signature
    assert re.search(
        r"^async def reviewer\(\*, path: str, source: str, focus: Literal\[.*\] = 'all'\) -> Review:$",
        out,
        re.MULTILINE,
    )
    # Structured outputs are declared as TypedDicts the script can index.
    for typed in ('class Review(TypedDict):', 'class Finding(TypedDict):', 'class Score(TypedDict):'):
        assert typed in lines


TRANSLATE = "async def translate(*, text: str, to: Literal['fr', 'de']) -> str:"
SHOUTER = 'async def shouter(*, task: str) -> str:'
CUSTOM_SCRIPT = (
    'import asyncio\nawait asyncio.gather(translate(text="hello", to="fr"), translate(text="hello", to="de"))\n'
)
WRONG_LANGUAGE = 'await translate(text="hello", to="es")\n'


def test_custom_subagents_from_the_agents_option(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / 'mymod.py').write_text(CUSTOM_MODULE)
    (tmp_path / 'flow.py').write_text(CUSTOM_SCRIPT)
    (tmp_path / 'wrong.py').write_text(WRONG_LANGUAGE)
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    opt = ['--agents', 'mymod:extras', '--agents', 'mymod:agents']
    catalog = cli(['agents', *opt], cwd=tmp_path, env=env)
    lines = ok(catalog).splitlines()
    assert TRANSLATE in lines
    assert 'Translate a short English greeting.' in catalog.stdout
    assert SHOUTER in lines  # a pydantic-ai Agent becomes `(*, task: str) -> <output>`
    assert 'async def reviewer(' in catalog.stdout  # the built-ins are still there
    assert json.loads(ok(cli(['exec', 'flow.py', '--json', *opt], cwd=tmp_path, env=env)))['value'] == [
        'bonjour',
        'hallo',
    ]
    wrong = failed(cli(['check', 'wrong.py', *opt], cwd=tmp_path, env=env))
    assert 'wrong.py:1:' in wrong.stdout and 'invalid-argument-type' in wrong.stdout

    bad_spec = cli(['agents', '--agents', 'mymod:nothing_here'], cwd=tmp_path, env=env)
    one_line_error(bad_spec, "'mymod:nothing_here'", 'no attribute')


PLAIN_MODULE = '''\
"""Plain functions: a user's host tools."""


async def lint(*, path: str) -> list[str]:
    """Lint one file."""
    return [path]


def word_count(*, text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


both = [lint, word_count]
'''


def kinds(result: Any) -> dict[str, str]:
    """Callee name -> 'agent' or 'tool', from `harness audit --json`."""
    return {c['name']: c['kind'] for c in json.loads(ok(result))['callees']}


def test_plain_functions_become_host_tools_with_the_tools_option(cli: Cli, tmp_path: Path) -> None:
    """`--tools module:attr` registers plain functions (sync or async, or a list of them) as host tools; under
    `--agents` an async function is a sub-agent, and `harness agents` says which each callee became and how to
    make a function a tool."""
    (tmp_path / 'plain.py').write_text(PLAIN_MODULE)
    (tmp_path / 'mymod.py').write_text(CUSTOM_MODULE)
    (tmp_path / 'flow.py').write_text('await word_count(text="a b c")\n')
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    as_tools = kinds(cli(['audit', '--json', '--tools', 'plain:both'], cwd=tmp_path, env=env))
    assert as_tools['lint'] == as_tools['word_count'] == 'tool'
    ran = json.loads(ok(cli(['exec', 'flow.py', '--json', '--tools', 'plain:word_count'], cwd=tmp_path, env=env)))
    assert ran['value'] == 3

    assert kinds(cli(['audit', '--json', '--agents', 'plain:lint'], cwd=tmp_path, env=env))['lint'] == 'agent'
    for option, kind in (('--agents', 'sub-agents'), ('--tools', 'host tools')):  # the catalog says what each became
        shown = cli(['agents', option, 'plain:lint'], cwd=tmp_path, env=env)
        ok(shown)
        said = ' '.join(shown.stderr.split())
        assert re.search(rf'{kind} \(max_\w+_calls\): [^;.]*\blint\b', said), said
        assert 'A function given with --agents is a sub-agent; --tools module:attr makes it a host tool.' in said

    one_line_error(cli(['agents', '--agents', 'plain:word_count'], cwd=tmp_path, env=env), 'word_count', '--tools')
    one_line_error(cli(['agents', '--tools', 'mymod:shouter'], cwd=tmp_path, env=env), 'Agent', '--agents')
    one_line_error(cli(['agents', '--tools', 'plain:nothing'], cwd=tmp_path, env=env), "--tools 'plain:nothing'")


def test_host_tools_from_pyproject(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / 'pyproject.toml').write_text('[project]\nname = "demo"\n\n[tool.harness]\ntools = ["plain:both"]\n')
    (tmp_path / 'plain.py').write_text(PLAIN_MODULE)
    found = cli(['audit', '--json'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')})
    assert kinds(found)['lint'] == kinds(found)['word_count'] == 'tool' and found.stderr == ''
    (tmp_path / 'pyproject.toml').write_text('[tool.harness]\ntools = [1]\n')
    one_line_error(cli(['agents'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')}), 'tools')


def test_agents_marks_calls_that_need_approval(cli: Cli, tmp_path: Path) -> None:
    """`harness agents` shows what the model is shown: a callee registered with `approval=True` says in its stub
    that each call waits for a person."""
    (tmp_path / 'gated.py').write_text(
        'from harness import Harness\nh = Harness(store=":memory:")\n\n\n@h.tool(side_effect=True, approval=True)\n'
        'async def send_email(*, to: str) -> str:\n    """Send an email."""\n    return to\n'
    )
    env = {'HARNESS_STORE': str(tmp_path / 'r.db')}
    out = ok(cli(['agents', '--plain', '--agents', 'gated:h'], cwd=tmp_path, env=env))
    stub = out[out.index('async def send_email') :].split('\n    ...\n')[0]
    assert 'Send an email.' in stub and 'Needs approval: a person must approve each call before it runs' in stub


def test_custom_subagents_from_pyproject(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / 'pyproject.toml').write_text(
        '[project]\nname = "demo"\n\n[tool.harness]\nagents = ["mymod:extras", "mymod:agents"]\n'
    )
    (tmp_path / 'mymod.py').write_text(CUSTOM_MODULE)
    sub = tmp_path / 'scripts'  # the nearest pyproject.toml up the tree applies, and its folder is importable
    sub.mkdir()
    (sub / 'flow.py').write_text('await shouter(task="hello") + " " + await translate(text="hello", to="de")\n')
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    lines = ok(cli(['agents'], cwd=sub, env=env)).splitlines()
    assert TRANSLATE in lines and SHOUTER in lines
    out = ok(cli(['exec', 'flow.py'], cwd=sub, env=env))
    assert '"HELLO! hallo"' in out
    assert '→ #1 shouter' in out and RUN_LINE.search(out)


# -- ask (offline demo planner) ----------------------------------------------------------------------


def test_ask_reviews_the_sample_project_offline(cli: Cli, work: Path) -> None:
    env = {'HARNESS_STORE': str(work / 'ask-store' / 'runs.db')}  # its own store: the repo's .harness is left alone
    out = ok(cli(['ask', 'review the code in examples/sample_project'], cwd=REPO, env=env))
    lines = out.splitlines()
    assert lines[0].startswith('Offline demo mode:'), lines[0]
    assert any(re.match(r'\s*→ #1 list_files\(', line) for line in lines)
    assert any(re.match(r'\s*→ #\d+ reviewer\(', line) for line in lines)
    assert any(re.match(r'\s*✓ #\d+ summarizer ', line) for line in lines)
    answer = out[out.index('Reviewed 5 file(s)') :]
    assert 'order_parser.py:22' in answer and 'eval(' in answer
    assert '== None' in answer  # inventory.py's comparison to None
    run_line = RUN_LINE.search(out)
    assert run_line and run_line['calls'] == '12'
    assert f'trace: harness trace {run_line["id"]}' in out

    out = ok(cli(['ask', 'something unrelated like the weather'], cwd=REPO, env=env))
    assert out.splitlines()[0].startswith('Offline demo mode:')
    assert 'I am the offline demo planner' in out
    flat = ' '.join(out.split())  # the help text is wrapped at the terminal width
    assert 'set HARNESS_MODEL' in flat and '--model' in flat and 'HARNESS_BASE_URL' in flat
    assert 'no calls were made' in out and '→' not in out


def test_ask_reviews_the_one_file_it_is_named_offline(cli: Cli, work: Path) -> None:
    """Issue 21.18: a prompt naming one file reviews that file (three calls), not every file of the clone."""
    env = {'HARNESS_STORE': str(work / 'ask-one' / 'runs.db')}
    out = ok(cli(['ask', 'review examples/sample_project/utils.py'], cwd=REPO, env=env, columns=120))
    assert re.search(r"^\s*→ #1 read_file\(path='examples/sample_project/utils\.py'\)$", out, re.M), out
    assert re.search(r"^\s*→ #2 reviewer\(path='examples/sample_project/utils\.py', ", out, re.M), out
    assert 'Reviewed 1 file(s)' in out and 'list_files' not in out
    run_line = RUN_LINE.search(out)
    assert run_line and run_line['calls'] == '3', out


# -- a model server at HARNESS_BASE_URL ------------------------------------------------------------------


def test_ask_with_only_a_base_url_uses_the_one_model_the_server_serves(cli: Cli, tmp_path: Path) -> None:
    """Ollama and vLLM refuse a request for a model they do not serve: with no HARNESS_MODEL, the CLI asks the
    server (`GET /models`) and uses its one model, by name."""
    from fake_openai import MODEL, FakeOpenAI, Turn

    fake = FakeOpenAI([Turn(script='files = await list_files(pattern="*.md")\nlen(files)\n'), Turn(chunks=['none'])])
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db'), 'HARNESS_BASE_URL': fake.base_url}
    try:
        out = ok(cli(['ask', 'count the notes'], cwd=tmp_path, env=env))
    finally:
        fake.close()
    assert f'model: {MODEL} at {fake.base_url}' in out
    assert [r['model'] for r in fake.requests] == [MODEL, MODEL]


def test_exec_shows_a_scripts_progress_and_its_json_keeps_it(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / 'flow.py').write_text(
        'phase("list")\nfiles = await list_files(pattern="*.md")\nlog("listed")\nlen(files)\n'
    )
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    out = ok(cli(['exec', 'flow.py'], cwd=tmp_path, env=env))
    assert '▸ list' in out and '│ listed' in out
    assert RUN_LINE.search(out)['calls'] == '1', out  # type: ignore[index]  # the log and the phase are no calls
    ran = json.loads(ok(cli(['exec', 'flow.py', '--json'], cwd=tmp_path, env=env)))
    assert ran['progress'] == [{'kind': 'phase', 'text': 'list', 'seq': 1}, {'kind': 'log', 'text': 'listed', 'seq': 3}]


def test_ask_shows_a_scripts_progress_live_and_show_prints_it_again(cli: Cli, tmp_path: Path) -> None:
    """`log`/`phase` lines appear among the calls as the script runs, and `harness show` (and `--json`) keeps them."""
    from fake_openai import FakeOpenAI, Turn

    script = (
        'phase("scan")\nfiles = await list_files(pattern="*.md")\nlog(f"found {len(files)} notes")\n'
        'phase("done")\nlen(files)\n'
    )
    (tmp_path / 'a.md').write_text('a')
    fake = FakeOpenAI([Turn(script=script), Turn(chunks=['one note'])])
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db'), 'HARNESS_BASE_URL': fake.base_url}
    try:
        out = ok(cli(['ask', 'count the notes'], cwd=tmp_path, env=env))
    finally:
        fake.close()
    lines = [line.strip() for line in out.splitlines()]
    scan, listed, found, done = (
        next(i for i, line in enumerate(lines) if line.startswith(mark))
        for mark in ('▸ scan', '✓ #2 list_files', '│ found 1 notes', '▸ done')
    )
    assert scan < listed < found < done, out  # in the order the script ran, among the calls
    run_id = RUN_LINE.search(out)
    assert run_id and run_id['calls'] == '1', out  # progress is not a call
    shown = ok(cli(['show', run_id['id']], cwd=tmp_path, env=env))
    assert 'progress:' in shown and '#1 ▸ scan' in shown and '#3 │ found 1 notes' in shown and '#4 ▸ done' in shown
    assert 'progress:log' not in shown  # not listed among the calls
    as_json = json.loads(ok(cli(['show', run_id['id'], '--json'], cwd=tmp_path, env=env)))
    assert as_json['progress'] == [
        {'kind': 'phase', 'text': 'scan', 'seq': 1},
        {'kind': 'log', 'text': 'found 1 notes', 'seq': 3},
        {'kind': 'phase', 'text': 'done', 'seq': 4},
    ]
    assert as_json['progress_dropped'] == 0


@pytest.mark.parametrize(
    ('models', 'path', 'needles'),
    [
        ([], '', ('serves no model', 'HARNESS_MODEL')),
        (['llama3.2', 'qwen2.5'], '', ('2 models', 'llama3.2, qwen2.5', 'HARNESS_MODEL')),
        (['m'], '/elsewhere', ('/elsewhere/models answered HTTP 404', 'HARNESS_MODEL')),
    ],
)
def test_a_base_url_whose_server_does_not_name_one_model_is_a_one_line_error(
    cli: Cli, tmp_path: Path, models: list[str], path: str, needles: tuple[str, ...]
) -> None:
    from fake_openai import FakeOpenAI, Turn

    fake = FakeOpenAI([Turn(chunks=['never sent'])], models=models)
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db'), 'HARNESS_BASE_URL': fake.base_url + path}
    try:
        one_line_error(cli(['ask', 'hello'], cwd=tmp_path, env=env), fake.base_url, *needles)
    finally:
        fake.close()
    assert fake.requests == []  # no chat request went out under a made-up name


def test_a_turn_that_ran_no_script_stores_no_spans(cli: Cli, tmp_path: Path) -> None:
    """An orchestrator's spans are shown and deleted with its runs: an answer without a script keeps none."""
    from fake_openai import FakeOpenAI, Turn

    fake = FakeOpenAI([Turn(chunks=['nothing to run'])])
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db'), 'HARNESS_BASE_URL': fake.base_url}
    try:
        assert 'nothing to run' in ok(cli(['ask', 'hello'], cwd=tmp_path, env=env))
    finally:
        fake.close()
    with sqlite3.connect(tmp_path / 'runs.db') as conn:
        assert conn.execute('SELECT count(*) FROM turns').fetchone() == (1,)
        assert conn.execute('SELECT count(*) FROM spans').fetchone() == (0,)


def test_a_base_url_with_no_server_behind_it_is_a_one_line_error(cli: Cli, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(('127.0.0.1', 0))
        base = f'http://127.0.0.1:{sock.getsockname()[1]}/v1'
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db'), 'HARNESS_BASE_URL': base}
    one_line_error(cli(['ask', 'hello'], cwd=tmp_path, env=env), base, 'HARNESS_BASE_URL', 'Start it')
    # Commands that call no model do not need the server: check, agents, audit, replay, diff.
    (tmp_path / 'flow.py').write_text('files = await list_files(pattern="*.md")\nlen(files)\n')
    for args in (['check', 'flow.py'], ['agents'], ['audit']):
        assert cli(args, cwd=tmp_path, env=env).exit_code == 0, args
    ran = cli(['exec', 'flow.py', '--json'], cwd=tmp_path, env={'HARNESS_STORE': env['HARNESS_STORE']})
    run_id = json.loads(ran.stdout)['run_id']
    for args in (['replay', run_id], ['diff', run_id]):
        assert cli(args, cwd=tmp_path, env=env).exit_code == 0, args


# -- stored runs ---------------------------------------------------------------------------------------


def test_runs_show_and_trace(cli: Cli, work: Path, env: dict[str, str], first_run: tuple[str, Any]) -> None:
    run_id, _ = first_run
    commands = [['runs'], ['show', run_id], ['trace', run_id], ['trace', run_id, '--mermaid'], ['show', run_id[:12]]]
    runs, show, tree, mermaid, by_prefix = (cli(args, cwd=work, env=env) for args in commands)
    listing = [line.split() for line in ok(runs).splitlines()]
    assert listing[0][:7] == ['run', 'when', 'status', 'calls', 'duration', 'tokens', 'cost']
    row = next(cols for cols in listing if run_id.startswith(cols[0]))  # a short id, whole even at 80 columns
    assert 7 <= len(row[0]) < len(run_id) and 'completed' in row and '2' in row

    out = ok(show)
    assert f'run {run_id}' in out and 'completed' in out
    # The script with line numbers.
    for number, line in enumerate(GOOD_SCRIPT.splitlines(), start=1):
        assert re.search(rf'^\s*{number} {re.escape(line)}\s*$', out, re.MULTILINE), line
    # The calls: sequence, callee, script line, status, source.
    assert re.search(r'^\s*1\s+list_files\s+1\s+ok\s+\S+\s+live', out, re.MULTILINE), out
    assert re.search(r'^\s*2\s+summarizer\s+2\s+ok\s+\S+\s+live', out, re.MULTILINE), out
    value = json.loads(out[out.index('value:') + len('value:') :])
    assert value['files'] == ['bad.py', 'good.py']
    assert re.search(r'sub-agents: [\d,]+ in / [\d,]+ out tokens', out), out  # the summarizer's tokens
    assert ok(by_prefix) == out  # a unique prefix names the same run

    out = ok(tree)
    assert out.startswith(f'run_workflow {run_id}')
    assert re.search(r'[├└]── check\b', out)
    assert re.search(r'[├└]── call list_files\b', out) and re.search(r'[├└]── call summarizer\b', out)
    assert 'invoke_agent summarizer' in out  # the sub-agent's own spans nest under its call

    # The script's possible calls as a flowchart, the path this run took drawn thick and marked taken.
    out = ok(mermaid)
    assert out.startswith('flowchart TD')
    nodes = {callee: node for node, callee in re.findall(r'^\s*(\w+)\["(\w+)<br/>line \d+"\]', out, re.MULTILINE)}
    assert '"list_files<br/>line 1"' in out and '"summarizer<br/>line 2"' in out
    first, second = nodes['list_files'], nodes['summarizer']
    for edge in (f'start ==> {first}', f'{first} ==> {second}', f'{second} ==> end_'):
        assert re.search(rf'^\s*{edge}\s*$', out, re.MULTILINE), (edge, out)
    assert re.search(rf'^\s*class {first},{second} taken;', out, re.MULTILINE), out


def test_replay_and_fork(cli: Cli, work: Path, env: dict[str, str], first_run: tuple[str, Any]) -> None:
    run_id, result = first_run
    original = result.stdout[result.stdout.index('{') : result.stdout.index(f'run {run_id}')]
    out = ok(cli(['replay', run_id], cwd=work, env=env))
    assert '(replayed)' in out and '(answered)' not in out
    value = out[out.index('{') : out.index('replayed run')]
    assert json.loads(value) == json.loads(original)
    assert f'replayed run {run_id} · 2 call(s)' in out

    out = ok(cli(['fork', run_id, '--at', '2', '--result', '"a different summary"'], cwd=work, env=env))
    assert '✓ #2 summarizer' in out and '(answered)' in out
    value = json.loads(out[out.index('{') : out.index('forked run')])
    assert value == {'files': ['bad.py', 'good.py'], 'summary': 'a different summary'}
    forked = re.search(r'forked run (\w+) · 2 call\(s\)', out)
    assert forked and forked[1] != run_id

    show = ok(cli(['show', forked[1]], cwd=work, env=env))
    assert f'forked from {run_id} at call #2' in show
    assert 'a different summary' in show


def test_unknown_runs_and_missing_store_are_one_line_errors(
    cli: Cli, work: Path, env: dict[str, str], first_run: tuple[str, Any]
) -> None:
    missing_store = work / 'nowhere' / 'runs.db'
    results = [
        cli(args, cwd=work, env=env)
        for args in (
            ['show', 'nope'],
            ['trace', 'nope'],
            ['replay', 'nope'],
            ['fork', 'nope', '--at', '1', '--result', '1'],
            ['runs', '--store', str(missing_store)],
            ['show', 'nope', '--store', str(missing_store)],
            ['replay', 'nope', '--store', str(missing_store)],
            ['fork', 'nope', '--at', '1', '--result', 'not json'],
        )
    ]
    for result in results[:4]:
        one_line_error(result, "'nope'", 'harness runs')
    for result in results[4:7]:
        one_line_error(result, f'no run store at {missing_store}')
    one_line_error(results[7], '--result', 'is not JSON')
    assert not missing_store.parent.exists()  # reading runs never creates a store


def test_catalog_options_stand_where_the_command_puts_them_and_arrive_as_one_where() -> None:
    """`@catalog_options` is the one definition of --store/--agents/--tools/--root: typer lists them where the
    command's `where` parameter stands (the `--help` order is a contract) and the command gets them as a `Where`."""
    got: list[tuple[str, Where, bool]] = []
    app = typer.Typer()

    @app.command()
    @catalog_options
    def probe(
        name: Annotated[str, typer.Argument()], *, where: Where, plain: Annotated[bool, typer.Option('--plain')] = False
    ) -> None:
        got.append((name, where, plain))

    runner = CliRunner()
    shown = runner.invoke(app, ['--help'], env={'COLUMNS': '200'}).output
    places = [shown.index(option) for option in ('--store', '--agents', '--tools', '--root', '--plain')]
    assert places == sorted(places), shown
    result = runner.invoke(app, ['x', '--agents', 'a:b', '--agents', 'c:d', '--root', 'ws', '--plain'])
    assert result.exit_code == 0, result.output
    assert got == [('x', Where(agents=['a:b', 'c:d'], root=Path('ws')), True)]


# -- chat -------------------------------------------------------------------------------------------


class Terminal:
    """A child process on a pseudo-terminal that is its controlling terminal (so ^C is a SIGINT)."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 200, 0, 0))  # rows, columns

        def own_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal, close_fds=True
        )
        os.close(slave)
        self.fd = master
        self.pending = ''
        self.transcript = ''

    def expect(self, pattern: str, timeout: float) -> str:
        """Read until `pattern` (a regex) appears; return everything up to and including it."""
        deadline = time.monotonic() + timeout
        while not (match := re.search(pattern, self.pending)):
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                pytest.fail(f'{pattern!r} did not appear within {timeout}s; transcript:\n{self.transcript}')
            try:
                data = os.read(self.fd, 65536).decode(errors='replace')
            except OSError:  # the child closed the terminal
                pytest.fail(f'the process ended before {pattern!r}; transcript:\n{self.transcript}')
            data = re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', data)  # colours
            self.pending += data
            self.transcript += data
        seen, self.pending = self.pending[: match.end()], self.pending[match.end() :]
        return seen

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.fd)


@pytest.fixture
def terminal() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for term in made:
        term.close()


PROMPT = r'you> '
TURN_END = r'trace: harness trace [0-9a-f]{7,}\s*\r?\n[\s\S]*?' + PROMPT
"""The footer's last line, then the prompt again (prompt-toolkit redraws the prompt as keys are typed)."""


def test_chat_turns_and_ctrl_c_cancels_the_running_workflow(
    tmp_path: Path, terminal: list[Terminal], offline_env: Callable[..., dict[str, str]]
) -> None:
    (tmp_path / 'slowmod.py').write_text(SLOW_MODULE)
    env = offline_env(HARNESS_STORE=str(tmp_path / 'runs.db'), PROMPT_TOOLKIT_NO_CPR='1')
    term = Terminal([HARNESS, 'chat', '--agents', 'slowmod:drafter'], tmp_path, env)
    terminal.append(term)

    banner = term.expect(PROMPT, 60)
    assert banner.lstrip().startswith('Offline demo mode:')

    # Turn 1: best of three drafts through the replaced (fast for haiku) drafter.
    term.send(b'write a haiku about tests\r')
    turn = term.expect(TURN_END, 60)
    assert 'orchestrator>' in turn and re.search(r'draft: write a haiku about tests', turn, re.IGNORECASE), turn
    first_ids = re.findall(r'run ([0-9a-f]{7,}) · 7 call\(s\)', turn)
    assert len(first_ids) == 1, turn

    # Turn 2: the drafter sleeps; Ctrl-C once the first call has started cancels the workflow.
    term.send(b'write a poem about tests\r')
    term.expect(r'→ #1 drafter', 30)
    term.send(b'\x03')
    cancelled = term.expect(
        r'cancelled · run ([0-9a-f]{7,}) stopped after \d+ call\(s\); finish its script: '
        r'harness resume \1\s*\r?\n[\s\S]*?' + PROMPT,
        30,
    )
    assert 'orchestrator>' not in cancelled and 'Traceback' not in cancelled
    assert term.proc.poll() is None  # still running, back at the prompt
    # The sleeping sub-agent was cancelled (it says so in a file as it stops), not left running.
    assert 'poem' in (tmp_path / 'drafter-cancelled.txt').read_text()

    # Turn 3: a question, answered in the same session; its footer lists this turn's run only.
    # Typed on two lines (a trailing backslash, then Enter, adds a line); slash commands answer in between.
    term.send(b'/help\r')
    term.expect(r'/multiline .*\r?\n[\s\S]*/exit .*\r?\n[\s\S]*?' + PROMPT, 30)
    term.send(b'what is\\\ra unit test?\r')
    turn = term.expect(TURN_END, 60)
    assert '→ #1 drafter' in turn and '→ #4 summarizer' in turn
    assert re.search(r"drafter\(task='what is\\na unit test\? Focus on the basics\.'\)", turn), turn
    assert 'orchestrator>' in turn and 'what is a unit test?' in turn  # Markdown joins a paragraph's lines
    footer = re.findall(r'run ([0-9a-f, ]+) · (\d+) call\(s\)', turn)
    assert len(footer) == 1 and re.fullmatch(r'[0-9a-f]{7,}', footer[0][0]) and footer[0][1] == '4', footer
    assert footer[0][0] != first_ids[0]

    # Ctrl-D leaves.
    term.send(b'\x04')
    assert term.proc.wait(timeout=30) == 0


def scripted(respond: Callable[..., Any]) -> Any:
    """A FunctionModel from `respond`, streamed as a model streams (the CLI streams every request)."""
    from pydantic_ai.messages import TextPart, ToolCallPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    async def stream(messages: Any, info: Any) -> Any:
        for part in respond(messages, info).parts:
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {
                    0: DeltaToolCall(
                        name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id
                    )
                }

    return FunctionModel(respond, stream_function=stream, model_name='scripted')


def test_chat_history_slash_commands_and_continue(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat loop in this process with a model that reads its history: the history reaches the next turn,
    the slash commands work, and the conversation is stored and continued by `chat --continue`."""
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    histories: list[list[str]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        if returned:  # answer with the script's value
            return ModelResponse(parts=[TextPart(str(returned[-1].content))])
        prompts = [
            p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
        ]
        answers = [
            p.content for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart)
        ]
        histories.append([str(p) for p in prompts])
        code = 'await list_files(pattern="*.txt")\n'  # one call, so the turn's footer names its run
        if not answers:
            code += 'lines = ["green checks in a row", "the suite hums", "merge before rain"]\n" / ".join(lines)'
        else:  # a follow-up: work on the previous answer, found in the history
            code += f'previous = {json.dumps(answers[-1])}\nprevious.split(" / ")[0].upper()'
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])

    from pydantic_ai.messages import UserPromptPart

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    session = [
        'write a haiku about tests',
        '/script',
        '/runs',
        '/trace',
        'now only its first line, \\',
        'loudly',
        '/retry',
        '/model nonsense',
        '/model',
        '/help',
        '/nope',
        '/exit',
        'never sent',
    ]
    out = ok(cli(['chat'], cwd=tmp_path, env=env, input='\n'.join(session) + '\n', columns=120))
    assert 'model: scripted' in out
    assert 'green checks in a row / the suite hums / merge before rain' in out
    assert out.count('GREEN CHECKS IN A ROW') == 2  # the turn, then /retry of it
    assert histories == [
        ['write a haiku about tests'],
        ['write a haiku about tests', 'now only its first line, \nloudly'],  # a trailing \ continues the line
        ['write a haiku about tests', 'now only its first line, \nloudly'],  # /retry: the same turn, again
    ]
    assert [calls for _, calls in RUN_LINE.findall(out)] == ['1', '1', '1']
    first_run = RUN_LINE.findall(out)[0][0]
    after_script = out[out.index('you> script · attempt 1') :]
    assert 'lines = ["green checks in a row"' in after_script  # /script: the last turn's script
    assert re.search(rf'^\s*{first_run}\s.*completed', out, re.M)  # /runs
    assert re.search(rf'run_workflow {first_run}\w+', out)  # /trace
    assert "you> error: unknown model 'nonsense'" in out and 'you> model: scripted' in out
    assert '/retry' in out and 'unknown command /nope' in out
    assert 'never sent' not in ''.join(h[-1] for h in histories)

    # The conversation was stored: `chat --continue` picks it up, history and all.
    out = ok(cli(['chat', '--continue'], cwd=tmp_path, env=env, input='and then?\n', columns=120))
    assert 'continuing conversation' in out and '3 turn(s)' in out
    assert histories[-1] == ['write a haiku about tests', 'now only its first line, \nloudly', 'and then?']
    # `show` names the turn a run belongs to: its prompt, the conversation before it, and the answer.
    last_run = RUN_LINE.findall(out)[-1][0]
    shown = ok(cli(['show', last_run], cwd=tmp_path, env=env, columns=120))
    assert 'you> and then?' in shown and 'you> write a haiku about tests' in shown
    assert 'orchestrator>' in shown and 'GREEN CHECKS IN A ROW' in shown
    one_line_error(cli(['chat', 'ffffffff', '--continue'], cwd=tmp_path, env=env), "no conversation 'ffffffff'")


def test_chat_renders_a_markdown_heading_without_its_hashes(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer's headings are headings on the terminal, as bold (and the first level underlined) lines, not
    the Markdown source: no `#` is left in front of them."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    answer = '# Findings\n\nThe suite is **green**.\n\n## Next steps\n\n- merge\n\n### Later\n\nrelease\n'

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(answer)])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    out = ok(
        cli(
            ['chat'],
            cwd=tmp_path,
            env={'HARNESS_STORE': str(tmp_path / 'runs.db')},
            input='report\n/exit\n',
            columns=100,
        )
    )
    lines = [line.strip() for line in out.splitlines()]
    assert 'Findings' in lines and 'Next steps' in lines and 'Later' in lines, out
    assert not [line for line in lines if line.startswith('#')], out
    assert 'The suite is green.' in out and '**' not in out


# -- the model: one line when it cannot be used --------------------------------------------------------


def test_a_model_that_cannot_be_used_is_one_line(cli: Cli, tmp_path: Path) -> None:
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    one_line_error(
        cli(['ask', 'hi', '--model', 'nonsense'], cwd=tmp_path, env=env),
        "unknown model 'nonsense'",
        '--model openai:gpt-4.1-mini',
    )
    one_line_error(
        cli(['ask', 'hi', '--model', 'openai:gpt-4o'], cwd=tmp_path, env=env),
        "cannot use model 'openai:gpt-4o'",
        'OPENAI_API_KEY',
    )
    one_line_error(cli(['chat', '--model', 'nonsense'], cwd=tmp_path, env=env), "unknown model 'nonsense'")


# -- the command line itself -------------------------------------------------------------------------------


def test_help_version_and_a_script_from_stdin(cli: Cli, work: Path, env: dict[str, str]) -> None:
    short = ok(cli(['-h'], cwd=work, env=env))
    assert re.search(r'Usage: \S+ \[OPTIONS\] COMMAND', short) and ok(cli(['--help'], cwd=work, env=env)) == short
    assert re.search(r'Usage: \S+ runs \[OPTIONS\]', ok(cli(['runs', '-h'], cwd=work, env=env)))
    from importlib.metadata import version

    assert ok(cli(['--version'], cwd=work, env=env)).strip() == f'harness {version("harness")}'
    data = json.loads(ok(cli(['exec', '-', '--json'], cwd=work, env=env, input=GOOD_SCRIPT)))
    assert data['value']['files'] == ['bad.py', 'good.py']
    assert 'ok' in ok(cli(['check', '-'], cwd=work, env=env, input=GOOD_SCRIPT))


def test_runs_filters_json_rm_and_short_ids(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / 'good.py').write_text(GOOD_SCRIPT)
    (tmp_path / 'bad.py').write_text(BAD_SCRIPT)
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    good = json.loads(ok(cli(['exec', 'good.py', '--json'], cwd=tmp_path, env=env)))['run_id']
    failed(cli(['exec', 'bad.py'], cwd=tmp_path, env=env))
    listed = json.loads(ok(cli(['runs', '--json'], cwd=tmp_path, env=env)))
    assert [r['status'] for r in listed] == ['failed', 'completed']
    bad = listed[0]['run_id']
    assert listed[1]['run_id'] == good and listed[1]['calls'] == 2 and listed[1]['usage']['input_tokens'] > 0
    only_failed = json.loads(ok(cli(['runs', '--json', '--status', 'failed'], cwd=tmp_path, env=env)))
    assert [r['run_id'] for r in only_failed] == [bad]
    table = ok(cli(['runs', '--status', 'completed'], cwd=tmp_path, env=env))
    assert good[:7] in table and bad[:7] not in table
    one_line_error(cli(['runs', '--status', 'done'], cwd=tmp_path, env=env), "--status 'done'", 'completed')
    # A short id names one run: 7 characters unless two runs share more (then one more than they share).
    full = ok(cli(['runs', '--full'], cwd=tmp_path, env=env))
    assert good in full and bad in full
    assert ok(cli(['show', good[:7], '--json'], cwd=tmp_path, env=env)) == ok(
        cli(['show', good, '--json'], cwd=tmp_path, env=env)
    )

    assert f'deleted run {bad}' in ok(cli(['rm', bad[:7]], cwd=tmp_path, env=env))
    assert [r['run_id'] for r in json.loads(ok(cli(['runs', '--json'], cwd=tmp_path, env=env)))] == [good]
    one_line_error(cli(['rm', bad], cwd=tmp_path, env=env), f"no run '{bad}'")


def test_show_call_full_and_replay_positions(
    cli: Cli, work: Path, env: dict[str, str], first_run: tuple[str, Any]
) -> None:
    run_id, _ = first_run
    call = ok(cli(['show', run_id, '--call', '2'], cwd=work, env=env))
    assert '#2 summarizer' in call and '"task": "Tests keep the code honest."' in call
    data = json.loads(ok(cli(['show', run_id, '--call', '1', '--json'], cwd=work, env=env)))
    assert data['callee'] == 'list_files' and data['result'] == ['bad.py', 'good.py']
    one_line_error(cli(['show', run_id, '--call', '9'], cwd=work, env=env), 'has no call 9', '1 to 2')
    whole = json.loads(ok(cli(['show', run_id, '--json'], cwd=work, env=env)))
    assert whole['script'] == GOOD_SCRIPT and [c['seq'] for c in whole['calls']] == [1, 2]
    spans = json.loads(ok(cli(['trace', run_id, '--json'], cwd=work, env=env)))
    assert any(s['name'] == f'run_workflow {run_id}' for s in spans)
    # replay --from K with no snapshot at K lists the K that would work.
    error = one_line_error(cli(['replay', run_id, '--from', '0'], cwd=work, env=env), 'replay --from K')
    assert re.search(r'K is one of \d+(, \d+)*', error), error


BIG_MODULE = """\
from harness import Harness

big = Harness(store=":memory:")


@big.tool
async def long_text(*, n: int) -> str:
    return "a" * n + "END"


@big.tool
async def many(*, n: int) -> list[int]:
    return list(range(n))
"""


def test_show_full_prints_every_result_whole(cli: Cli, tmp_path: Path) -> None:
    """`show --full` prints a 5,000-character result as one string (not folded into a table column) and a
    list of 30 items with all of them; without it, both are previews."""
    (tmp_path / 'bigmod.py').write_text(BIG_MODULE)
    (tmp_path / 'flow.py').write_text('text = await long_text(n=5000)\nnumbers = await many(n=30)\nlen(text)\n')
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    run_id = json.loads(ok(cli(['exec', 'flow.py', '--json', '--agents', 'bigmod:big'], cwd=tmp_path, env=env)))[
        'run_id'
    ]
    whole = ok(cli(['show', run_id, '--full'], cwd=tmp_path, env=env))
    assert '"' + 'a' * 5000 + 'END"' in whole
    assert (
        ''.join(whole.split()).count(
            '[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29]'
        )
        == 1
    )
    assert 'more' not in whole and '…' not in whole
    short = ''.join(ok(cli(['show', run_id], cwd=tmp_path, env=env)).split())
    assert 'a' * 5000 not in short and '(5,003chars)' in short and '…10more]' in short


MARKED_MODULE = """\
from pathlib import Path

from harness import Harness

Path("imported.txt").write_text("imported")  # says the module was imported
marked = Harness(store=":memory:")


@marked.tool
async def eligible(*, ticket: str) -> bool:
    return True


@marked.tool
async def refund(*, ticket: str) -> str:
    return "refunded"
"""


def test_trace_mermaid_builds_no_catalog_for_a_run_that_stored_its_own(cli: Cli, tmp_path: Path) -> None:
    """The run's stored catalog names the callees of its script, the branch not taken too: drawing it imports
    none of the user's modules. A run an older harness stored without one is drawn with today's catalog."""
    (tmp_path / 'marked.py').write_text(MARKED_MODULE)
    (tmp_path / 'flow.py').write_text('ok = await eligible(ticket="T")\nif not ok:\n    await refund(ticket="T")\nok\n')
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    ran = ok(cli(['exec', 'flow.py', '--json', '--agents', 'marked:marked'], cwd=tmp_path, env=env))
    run_id = json.loads(ran)['run_id']
    marker = tmp_path / 'imported.txt'
    marker.unlink()
    chart = ok(cli(['trace', run_id, '--mermaid', '--agents', 'marked:marked'], cwd=tmp_path, env=env))
    assert '"refund<br/>line 3"' in chart and 'start ==> n0' in chart
    assert not marker.exists()
    with sqlite3.connect(tmp_path / 'runs.db') as conn:
        conn.execute('UPDATE runs SET catalog_json = NULL')
    older = ok(cli(['trace', run_id, '--mermaid', '--agents', 'marked:marked'], cwd=tmp_path, env=env))
    assert older == chart and marker.exists()


def test_the_store_is_the_projects_from_any_subdirectory(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / 'project'
    deep = project / 'src' / 'pkg'
    deep.mkdir(parents=True)
    (project / 'pyproject.toml').write_text('[project]\nname = "p"\n')
    (project / 'good.py').write_text(GOOD_SCRIPT)
    ran = json.loads(ok(cli(['exec', 'good.py', '--json'], cwd=project)))
    assert (project / '.harness' / 'runs.db').is_file()
    listed = json.loads(ok(cli(['runs', '--json'], cwd=deep)))  # not a new, empty store under src/pkg
    assert [r['run_id'] for r in listed] == [ran['run_id']]
    assert not (deep / '.harness').exists()
    # [tool.harness] store, relative to the pyproject.toml that names it.
    (project / 'pyproject.toml').write_text('[project]\nname = "p"\n\n[tool.harness]\nstore = "var/runs.db"\n')
    ok(cli(['exec', str(project / 'good.py'), '--json'], cwd=deep))
    assert (project / 'var' / 'runs.db').is_file()
    assert len(json.loads(ok(cli(['runs', '--json'], cwd=deep)))) == 1


# -- a run cancelled from another process ------------------------------------------------------------------

BLOCKING_MODULE = '''\
import asyncio
from pathlib import Path


async def wait_forever(*, what: str) -> str:
    """Waits until cancelled."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        Path("cancelled.txt").write_text(what)
        raise
    return what
'''


def test_cancel_stops_a_run_in_another_process(
    cli: Cli, tmp_path: Path, spawn: Callable[..., Any], offline_env: Callable[..., dict[str, str]]
) -> None:
    (tmp_path / 'blocking.py').write_text(BLOCKING_MODULE)
    (tmp_path / 'flow.py').write_text('a = await list_files(pattern="*.py")\nawait wait_forever(what="x")\n')
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    child = spawn(
        [HARNESS, 'exec', 'flow.py', '--agents', 'blocking:wait_forever'], cwd=tmp_path, env=offline_env(**env)
    )
    child.expect('  → #2 wait_forever')
    [running] = json.loads(ok(cli(['runs', '--json', '--status', 'running'], cwd=tmp_path, env=env)))
    out = ok(cli(['cancel', running['run_id'][:7]], cwd=tmp_path, env=env))
    assert f'cancelled run {running["run_id"]}: it is interrupted' in out
    assert child.wait() == 130
    stderr = ''.join(child.stderr)
    assert 'Traceback' not in stderr and f'harness resume {running["run_id"]}' in stderr, child.describe()
    assert (tmp_path / 'cancelled.txt').read_text() == 'x'  # the call itself was cancelled, not left running
    one_line_error(cli(['cancel', running['run_id']], cwd=tmp_path, env=env), 'is not running')


# -- streamed Markdown on a real terminal -----------------------------------------------------------------


# A real pty and a real process (3 s): the slow tier; the rendering itself is tested in-process above.
@pytest.mark.slow
def test_ask_streams_markdown_on_a_terminal(
    tmp_path: Path, terminal: list[Terminal], offline_env: Callable[..., dict[str, str]]
) -> None:
    """`harness ask` on a pseudo-terminal against an OpenAI-compatible server that holds back: the spinner
    shows while the model has said nothing, the first Markdown lines render before the rest of the answer
    exists, then the rest (the server sends each part only once the terminal showed the previous one)."""
    import threading

    from fake_openai import FakeOpenAI, Turn

    started, first_seen = threading.Event(), threading.Event()
    script = 'files = await list_files(pattern="*.md")\nlen(files)\n'
    answer = ['# Findings\n\n', '- **first** point\n', '- second point with `code`\n']
    fake = FakeOpenAI([Turn(script=script, gates={0: started}), Turn(chunks=answer, gates={2: first_seen})])
    env = offline_env(
        HARNESS_STORE=str(tmp_path / 'runs.db'), HARNESS_BASE_URL=fake.base_url, HARNESS_MODEL='fake-model'
    )
    try:
        term = Terminal([HARNESS, 'ask', 'summarise the notes'], tmp_path, env)
        terminal.append(term)
        term.expect(r'thinking…', 60)  # the spinner, while the server holds the first response back
        started.set()
        shown = term.expect(r'• first point', 60)  # rendered Markdown: a bullet, bold without its stars
        assert 'script · attempt 1' in shown and 'files = await list_files(pattern="*.md")' in shown
        assert '→ #1 list_files' in shown and 'Findings' in shown and '# Findings' not in shown  # a heading
        assert 'second point' not in shown and '**' not in shown
        first_seen.set()
        rest = term.expect(r'trace: harness trace [0-9a-f]{7,}', 60)
        assert '• second point with code' in rest
        assert term.proc.wait(timeout=30) == 0
    finally:
        fake.close()
    assert [r['stream'] for r in fake.requests] == [True, True]


def test_ask_labels_attempts_shows_failed_checks_and_numbers_calls_across_the_turn(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three attempts in one turn: a script that fails at run time after one call, one that fails the type
    check (nothing runs), one that works. Each is shown and labelled, each failure says what the model is
    told, the calls are numbered across the turn, and the footer names all three runs."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    scripts = [
        'files = await list_files(pattern="*.txt")\nraise ValueError("boom")\n',
        BAD_SCRIPT,
        'files = await list_files(pattern="*.md")\ntext = await read_file(path=files[0])\n[files, text]\n',
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = sum(1 for m in messages for p in m.parts if p.part_kind in ('tool-return', 'retry-prompt'))
        if returned < len(scripts):
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': scripts[returned]})])
        return ModelResponse(parts=[TextPart('third time lucky')])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    (tmp_path / 'notes.md').write_text('# notes\n')
    out = ok(cli(['ask', 'try hard'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')}, columns=120))
    first, second, third = (out.index(f'script · attempt {n}') for n in (1, 2, 3))
    assert first < out.index('→ #1 list_files') < out.index('✗ attempt 1 failed') < second
    assert 'ValueError' in out[first:second]
    assert 'error[invalid-argument-type]' in out[out.index('✗ attempt 2 failed') : third]
    assert '→ #' not in out[second:third]  # the check failed: nothing ran
    assert '→ #2 list_files' in out and '→ #3 read_file' in out and '✓ attempt 3 returned' in out
    assert 'third time lucky' in out
    footer = re.search(r'^run (\w+) \(failed\), (\w+) \(failed\), (\w+) · 3 call\(s\)$', out, re.M)  # failed check too
    assert footer, out
    assert f'trace: harness trace {footer[3]}' in out


def test_ask_shows_the_calls_a_budget_refuses_as_they_happen(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21.18: a fan-out past `max_agent_calls` (50) in `harness ask`: each refused call is shown live,
    naming the budget, and what the model is told names it too."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    script = 'rs = await settle_all(*[summarizer(task="t" + str(i)) for i in range(52)])\n[r["ok"] for r in rs]'

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script})])
        return ModelResponse(parts=[TextPart(f'told: {returned[-1].content}')])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    out = ok(
        cli(['ask', 'summarise a lot'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')}, columns=200)
    )
    refused = re.findall(r"^\s*⊘ summarizer\(task='(t\d+)'\) refused: (.*)$", out, re.M)
    assert [task for task, _ in refused] == ['t50', 't51'], out
    assert all(why.startswith('The sub-agent call budget (max_agent_calls=50) is spent') for _, why in refused)
    assert out.index('⊘ summarizer') < out.index('✓ attempt 1 returned')
    told = ' '.join(out[out.index('told:') :].split())
    assert 'the sub-agent call budget (max_agent_calls=50) is spent' in told, told
    run_line = RUN_LINE.search(out)
    assert run_line and run_line['calls'] == '50', out  # the refused calls are not calls of the run


def test_every_script_shows_when_the_model_server_reuses_one_tool_call_id(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some OpenAI-compatible servers (and `tests/helpers/fake_openai.py`) give every tool call the same id: the second
    script is still a new attempt, shown and labelled, not the first one going on."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    scripts = ['raise ValueError("boom")\n', 'files = await list_files(pattern="*.md")\nfiles\n']

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = sum(1 for m in messages for p in m.parts if p.part_kind in ('tool-return', 'retry-prompt'))
        if returned < len(scripts):
            call = ToolCallPart('run_workflow', {'code': scripts[returned]}, tool_call_id='call_1')
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart('done')])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    (tmp_path / 'notes.md').write_text('# notes\n')
    out = ok(cli(['ask', 'try twice'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')}, columns=120))
    assert 'goes on' not in out, out
    assert out.index('script · attempt 1') < out.index('✗ attempt 1 failed') < out.index('script · attempt 2')
    assert 'files = await list_files(pattern="*.md")' in out and '✓ attempt 2 returned' in out


APPROVAL_MODULE = '''\
from pathlib import Path

from harness import Harness

gated = Harness(store=":memory:")


@gated.tool(side_effect=True, approval=True)
async def send_email(*, to: str, body: str) -> str:
    """Send an email (a person approves each one)."""
    Path("sent.txt").write_text(f"{to}: {body}")
    return "sent to " + to
'''
APPROVAL_SCRIPT = """\
try:
    r = await send_email(to="ada@example.com", body="hi")
except PermissionError as e:
    r = "refused: " + str(e)
r
"""


@pytest.mark.parametrize('decision', ['approve', 'reject', 'no answer'])
def test_a_call_that_needs_approval_is_asked_inline(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decision: str
) -> None:
    """`ask` stops at a call that needs approval, asks the person, records the decision and goes on; with no
    one to answer, the run stays waiting for `harness approve`."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo

    import harness._cli._shared
    from harness._store import RunStore
    from harness._ui._models import ModelChoice

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        if returned:
            return ModelResponse(parts=[TextPart(f'result: {returned[-1].content}')])
        # One id for every tool call, as some model servers do: going on after the decision is still attempt 1.
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': APPROVAL_SCRIPT}, tool_call_id='call_1')])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    (tmp_path / 'gate.py').write_text(APPROVAL_MODULE)
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    answers = {'approve': 'y\n', 'reject': 'n\nnot today\n', 'no answer': ''}[decision]
    out = ok(cli(['ask', 'email ada', '--agents', 'gate:gated'], cwd=tmp_path, env=env, input=answers, columns=120))
    assert re.search(r"waits for approval of #1 send_email\(to='ada@example.com', body='hi'\)", out), out
    assert 'approve? [y/N]' in out and 'script · attempt 2' not in out  # going on is not a new attempt
    assert ('attempt 1 goes on' in out) == (decision != 'no answer'), out
    [run] = json.loads(ok(cli(['runs', '--json'], cwd=tmp_path, env=env)))
    # The orchestrator's own requests, each counted once: the one that wrote the script, and (when the run
    # went on after the decision) the one that answered; as the stored conversation holds them.
    requests = 1 if decision == 'no answer' else 2
    with RunStore(tmp_path / 'runs.db') as db:
        conversation = db.get_conversation(None)
        [turn] = db.turns(conversation.conversation_id)
    assert turn.usage['requests'] == requests, turn.usage
    if decision != 'no answer':  # a waiting turn adds no messages to the conversation yet
        served = [
            m
            for m in ModelMessagesTypeAdapter.validate_json(conversation.messages_json)
            if isinstance(m, ModelResponse)
        ]
        assert turn.usage['input_tokens'] == sum(m.usage.input_tokens for m in served) and len(served) == requests
    assert f'orchestrator {requests} request(s), {turn.usage["input_tokens"]:,} in' in out, out
    if decision == 'approve':
        assert (tmp_path / 'sent.txt').read_text() == 'ada@example.com: hi'
        assert 'result: sent to ada@example.com' in out and run['status'] == 'completed'
    elif decision == 'reject':
        assert not (tmp_path / 'sent.txt').exists()
        assert re.search(r'result: refused: send_email was rejected by \S+: not today', out), out
        assert run['status'] == 'completed'
    else:
        assert not (tmp_path / 'sent.txt').exists() and run['status'] == 'waiting'
        assert f'left waiting: harness approve {run["run_id"]}' in out
    # Its trace has the orchestrator's agent run of each part of the turn (one more when it went on); they are
    # deleted with the run, the turn's only one.
    spans = json.loads(ok(cli(['trace', run['run_id'], '--json'], cwd=tmp_path, env=env)))
    assert [s['name'] for s in spans].count('invoke_agent orchestrator') == requests
    ok(cli(['rm', '--force', run['run_id']], cwd=tmp_path, env=env))
    with sqlite3.connect(tmp_path / 'runs.db') as conn:
        assert conn.execute('SELECT count(*) FROM spans').fetchone() == (0,)


def test_a_turn_the_store_could_not_take_keeps_its_conversation(tmp_path: Path) -> None:
    """The chat's conversation is made before its first turn is stored: a turn the store refused (a full disk, a
    lock) is said in one line, and the next turn still belongs to the same conversation."""
    import io

    from rich.console import Console

    from harness import Harness, StoreError
    from harness._cli._chat import Session
    from harness._cli._live import LiveCalls
    from harness._cli._turn import TurnOutcome

    h = Harness(store=str(tmp_path / 'runs.db'))
    out = io.StringIO()
    console = Console(file=out, width=120)
    session = Session(h, console, lambda model: None, None, 'test', LiveCalls(console))
    store = h.store
    assert store is not None
    real_add_turn = store.add_turn
    failures = iter([StoreError('the disk is full')])

    def add_turn(turn: Any) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        real_add_turn(turn)

    store.add_turn = add_turn  # type: ignore[method-assign]
    try:
        for n, prompt in enumerate(['first', 'second'], start=1):
            session.turns = n
            session.record(prompt, TurnOutcome(output=f'answer {n}'), 'completed')
        assert 'the turn was not stored' in out.getvalue()
        assert session.conversation is not None
        turns = store.turns(session.conversation.conversation_id)
        assert [t.prompt for t in turns] == ['second']  # the second turn went to the first turn's conversation
        assert [c['conversation_id'] for c in store.list_conversations()] == [session.conversation.conversation_id]
    finally:
        h.close()
