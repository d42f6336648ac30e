"""Every command of the `harness` CLI under bad input, round two: numbers out of range, files that are not
scripts, run ids that are not ids, stores that are no store, environment variables and `[tool.harness]`
values that make no sense, `--agents` specs that are no module, and scripts built to exhaust the parser.

For each case: no traceback, no exception out of the command, an exit code that says what happened (non-zero
for a bad input; 0 where the input is odd but fine), and a failure said in one line (`error: ...`) or as
typer's usage error. Most cases run in this process through typer's runner; a few through a real process.
An error nobody foresaw is still one line (the CLI's last-resort handler), and `HARNESS_DEBUG=1` adds its
traceback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness._cli._app import app

HUGE = str(10**30)
DEEP_JSON = '[' * 100_000 + ']' * 100_000
LONG_INT = '1' * 5_000  # past Python's 4,300-digit limit for int from a string
NOT_UTF8 = b'\xff\xfe'.decode('utf-8', 'surrogateescape')  # as Python sees a non-UTF-8 argv or environ

MODULES = {
    'approval_mod': (
        'from harness import Harness\n'
        'gated = Harness(store=":memory:")\n\n'
        '@gated.tool(side_effect=True, approval=True)\n'
        'async def send(*, to: str) -> str:\n'
        '    """Send (a person approves)."""\n'
        '    return "sent"\n'
    ),
    'deep_mod': 'raise RecursionError("maximum recursion depth exceeded")\n',
    'baseexc_mod': 'class Odd(BaseException):\n    pass\n\nraise Odd("odd")\n',
    'memory_mod': 'raise MemoryError()\n',
    'strbomb_mod': (
        'class Bad(Exception):\n    def __str__(self):\n        raise RuntimeError("no str")\n\nraise Bad()\n'
    ),
    'things_mod': 'number = 7\nnames = ["a", 1]\nmixed = [print, 3]\nasync def ok(*, x: int) -> int:\n    return x\n',
    'plainfn_mod': 'def tool(*, x: int) -> int:\n    return x\n',
}
SCRIPTS: dict[str, str | bytes] = {
    'ok.py': '1 + 1\n',
    'plus_bomb.py': 'x = 1' + ' + 1' * 30_000 + '\n',
    'minus_bomb.py': 'x = ' + '-' * 100_000 + '1\n',
    'paren_bomb.py': 'x = ' + '(' * 5_000 + '1' + ')' * 5_000 + '\n',
    'list_bomb.py': 'x = ' + '[' * 5_000 + ']' * 5_000 + '\n',
    'nul.py': b'x = 1\x00\n',
    'bom_only.py': b'\xef\xbb\xbf',
    'binary.py': b'\x00\x01\x02\xff\xfe',
    'latin1.py': 'x = "caf\xe9"\n'.encode('latin-1'),
    'empty.py': '',
    'huge_line.py': 'x = "' + 'a' * 2_000_000 + '"\n',
    'many_defs.py': ''.join(f'def f{i}():\n    return {i}\n' for i in range(3_000)),
    'deep_if.py': ''.join(' ' * i + 'if True:\n' for i in range(100)) + ' ' * 100 + 'x = 1\n',
}
DATASETS: dict[str, str | bytes] = {
    'deep.json': DEEP_JSON,
    'bad.yaml': 'cases: [\n',
    'latin1.yaml': 'cases:\n- name: caf\xe9\n'.encode('latin-1'),
    'binary.yaml': b'\x00\xff\xfe',
    'not-a-dataset.yaml': 'hello: world\n',
    'empty.yaml': '',
    'list.yaml': '- 1\n- 2\n',
    'ok.yaml': 'cases:\n- name: one\n  inputs: hello\n',
}


@dataclass
class Case:
    name: str
    args: list[str]
    env: dict[str, str | None] = field(default_factory=dict)
    exit: str = 'fail'
    """'fail': non-zero; 'ok': zero; 'any': either (odd but acceptable input)."""
    stdin: str | bytes | None = None
    cwd: str | None = None


@dataclass
class World:
    root: Path
    good: str
    completed: str
    failed: str
    waiting: str
    readonly: str | None
    readonly_runs: tuple[str, str]
    readonly_file: str | None = None
    """A store whose file is read-only in a folder that is not (its -wal and -shm can be made)."""


def make_store(path: Path) -> tuple[str, str, str]:
    from harness import Harness

    with Harness(store=str(path), tracing=False) as h:

        @h.tool(side_effect=True, approval=True)
        async def send(*, to: str) -> str:
            return 'sent'

        completed = h.run_sync('1 + 1').run_id
        try:
            h.run_sync('raise ValueError("no")')
        except Exception as exc:
            failed = getattr(exc, 'run_id', '')
        waiting = h.run_sync('await send(to="a")').run_id
    return completed, failed, waiting


def immutable(*paths: Path, on: bool) -> bool:
    """`chattr +i`: read-only even for root (the tests run as root, who ignores file modes)."""
    flag = '+i' if on else '-i'
    done = subprocess.run(['chattr', flag, *map(str, paths)], capture_output=True)
    return done.returncode == 0


@pytest.fixture(scope='module')
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp('matrix')
    for name, text in MODULES.items():
        (root / f'{name}.py').write_text(text)
    for folder, files in (('scripts', SCRIPTS), ('data', DATASETS)):
        (root / folder).mkdir()
        for name, content in files.items():
            target = root / folder / name
            target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    (root / 'scripts' / 'a-dir.py').mkdir()
    (root / 'a-dir').mkdir()
    (root / 'a-file').write_text('x')
    (root / 'not-sqlite.db').write_text('this is not a database\n' * 100)
    (root / 'empty.db').write_bytes(b'')
    (root / 'latin1.txt').write_bytes('caf\xe9'.encode('latin-1'))
    corrupt = root / 'corrupt.db'
    completed, failed, waiting = make_store(corrupt)
    data = corrupt.read_bytes()
    corrupt.write_bytes(data[:100] + b'\xff' * 4000 + data[4100:])
    foreign = root / 'foreign.db'
    with sqlite3.connect(foreign) as db:
        db.execute('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)')
        db.execute("INSERT INTO meta VALUES ('schema_version', '999')")
    good = root / 'good.db'
    completed, failed, waiting = make_store(good)
    # A read-only store: immutable file in an immutable folder (no -wal or -shm can be made beside it).
    ro_dir = root / 'ro'
    ro_dir.mkdir()
    ro = ro_dir / 'runs.db'
    ro_runs = make_store(ro)
    for extra in ro_dir.glob('runs.db-*'):
        extra.unlink()
    readonly = str(ro) if immutable(ro, ro_dir, on=True) else None
    ro_file = root / 'ro-file' / 'runs.db'
    ro_file.parent.mkdir()
    shutil.copy(ro, ro_file)
    readonly_file = str(ro_file) if immutable(ro_file, on=True) else None
    try:
        yield World(root, str(good), completed, failed, waiting, readonly, (ro_runs[0], ro_runs[2]), readonly_file)
    finally:
        if readonly:
            immutable(ro, ro_dir, on=False)
        if readonly_file:
            immutable(ro_file, on=False)


def stores(w: World) -> dict[str, str]:
    found = {
        'directory': str(w.root / 'a-dir'),
        'not-sqlite': str(w.root / 'not-sqlite.db'),
        'corrupt': str(w.root / 'corrupt.db'),
        'parent-is-a-file': str(w.root / 'a-file' / 'runs.db'),
        'newer-schema': str(w.root / 'foreign.db'),
        'not-utf8-path': str(w.root / f'{NOT_UTF8}.db'),
        'too-long-path': str(w.root / ('x' * 300) / 'runs.db'),
        'dev-null': '/dev/null',
    }
    if w.readonly:
        found['read-only'] = w.readonly
    if w.readonly_file:
        found['read-only-file'] = w.readonly_file
    return found


def cases(w: World) -> list[Case]:
    good = ['--store', w.good]
    run, waiting = w.completed, w.waiting
    found: list[Case] = []
    add = found.append

    # -- numbers out of range, on every option that takes one -----------------------------------
    for value in (HUGE, '-1', '-' + HUGE, 'x', '1.5', ''):
        add(Case(f'runs-limit-{value[:6]}', ['runs', '--limit', value, *good], exit='fail'))
        add(Case(f'evals-limit-{value[:6]}', ['evals', '--limit', value, *good], exit='fail'))
        add(Case(f'show-call-{value[:6]}', ['show', run, '--call', value, *good]))
        add(Case(f'fork-at-{value[:6]}', ['fork', run, '--at', value, '--result', '1', *good]))
        add(Case(f'replay-from-{value[:6]}', ['replay', run, '--from', value, *good]))
        add(Case(f'approve-seq-{value[:6]}', ['approve', waiting, value, *good]))
        add(Case(f'reject-seq-{value[:6]}', ['reject', waiting, value, '--reason', 'no', *good]))
        add(Case(f'ui-port-{value[:6]}', ['ui', '--port', value, *good]))
        add(Case(f'temporal-dev-port-{value[:6]}', ['temporal-dev', '--port', value, '--headless']))
        add(Case(f'temporal-dev-ui-port-{value[:6]}', ['temporal-dev', '--ui-port', value]))
        add(Case(f'eval-concurrency-{value[:6]}', ['eval', 'data/ok.yaml', '-j', value, *good]))
        add(Case(f'resume-answer-seq-{value[:6]}', ['resume', waiting, '--answer', f'{value}=1', *good]))
    for value in ('99999', '65536'):
        add(Case(f'ui-port-{value}', ['ui', '--port', value, *good]))
        add(Case(f'temporal-dev-port-{value}', ['temporal-dev', '--port', value, '--headless']))
    add(Case('temporal-dev-port-max-ui', ['temporal-dev', '--port', '65000']))
    for value in ('nan', 'inf', '-inf', '-1', HUGE, 'x'):
        add(Case(f'cancel-wait-{value[:6]}', ['cancel', run, '--wait', value, *good]))
    add(Case('runs-limit-0', ['runs', '--limit', '0', *good], exit='any'))
    add(Case('show-call-0', ['show', run, '--call', '0', *good]))

    # -- JSON that is too deep or a number too long -----------------------------------------------
    for what, text in (('deep', DEEP_JSON), ('long-int', LONG_INT), ('nan', 'NaN'), ('inf', '1e999')):
        exit_ = 'any' if what in ('nan', 'inf') else 'fail'
        add(Case(f'exec-input-{what}', ['exec', 'scripts/ok.py', '--input', f'x={text}', *good], exit=exit_))
        add(Case(f'fork-result-{what}', ['fork', run, '--at', '1', '--result', text, *good], exit='any'))
        add(Case(f'resume-answer-{what}', ['resume', waiting, '--answer', f'1={text}', *good], exit='any'))

    # -- scripts that are no script, or built to exhaust the parser ------------------------------
    for script in [*SCRIPTS, 'a-dir.py', 'missing.py']:
        fine = script in ('ok.py', 'many_defs.py', 'deep_if.py', 'huge_line.py')
        for command in ('exec', 'check'):
            exit_ = 'ok' if script == 'ok.py' else 'any' if fine else 'fail'
            add(Case(f'{command}-script-{script}', [command, f'scripts/{script}', *good], exit=exit_))
    add(Case('check-graph-plus-bomb', ['check', 'scripts/plus_bomb.py', '--graph']))
    add(Case('check-mermaid-minus-bomb', ['check', 'scripts/minus_bomb.py', '--mermaid']))
    add(Case('check-estimate-paren-bomb', ['check', 'scripts/paren_bomb.py', '--estimate']))
    add(Case('exec-stdin-binary', ['exec', '-', *good], stdin=b'\xff\xfe\x00'))
    add(Case('check-stdin-binary', ['check', '-'], stdin=b'\xff\xfe\x00'))
    add(Case('check-stdin-bomb', ['check', '-'], stdin='x = ' + '-' * 100_000 + '1\n'))
    add(Case('exec-stdin-empty', ['exec', '-', *good], stdin=''))
    add(Case('exec-stdin-ok', ['exec', '-', *good], stdin='\ufeff1 + 1\n', exit='ok'))

    # -- run ids that are not ids -----------------------------------------------------------------
    for what, rid in (
        ('empty', ''),
        ('like-wildcard', '%'),
        ('underscore', '_'),
        ('long', 'a' * 10_000),
        ('not-utf8', NOT_UTF8),
        ('nul', 'ab\x00cd'),
        ('quote', "'; DROP TABLE runs; --"),
    ):
        for command in (
            ['show', rid],
            ['trace', rid],
            ['rm', rid],
            ['cancel', rid],
            ['replay', rid],
            ['resume', rid],
            ['fork', rid, '--at', '1', '--result', '1'],
            ['diff', rid],
            ['pending', rid],
            ['approve', rid],
            ['reject', rid, '--reason', 'no'],
        ):
            exit_ = 'any' if command == ['pending', ''] else 'fail'  # no run named: every waiting run
            add(Case(f'{command[0]}-run-{what}', [*command, *good], exit=exit_))
    add(Case('eval-baseline-missing', ['eval', 'data/ok.yaml', '--baseline', 'nope', *good]))
    add(Case('eval-reuse-missing', ['eval', 'data/ok.yaml', '--reuse-calls', NOT_UTF8, *good]))
    add(Case('chat-missing-conversation', ['chat', 'nope', *good]))
    add(Case('chat-continue-none', ['chat', '--continue', *good]))
    add(Case('chat-not-utf8-conversation', ['chat', NOT_UTF8, *good]))

    # -- stores that are no store, for commands that read one and commands that write one ---------
    for store_name, path in stores(w).items():
        writes = not store_name.startswith('read-only')
        ro_run, ro_waiting = w.readonly_runs
        rid = run if writes else ro_run
        wid = waiting if writes else ro_waiting
        reading: list[list[str]] = [['runs'], ['show', rid], ['trace', rid], ['pending'], ['evals']]
        writing: list[list[str]] = [
            ['exec', 'scripts/ok.py'],
            ['approve', wid],
            ['reject', wid, '--reason', 'no'],
            ['rm', rid],
            ['resume', wid],
            ['replay', rid],
            ['ask', 'hi'],
        ]
        for command in reading:  # a read-only store: read if the store can be opened so, else one line
            add(Case(f'{command[0]}-store-{store_name}', [*command, '--store', path], exit='fail' if writes else 'any'))
        for command in writing:  # `ask hi` writes nothing but its turn: 'not stored' is a note
            exit_ = 'any' if command[0] == 'ask' and store_name == 'read-only-file' else 'fail'
            add(Case(f'{command[0]}-store-{store_name}', [*command, '--store', path], exit=exit_))

    # -- environment variables --------------------------------------------------------------------
    for command in (['runs', *good], ['exec', 'scripts/ok.py', *good], ['show', run, *good]):
        add(Case(f'{command[0]}-secret-not-utf8', command, env={'HARNESS_SECRET': NOT_UTF8}))
        add(Case(f'{command[0]}-home-key-in-a-file', command, env=key_in_a_file(w), exit='fail'))
        add(Case(f'{command[0]}-tracing-garbage', command, env={'HARNESS_TRACING': 'garbage'}, exit='any'))
    for command in (['runs'], ['exec', 'scripts/ok.py'], ['pending']):
        add(Case(f'{command[0]}-env-store-dir', command, env={'HARNESS_STORE': str(w.root / 'a-dir')}))
        add(Case(f'{command[0]}-env-store-not-utf8', command, env={'HARNESS_STORE': str(w.root / f'{NOT_UTF8}')}))
    for command in (['ask', 'hi', *good], ['exec', 'scripts/ok.py', *good], ['ui', '--port', HUGE, *good]):
        add(Case(f'{command[0]}-model-not-utf8', command, env={'HARNESS_MODEL': NOT_UTF8}))
        add(Case(f'{command[0]}-model-nonsense', command, env={'HARNESS_MODEL': 'no-such:model'}, exit='any'))
    add(Case('ask-base-url-garbage', ['ask', 'hi', *good], env={'HARNESS_BASE_URL': 'not a url at all'}))
    add(Case('ask-base-url-not-utf8', ['ask', 'hi', *good], env={'HARNESS_BASE_URL': NOT_UTF8}))
    add(Case('exec-temporal-garbage', ['exec', 'scripts/ok.py', *good], env={'HARNESS_TEMPORAL': 'no port here'}))
    add(Case('exec-temporal-not-utf8', ['exec', 'scripts/ok.py', *good], env={'HARNESS_TEMPORAL': NOT_UTF8}))

    # -- [tool.harness] values that make no sense --------------------------------------------------
    for what in PYPROJECTS:
        folder = w.root / 'projects' / what
        for command in (['runs'], ['agents'], ['exec', str(w.root / 'scripts' / 'ok.py')]):
            exit_ = 'any' if command == ['agents'] and what == 'store-a-directory' else 'fail'  # agents opens no store
            add(Case(f'{command[0]}-pyproject-{what}', command, cwd=str(folder), exit=exit_))

    # -- --agents / --tools specs that are no module ----------------------------------------------
    specs = {
        'recursion': 'deep_mod:x',
        'base-exception': 'baseexc_mod:x',
        'memory': 'memory_mod:x',
        'str-raises': 'strbomb_mod:x',
        'a-number': 'things_mod:number',
        'a-list-of-junk': 'things_mod:names',
        'builtin': 'things_mod:mixed',
        'stdlib-function': 'os:getcwd',
        'dotted-missing': 'things_mod:ok.nope',
        'relative': '..things_mod:ok',
        'nul': 'things\x00_mod:ok',
        'not-utf8': f'{NOT_UTF8}:x',
        'path': '/etc/passwd:x',
        'plain-function': 'plainfn_mod:tool',
    }
    for spec_name, spec in specs.items():
        add(Case(f'agents-agents-{spec_name}', ['agents', '--agents', spec]))
        add(Case(f'check-tools-{spec_name}', ['check', 'scripts/ok.py', '--tools', spec], exit='any'))
    add(Case('agents-root-missing', ['agents', '--root', str(w.root / 'nowhere')], exit='any'))
    add(Case('agents-root-a-file', ['agents', '--root', str(w.root / 'a-file')], exit='any'))

    # -- datasets and instructions that are no dataset --------------------------------------------
    for dataset in [*DATASETS, 'missing.yaml']:
        if dataset != 'ok.yaml':
            add(Case(f'eval-dataset-{dataset}', ['eval', f'data/{dataset}', *good]))
    for what, path in (('missing', 'nowhere.txt'), ('directory', 'a-dir'), ('latin1', 'latin1.txt')):
        add(Case(f'eval-instructions-{what}', ['eval', 'data/ok.yaml', '--instructions', path, *good]))
    return found


PYPROJECTS = {
    'not-toml': 'this is [ not toml',
    'not-utf8': b'[tool.harness]\nstore = "caf\xe9"\n',
    'section-a-string': '[tool]\nharness = "yes"\n',
    'tool-a-number': 'tool = 5\n',
    'agents-a-number': '[tool.harness]\nagents = 5\n',
    'agents-numbers': '[tool.harness]\nagents = [1, 2]\n',
    'tools-a-number': '[tool.harness]\ntools = 5\n',
    'store-a-number': '[tool.harness]\nstore = 5\n',
    'store-a-directory': '[tool.harness]\nstore = "."\n',
    'model-a-number': '[tool.harness]\nmodel = 5\n',
    'workspace-a-list': '[tool.harness]\nworkspace = ["a"]\n',
    'temporal-a-table': '[tool.harness]\ntemporal = { a = 1 }\n',
    'queues-a-list': '[tool.harness]\ntask_queues = ["a"]\n',
    'review-sometimes': '[tool.harness]\nreview = "sometimes"\n',
}


def key_in_a_file(w: World) -> dict[str, str | None]:
    """No HARNESS_SECRET, and a config folder that is a file: the key can be neither read nor made."""
    return {'HARNESS_SECRET': None, 'XDG_CONFIG_HOME': str(w.root / 'a-file')}


def write_projects(w: World) -> None:
    for what, text in PYPROJECTS.items():
        folder = w.root / 'projects' / what
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / 'pyproject.toml'
        target.write_bytes(text) if isinstance(text, bytes) else target.write_text(text)


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


def run_case(case: Case, w: World) -> Outcome:
    env: dict[str, str | None] = {
        'COLUMNS': '200',
        'HARNESS_TRACING': 'off',
        'HARNESS_STORE': None,
        'HARNESS_MODEL': None,
        'HARNESS_BASE_URL': None,
        'HARNESS_TEMPORAL': None,
        'OPENAI_API_KEY': None,
        'ANTHROPIC_API_KEY': None,
        **case.env,
    }
    path_before, modules_before = list(sys.path), set(sys.modules)
    try:
        with contextlib.chdir(case.cwd or w.root):
            result = CliRunner().invoke(app, case.args, env=env, input=case.stdin)
    except BaseException as exc:  # the runner catches only Exception: a BaseException left the command
        return Outcome(1, '', '', exc)
    finally:
        sys.path[:] = path_before
        for name in set(sys.modules) - modules_before:
            if name in MODULES or name.startswith('things'):
                del sys.modules[name]
    return Outcome(result.exit_code, result.stdout, result.stderr, result.exception)


def problem_of(case: Case, out: Outcome) -> str | None:
    text = out.stdout + out.stderr
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        return f'raised {type(out.exception).__name__}: {str(out.exception)[:200]}'
    if 'Traceback' in text:
        return 'printed a traceback'
    usage = out.exit_code == 2 and 'Usage:' in text
    if case.exit == 'fail' and out.exit_code == 0:
        return 'exit 0 for a bad input'
    if case.exit == 'ok' and out.exit_code != 0:
        return f'exit {out.exit_code}: {out.stderr.strip()[:300]}'
    if out.exit_code not in (0, 2) or (out.exit_code == 2 and not usage):
        errors = [line for line in out.stderr.splitlines() if line.strip()]
        report = case.args[0] == 'check' and not errors and out.stdout.strip()  # check's report is its output
        listed = errors and errors[0].startswith('error:') and errors[0].endswith(':')  # e.g. the type errors
        if not report and not listed and (len(errors) != 1 or not errors[0].startswith('error:')):
            return f'not one error line: {out.stderr[-400:]!r}'
    return None


@pytest.fixture
def no_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """`temporal-dev` ends in `os.execv`: a bad input must never get that far (it would replace pytest)."""

    def refuse(*args: Any) -> None:
        raise AssertionError(f'exec reached with {args!r}')

    monkeypatch.setattr(os, 'execv', refuse)


def test_at_least_150_bad_inputs_and_not_one_traceback(
    world: World, no_exec: None, sandbox_workers: Callable[[], set[int]]
) -> None:
    write_projects(world)
    matrix = cases(world)
    assert len(matrix) >= 150, len(matrix)
    assert len({c.name for c in matrix}) == len(matrix), 'case names are unique'
    before = sandbox_workers()
    problems = []
    for case in matrix:
        problem = problem_of(case, run_case(case, world))
        if problem:
            problems.append(f'{case.name}: {problem}')
    assert sandbox_workers() - before == set(), 'a command left a sandbox worker running'
    assert problems == [], f'{len(problems)} of {len(matrix)} cases:\n' + '\n'.join(problems)


def test_a_store_in_a_read_only_folder_is_one_line_for_every_command(world: World) -> None:
    if world.readonly is None:
        pytest.skip('chattr +i is not available here')
    ro_run, ro_waiting = world.readonly_runs
    for args in (['runs'], ['show', ro_run], ['approve', ro_waiting], ['exec', 'scripts/ok.py'], ['rm', ro_run]):
        out = run_case(Case(args[0], [*args, '--store', world.readonly]), world)
        assert out.exception is None or isinstance(out.exception, SystemExit), out
        assert out.exit_code == 1 and out.stderr.startswith('error:') and len(out.stderr.splitlines()) == 1, out


# -- the last-resort handler, in a real process ---------------------------------------------------


def harness_process(
    args: list[str], cwd: Path, offline_env: Callable[..., dict[str, str]], **env: str
) -> subprocess.CompletedProcess[bytes]:
    full = offline_env(HARNESS_TRACING='off', COLUMNS='200', **env)
    full['PYTHONPATH'] = os.pathsep.join([str(cwd), str(Path(__file__).resolve().parents[1])])
    return subprocess.run([sys.executable, '-m', 'harness', *args], cwd=cwd, env=full, capture_output=True, timeout=180)


@pytest.mark.parametrize(
    'args',
    [
        ['runs', '--limit', HUGE],
        ['ui', '--port', '99999'],
        ['check', 'scripts/plus_bomb.py'],
        ['exec', 'scripts/minus_bomb.py'],
    ],
    ids=['runs-limit-huge', 'ui-port-99999', 'check-plus-bomb', 'exec-minus-bomb'],
)
def test_in_a_real_process_a_bad_input_is_one_line(
    world: World, offline_env: Callable[..., dict[str, str]], args: list[str]
) -> None:
    done = harness_process([*args, '--store', world.good], world.root, offline_env)
    text = (done.stdout + done.stderr).decode(errors='replace')
    assert done.returncode != 0 and 'Traceback' not in text, text[-2000:]
    errors = [line for line in (done.stderr or done.stdout).decode().splitlines() if line.strip()]
    assert len(errors) == 1 or (done.returncode == 2 and 'Usage:' in text), text[-2000:]


def test_a_non_utf8_secret_in_a_real_process(world: World, offline_env: Callable[..., dict[str, str]]) -> None:
    env = offline_env(HARNESS_TRACING='off')
    envb = {k.encode(): v.encode() for k, v in env.items()}
    envb[b'HARNESS_SECRET'] = b'\xff\xfe'
    envb[b'PYTHONPATH'] = str(Path(__file__).resolve().parents[1]).encode()
    done = subprocess.run(
        [sys.executable, '-m', 'harness', 'runs', '--store', world.good],
        cwd=world.root,
        env=envb,  # ty: ignore[invalid-argument-type]
        capture_output=True,
        timeout=120,
    )
    text = (done.stdout + done.stderr).decode(errors='replace')
    assert done.returncode == 1 and 'Traceback' not in text, text
    assert text.startswith('error:') and 'HARNESS_SECRET' in text and len(text.strip().splitlines()) == 1, text


UNFORESEEN = """\
import sys

