"""Runs stay true to their catalog and their types: catalog manifests, return-type checks, exact budgets
after resume, deterministic failure, and one owner per run.

Each test is one of the ways issue #10 found to get a wrong answer without an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from harness import (
    BudgetExceeded,
    CatalogChanged,
    Harness,
    RunBusy,
    WorkflowError,
    WorkflowRuntimeError,
    WorkflowTypeError,
)
from harness._store import RunStore

ROOT = Path(__file__).resolve().parents[1]


def interrupted(h: Harness, script: str, gate: asyncio.Event) -> str:
    """Run `script` until a callee sets `gate`, then cancel it (as Ctrl-C does); the run's id."""

    async def go() -> str:
        task = asyncio.ensure_future(h.run(script))
        await gate.wait()
        await asyncio.sleep(0)  # let the pause that started the call journal it
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (run,) = [r for r in h.runs() if r.status == 'interrupted']
        return run.run_id

    return asyncio.run(go())


def two_step(store: Path, *, second_returns: type, entered: asyncio.Event | None = None) -> Harness:
    h = Harness(store=str(store))

    @h.tool
    async def first() -> int:
        return 1

    if second_returns is int:

        @h.tool
        async def second() -> int:
            if entered is not None:
                entered.set()
                await asyncio.Event().wait()  # hangs until cancelled
            return 2

    else:

        @h.tool
        async def second() -> str:  # type: ignore[no-redef]
            return 'two'

    return h


SCRIPT = 'a = await first()\nb = await second()\na + b'


def test_resume_under_a_changed_return_type_is_refused(tmp_path: Path) -> None:
    entered = asyncio.Event()
    with two_step(tmp_path / 'runs.db', second_returns=int, entered=entered) as h:
        run_id = interrupted(h, SCRIPT, entered)
    with two_step(tmp_path / 'runs.db', second_returns=str) as h:
        with pytest.raises(CatalogChanged) as info:
            h.resume_sync(run_id)
        assert [str(c) for c in info.value.changes] == ['second: signature changed']
        assert 'recheck=True' in info.value.message and 'harness diff RUN' in info.value.message
        assert [str(c) for c in h.diff(run_id)] == ['second: signature changed']
        with pytest.raises(WorkflowTypeError, match='Operator `\\+` is not supported'):
            h.resume_sync(run_id, recheck=True)  # the stored script no longer type-checks: nothing runs
        assert [c.callee for c in h.store.calls(run_id)] == ['first', 'second']  # type: ignore[union-attr]


def test_a_refused_resume_leaves_the_run_as_it_was(tmp_path: Path) -> None:
    """Refused for a wrong answer or for its catalog, a resume writes nothing: the run is still interrupted
    and nobody holds it, so another process can resume it at once."""
    entered = asyncio.Event()

    def state(h: Harness) -> tuple[str, Any]:
        assert h.store is not None
        run = h.store.get_run(run_id)
        assert run is not None
        return run.status, h.store.holder(run_id)[0]

    with two_step(tmp_path / 'runs.db', second_returns=int, entered=entered) as h:
        run_id = interrupted(h, SCRIPT, entered)
        with pytest.raises(WorkflowError, match='The answer given for call #2 is refused'):
            h.resume_sync(run_id, answers={2: 'two'})
        assert state(h) == ('interrupted', None)
    with two_step(tmp_path / 'runs.db', second_returns=str) as h:
        with pytest.raises(CatalogChanged):
            h.resume_sync(run_id)
        assert state(h) == ('interrupted', None)
        with pytest.raises(WorkflowTypeError):
            h.resume_sync(run_id, recheck=True)  # a recheck that fails is a refusal too: the run is not failed
        assert state(h) == ('interrupted', None)


