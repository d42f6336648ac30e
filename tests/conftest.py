"""Shared fixtures: every Harness a test makes is closed after it, so no sandbox worker outlives its test;
`cli` runs the command line in this process (typer's runner); `spawn` starts the few real subprocesses
the suite keeps (crash, CLI entry point, pty chat, OTLP) and talks to them line by line, so tests wait
for what a process says, not for time to pass."""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import Harness

# The test helpers and the worker scripts the tests start (tests/helpers/) import as top-level modules, as they do
# in the worker processes, whose PYTHONPATH names that folder.
HELPERS = Path(__file__).parent / 'helpers'
sys.path.insert(0, str(HELPERS))


def pytest_configure(config: pytest.Config) -> None:
    """Let the Python subprocesses the crash, CLI and tracing tests start share a bytecode cache.

    With PYTHONDONTWRITEBYTECODE set (as on this project's machines), each one would otherwise
    compile the project (and anything not compiled at install) from source again.
    """
    if os.environ.pop('PYTHONDONTWRITEBYTECODE', None) is not None and not os.environ.get('PYTHONPYCACHEPREFIX'):
        os.environ['PYTHONPYCACHEPREFIX'] = os.path.join(tempfile.gettempdir(), 'harness-tests-pycache')
    # The stores the tests write are sealed with a key of their own (inherited by their subprocesses),
    # never with the key in the user's config directory.
    os.environ['HARNESS_SECRET'] = 'harness-tests'
    # ... and record the generations of their runs (`_store._freshness`) in a directory of their own, never in the
    # user's state directory.
    os.environ['XDG_STATE_HOME'] = tempfile.mkdtemp(prefix='harness-tests-state-')
    # pytest-xdist's workers (`make test` runs two) start with COLUMNS=80 and LINES=24, set by execnet: rich
    # would take them for the terminal's size for good when the CLI's consoles are made, and the width a test
    # asks for (`columns=`) would be lost.
    for size in ('COLUMNS', 'LINES'):
        os.environ.pop(size, None)
    # In this process logfire is configured first, as an app that uses it would: logfire's `capfire`
    # fixture configures it again, which replaces logfire's provider but could not replace the plain
    # OpenTelemetry provider the harness installs when it finds nothing to export (its `offline` mode,
    # tested in fresh processes).
    import logfire

    logfire.configure(send_to_logfire=False, console=False)
    logfire.instrument_pydantic_ai()
    # Typer's CliRunner builds the whole click command tree from the app's signatures at every invoke (about 20 ms
    # for this app, and the suite invokes it hundreds of times); the app does not change, so it is built once.
    import typer.testing

    typer.testing._get_command = functools.cache(typer.testing._get_command)  # type: ignore[attr-defined]


@pytest.fixture
def make_harness() -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(**kwargs: Any) -> Harness:
        kwargs.setdefault('store', ':memory:')
        h = Harness(**kwargs)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


class Child:
    """A subprocess whose stdout is read line by line (on a thread, so waits have deadlines) and whose
    stderr is kept for failure messages. Nothing here sleeps: every wait is for a line or for the exit."""

    def __init__(self, args: list[str], *, env: dict[str, str] | None = None, cwd: Path | str | None = None) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            args, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.lines.put(line.rstrip('\n'))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def describe(self) -> str:
        return (
            f'{self.args} (exit {self.proc.poll()})\nstdout:\n{"".join(self.stdout)[-3000:]}'
            f'\nstderr:\n{"".join(self.stderr)[-3000:]}'
        )

    def line(self, timeout: float = 90) -> str:
        """The next line of stdout; fails if the process ends first or says nothing for `timeout` s."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f'no output within {timeout}s from {self.describe()}')
        if line is None:
            self.lines.put(None)
            self.proc.wait()
            pytest.fail(f'the process ended early: {self.describe()}')
        return line

    def expect(self, prefix: str, timeout: float = 90) -> str:
        """Read lines until one starts with `prefix` (earlier lines are skipped); return it."""
        deadline = time.monotonic() + timeout
        while not (line := self.line(max(0.0, deadline - time.monotonic()))).startswith(prefix):
            pass
        return line

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text if text.endswith('\n') else text + '\n')
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL, and wait until the process is gone."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout: float = 120) -> int:
        """Close stdin, wait for the exit and for everything it printed; return the exit status."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f'did not exit within {timeout}s: {self.describe()}')
        for reader in self._readers:
            reader.join()
        return code

    def finish(self, timeout: float = 120) -> str:
        """Wait for a clean exit (exit status 0) and return everything it printed."""
        assert self.wait(timeout) == 0, self.describe()
        return ''.join(self.stdout)