from harness._store import RunStore


def broken(self, *args, **kwargs):
    raise ZeroDivisionError('from deep inside')


RunStore.list_runs = broken  # an error no command expects
from harness._cli._app import app

app(prog_name='harness')
"""


def test_an_unforeseen_error_is_one_line_and_harness_debug_shows_its_traceback(
    world: World, offline_env: Callable[..., dict[str, str]]
) -> None:
    """An error no command expects (here the store's listing raising ZeroDivisionError) is one line naming
    HARNESS_DEBUG and exit 1; with HARNESS_DEBUG=1 its traceback follows."""
    runs: list[subprocess.CompletedProcess[bytes]] = []
    for extra in ({}, {'HARNESS_DEBUG': '1'}):
        env = offline_env(HARNESS_TRACING='off', **extra)
        env['PYTHONPATH'] = str(Path(__file__).resolve().parents[1])
        runs.append(
            subprocess.run(
                [sys.executable, '-c', UNFORESEEN, 'runs', '--store', world.good],
                cwd=world.root,
                env=env,
                capture_output=True,
                timeout=120,
            )
        )
    quiet, loud = (done.stderr.decode() for done in runs)
    assert [done.returncode for done in runs] == [1, 1], (quiet, loud)
    assert 'Traceback' not in quiet and len(quiet.strip().splitlines()) == 1, quiet
    assert quiet.startswith('error:') and 'ZeroDivisionError' in quiet and 'HARNESS_DEBUG=1' in quiet, quiet
    assert 'Traceback' in loud and 'from deep inside' in loud, loud
