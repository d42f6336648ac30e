"""Terminal control sequences from a script, a callee, a model or the store never reach the terminal raw.

A script prints an OSC 52 clipboard write, a window title, a clear screen, a C1 CSI and a bidi override; a
callee fails with them in its message; a call waiting for approval has them in its arguments; a script holds
a raw ESC in its source; the model's answer has them. Every command that prints such text (`exec`, `show`,
`runs`, `pending`, `trace`, `check`, `audit`, `ask`) shows each as an escape (`\\x1b`), and rich markup in
such text (`[bold]`) is printed as written, not interpreted. Run through typer's runner on the raw output
(no ANSI stripping), and once in a real process on a forced colour terminal, where only the CLI's own
colour codes (SGR) may appear.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness._cli._app import app
from harness._cli._safe_text import safe, visible

HOSTILE = (
    '\x1b]52;c;cHduZWQ=\x07'  # OSC 52: write the clipboard
    '\x1b]0;pwned\x07'  # OSC 0: the window title
    '\x1b[2J\x1b[H'  # clear the screen, cursor home
    '\x9b31m'  # C1 CSI: an escape without ESC
    '\x9d0;t\x9c'  # C1 OSC ... ST
    '\x08\x7f\r\x00'
    '\u202e'  # right-to-left override
    '[bold]B[/bold][link=http://x]L[/link]'
)
HOSTILE_LITERAL = json.dumps(HOSTILE)  # as a Python string literal in a script (json escapes are Python's)
RAW = re.compile('[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]')
SGR = re.compile(r'\x1b\[[0-9;]*m')

MODULE = f'''\
from harness import Harness

hostile = Harness(store=":memory:")
H = {HOSTILE_LITERAL}


@hostile.tool
async def leak(*, text: str) -> str:
    """Fails with what it is given.{HOSTILE_LITERAL[1:-1]}"""
    raise ValueError(text)


@hostile.tool(side_effect=True, approval=True)
async def send(*, body: str) -> str:
    """Sends once a person approves."""
    return "sent"
'''

PRINTS = f"""\
H = {HOSTILE_LITERAL}
print(H)
log(H)
phase(H)
try:
    await leak(text=H)
except Exception as e:
    print("caught", str(e))
