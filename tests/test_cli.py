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
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HARNESS = str(Path(sys.executable).with_name('harness'))
REPO = Path(__file__).resolve().parents[1]
RUN_LINE = re.compile(r'^run (?P<id>[0-9a-f]{12,}) · (?P<calls>\d+) call\(s\)$', re.MULTILINE)
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


def test_the_console_script_runs_a_workflow(work: Path, offline_env: Callable[..., dict[str, str]],
                                             tmp_path: Path) -> None:
    """The entry point itself: `harness` on PATH, its exit status and its two streams."""
    proc = subprocess.run([HARNESS, 'exec', 'good.py'], cwd=work, env=offline_env(HARNESS_STORE=str(tmp_path / 'r.db')),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and 'Traceback' not in proc.stderr, f'{proc.returncode}\n{proc.stdout}\n{proc.stderr}'
    assert '→ #1 list_files' in proc.stdout and '✓ #2 summarizer' in proc.stdout
    match = RUN_LINE.search(proc.stdout)
    assert match and match['calls'] == '2', proc.stdout
    value = json.loads(proc.stdout[proc.stdout.index('{'):proc.stdout.index(f'run {match["id"]}')])
    assert value['files'] == ['bad.py', 'good.py']


# -- exec and check ---------------------------------------------------------------------------------


def test_exec_prints_the_value_live_calls_and_run_id(first_run: tuple[str, Any]) -> None:
    run_id, result = first_run
    out = result.stdout
    assert '→ #1 list_files' in out and '→ #2 summarizer' in out
    assert '✓ #2 summarizer' in out
    # The value, pretty-printed JSON between the live lines and the run line.
    body = out[out.index('{'):out.index(f'run {run_id}')]
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
    assert re.search(r"^async def reviewer\(\*, path: str, source: str, focus: Literal\[.*\] = 'all'\) -> Review:$",
                     out, re.MULTILINE)
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
        'bonjour', 'hallo'
    ]
    wrong = failed(cli(['check', 'wrong.py', *opt], cwd=tmp_path, env=env))
    assert 'wrong.py:1:' in wrong.stdout and 'invalid-argument-type' in wrong.stdout

    bad_spec = cli(['agents', '--agents', 'mymod:nothing_here'], cwd=tmp_path, env=env)
    one_line_error(bad_spec, "'mymod:nothing_here'", 'no attribute')


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
    answer = out[out.index('Reviewed 5 file(s)'):]
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


# -- stored runs ---------------------------------------------------------------------------------------


def test_runs_show_and_trace(cli: Cli, work: Path, env: dict[str, str], first_run: tuple[str, Any]) -> None:
    run_id, _ = first_run
    commands = [['runs'], ['show', run_id], ['trace', run_id], ['trace', run_id, '--mermaid'], ['show', run_id[:12]]]
    runs, show, tree, mermaid, by_prefix = (cli(args, cwd=work, env=env) for args in commands)
    listing = [line.split() for line in ok(runs).splitlines()]
    assert listing[0][:5] == ['run', 'when', 'status', 'calls', 'duration']
    row = next(cols for cols in listing if cols[0] == run_id)  # the whole id, even at 80 columns
    assert 'completed' in row and '2' in row

    out = ok(show)
    assert f'run {run_id}' in out and 'completed' in out
    # The script with line numbers.
    for number, line in enumerate(GOOD_SCRIPT.splitlines(), start=1):
        assert re.search(rf'^\s*{number} {re.escape(line)}\s*$', out, re.MULTILINE), line
    # The calls: sequence, callee, script line, status, source.
    assert re.search(r'^\s*1\s+list_files\s+1\s+ok\s+\S+\s+live', out, re.MULTILINE), out
    assert re.search(r'^\s*2\s+summarizer\s+2\s+ok\s+\S+\s+live', out, re.MULTILINE), out
    value = json.loads(out[out.index('value:') + len('value:'):])
    assert value['files'] == ['bad.py', 'good.py']
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
    original = result.stdout[result.stdout.index('{'):result.stdout.index(f'run {run_id}')]
    out = ok(cli(['replay', run_id], cwd=work, env=env))
    assert '(replayed)' in out and '(answered)' not in out
    value = out[out.index('{'):out.index('replayed run')]
    assert json.loads(value) == json.loads(original)
    assert f'replayed run {run_id} · 2 call(s)' in out

    out = ok(cli(['fork', run_id, '--at', '2', '--result', '"a different summary"'], cwd=work, env=env))
    assert '✓ #2 summarizer' in out and '(answered)' in out
    value = json.loads(out[out.index('{'):out.index('forked run')])
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
        seen, self.pending = self.pending[: match.end()], self.pending[match.end():]
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


