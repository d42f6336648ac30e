"""The command line under bad input: every expected failure is one line naming the fix and a non-zero exit,
never a traceback. A matrix of inputs across every subcommand, run in this process (typer's runner).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness._cli._app import app

STORE_COMMANDS = [
    ['runs'],
    ['show', 'RUN'],
    ['trace', 'RUN'],
    ['replay', 'RUN'],
    ['resume', 'RUN'],
    ['fork', 'RUN', '--at', '1', '--result', '1'],
    ['diff', 'RUN'],
    ['pending'],
    ['approve', 'RUN'],
    ['reject', 'RUN', '1', '--reason', 'no'],
    ['rm', 'RUN'],
    ['cancel', 'RUN'],
]
CATALOG_COMMANDS = [['exec', 'ok.py'], ['check', 'ok.py'], ['agents'], ['audit']]
SESSION_COMMANDS = [['ask', 'hi']]


def bad_stores(tmp: Path) -> dict[str, str]:
    (tmp / 'a-directory').mkdir()
    (tmp / 'not-sqlite.db').write_text('this is not a database\n' * 100)
    corrupt = tmp / 'corrupt.db'
    with sqlite3.connect(corrupt) as db:
        db.execute('CREATE TABLE x (y)')
    data = corrupt.read_bytes()
    corrupt.write_bytes(data[:100] + b'\xff' * 200 + data[300:])
    (tmp / 'a-file').write_text('x')
    foreign = tmp / 'foreign.db'
    with sqlite3.connect(foreign) as db:
        db.execute('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)')
        db.execute("INSERT INTO meta VALUES ('schema_version', '999')")
    return {
        'directory': str(tmp / 'a-directory'),
        'not-sqlite': str(tmp / 'not-sqlite.db'),
        'corrupt': str(corrupt),
        'parent-is-a-file': str(tmp / 'a-file' / 'runs.db'),
        'missing': str(tmp / 'nowhere' / 'runs.db'),
        'newer-schema': str(foreign),
    }


AGENT_MODULES = {
    'raises': 'raise RuntimeError("boom at import")\n',
    'syntax': 'def (:\n',
    'exits': 'import sys\nsys.exit(3)\n',
    'wrongtype': 'x = 42\n',
    'badname': 'from harness import Harness\nh = Harness()\n',
}


def agent_specs() -> dict[str, str]:
    return {
        'raises': 'raises_mod:x',
        'syntax': 'syntax_mod:x',
        'exits': 'exits_mod:x',
        'wrongtype': 'wrongtype_mod:x',
        'missing-attr': 'badname_mod:nope',
        'missing-module': 'no_such_module:x',
        'no-colon': 'raises_mod',
        'empty': ':',
    }


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in AGENT_MODULES.items():
        (tmp_path / f'{name}_mod.py').write_text(text)
    (tmp_path / 'ok.py').write_text('1 + 1\n')
    (tmp_path / 'binary.py').write_bytes(b'\x00\x01\x02\xff\xfe')
    (tmp_path / 'latin1.py').write_bytes('x = "caf\xe9"\n'.encode('latin-1'))
    (tmp_path / 'a-dir.py').mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for key in ('HARNESS_STORE', 'HARNESS_MODEL', 'HARNESS_BASE_URL', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY'):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv('HARNESS_TRACING', 'off')
    return tmp_path


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    stores = bad_stores(tmp)
    for store_name, path in stores.items():
        for command in STORE_COMMANDS + CATALOG_COMMANDS + SESSION_COMMANDS:
            never_opens = command[0] in ('agents', 'audit', 'check')
            if never_opens or (command[0] in ('exec', 'ask') and store_name == 'missing'):
                continue  # exec and ask make a new store
            found.append((f'{command[0]}-store-{store_name}', [*command, '--store', path]))
    for spec_name, spec in agent_specs().items():
        for command in [*CATALOG_COMMANDS, ['replay', 'RUN'], ['ask', 'hi']]:
            found.append((f'{command[0]}-agents-{spec_name}', [*command, '--agents', spec]))
        for command in CATALOG_COMMANDS:
            found.append((f'{command[0]}-tools-{spec_name}', [*command, '--tools', spec]))
    for script in ('binary.py', 'latin1.py', 'missing.py', 'a-dir.py'):
        for command in ('exec', 'check'):
            found.append((f'{command}-script-{script}', [command, script]))
    good = str(tmp / 'good.db')
    found += [
        ('ask-empty-prompt', ['ask', '']),
        ('ask-unknown-model', ['ask', 'hi', '--model', 'nonsense']),
        ('ask-provider-without-key', ['ask', 'hi', '--model', 'openai:gpt-4.1-mini']),
        ('store-empty-string', ['runs', '--store', '']),
        ('exec-bad-input', ['exec', 'ok.py', '--input', 'not-a-pair', '--store', good]),
        ('exec-bad-input-name', ['exec', 'ok.py', '--input', '1x=2', '--store', good]),
        ('show-missing-run', ['show', 'nope', '--store', good]),
        ('show-bad-call', ['show', 'RUN', '--call', '99', '--store', good]),
        ('fork-bad-json', ['fork', 'RUN', '--at', '1', '--result', '{bad', '--store', good]),
        ('fork-bad-position', ['fork', 'RUN', '--at', '99', '--result', '1', '--store', good]),
        ('resume-bad-answer', ['resume', 'RUN', '--answer', 'x=1', '--store', good]),
        ('replay-bad-from', ['replay', 'RUN', '--from', '99', '--store', good]),
        ('approve-not-waiting', ['approve', 'RUN', '1', '--store', good]),
        ('reject-no-reason', ['reject', 'RUN', '1', '--store', good]),
        ('runs-bad-status', ['runs', '--status', 'sleeping', '--store', good]),
        ('runs-bad-limit', ['runs', '-n', 'many', '--store', good]),
        ('unknown-command', ['frobnicate']),
        ('trace-missing-run', ['trace', 'nope', '--store', good]),
        ('rm-missing-run', ['rm', 'nope', '--store', good]),
        ('cancel-missing-run', ['cancel', 'nope', '--store', good]),
        ('diff-missing-run', ['diff', 'nope', '--store', good]),
    ]
    return found


def run_id_in(store: str) -> str:
    from harness import Harness

    with Harness(store=store, tracing=False) as h:
        return h.run_sync('1 + 1').run_id


def test_every_bad_input_is_one_line_and_a_non_zero_exit(work: Path) -> None:
    good = str(work / 'good.db')
    real = run_id_in(good)
    runner = CliRunner()
    matrix = cases(work)
    assert len(matrix) >= 100
    problems = []
    for name, args in matrix:
        args = [
            real if a == 'RUN' and '--store' in args and args[args.index('--store') + 1] == good else a for a in args
        ]
        result = runner.invoke(app, args, catch_exceptions=True)
        errors = [line for line in result.stderr.splitlines() if line.strip()] if result.stderr else []
        uncaught = result.exception is not None and not isinstance(result.exception, SystemExit)
        if result.exit_code == 2 and 'Usage:' in result.output and not uncaught:
            continue  # a usage error, worded by typer as every typer CLI words it
        if uncaught or result.exit_code == 0 or 'Traceback' in result.output or len(errors) > 1:
            problems.append((name, result.exit_code, type(result.exception).__name__, result.output[-300:]))
        elif errors and not errors[0].startswith(('error:', 'Usage:', 'unverified:')):
            problems.append((name, result.exit_code, 'not an error line', errors[0]))
    assert problems == [], '\n'.join(map(str, problems))


def test_a_read_only_store_can_be_listed_and_shown(work: Path) -> None:
    good = work / 'ro.db'
    real = run_id_in(str(good))
    for path in (good, *good.parent.glob('ro.db-*')):
        path.chmod(0o444)
    work.chmod(0o555)  # no new -wal/-shm files either
    try:
        runner = CliRunner()
        listed = runner.invoke(app, ['runs', '--store', str(good)])
        assert listed.exit_code == 0 and real[:7] in listed.output, listed.output
        shown = runner.invoke(app, ['show', real, '--store', str(good)])
        assert shown.exit_code == 0 and 'Traceback' not in shown.output, shown.output
    finally:
        work.chmod(0o755)