def test_replay_after_a_return_type_changed_and_a_removed_callee_are_refused(tmp_path: Path) -> None:
    with two_step(tmp_path / 'runs.db', second_returns=int) as h:
        run_id = h.run_sync(SCRIPT).run_id
        assert h.replay_sync(run_id).value == 3
    with two_step(tmp_path / 'runs.db', second_returns=str) as h, pytest.raises(CatalogChanged, match='second: sig'):
        h.replay_sync(run_id)
    with Harness(store=str(tmp_path / 'runs.db')) as h:

        @h.tool
        async def first() -> int:
            return 1

        with pytest.raises(CatalogChanged, match='second: removed'):
            h.replay_sync(run_id)
        with pytest.raises(WorkflowRuntimeError, match="name 'second' is not defined"):
            h.replay_sync(run_id, accept_changes=True)  # accepted (no type check), but the script calls what is gone


def test_an_added_callee_does_not_block_older_runs(tmp_path: Path) -> None:
    """A purely additive change is rechecked on its own: replay and resume of a run made before it go on."""
    entered = asyncio.Event()
    with two_step(tmp_path / 'runs.db', second_returns=int, entered=entered) as h:
        done = h.run_sync('await first()').run_id
        run_id = interrupted(h, SCRIPT, entered)
    with two_step(tmp_path / 'runs.db', second_returns=int) as h:

        @h.tool
        async def third() -> int:
            return 3

        assert [str(c) for c in h.diff(run_id)] == ['third: added']  # still reported
        assert h.replay_sync(done).value == 1
        assert h.resume_sync(run_id).value == 3


def test_accepted_changes_run_without_the_type_check(tmp_path: Path) -> None:
    """`accept_changes=True` is the person's word: the stored script runs even though it no longer type-checks,
    and what the new catalog breaks fails at run time (here `1 + 'two'`), after the call ran and was checked."""
    entered = asyncio.Event()
    with two_step(tmp_path / 'runs.db', second_returns=int, entered=entered) as h:
        run_id = interrupted(h, SCRIPT, entered)
    with two_step(tmp_path / 'runs.db', second_returns=str) as h:
        with pytest.raises(WorkflowRuntimeError, match='unsupported operand'):
            h.resume_sync(run_id, accept_changes=True)
        assert h.store is not None
        assert [(c.callee, c.status, c.result) for c in h.store.calls(run_id)][1] == ('second', 'ok', 'two')


def test_a_version_change_is_refused_unless_accepted(tmp_path: Path) -> None:
    def build(version: str) -> Harness:
        h = Harness(store=str(tmp_path / 'runs.db'))

        @h.tool(version=version)
        async def price(*, sku: str) -> int:
            return 10

        return h

    with build('1') as h:
        run_id = h.run_sync('await price(sku="a")').run_id
    with build('2') as h:
        with pytest.raises(CatalogChanged, match=r'price: version changed \(1 -> 2\)'):
            h.replay_sync(run_id)
        with pytest.raises(CatalogChanged):
            h.replay_sync(run_id, recheck=True)  # a type check cannot vouch for a change of behaviour
        assert h.replay_sync(run_id, accept_changes=True).value == 10


def test_return_values_are_checked_against_the_declared_type(make_harness: Any) -> None:
    h = make_harness()

    @h.subagent
    async def wrong(*, n: int) -> int:
        return 'not an int'  # type: ignore[return-value]

    result = h.run_sync('try:\n    v = await wrong(n=1)\nexcept TypeError as e:\n    v = str(e)\nv')
    assert result.value.startswith('wrong returned str, but its stub promises int')
    (call,) = result.calls
    assert call.status == 'error' and call.error == result.value
    spans = h.store.spans(result.run_id)
    (span,) = [s for s in spans if s['name'] == 'call wrong']
    assert span['status'] == 'error' and 'promises int' in (span['error'] or '')


class Mood(BaseModel):
    label: Literal['happy', 'sad']