await send(body=H)
"""
FAILS = f'# a raw escape in the source: \x1b]0;src\x07 \x9b2J\nH = {HOSTILE_LITERAL}\nawait leak(text=H)\n'
BAD_TYPES = f'x: int = {HOSTILE_LITERAL}\nx\n'


def assert_clean(name: str, text: str, *, sgr_allowed: bool = False) -> None:
    shown = SGR.sub('', text) if sgr_allowed else text
    raw = sorted({repr(c) for c in RAW.findall(shown)})
    assert not raw, f'{name}: raw control characters {raw} reach the terminal:\n{text[-2000:]!r}'


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / 'hostile_mod.py').write_text(MODULE)
    (tmp_path / 'prints.py').write_text(PRINTS)
    (tmp_path / 'fails.py').write_text(FAILS)
    (tmp_path / 'bad_types.py').write_text(BAD_TYPES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for key in ('HARNESS_STORE', 'HARNESS_MODEL', 'HARNESS_BASE_URL', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY'):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv('HARNESS_TRACING', raising=False)
    sys.modules.pop('hostile_mod', None)
    return tmp_path


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, env={'COLUMNS': '200'})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout + result.stderr


def test_visible_shows_every_control_character_and_keeps_text() -> None:
    assert visible('a\tb\nc') == 'a\tb\nc'
    assert visible('\x1b]0;t\x07') == '\\x1b]0;t\\x07'
    assert visible('\x9b\r\u202e\x7f') == '\\x9b\\r\\u202e\\x7f'
    assert visible('café ünïcode 漢字 ▸ │') == 'café ünïcode 漢字 ▸ │'
    assert safe('[bold]x[/bold]\x1b') == '\\[bold]x\\[/bold]\\x1b'
    assert not RAW.search(visible(''.join(map(chr, range(0x0, 0x2100)))).replace('\n', '').replace('\t', ''))


def test_no_command_prints_a_control_sequence_from_a_script_a_callee_or_the_store(work: Path) -> None:
    store = str(work / 'runs.db')
    where = ['--store', store, '--agents', 'hostile_mod:hostile']
    code, out = invoke(['exec', 'prints.py', *where])
    assert_clean('exec (printed, live calls, waiting)', out)
    assert code == 0 and 'waits for approval' in out, out
    assert '\\x1b]52;c;' in out and '[bold]B[/bold]' in out, out  # shown, as written
    code, failed = invoke(['exec', 'fails.py', *where])
    assert_clean('exec (the error)', failed)
    assert code == 1 and '\\x1b]0;pwned' in failed, failed

    with __import__('harness._store', fromlist=['RunStore']).RunStore(store) as db:
        runs = {r.script: r.run_id for r in db.list_runs(10)}
    waiting, failing = runs[PRINTS], runs[FAILS]
    for args in (
        ['show', waiting],
        ['show', waiting, '--full'],
        ['show', waiting, '--call', '3'],
        ['show', failing],
        ['show', failing, '--call', '1'],
        ['runs'],
        ['runs', '--full'],
        ['pending'],
        ['trace', waiting],
        ['trace', failing, '--full'],
    ):
        code, out = invoke([*args, '--store', store])
        assert code == 0, (args, out)
        assert_clean(' '.join(args[:3]), out)
    _, shown = invoke(['show', waiting, '--store', store])
    assert '[bold]B[/bold]' in shown and '\\x1b]0;pwned' in shown, shown
    _, listed = invoke(['runs', '--full', '--store', store])
    assert '\\x1b]0;src' in listed, listed

    code, checked = invoke(['check', 'bad_types.py'])
    assert code == 1
    assert_clean('check', checked)
    code, audited = invoke(['audit', '--agents', 'hostile_mod:hostile'])
    assert code == 0
    assert_clean('audit', audited)


def test_the_orchestrators_answer_and_its_live_view_print_no_control_sequence(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart(f'# done {HOSTILE}\n\n`{HOSTILE}`\n\n```\n{HOSTILE}\n```')])
        code = f'H = {HOSTILE_LITERAL}\nprint(H)\ntry:\n    await leak(text=H)\nexcept Exception as e:\n    pass\nH'
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])

    async def stream(messages: Any, info: Any) -> Any:
        for part in respond(messages, info).parts:
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {0: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str())}

    model = FunctionModel(respond, stream_function=stream, model_name='scripted')
    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(model, 'scripted', demo=False)
    )
    code, out = invoke(['ask', 'go', '--store', str(work / 'runs.db'), '--agents', 'hostile_mod:hostile'])
    assert code == 0, out
    assert_clean('ask', out)
    assert 'done' in out and '\\x1b]0;pwned' in out, out


def test_a_real_colour_terminal_gets_only_the_clis_own_colour_codes(work: Path, offline_env: Any) -> None:
    """In a real process with colours forced on: the CLI styles its output (SGR), and nothing else gets through."""
    env = offline_env(FORCE_COLOR='1', TTY_COMPATIBLE='1', COLUMNS='200', PYTHONPATH=os.getcwd())
    env['PYTHONPATH'] = os.pathsep.join([str(work), str(Path(__file__).resolve().parents[1])])
    args = [sys.executable, '-m', 'harness', 'exec', 'prints.py', '--store', str(work / 'runs.db')]
    done = subprocess.run(
        [*args, '--agents', 'hostile_mod:hostile'], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert SGR.search(done.stdout), 'colours were not forced on: the test shows nothing'
    assert_clean('exec on a colour terminal', done.stdout + done.stderr, sgr_allowed=True)


def test_the_consoles_net_catches_what_a_renderable_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever builds the renderable (a Syntax of a stored script, a Markdown answer, a Text, a table cell, an eval
    report), the CLI's console shows its control characters; its own styles (SGR) and a live view's cursor
    moves (rich's control segments) still reach the terminal."""
    import io

    from rich.live import Live
    from rich.markdown import Markdown
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    from harness._cli._safe_text import SafeConsole

    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system='standard', width=200)
    table = Table('cell')
    table.add_row(Text(HOSTILE))
    for renderable in (Text(HOSTILE, style='red'), Syntax(f'x = "{HOSTILE}"', 'python'), Markdown(HOSTILE), table):
        console.print(renderable)
    with Live(Text('live'), console=console, auto_refresh=False) as live:
        live.update(Text(HOSTILE), refresh=True)
    text = out.getvalue()
    assert SGR.search(text), 'no colours: the test shows nothing'
    assert '\x1b[?25l' in text, "the live view's own control codes (hide the cursor) pass"
    shown = re.sub(r'\x1b\[\?25[lh]|\x1b\[[0-9]*[AK]|\x1b\[2K', '', SGR.sub('', text))  # rich's own
    assert not RAW.search(shown.replace('\r', '')), repr(shown)
    assert '\\x1b]52;c;' in text
