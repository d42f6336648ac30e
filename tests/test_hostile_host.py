"""Hostile input against the host's own code, which the sandbox's limits do not cover.

The script's parse and type check, the workspace tools' matching, the conversion of callee results and the
wrapping of callee exceptions all run on the host. Each attack here froze the host, blocked its event loop or
escaped as a raw exception on main; each must end in a clear error the model can act on, with the Harness as
usable for the next script as before.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import pytest

from harness import Harness, WorkflowTypeError

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
