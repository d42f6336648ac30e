"""Hostile input against the host's own code, which the sandbox's limits do not cover.

The script's parse and type check, the workspace tools' matching, the conversion of callee results and the
wrapping of callee exceptions all run on the host. Each attack here froze the host, blocked its event loop or
escaped as a raw exception on main; each must end in a clear error the model can act on, with the Harness as
usable for the next script as before.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import Harness, WorkflowRuntimeError, WorkflowTypeError
from tools.workspace import Workspace, WorkspaceError, compile_glob

# -- the script's parse on the host ---------------------------------------------------------------------------------

BOMBS = {
    'a 30,000-term + chain': 'x = ' + '+'.join(['1'] * 30_000) + '\nx',
    '100,000 unary minuses': 'x = ' + '-' * 100_000 + '1\nx',
    '1,000 parentheses': 'x = ' + '(' * 1_000 + '1' + ')' * 1_000 + '\nx',
    'a list nested 150 deep': 'x = ' + '[' * 150 + ']' * 150 + '\nx',
    'abs() nested 30 deep': 'x = ' + 'abs(' * 30 + '1' + ')' * 30 + '\nx',
    'functions nested 20 deep': ''.join(' ' * (4 * i) + f'def f{i}():\n' for i in range(20)) + ' ' * 80 + 'return 1\n',
    'a 300 KB script': 'x = 1\n' * 50_000,
}
"""Each raised a raw RecursionError, MemoryError or SyntaxError from check/analyze/run on main, or held a checking
worker past its timeout (the nested list, abs and functions: ty takes seconds, then the worker is killed)."""


@pytest.mark.parametrize('code', BOMBS.values(), ids=BOMBS.keys())
def test_a_script_past_the_parse_limits_is_a_clear_type_error_from_check_analyze_and_run(
    make_harness: Callable[..., Harness], code: str
) -> None:
    h = make_harness()
    report = h.check(code)
    assert not report.ok
    assert [d.rule for d in report.diagnostics] in (['too-complex'], ['invalid-syntax']), report.errors
    assert 'Nothing ran' in report.errors
    for attempt in (h.analyze, h.run_sync):
        with pytest.raises(WorkflowTypeError, match='Nothing ran') as raised:
            attempt(code)
        assert 'Traceback' not in raised.value.message
    assert h.run_sync('x = 1\nx').value == 1


def test_a_script_within_the_limits_still_checks_and_runs(make_harness: Callable[..., Harness]) -> None:
    h = make_harness()
    code = 'x = ' + '+'.join(['1'] * 150) + '\ny = ' + '[' * 30 + ']' * 30 + '\nz = ' + 'abs(' * 10 + '-1' + ')' * 10
    assert h.check(code + '\nx').ok
    assert h.run_sync(code + '\nx').value == 150


# -- the checker's workers ------------------------------------------------------------------------------------------


async def test_a_checking_worker_killed_with_sigkill_is_replaced_before_the_next_script(
    make_harness: Callable[..., Harness],
) -> None:
    """Two checks at once leave two idle checking sessions; with both workers killed, the next check met the
    second dead one on its retry and raised a raw MontyCrashedError on main."""
    h = make_harness()

    @h.tool
    def ping(*, i: int) -> int:
        return i

    assert all(r.ok for r in await asyncio.gather(h.acheck('await ping(i=1)'), h.acheck('await ping(i=2)')))
    pids = [s.session.worker_pid for idle in h._checker._idle.values() for s in idle]
    assert len(pids) == 2
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for code in ('y = await ping(i=3)\ny', 'z: int = "x"'):
        report = await h.acheck(code)
        assert report.ok == (code != 'z: int = "x"'), report.errors
    assert (await h.run('await ping(i=4)')).value == 4


# -- the workspace tools' matching ----------------------------------------------------------------------------------

FREEZE = r"""
import sys, time
from pathlib import Path
from tools.workspace import Workspace
root = Path(sys.argv[1])
(root / ('a' * 60)).write_text('x' * 60 + '\n')
(root / 'sub').mkdir()
(root / 'sub' / ('b' * 60 + '.txt')).write_text('y\n')
ws = Workspace(root)
started = time.perf_counter()
print(ws.list_files('*' * 40 + 'x'), ws.list_files('**/' * 30 + '*' * 30 + 'q'), ws.search_text('(x+x+)+y'),
      ws.search_text('z', glob='*' * 40 + 'x'), ws.list_files('*a*a*a*a*a*a*a*a*a*a*a'), flush=True)