@pytest.fixture(scope='session')
def spawn() -> Iterator[Callable[..., Child]]:
    """Start a `Child`; any still running at the end of the session is killed."""
    started: list[Child] = []

    def start(args: list[str], **kwargs: Any) -> Child:
        child = Child(args, **kwargs)
        started.append(child)
        return child

    yield start
    for child in started:
        child.kill()


# -- the command line, in this process -------------------------------------------------------------

STRIPPED_ENV = frozenset(
    {
        'OPENAI_API_KEY',
        'ANTHROPIC_API_KEY',
        'GEMINI_API_KEY',
        'GOOGLE_API_KEY',
        'GROQ_API_KEY',
        'MISTRAL_API_KEY',
        'HARNESS_MODEL',
        'HARNESS_BASE_URL',
        'HARNESS_API_KEY',
        'HARNESS_STORE',
        'HARNESS_TRACING',
        'LOGFIRE_TOKEN',
    }
)
"""Unset for every CLI run (so it runs offline, on the store the test names), as are `OTEL_*` variables."""
ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
OWN_PACKAGES = ('harness', 'subagents', 'tools')


@dataclass
class CliResult:
    args: list[str]
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None
    """What ended the command: a `SystemExit` for any exit it chose, else the exception it let escape."""
    traceback: str

    def describe(self) -> str:
        return (
            f'harness {self.args} exited {self.exit_code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}'
            f'{self.traceback}'
        )


def sandbox_workers() -> set[int]:
    """This process's sandbox worker processes (children running the `monty` binary)."""
    pids = set()
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / 'stat').read_text()
                cmd = (entry / 'cmdline').read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(')', 1)[1].split()[1]) == os.getpid() and b'monty' in cmd:
                pids.add(int(entry.name))
    return pids


def invoke_cli(
    args: list[str], *, cwd: Path | str, env: dict[str, str] | None = None, input: str | None = None, columns: int = 80
) -> CliResult:
    """`harness ARGS` in this process, in `cwd`, with no model key, tracing setup or store from the
    environment (pass `env`), on a terminal `columns` wide. Modules and `sys.path` entries the command
    added for `--agents` are dropped again, and no sandbox worker may outlive the command."""
    from typer.testing import CliRunner

    from harness._cli._app import app

    overrides: dict[str, str | None] = {k: None for k in os.environ if k in STRIPPED_ENV or k.startswith('OTEL_')}
    overrides.update({'COLUMNS': str(columns), **(env or {})})
    path_before, modules_before, workers_before = list(sys.path), set(sys.modules), sandbox_workers()
    try:
        with contextlib.chdir(cwd):
            result = CliRunner().invoke(app, args, env=overrides, input=input)
    finally:
        added = [p for p in sys.path if p not in path_before]
        sys.path[:] = path_before
        for name in set(sys.modules) - modules_before:
            file = getattr(sys.modules[name], '__file__', None) or ''
            if not name.startswith(OWN_PACKAGES) and any(file.startswith(p) for p in added):
                del sys.modules[name]
    leaked = sandbox_workers() - workers_before
    assert not leaked, f'harness {args} left sandbox workers running (a Harness was not closed): {leaked}'
    exc_info = result.exc_info
    escaped = exc_info is not None and exc_info[0] is not SystemExit
    return CliResult(
        args=args,
        exit_code=result.exit_code,
        stdout=ANSI.sub('', result.stdout),
        stderr=ANSI.sub('', result.stderr),
        exception=result.exception,
        traceback=''.join(traceback.format_exception(*exc_info)) if escaped else '',
    )


@pytest.fixture(scope='session', name='sandbox_workers')
def sandbox_workers_fixture() -> Callable[[], set[int]]:
    return sandbox_workers


@pytest.fixture(scope='session')
def cli() -> Callable[..., CliResult]:
    return invoke_cli


@pytest.fixture(scope='session')
def offline_env() -> Callable[..., dict[str, str]]:
    """The environment for a real `harness` process, as `cli` runs it: no key, tracing setup or store."""

    def make(**extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in STRIPPED_ENV and not k.startswith('OTEL_')}
        return {**env, 'PYTHONUNBUFFERED': '1', **extra}

    return make
