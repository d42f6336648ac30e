"""Waiting: approvals as durable pauses, and the join helpers `first_of`, `quorum` and `within`.

Real Monty, a real SQLite file, and real processes killed with SIGKILL where a crash is the point.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import CallContext, Harness, Pending, RunBusy, WorkflowError
from harness._store import RunStore

WORKER = Path(__file__).parent / 'helpers' / 'waiting_worker.py'
sys.path.insert(0, str(WORKER.parent))
from waiting_worker import build, build_progress  # noqa: E402


def start_worker(kind: str, store: Path, markers: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), kind, str(store), str(markers)],
        env={**os.environ, 'PYTHONUNBUFFERED': '1'},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line and line[0] == 'ready', proc.stderr.read() if proc.stderr else ''
    return proc, line[1]


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize('decision', ['approve', 'reject'])
def test_a_run_waits_survives_sigkill_and_a_new_process_decides(tmp_path: Path, decision: str) -> None:
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    proc, run_id = start_worker('approval', store, markers)
    kill(proc)  # killed while the run waits: it holds nothing but its rows in the store
    with build(str(store), markers, hang=False) as h:
        assert h.store is not None and h.store.get_run(run_id).status == 'waiting'  # type: ignore[union-attr]
        (waiting,) = h.pending()
        assert waiting == Pending(2, 'send_email', {'to': 'ann', 'body': 'hello ann'}, run_id)
        if decision == 'approve':
            assert h.approve(run_id, 2, by='dana') == [2]
        else:
            h.reject(run_id, 2, reason='ann unsubscribed', by='dana')
        result = h.resume_sync(run_id)
    assert result.status == 'completed'
    assert (markers / 'drafts').read_text() == 'ann\n'  # the draft before the pause did not run again
    if decision == 'approve':
        assert result.value == 'sent to ann'
        assert (markers / 'sent').read_text() == 'ann:hello ann\n'  # exactly once, with the value flowing on
    else:
        assert result.value == 'not sent: send_email was rejected by dana: ann unsubscribed'
        assert not (markers / 'sent').exists()
    with RunStore(store) as db:
        spans = db.spans(run_id)
    (approval,) = [s for s in spans if s['name'] == 'approval send_email']
    attributes = approval['attributes']
    assert attributes['harness.decided_by'] == 'dana'
    assert attributes['harness.decision'] == ('approved' if decision == 'approve' else 'rejected')
    assert attributes['harness.decided_at'] > 0


def test_gated_calls_in_one_gather_wait_together_and_are_decided_one_by_one(make_harness: Any) -> None:
    h = make_harness()
    sent: list[str] = []

    @h.tool(approval=True, side_effect=True)
    async def send(*, to: str) -> str:
        sent.append(to)
        return f'sent {to}'

    script = (
        'import asyncio\nr = await settle_all(send(to="a"), send(to="b"))\n[x.get("value", x.get("error")) for x in r]'
    )
    first = h.run_sync(script)
    assert first.status == 'waiting' and [p.seq for p in first.waiting] == [1, 2]
    h.approve(first.run_id, 1)
    second = h.resume_sync(first.run_id)
    assert second.status == 'waiting' and [p.seq for p in second.waiting] == [2] and sent == ['a']
    h.reject(first.run_id, 2, reason='no')
    done = h.resume_sync(first.run_id)
    assert done.value == ['sent a', 'send was rejected by ' + done.calls[1].error.split('rejected by ')[1]]
    assert sent == ['a']
    with pytest.raises(WorkflowError, match='is not waiting for approval'):
        h.approve(first.run_id, 2)


def held_approval_harness(make_harness: Any, path: Path) -> tuple[Harness, asyncio.Event, asyncio.Event, list[str]]:
    """A store-backed Harness whose gated `send` runs beside a `hold` that waits for the test: `(h, entered, go,
    sent)`; `sent` lists the emails that really went."""
    h = make_harness(store=str(path))
    entered, go, sent = asyncio.Event(), asyncio.Event(), []

    @h.tool(side_effect=True, approval=True)
    async def send(*, to: str) -> str:
        sent.append(to)
        return f'sent to {to}'

    @h.tool
    async def hold() -> int:
        if not entered.is_set():  # only the first call is held
            entered.set()
            await go.wait()
        return 1

    return h, entered, go, sent


async def test_a_decision_never_frees_the_hold_of_a_run_this_process_runs(make_harness: Any, tmp_path: Path) -> None:
    """In one process (the studio) a call can be decided while the same process still runs its run: the decision
    is refused as it would be from another process, and the run's hold is not given away (it ends `waiting`,
    not `running` for ever with the gated call never run)."""
    h, entered, go, sent = held_approval_harness(make_harness, tmp_path / 'runs.db')
    run = asyncio.ensure_future(h.run('import asyncio\nawait asyncio.gather(send(to="ann"), hold())'))
    await entered.wait()  # `send` is journaled waiting; the run still runs, in this process
    [run_id] = [r.run_id for r in h.runs()]
    assert [p.seq for p in h.pending(run_id)] == [1]
    with pytest.raises(RunBusy, match='active in this process'):
        await asyncio.to_thread(h.approve, run_id, 1)
    go.set()
    result = await run
    assert result.status == 'waiting' and h.store.get_run(run_id).status == 'waiting'
    assert await asyncio.to_thread(h.approve, run_id, 1) == [1]
    assert (await h.resume(run_id)).value == ['sent to ann', 1]
    assert sent == ['ann']


async def test_one_resume_at_a_time_in_one_process(make_harness: Any, tmp_path: Path) -> None:
    """Two resumes of one run in one process (an Approve clicked twice) exclude each other as two processes do:
    the second is refused while the first runs, and the approved call runs once."""
    h, entered, go, sent = held_approval_harness(make_harness, tmp_path / 'runs.db')
    waiting = await h.run('a = await send(to="bo")\nb = await hold()\n[a, b]')
    h.approve(waiting.run_id, 1)
    first = asyncio.ensure_future(h.resume(waiting.run_id))
    await entered.wait()
    with pytest.raises(RunBusy, match='active in this process'):
        await h.resume(waiting.run_id)
    go.set()
    assert (await first).value == ['sent to bo', 1]
    assert sent == ['bo'] and h.store.get_run(waiting.run_id).status == 'completed'


def test_the_orchestrator_defers_as_pydantic_ai_does_and_continues_from_the_snapshot(make_harness: Any) -> None:
    h = make_harness()
    calls: list[str] = []

    @h.tool
    async def draft(*, to: str) -> str:
        calls.append('draft')
        return f'hello {to}'

    @h.tool(side_effect=True, approval=True)
    async def send_email(*, to: str, body: str) -> str:
        calls.append('send')
        return f'sent to {to}'

    script = 'b = await draft(to="ann")\nawait send_email(to="ann", body=b)'

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                return ModelResponse(parts=[TextPart(f'done: {part.content}')])
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script})])

    agent = h.orchestrator(FunctionModel(model))
    first = agent.run_sync('email ann')
    assert isinstance(first.output, DeferredToolRequests)
    (call,) = first.output.approvals
    metadata = first.output.metadata[call.tool_call_id]
    assert metadata['waiting'] == [{'seq': 2, 'callee': 'send_email', 'arguments': {'to': 'ann', 'body': 'hello ann'}}]
    assert calls == ['draft']
    results = DeferredToolResults(approvals={call.tool_call_id: True})
    second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == 'done: sent to ann'
    assert calls == ['draft', 'send']  # the draft was not made again: the run went on from its snapshot


async def test_a_hundred_waiting_runs_hold_no_worker(make_harness: Any) -> None:
    h = make_harness(max_workers=2)  # a waiting run that kept its worker would block the third run forever
    done: list[int] = []

    @h.tool(approval=True)
    async def act(*, i: int) -> int:
        done.append(i)
        return i

    results = await asyncio.gather(*[h.run(f'await act(i={i})') for i in range(100)])
    assert {r.status for r in results} == {'waiting'} and done == []
    for result in results:
        h.approve(result.run_id)
    resumed = await asyncio.gather(*[h.resume(r.run_id) for r in results])
    assert sorted(r.value for r in resumed) == list(range(100)) and sorted(done) == list(range(100))


# -- join helpers ----------------------------------------------------------------------------------


def racing(h: Harness, finished: list[str], cancelled: list[str]) -> None:
    """Three sub-agents: `fast` answers at once, `mid` once `fast` has (a moment later), `slow` never (until
    cancelled)."""

    def make(name: str) -> None:
        async def agent(*, q: str) -> str:
            try:
                if name == 'mid':
                    while 'fast' not in finished:  # after fast, whatever the scheduling
                        await asyncio.sleep(0)
                elif name == 'slow':
                    await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise
            finished.append(name)
            return f'{name}:{q}'

        agent.__name__ = name
        h.subagent(agent)

    for name in ('slow', 'fast', 'mid'):
        make(name)


def test_first_of_takes_the_fastest_cancels_the_rest_and_replays_to_the_same_value(make_harness: Any) -> None:
    h = make_harness()
    finished: list[str] = []
    cancelled: list[str] = []
    racing(h, finished, cancelled)
    for i in range(20):
        finished.clear()
        cancelled.clear()
        result = h.run_sync(f'await first_of(slow(q="{i}"), fast(q="{i}"))')
        assert result.value == f'fast:{i}'
        assert finished == ['fast'] and cancelled == ['slow']  # its run really stopped
        statuses = {c.callee: c.status for c in result.calls}
        assert statuses == {'slow': 'lost', 'fast': 'ok', 'join:race': 'ok', 'join:won': 'ok'}
        finished.clear()
        replayed = h.replay_sync(result.run_id)
        assert replayed.value == f'fast:{i}' and finished == []  # zero calls
        assert {c.source for c in replayed.calls} == {'replayed'}


def test_quorum_takes_the_first_k_in_completion_order(make_harness: Any) -> None:
    h = make_harness()
    finished: list[str] = []
    cancelled: list[str] = []
    racing(h, finished, cancelled)
    for _ in range(5):
        finished.clear()
        cancelled.clear()
        result = h.run_sync('await quorum(2, slow(q="x"), mid(q="x"), fast(q="x"))')
        assert result.value == ['fast:x', 'mid:x'] and cancelled == ['slow']
        finished.clear()
        assert h.replay_sync(result.run_id).value == ['fast:x', 'mid:x'] and finished == []
    with pytest.raises(WorkflowError, match=r'quorum: 2 of 2 calls succeeded, 3 needed'):
        h.run_sync('await quorum(3, fast(q="z"), mid(q="z"))')


def test_a_quorum_replays_in_the_order_its_run_finished(make_harness: Any) -> None:
    h = make_harness()

    @h.subagent
    async def alpha(ctx: CallContext, *, q: str) -> str:
        while not any(c.callee == 'join:won' for c in h.store.calls(ctx.run_id)):  # after the script saw beta win
            await asyncio.sleep(0)
        return 'alpha'

    @h.subagent
    async def beta(*, q: str) -> str:
        return 'beta'

    @h.subagent
    async def gamma(*, q: str) -> str:
        await asyncio.Event().wait()  # never, until the quorum cancels it
        return 'gamma'

    result = h.run_sync('await quorum(2, alpha(q="x"), beta(q="x"), gamma(q="x"))')
    assert result.value == ['beta', 'alpha']
    won = [c.arguments['index'] for c in result.calls if c.callee == 'join:won']
    assert won == [1, 0]  # the run saw beta win first; a replay sees both results at once, alpha's first
    replayed = h.replay_sync(result.run_id)
    assert replayed.value == ['beta', 'alpha']
    assert {c.source for c in replayed.calls} == {'replayed'}


def test_within_times_out_cancels_and_replays(make_harness: Any) -> None:
    h = make_harness()
    finished: list[str] = []
    cancelled: list[str] = []
    racing(h, finished, cancelled)
    script = 'try:\n    v = await within(0.05, slow(q="x"))\nexcept TimeoutError as e:\n    v = "timeout"\nv'
    result = h.run_sync(script)
    assert result.value == 'timeout' and cancelled == ['slow']
    assert {c.callee: c.status for c in result.calls}['slow'] == 'timed_out'
    assert h.replay_sync(result.run_id).value == 'timeout'
    assert h.run_sync('await within(30, fast(q="y"))').value == 'fast:y'


def test_a_within_deadline_that_passed_while_the_process_was_down_times_out_on_resume(tmp_path: Path) -> None:
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    proc, run_id = start_worker('deadline', store, markers)
    kill(proc)  # killed while `slow` runs inside `within(1.0, ...)`
    with RunStore(store) as db:
        (deadline,) = [c for c in db.calls(run_id) if c.callee == 'join:deadline']
    due = float(deadline.result)  # type: ignore[arg-type]
    while time.time() <= due:  # the deadline is journaled; wait until it has passed (a condition, not a guess)
        time.sleep(0.05)
    with build(str(store), markers, hang=False) as h:
        result = h.resume_sync(run_id)
    assert result.value.startswith('timed out: within(1): the call did not finish in time')
    assert (markers / 'slow').read_text() == 'x\n'  # not started again after the resume
    assert json.loads(json.dumps([c.status for c in result.calls])) == ['timed_out', 'ok']


def test_cli_pending_approve_reject_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from harness._cli._app import app

    (tmp_path / 'mailer.py').write_text(
        'from harness import Harness\nh = Harness()\n\n@h.tool(side_effect=True, approval=True)\n'
        'async def send(*, to: str) -> str:\n    return "sent " + to\n'
    )
    (tmp_path / 'mail.py').write_text(
        'r = await settle_all(send(to="ann"), send(to="bob"))\n[x.get("value", x.get("error")) for x in r]\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    store = str(tmp_path / 'runs.db')
    runner = CliRunner()
    ran = runner.invoke(app, ['exec', 'mail.py', '--json', '--store', store, '--agents', 'mailer:h'])
    run_id = json.loads(ran.output.strip().splitlines()[-1])['run_id']
    listed = json.loads(runner.invoke(app, ['pending', '--json', '--store', store]).output)
    assert [(p['run_id'], p['seq'], p['arguments']['to']) for p in listed] == [(run_id, 1, 'ann'), (run_id, 2, 'bob')]
    approved = runner.invoke(app, ['approve', run_id, '1', '--by', 'dana', '--store', store])
    assert approved.exit_code == 0 and 'approved call(s) #1' in approved.output
    rejected = runner.invoke(app, ['reject', run_id, '2', '--reason', 'bob left', '--by', 'dana', '--store', store])
    assert rejected.exit_code == 0 and 'rejected call(s) #2' in rejected.output
    again = runner.invoke(app, ['approve', run_id, '2', '--store', store])
    assert again.exit_code == 1 and 'is not waiting for approval' in again.output and 'Traceback' not in again.output
    resumed = runner.invoke(app, ['resume', run_id, '--store', store, '--agents', 'mailer:h'])
    assert resumed.exit_code == 0, resumed.output
    assert 'sent ann' in resumed.output and 'send was rejected by dana: bob left' in resumed.output
    assert 'nothing waits for approval' in runner.invoke(app, ['pending', '--store', store]).output


# -- progress: log() and phase() ------------------------------------------------------------------


def progress_harness(make_harness: Any, **kwargs: Any) -> tuple[Harness, list[str]]:
    """A Harness with a plain `double` and a gated `send`; `ran` lists the calls that really ran."""
    h = make_harness(**kwargs)
    ran: list[str] = []

    @h.tool
    async def double(*, x: int) -> int:
        ran.append(f'double {x}')
        return 2 * x

    @h.tool(approval=True, side_effect=True)
    async def send(*, to: str) -> str:
        ran.append(f'send {to}')
        return f'sent {to}'

    return h, ran


def test_log_and_phase_are_kept_in_order_with_their_seq_and_replay_the_same(make_harness: Any) -> None:
    h, ran = progress_harness(make_harness)
    script = 'phase("fetch")\nlog("starting")\ny = await double(x=2)\nlog(f"got {y}")\nphase("done")\ny'
    result = h.run_sync(script)
    assert result.value == 4
    assert result.progress == [
        {'kind': 'phase', 'text': 'fetch', 'seq': 1},
        {'kind': 'log', 'text': 'starting', 'seq': 2},
        {'kind': 'log', 'text': 'got 4', 'seq': 4},
        {'kind': 'phase', 'text': 'done', 'seq': 5},
    ]
    ran.clear()
    replayed = h.replay_sync(result.run_id)
    assert replayed.progress == result.progress and ran == []  # answered from the journal, nothing ran
    forked = h.fork_sync(result.run_id, at=3, result=10)
    assert forked.value == 10 and [p['text'] for p in forked.progress] == ['fetch', 'starting', 'got 10', 'done']
    with pytest.raises(WorkflowError, match=r'#2 of run \w+ is a log\(\)/phase\(\) entry of the script, not a call'):
        h.fork_sync(result.run_id, at=2, result='x')


def test_progress_across_a_wait_for_approval_is_neither_lost_nor_repeated(make_harness: Any, tmp_path: Path) -> None:
    h, ran = progress_harness(make_harness, store=str(tmp_path / 'runs.db'))
    script = 'phase("draft")\nlog("one")\nr = await send(to="ann")\nlog(r)\nfor i in range(1_200):\n    log(str(i))\nr'
    first = h.run_sync(script)
    assert first.status == 'waiting'
    assert first.progress == [{'kind': 'phase', 'text': 'draft', 'seq': 1}, {'kind': 'log', 'text': 'one', 'seq': 2}]
    h.approve(first.run_id, 3)
    done = h.resume_sync(first.run_id)
    assert done.value == 'sent ann' and ran == ['send ann']
    texts = [p['text'] for p in done.progress]
    assert texts[:4] == ['draft', 'one', 'sent ann', '0'] and len(texts) == 1_000  # kept: the first 1,000
    assert done.progress_dropped == 1_203 - 1_000  # counted, exactly once
    assert [p['seq'] for p in done.progress] == sorted({p['seq'] for p in done.progress})
    again = h.replay_sync(first.run_id)
    assert again.progress == done.progress and again.progress_dropped == done.progress_dropped


def test_logs_cost_nothing_and_are_no_repeated_call(make_harness: Any) -> None:
    """Not a call of the catalog: no budget is charged, and the same line logged 50 times is not a stuck loop."""
    h, ran = progress_harness(make_harness, max_tool_calls=1, max_repeats=2)
    result = h.run_sync('for i in range(50):\n    log("polling")\n    phase("wait")\nawait double(x=1)')
    assert result.status == 'completed' and result.value == 2 and len(result.progress) == 100
    assert ran == ['double 1']


def test_a_log_that_is_not_text_says_how_to_write_it(make_harness: Any) -> None:
    h, _ = progress_harness(make_harness)
    with pytest.raises(WorkflowError) as caught:
        h.run_sync('import json\nlog(json.loads("[1]")[0])')  # Any to the checker, an int when it runs
    assert 'log() takes one str, got int: write log(str(x)) or an f-string' in caught.value.message
    assert '__progress__' not in caught.value.message.splitlines()[-1]


def test_ten_thousand_logs_keep_the_store_bounded(make_harness: Any, tmp_path: Path) -> None:
    h, _ = progress_harness(make_harness, store=str(tmp_path / 'runs.db'))
    result = h.run_sync('for i in range(10_000):\n    log("x" * 5_000)\nawait double(x=1)')
    assert result.value == 2
    assert len(result.progress) == 1_000 and result.progress_dropped == 9_000
    assert {len(p['text']) for p in result.progress} == {len('x' * 1_000 + '… [4000 more characters cut]')}
    with RunStore(tmp_path / 'runs.db') as db:
        rows = db.calls(result.run_id)
    assert len(rows) == 1_002  # the kept entries, one count of the rest, the call


def test_entries_past_the_cap_are_counted_once_across_a_sigkill_and_resume(tmp_path: Path) -> None:
    """The count of entries past the cap is journaled as the script goes; after a SIGKILL the resumed run restarts
    from its last snapshot and makes the entries after it again: they are counted once, not twice."""
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    proc, run_id = start_worker('progress', store, markers)
    kill(proc)
    with RunStore(store) as db:
        assert db.get_run(run_id).status == 'interrupted'  # killed mid-way  # type: ignore[union-attr]
    with build_progress(str(store), hang=False) as h:
        result = h.resume_sync(run_id)
    assert result.status == 'completed' and result.value == 1
    assert len(result.progress) == 1_000 and result.progress_dropped == 100 + 300