def test_chat_turns_and_ctrl_c_cancels_the_running_workflow(
    tmp_path: Path, terminal: list[Terminal], offline_env: Callable[..., dict[str, str]]
) -> None:
    (tmp_path / 'slowmod.py').write_text(SLOW_MODULE)
    env = offline_env(HARNESS_STORE=str(tmp_path / 'runs.db'))
    term = Terminal([HARNESS, 'chat', '--agents', 'slowmod:drafter'], tmp_path, env)
    terminal.append(term)

    banner = term.expect(PROMPT, 60)
    assert banner.lstrip().startswith('Offline demo mode:')

    # Turn 1: best of three drafts through the replaced (fast for haiku) drafter.
    term.send(b'write a haiku about tests\r')
    turn = term.expect(PROMPT, 60)
    assert re.search(r'orchestrator> draft: write a haiku about tests', turn, re.IGNORECASE), turn
    first_ids = re.findall(r'run ([0-9a-f]{12,}) · 7 call\(s\)', turn)
    assert len(first_ids) == 1, turn

    # Turn 2: the drafter sleeps; Ctrl-C once the first call has started cancels the workflow.
    term.send(b'write a poem about tests\r')
    term.expect(r'→ #1 drafter', 30)
    term.send(b'\x03')
    cancelled = term.expect(r'cancelled\s*\r?\n' + PROMPT, 30)
    assert 'orchestrator>' not in cancelled and 'Traceback' not in cancelled
    assert term.proc.poll() is None  # still running, back at the prompt
    # The sleeping sub-agent was cancelled (it says so in a file as it stops), not left running.
    assert 'poem' in (tmp_path / 'drafter-cancelled.txt').read_text()

    # Turn 3: a question, answered in the same session; its footer lists this turn's run only.
    term.send(b'what is a unit test?\r')
    turn = term.expect(PROMPT, 60)
    assert '→ #1 drafter' in turn and '→ #4 summarizer' in turn
    assert 'orchestrator> what is a unit test?' in turn
    footer = re.findall(r'run ([0-9a-f, ]+) · (\d+) call\(s\)', turn)
    assert len(footer) == 1 and re.fullmatch(r'[0-9a-f]{12,}', footer[0][0]) and footer[0][1] == '4', footer
    assert footer[0][0] != first_ids[0]

    # Ctrl-D leaves.
    term.send(b'\x04')
    assert term.proc.wait(timeout=30) == 0


def test_chat_passes_the_history_to_the_next_turn(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat loop itself (in this process) with a model that reads its history."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    import harness._cli
    from harness._models import ModelChoice

    histories: list[list[str]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        if returned:  # answer with the script's value
            return ModelResponse(parts=[TextPart(str(returned[-1].content))])
        prompts = [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts
                   if isinstance(p, UserPromptPart)]
        answers = [p.content for m in messages if isinstance(m, ModelResponse) for p in m.parts
                   if isinstance(p, TextPart)]
        histories.append([str(p) for p in prompts])
        code = 'await list_files(pattern="*.txt")\n'  # one call, so the turn's footer names its run
        if not answers:
            code += 'lines = ["green checks in a row", "the suite hums", "merge before rain"]\n" / ".join(lines)'
        else:  # a follow-up: work on the previous answer, found in the history
            code += f'previous = {json.dumps(answers[-1])}\nprevious.split(" / ")[0].upper()'
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])

    monkeypatch.setattr(
        harness._cli, 'choose_model', lambda *a, **k: ModelChoice(FunctionModel(respond), 'scripted', demo=False)
    )
    out = ok(cli(['chat'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')},
                 input='write a haiku about tests\nnow only its first line, loudly\n'))
    assert 'model: scripted' in out
    assert 'orchestrator> green checks in a row / the suite hums / merge before rain' in out
    assert 'orchestrator> GREEN CHECKS IN A ROW' in out
    assert histories == [
        ['write a haiku about tests'],
        ['write a haiku about tests', 'now only its first line, loudly'],
    ]
    assert [calls for _, calls in RUN_LINE.findall(out)] == ['1', '1']