def test_fork_answers_are_checked_against_the_callee_return_type(make_harness: Any) -> None:
    h = make_harness()
    ran: list[str] = []

    @h.tool
    def mood() -> Mood:
        ran.append('mood')
        return Mood(label='happy')

    run_id = h.run_sync('m = await mood()\nm["label"]').run_id
    with pytest.raises(
        WorkflowError,
        match=r'answer given for call #1 is refused: mood returned dict, but its '
        r"stub promises Mood .*'happy' or 'sad'",
    ):
        h.fork_sync(run_id, at=1, result={'label': 'ecstatic'})
    assert h.fork_sync(run_id, at=1, result={'label': 'sad'}).value == 'sad'
    assert ran == ['mood']


def test_a_script_that_never_passed_the_check_is_not_resumed(make_harness: Any) -> None:
    h = make_harness()
    ran: list[int] = []

    @h.tool
    def ping(*, i: int) -> int:
        ran.append(i)
        return i

    with pytest.raises(WorkflowTypeError) as info:
        h.run_sync('await ping(i="one")')
    with pytest.raises(WorkflowTypeError, match='nothing ran'):
        h.resume_sync(info.value.run_id)
    assert ran == []


# -- budgets after resume --------------------------------------------------------------------------


def test_a_call_in_flight_at_an_interruption_is_counted_once(tmp_path: Path) -> None:
    entered = asyncio.Event()
    hang = {'on': True}

    def build() -> tuple[Harness, list[int]]:
        h = Harness(store=str(tmp_path / 'runs.db'), call_caps={'ping': 3})
        pings: list[int] = []

        @h.tool
        async def ping(*, i: int) -> int:
            pings.append(i)
            if i == 3 and hang['on']:
                entered.set()
                await asyncio.Event().wait()
            return i

        return h, pings

    h, _ = build()
    run_id = interrupted(h, 'a = await ping(i=1)\nb = await ping(i=2)\nc = await ping(i=3)\na + b + c', entered)
    h.close()
    hang['on'] = False
    h, pings = build()
    with h:
        result = h.resume_sync(run_id)
        assert result.value == 6 and pings == [3]  # #3 ran again; the cap counted it once
        calls = h.store.calls(run_id)  # type: ignore[union-attr]
        assert [(c.seq, c.status, c.attempt) for c in calls] == [(1, 'ok', 1), (2, 'ok', 1), (3, 'ok', 2)]
        spans = h.store.spans(run_id)  # type: ignore[union-attr]
        budgets = [s['attributes']['harness.budget_used'] for s in spans if s['name'].startswith('run_workflow')]
        assert budgets[-1] == '0/50 sub-agent calls, 3/1000 tool calls'
        assert h.replay_sync(run_id).value == 6


def test_the_orchestrator_budget_continues_on_resume(tmp_path: Path) -> None:
    entered = asyncio.Event()
    hang = {'on': True}

    def build() -> Harness:
        h = Harness(store=str(tmp_path / 'runs.db'), max_agent_calls=3)

        @h.subagent
        async def step(*, n: int) -> int:
            if n == 4 and hang['on']:
                entered.set()
                await asyncio.Event().wait()
            return n

        return h

    h = build()
    scope = h.new_scope(orchestrator_run_id='orch-1')
    assert h.run_sync('[await step(n=1), await step(n=2)]', scope=scope).value == [1, 2]

    async def second() -> str:
        task = asyncio.ensure_future(h.run('x = await step(n=4)\nx', scope=scope))
        await entered.wait()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return next(r.run_id for r in h.runs() if r.status == 'interrupted')

    run_id = asyncio.run(second())
    h.close()
    hang['on'] = False
    with build() as h:
        # 2 calls by the orchestrator run's first script + step(n=4) again = 3: the budget of 3, all spent.
        assert h.resume_sync(run_id).value == 4
        spans = h.store.spans(run_id)  # type: ignore[union-attr]
        budgets = [s['attributes']['harness.budget_used'] for s in spans if s['name'].startswith('run_workflow')]
        assert budgets[-1].startswith('3/3 sub-agent calls')


# -- deterministic failure -------------------------------------------------------------------------