print(round(time.perf_counter() - started, 3))
"""


def test_no_glob_or_search_pattern_backtracks(tmp_path: Path) -> None:
    """On main each of these ran Python's `re` into catastrophic backtracking with the GIL held: the host froze at
    100% CPU and no timeout in the process could stop it. Run in a subprocess, so main's freeze is a failed test."""
    done = subprocess.run(
        [sys.executable, '-c', FREEZE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found, took = done.stdout.splitlines()
    assert found == f"[] [] [] [] ['{'a' * 60}']"
    assert float(took) < 2.0


def test_a_search_pattern_re2_cannot_run_is_refused_saying_why(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    for pattern in (r'(a)\1', r'(?<=a)b', r'x(?!y)'):
        with pytest.raises(WorkspaceError, match='no lookarounds or backreferences'):
            ws.search_text(pattern)
    (tmp_path / 'f.txt').write_text('Def main\n')
    assert [m['line'] for m in ws.search_text(r'(?i)^def\s+\w+$')] == [1]


def _oracle(pattern: str) -> re.Pattern[str]:
    """The regular expression main translated a glob to (its semantics, which the new matcher keeps), but for a
    negated class, which matched a `/` there (`[!a]` is `[^/a]` here, as in pathlib)."""
    out: list[str] = []
    segments = pattern.split('/')
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == '**':
            out.append('.*' if last else '(?:[^/]+/)*')
            continue
        i = 0
        while i < len(segment):
            char = segment[i]
            if char == '*':
                out.append('[^/]*')
            elif char == '?':
                out.append('[^/]')
            elif char == '[' and (end := segment.find(']', i + (2 if segment[i + 1 : i + 2] in '!]' else 1))) > 0:
                body = segment[i + 1 : end]
                negate = body.startswith('!')
                escaped = ''.join('\\' + c if c in '\\[]^&~|' else c for c in (body[1:] if negate else body))
                out.append('[' + ('^/' if negate else '') + escaped + ']')
                i = end
            else:
                out.append(re.escape(char))
            i += 1
        if not last:
            out.append('/')
    return re.compile(''.join(out), re.DOTALL)


def test_the_glob_matcher_agrees_with_the_globs_it_replaced() -> None:
    """Seeded random globs and paths over a small alphabet: the linear matcher says what main's regex said."""
    rng = random.Random(25)
    pieces = ['a', 'b', '.', '*', '?', '[ab]', '[!a]', '[a-b]', '**', '/']
    letters = 'ab.'
    agreed = 0
    for _ in range(4_000):
        pattern = (
            '/'.join(s for s in ''.join(rng.choice(pieces) for _ in range(rng.randint(1, 7))).split('/') if s) or '*'
        )
        if any(s != '**' and '**' in s for s in pattern.split('/')):
            pattern = pattern.replace('**', '*')
        path = '/'.join(
            ''.join(rng.choice(letters) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 4))
        )
        expected = _oracle(pattern).fullmatch(path) is not None
        assert bool(compile_glob(pattern).fullmatch(path)) == expected, (pattern, path)
        agreed += expected
    assert agreed > 200  # the sample holds matches, not only misses


# -- whatever a callee raises ---------------------------------------------------------------------------------------


class UnreadableMessage(Exception):
    def __str__(self) -> str:
        raise ValueError('SECRET in __str__')


class Unprintable(Exception):
    def __str__(self) -> str:
        raise SystemExit('SECRET in __str__')

    def __repr__(self) -> str:
        raise SystemExit('SECRET in __repr__')


RAISED: dict[str, Callable[[], BaseException]] = {
    'SystemExit': lambda: SystemExit('SECRET exit'),  # argparse's way out
    'KeyboardInterrupt': lambda: KeyboardInterrupt('SECRET interrupt'),
    'CancelledError': lambda: asyncio.CancelledError('SECRET cancel'),
    'GeneratorExit': lambda: GeneratorExit('SECRET generator'),
    'UnreadableMessage': UnreadableMessage,
    'Unprintable': Unprintable,
}


def _raising(h: Harness, how: str, make: Callable[[], BaseException], expose: bool) -> None:
    if how == 'sync tool':

        @h.tool(name='boom', expose_errors=expose)
        def boom_sync() -> int:
            raise make()

    elif how == 'tool awaiting a thread':

        def in_thread() -> int:
            raise make()

        @h.tool(name='boom', expose_errors=expose)
        async def boom_thread() -> int:
            return await asyncio.to_thread(in_thread)

    else:

        @h.subagent(name='boom', expose_errors=expose)
        async def boom_agent() -> int:
            raise make()


@pytest.mark.parametrize('expose', [False, True], ids=['hidden', 'exposed'])
@pytest.mark.parametrize('how', ['sync tool', 'tool awaiting a thread', 'sub-agent'])
@pytest.mark.parametrize('kind', RAISED)
def test_whatever_a_callee_raises_is_its_failure_and_the_harness_runs_on(
    make_harness: Callable[..., Harness], kind: str, how: str, expose: bool
) -> None:
    """On main 9 of these escaped raw (SystemExit and KeyboardInterrupt broke the Harness for every later run, some
    carried the secret without expose_errors): the script gets an exception it can catch, named by its type."""
    h = make_harness()
    _raising(h, how, RAISED[kind], expose)

    @h.tool
    def ok() -> int:
        return 7

    result = h.run_sync('try:\n    await boom()\nexcept Exception as e:\n    x = str(e)\nx')
    readable = expose and kind not in ('UnreadableMessage', 'Unprintable')
    expected = f'boom failed with {kind}'
    if readable:
        expected += f': {RAISED[kind]()}'
    elif expose:
        expected += ' (its message could not be read)'
    assert result.value == expected
    assert ('SECRET' in result.value) == readable
    (call,) = result.calls
    assert (call.status, call.error) == ('error', expected)
    assert h.run_sync('await ok()').value == 7  # the same Harness, the next run


async def test_the_hosts_own_cancellation_of_a_run_is_still_a_cancellation(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness()
    started = asyncio.Event()

    @h.tool
    async def slow() -> int:
        started.set()
        await asyncio.Event().wait()
        return 1

    run = asyncio.ensure_future(h.run('await slow()'))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


# -- the join helpers' internals ------------------------------------------------------------------------------------

INTERNAL_CALLS = [
    'await __race__(kind="x", need="a", members=[])',
    'await __race__(kind="x", need=1, members=5)',
    'await __race__()',
    'await __race__(kind="x", need=10**30, members=[])',
    'await __race__(kind="x", need=1, members=[1, 2])',
    'await __race_won__(race=99, index=0)',
    'await __race_won__(race="a", index=0)',
    'r = await __race__(kind="x", need=1, members=[])  # type: ignore\nawait __race_won__(race=r, index=5)',
    'await __deadline__(seconds="x", members=[])',
    'await __deadline__(seconds=1, members=[])',
    'await __deadline__(seconds=float("nan"), members=["x"])',
    '__progress__(kind="x", text=5)',
    'await __join__("first_of", "a", [])',
    'await __join__("first_of", 1, [1])',
    'await __member__(1, 2, ping(i=1))',
]
"""9 of these raised a raw ValueError, TypeError, KeyError, IndexError or RuntimeError from the host on main."""


@pytest.mark.parametrize('code', INTERNAL_CALLS)
def test_the_join_helpers_internals_are_refused_by_name_and_never_raise_raw(
    make_harness: Callable[..., Harness], code: str
) -> None:
    code += '  # type: ignore'
    name = re.search(r'__\w+__', code.splitlines()[-1])[0]  # type: ignore[index]
    for type_check in (True, False):
        h = make_harness(type_check=type_check)

        @h.tool
        async def ping(*, i: int) -> int:
            return i

        if type_check:
            with pytest.raises(WorkflowTypeError, match=f'`{name}` is internal to the script helpers'):
                h.run_sync(code)
        else:
            with pytest.raises(WorkflowRuntimeError) as raised:
                h.run_sync(code)
            assert 'The script raised an error' in raised.value.message
        assert h.run_sync('await first_of(ping(i=1), ping(i=2))').value in (1, 2)


def test_a_join_given_what_it_cannot_use_is_a_type_error_in_the_script(make_harness: Callable[..., Harness]) -> None:
    h = make_harness()

    @h.tool
    async def ping(*, i: int) -> int:
        return i

    for code, message in [
        ('await within("x", ping(i=1))  # type: ignore', 'within(): seconds must be a number, not str'),
        ('await within(float("nan"), ping(i=1))', 'within(): seconds must be a number, not NaN'),
        ('await quorum(-1, ping(i=1))', 'quorum(): the number of calls needed must be a whole number'),
    ]:
        caught = h.run_sync(f'try:\n    {code}\nexcept TypeError as e:\n    x = str(e)\nx').value
        assert caught.startswith(message)
    assert h.run_sync('await within(1e308, ping(i=3))').value == 3