def journal_of(h: Harness, run_id: str) -> list[tuple[Any, ...]]:
    return [
        (c.seq, c.callee, json.dumps(c.arguments), c.status, json.dumps(c.result), c.source)
        for c in h.store.calls(run_id)
    ]  # type: ignore[union-attr]


def test_a_gather_past_the_budget_fails_the_same_way_every_time(make_harness: Any) -> None:
    h = make_harness(max_agent_calls=3)
    ran: list[int] = []

    @h.subagent
    async def work(*, i: int) -> int:
        ran.append(i)
        return i

    journals = set()
    for _ in range(20):
        with pytest.raises(BudgetExceeded, match=r'3/3 sub-agent calls') as info:
            h.run_sync('import asyncio\nawait asyncio.gather(*[work(i=i) for i in range(8)])')
        journals.add(tuple(journal_of(h, info.value.run_id)))
    assert ran == [0, 1, 2] * 20  # the budget's worth in call order ran to the end, then the gather failed
    (journal,) = journals
    assert [(row[3], row[4]) for row in journal] == [('ok', '0'), ('ok', '1'), ('ok', '2')]


def test_a_failure_inside_a_gather_cancels_the_rest_the_same_way_every_time(make_harness: Any) -> None:
    h = make_harness()
    finished: list[str] = []

    @h.subagent
    async def fail_now(*, i: int) -> int:
        raise ValueError('no')

    @h.subagent
    async def slow(*, i: int) -> int:
        await asyncio.Event().wait()
        return i

    @h.tool
    def blocking(*, i: int) -> int:  # a sync tool: it runs in a thread and cannot be cancelled
        finished.append('blocking')
        return i * 10

    script = 'import asyncio\nawait asyncio.gather(slow(i=1), blocking(i=2), fail_now(i=3), slow(i=4))'
    journals = set()
    for _ in range(20):
        with pytest.raises(WorkflowRuntimeError, match='fail_now failed with ValueError') as info:
            h.run_sync(script)
        journals.add(tuple(journal_of(h, info.value.run_id)))
    (journal,) = journals
    assert [(row[1], row[3], row[4]) for row in journal] == [
        ('slow', 'cancelled', 'null'),
        ('blocking', 'ok', '20'),
        ('fail_now', 'error', 'null'),
        ('slow', 'cancelled', 'null'),
    ]
    assert finished == ['blocking'] * 20  # awaited, and its result journaled


def test_a_call_the_script_never_awaited_does_not_outlive_it(make_harness: Any) -> None:
    h = make_harness()

    @h.subagent
    async def forever(*, i: int) -> int:
        await asyncio.Event().wait()
        return i

    @h.subagent
    async def quick(*, i: int) -> int:
        return i

    result = h.run_sync('pending = forever(i=1)\nawait quick(i=2)')
    assert result.value == 2
    statuses = {c.callee: c.status for c in h.store.calls(result.run_id)}  # type: ignore[union-attr]
    assert statuses == {'forever': 'cancelled', 'quick': 'ok'}  # completed, with nothing left running


# -- one owner per run -----------------------------------------------------------------------------

RESUMER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from harness import Harness, WorkflowError

    store, run_id, gate = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    h = Harness(store=store)

    @h.tool
    async def first() -> int:
        return 1

    @h.tool
    async def second() -> int:
        print('entered', flush=True)
        while not gate.exists():  # released by the test, across the process boundary
            await asyncio.sleep(0.01)
        return 2

    try:
        print(json.dumps({'value': h.resume_sync(run_id).value}), flush=True)
    except WorkflowError as exc:
        print(json.dumps({'error': type(exc).__name__, 'message': exc.message}), flush=True)
    h.close()
    """
)


def test_two_processes_resuming_one_run(tmp_path: Path) -> None:
    store, gate = tmp_path / 'runs.db', tmp_path / 'gate'
    entered = asyncio.Event()
    with two_step(store, second_returns=int, entered=entered) as h:
        run_id = interrupted(h, SCRIPT, entered)
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}

    def resumer() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, '-c', RESUMER, str(store), run_id, str(gate)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    winner = resumer()
    assert winner.stdout is not None and winner.stdout.readline().strip() == 'entered', winner.stderr
    loser = resumer()
    out, err = loser.communicate(timeout=120)
    refused = json.loads(out.strip().splitlines()[-1])
    assert refused['error'] == 'RunBusy', err
    assert f'run {run_id} is active in another process (pid {winner.pid} on host' in refused['message']
    gate.touch()
    out, err = winner.communicate(timeout=120)
    assert json.loads(out.strip().splitlines()[-1]) == {'value': 3}, err
    with RunStore(store) as db:
        run = db.get_run(run_id)
        assert run is not None and (run.status, run.value) == ('completed', 3)
        assert db.holder(run_id) == (None, None)  # released with the final status


def test_a_lease_whose_owner_died_is_taken_over(tmp_path: Path) -> None:
    store = tmp_path / 'runs.db'
    entered = asyncio.Event()
    with two_step(store, second_returns=int, entered=entered) as h:
        run_id = interrupted(h, SCRIPT, entered)
    from harness._records import Owner

    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
    ghost = Owner(os.uname().nodename, int(dead.stdout), 'gone')
    with RunStore(store) as db:
        db.claim(run_id, ghost)  # a process that held it and died without releasing it
        assert db.holder(run_id)[0] == ghost
    with two_step(store, second_returns=int) as h:
        assert h.resume_sync(run_id).value == 3


def test_a_stale_owner_cannot_write_the_outcome(tmp_path: Path) -> None:
    from harness._records import Owner

    with RunStore(tmp_path / 'runs.db') as db:
        from harness import RunRow

        db.create_run(RunRow('r'))
        first, second = Owner('h', 1, 'a'), Owner('h', 2, 'b')
        db.claim('r', first, ttl=0.0)  # its lease is already over
        db.claim('r', second)
        with pytest.raises(RunBusy, match='was taken over by another process'):
            db.update_run('r', status='completed', value=1, expect_owner=first)
        db.update_run('r', status='completed', value=2, expect_owner=second)
        run = db.get_run('r')
        assert run is not None and run.value == 2


# -- the command line ------------------------------------------------------------------------------


def test_cli_diff_and_replay_under_a_changed_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from harness._cli._app import app

    for name, returns, value in (('cat_v1', 'int', '2'), ('cat_v2', 'str', "'two'")):
        (tmp_path / f'{name}.py').write_text(
            'from harness import Harness\nh = Harness()\n\n@h.tool\nasync def first() -> int:\n    return 1\n\n'
            f'@h.tool\nasync def second() -> {returns}:\n    return {value}\n'
        )
    (tmp_path / 'flow.py').write_text('a = await first()\nb = await second()\na + b\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    store = str(tmp_path / 'runs.db')
    runner = CliRunner()
    ran = runner.invoke(app, ['exec', 'flow.py', '--json', '--store', store, '--agents', 'cat_v1:h'])
    run_id = json.loads(ran.output.strip().splitlines()[-1])['run_id']
    same = runner.invoke(app, ['diff', run_id, '--store', store, '--agents', 'cat_v1:h'])
    assert same.exit_code == 0 and 'no changes' in same.output
    changed = runner.invoke(app, ['diff', run_id, '--store', store, '--agents', 'cat_v2:h'])
    assert changed.exit_code == 1 and '- second: signature changed' in changed.output
    refused = runner.invoke(app, ['replay', run_id, '--store', store, '--agents', 'cat_v2:h'])
    assert refused.exit_code == 1 and 'The catalog changed since run' in refused.output
    assert 'Traceback' not in refused.output
    rechecked = runner.invoke(app, ['replay', run_id, '--recheck', '--store', store, '--agents', 'cat_v2:h'])
    assert rechecked.exit_code == 1 and 'failed the type check against the stubs' in rechecked.output
