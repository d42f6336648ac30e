"""Control: rules on what a script may call and in what order, enforced at the pause and checked before it runs.

Real Monty, a real SQLite store, and (for the crash) a real process killed with SIGKILL and a fresh one
that resumes; nothing of the engine is mocked.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from harness import (
    After,
    CallEvent,
    CatalogChanged,
    Harness,
    PolicyViolation,
    RegistrationError,
    WorkflowError,
    WorkflowTypeError,
)
from harness._agent._toolset import WorkflowToolset
from harness._catalog._rules import Requires
from harness._store import RunStore

WORKER = Path(__file__).parent / 'helpers' / 'control_worker.py'
REFUND_RULE = After('check_entitlement', same=('ticket_id',), when=lambda result: result['eligible'])
ONCE_RULE = After('check_entitlement', same=('ticket_id',), when=lambda result: result['eligible'], once=True)


def desk(h: Harness, refunds: list[tuple[str, int]], rule: Requires = REFUND_RULE, *, gated: bool = False) -> Harness:
    """The refund desk; `gated`: also a `pause_here` tool that waits for approval (the cheapest real pause)."""

    @h.tool
    async def check_entitlement(*, ticket_id: str) -> dict[str, bool]:
        """Whether the ticket may be refunded."""
        return {'eligible': not ticket_id.endswith('NO')}

    @h.tool(side_effect=True, requires=rule)
    async def issue_refund(*, ticket_id: str, cents: int) -> str:
        """Refund the customer."""
        if cents <= 0:
            raise ValueError('nothing to refund')
        refunds.append((ticket_id, cents))
        return f'refunded {ticket_id}'

    @h.tool(approval=gated)
    async def pause_here(*, i: int) -> int:
        """A step a person approves (with `gated`)."""
        return i

    return h


@pytest.fixture
def refunds() -> list[tuple[str, int]]:
    return []


@pytest.fixture
def h(make_harness: Any, refunds: list[tuple[str, int]]) -> Harness:
    return desk(make_harness(), refunds)


# -- enforced at the pause ------------------------------------------------------------------------


def test_a_refund_before_the_entitlement_check_is_refused_and_never_runs(h: Harness, refunds: list) -> None:
    events: list[CallEvent] = []
    with pytest.raises(PolicyViolation) as info:
        h.run_sync('await issue_refund(ticket_id="T-1", cents=99999)', on_event=events.append)
    message = info.value.message
    assert 'issue_refund requires a successful check_entitlement(...) earlier in the run' in message
    assert 'Call check_entitlement first' in message
    assert refunds == []
    (refused,) = h.store.calls(info.value.run_id)  # type: ignore[union-attr]
    assert (refused.callee, refused.status, refused.seq) == ('issue_refund', 'refused', 1)
    assert [e.kind for e in events] == ['refused']  # it never started
    assert h.store.get_run(info.value.run_id).status == 'failed'  # type: ignore[union-attr]
    spans = h.store.spans(info.value.run_id)  # type: ignore[union-attr]
    (call,) = [s for s in spans if s['name'] == 'call issue_refund']
    assert call['status'] == 'error' and call['attributes']['harness.status'] == 'refused'
    assert 'issue_refund requires' in (call['error'] or '')


def test_a_refusal_costs_no_budget_and_is_catchable(make_harness: Any, refunds: list) -> None:
    h = desk(make_harness(max_tool_calls=2), refunds)
    result = h.run_sync(
        'try:\n'
        '    await issue_refund(ticket_id="T-1", cents=1)\n'
        'except PermissionError as e:\n'
        '    first = str(e)\n'
        'e = await check_entitlement(ticket_id="T-1")\n'
        'r = await issue_refund(ticket_id="T-1", cents=1)\n'
        '[first, r]'
    )
    assert result.value[0].startswith('issue_refund requires a successful check_entitlement')
    assert result.value[1] == 'refunded T-1'
    assert [c.status for c in result.calls] == ['refused', 'ok', 'ok']  # two tool calls: within max_tool_calls=2
    assert refunds == [('T-1', 1)]


def test_same_refuses_a_refund_for_another_ticket(h: Harness, refunds: list) -> None:
    with pytest.raises(PolicyViolation, match='with the same ticket_id'):
        h.run_sync('e = await check_entitlement(ticket_id="T-1")\nawait issue_refund(ticket_id="T-2", cents=5)')
    assert refunds == []


def test_when_refuses_after_an_entitlement_that_said_no(h: Harness, refunds: list) -> None:
    with pytest.raises(PolicyViolation, match='whose result passes its condition'):
        h.run_sync('e = await check_entitlement(ticket_id="T-NO")\nawait issue_refund(ticket_id="T-NO", cents=5)')
    assert refunds == []


def test_a_check_still_in_flight_does_not_count(h: Harness, refunds: list) -> None:
    script = (
        'import asyncio\n'
        'r = await settle_all(check_entitlement(ticket_id="T-1"), issue_refund(ticket_id="T-1", cents=5))\n'
        '[x["ok"] for x in r]'
    )
    assert h.run_sync(script).value == [True, False]  # started together: the check had not succeeded yet
    assert refunds == []


def test_when_may_read_the_call_arguments(make_harness: Any) -> None:
    h = make_harness()

    @h.tool
    def quote(*, item: str) -> dict[str, int]:
        return {'max_cents': 100}

    @h.tool(requires=After('quote', same=('item',), when=lambda q, args: args['cents'] <= q['max_cents']))
    def pay(*, item: str, cents: int) -> int:
        return cents

    assert h.run_sync('q = await quote(item="a")\nawait pay(item="a", cents=100)').value == 100
    with pytest.raises(PolicyViolation):
        h.run_sync('q = await quote(item="a")\nawait pay(item="a", cents=101)')


def test_requires_takes_a_name_or_a_list(make_harness: Any) -> None:
    h = make_harness()

    @h.tool
    def login() -> str:
        return 'ok'

    @h.tool
    def consent() -> str:
        return 'ok'

    @h.tool(requires=['login', After('consent')])
    def export() -> str:
        return 'data'

    @h.tool(requires='login')
    def profile() -> str:
        return 'me'

    with pytest.raises(PolicyViolation, match='export requires a successful consent'):
        h.run_sync('await login()\nawait export()')
    assert h.run_sync('await login()\nawait consent()\nawait export()').value == 'data'
    assert h.run_sync('await login()\nawait profile()').value == 'me'


def test_rules_name_registered_callees_and_their_parameters(make_harness: Any) -> None:
    h = make_harness()

    @h.tool(requires='nope')
    def a() -> int:
        return 1

    with pytest.raises(RegistrationError, match="a requires 'nope', which is not registered"):
        h.stubs()
    h2 = make_harness()

    @h2.tool
    def b(*, x: int) -> int:
        return x

    @h2.tool(requires=After('b', same=('y',)))
    def c(*, x: int) -> int:
        return x

    with pytest.raises(RegistrationError, match="names 'y', which is not a parameter of c"):
        h2.stubs()


def test_allow_and_deny_per_run(h: Harness, refunds: list) -> None:
    with pytest.raises(PolicyViolation, match='check_entitlement is denied for this run'):
        h.run_sync('await check_entitlement(ticket_id="T-1")', deny=['check_entitlement'])
    with pytest.raises(PolicyViolation, match='issue_refund is not among the callees allowed'):
        h.run_sync(
            'e = await check_entitlement(ticket_id="T-1")\nawait issue_refund(ticket_id="T-1", cents=1)',
            allow=['check_entitlement'],
        )
    assert refunds == []


def test_allow_and_deny_per_orchestrator(h: Harness, refunds: list) -> None:
    script = 'e = await check_entitlement(ticket_id="T-1")\nawait issue_refund(ticket_id="T-1", cents=1)'

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                return ModelResponse(parts=[TextPart(str(part.content))])
        assert 'This run may not call: issue_refund.' in (info.function_tools[0].description or '')
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script})])

    result = h.orchestrator(FunctionModel(model), deny=['issue_refund']).run_sync('refund T-1')
    assert 'issue_refund is denied for this run; it was not called.' in result.output
    assert refunds == []


def test_rules_hold_on_replay_and_fork(make_harness: Any, refunds: list) -> None:
    h = desk(make_harness(store=':memory:'), refunds)
    script = (
        'e = await check_entitlement(ticket_id="T-1")\n'
        'try:\n'
        '    r = await issue_refund(ticket_id="T-1", cents=5)\n'
        'except PermissionError:\n'
        '    r = "refused"\n'
        'r'
    )
    first = h.run_sync(script)
    assert first.value == 'refunded T-1' and refunds == [('T-1', 5)]
    assert h.replay_sync(first.run_id).value == 'refunded T-1'
    forked = h.fork_sync(first.run_id, at=1, result={'eligible': False})  # the check now says no
    assert forked.value == 'refused'
    assert [c.status for c in forked.calls] == ['ok', 'refused']
    assert refunds == [('T-1', 5)]  # neither the replay nor the fork refunded anything


def test_the_rule_holds_after_sigkill_and_resume_in_a_new_process(tmp_path: Path) -> None:
    store, markers = tmp_path / 'runs.db', tmp_path / 'markers'
    markers.mkdir()
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    run = subprocess.Popen(
        [sys.executable, str(WORKER), 'run', str(store), str(markers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while not (markers / 'waiting').exists():  # the process is stopped between the check and the refunds
            assert run.poll() is None, run.stderr.read().decode() if run.stderr else ''
            assert time.monotonic() < deadline, 'the worker never reached the wait'
            time.sleep(0.02)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    with RunStore(store) as db:
        (row,) = db.list_runs()
    resumed = subprocess.run(
        [sys.executable, str(WORKER), 'resume', str(store), str(markers), row.run_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    mine, other = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert mine == 'refunded T-1'  # the resumed run knows the check of T-1 completed before the crash
    assert other.startswith('refused: issue_refund requires a successful check_entitlement')
    assert (markers / 'checks').read_text() == 'T-1\n'  # not checked again
    assert (markers / 'refunds').read_text() == 'T-1:5\n'  # T-2 never refunded
    with RunStore(store) as db:
        calls = db.calls(row.run_id)
    assert [(c.callee, c.status) for c in calls] == [
        ('check_entitlement', 'ok'),
        ('wait_here', 'ok'),
        ('issue_refund', 'refused'),
        ('issue_refund', 'ok'),
    ]


# -- consumed guards: one check, one refund ---------------------------------------------------------


def until_done(h: Harness, result: Any) -> tuple[Any, int]:
    """Approve every waiting call and resume until the run ends: (the last result or the error, resumes)."""
    resumes = 0
    while result.status == 'waiting':
        for pending in result.waiting:
            h.approve(result.run_id, pending.seq)
        resumes += 1
        try:
            result = h.resume_sync(result.run_id)
        except WorkflowError as exc:
            return exc, resumes
    return result, resumes


def test_one_check_authorises_one_refund_even_under_fan_out(make_harness: Any, refunds: list) -> None:
    h = desk(make_harness(), refunds, ONCE_RULE)
    assert 'whose result passes its condition (each authorises one call); otherwise' in h.stubs()  # the model reads it
    script = (
        'e = await check_entitlement(ticket_id="T-1")\n'
        'rs = await settle_all(*[issue_refund(ticket_id="T-1", cents=400) for _ in range(7)])\n'
        '[r["ok"] for r in rs]'
    )
    result = h.run_sync(script)
    assert result.value == [True] + [False] * 6
    assert refunds == [('T-1', 400)]  # 400 cents, not 2,800
    refused = [c for c in result.calls if c.status == 'refused']
    assert len(refused) == 6 and 'each authorises one call' in (refused[0].error or '')
    two = h.run_sync(
        'a = await check_entitlement(ticket_id="T-2")\nb = await check_entitlement(ticket_id="T-2")\n'
        'rs = await settle_all(*[issue_refund(ticket_id="T-2", cents=1) for _ in range(3)])\n'
        '[r["ok"] for r in rs]'
    )
    assert two.value == [True, True, False]  # two checks, two refunds


def test_a_check_a_once_rule_counts_runs_each_time_it_is_called(make_harness: Any, refunds: list) -> None:
    """An identical check is not answered from the earlier one (`reuse_results`): that would let one check that ran
    authorise a refund per repeat of it, in this script or a later one of the orchestrator run."""
    h = desk(make_harness(), refunds, ONCE_RULE)
    script = (
        'for i in range(3):\n    e = await check_entitlement(ticket_id="T-1")\n'
        '    await issue_refund(ticket_id="T-1", cents=500 + i)\n'
    )
    result = h.run_sync(script)
    checks = [c.source for c in result.calls if c.callee == 'check_entitlement']
    assert checks == ['live'] * 3  # three checks ran, three refunds paid
    assert len(refunds) == 3
    assert '- Except check_entitlement: each call runs (and is charged)' in WorkflowToolset(h).description()
    plain = desk(make_harness(), [])  # a check no once= rule counts is still reused
    assert [c.source for c in plain.run_sync(script).calls if c.callee == 'check_entitlement'] == [
        'live',
        'reused',
        'reused',
    ]


def test_a_once_refusal_says_call_again_only_when_a_check_was_spent(make_harness: Any, refunds: list) -> None:
    """ "Call it again" is the fix only when a check that would have authorised the call was consumed: after a check
    that said no (or whose condition raised), calling it again gets the same answer, and the script loops."""
    h = desk(make_harness(), refunds, ONCE_RULE)
    script = (
        'e = await check_entitlement(ticket_id="T-NO")\ntry:\n    await issue_refund(ticket_id="T-NO", cents=5)\n'
        'except PermissionError as exc:\n    r = str(exc)\nr'
    )
    said_no = h.run_sync(script).value
    assert 'again' not in said_no and said_no.endswith('Call check_entitlement first.')
    twice = script.replace('T-NO', 'T-1').replace('try:', 'await issue_refund(ticket_id="T-1", cents=1)\ntry:')
    spent = h.run_sync(twice)
    assert spent.value.endswith('Each check_entitlement authorises one call: call check_entitlement again first.')


def test_a_refund_that_failed_spent_its_check(make_harness: Any, refunds: list) -> None:
    """The failed call's effect may have happened (a timeout after the payment went out): it is not re-authorised."""
    h = desk(make_harness(), refunds, ONCE_RULE)
    script = (
        'e = await check_entitlement(ticket_id="T-1")\n'
        'out = []\n'
        'for cents in (0, 5):\n'
        '    try:\n'
        '        out.append(await issue_refund(ticket_id="T-1", cents=cents))\n'
        '    except RuntimeError:\n'
        '        out.append("failed")\n'
        '    except PermissionError:\n'
        '        out.append("refused")\n'
        'out'
    )
    assert h.run_sync(script).value == ['failed', 'refused']
    assert refunds == []


ONCE_SCRIPT = (
    'a = await check_entitlement(ticket_id="T-1")\n'
    'b = await check_entitlement(ticket_id="T-1")\n'
    'first = await issue_refund(ticket_id="T-1", cents=1)\n'
    'await pause_here(i=1)\n'
    'out = [first]\n'
    'for i in range(3):\n'
    '    try:\n'
    '        out.append(await issue_refund(ticket_id="T-1", cents=2 + i))\n'
    '    except PermissionError:\n'
    '        out.append("refused")\n'
    'out'
)


def test_consumed_checks_are_the_same_across_resume_replay_and_fork(make_harness: Any, refunds: list) -> None:
    expected = ['refunded T-1', 'refunded T-1', 'refused', 'refused']
    plain = desk(make_harness(), [], ONCE_RULE)
    assert plain.run_sync(ONCE_SCRIPT).value == expected  # uninterrupted
    h = desk(make_harness(), refunds, ONCE_RULE, gated=True)
    result, resumes = until_done(h, h.run_sync(ONCE_SCRIPT))
    assert resumes == 1 and result.value == expected  # resumed from the snapshot at the pause
    assert refunds == [('T-1', 1), ('T-1', 2)]
    assert h.replay_sync(result.run_id).value == expected
    forked, _ = until_done(h, h.fork_sync(result.run_id, at=2, result={'eligible': False}))  # the 2nd check: no
    assert forked.value == ['refunded T-1', 'refused', 'refused', 'refused']
    assert refunds == [('T-1', 1), ('T-1', 2), ('T-1', 1)]  # the fork's first refund ran live; nothing else did


def test_a_refund_in_flight_at_a_crash_keeps_its_check(make_harness: Any) -> None:
    """Interrupted while the refund ran (its outcome unknown), the run resumes with the refund re-run or answered:
    either way that refund is the one the check paid for, and the next one is refused. Interrupted while the check
    ran, a resume's answer for the check is a person's word, not a check: it pays for no refund."""
    h = make_harness()
    entered: list[asyncio.Event] = []  # one per interrupted run (each has its own event loop)
    hung: list[int] = []
    paid: list[int] = []

    hanging = ['pay']  # which callee's first attempt hangs until the run is interrupted

    async def hang_once(name: str) -> None:
        if name == hanging[-1] and not hung:
            hung.append(1)
            entered[0].set()
            await asyncio.Event().wait()

    @h.tool
    async def check(*, k: str) -> bool:
        await hang_once('check')
        return True

    @h.tool(side_effect=True, requires=After('check', same=('k',), once=True))
    async def pay(*, k: str, n: int) -> int:
        await hang_once('pay')
        paid.append(n)
        return n

    script = (
        'await check(k="a")\nfirst = await pay(k="a", n=1)\ntry:\n    second = await pay(k="a", n=2)\n'
        'except PermissionError:\n    second = "refused"\n[first, second]'
    )

    def interrupted() -> str:
        async def go() -> None:  # runs `script` as it is when called
            entered[:] = [asyncio.Event()]
            task = asyncio.ensure_future(h.run(script))
            await entered[0].wait()
            await asyncio.sleep(0)  # let the pause that started the call journal it
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        hung.clear()
        asyncio.run(go())
        (run,) = [r for r in h.runs() if r.status == 'interrupted']
        return run.run_id

    run_id = interrupted()
    assert h.resume_sync(run_id, retry_unknown=True).value == [1, 'refused']
    run_id = interrupted()
    assert h.resume_sync(run_id, answers={2: 7}).value == [7, 'refused']
    assert paid == [1]
    script = (
        'await check(k="b")\ntry:\n    r = await pay(k="b", n=3)\nexcept PermissionError as exc:\n    r = str(exc)\nr'
    )
    hanging.append('check')
    run_id = interrupted()  # now the check hangs: resumed with a person's answer for it (`--answer 1=true`)
    assert 'The check result of call #1 was supplied, not run' in h.resume_sync(run_id, answers={1: True}).value
    assert paid == [1]


@pytest.mark.parametrize(
    ('source', 'named', 'not_named'),
    [('baseline', "an eval baseline's recorded result", "a fork's"), ('answered', "a fork's or a person's", 'eval')],
)
def test_a_refusal_says_where_the_supplied_predecessor_came_from(source: str, named: str, not_named: str) -> None:
    """The model is told what supplied the predecessor that cannot authorise a side effect: an eval baseline's
    recorded result is no person's answer."""
    from harness import CallRecord
    from harness._catalog._rules import Access, Ledger, refusal

    ledger = Ledger()
    ledger.add(CallRecord(seq=1, callee='check', arguments={}, line=1, status='ok', result=True, source=source))
    why = refusal('pay', {}, (After('check', once=True),), Access(), ledger, side_effect=True, seq=2)
    assert why is not None and 'was supplied, not run' in why
    assert named in why and not_named not in why


def test_a_rejected_call_gives_its_check_back(make_harness: Any) -> None:
    """A call a person rejected never ran: what it consumed while it waited is free again, after the resume."""
    h = make_harness()
    paid: list[int] = []

    @h.tool
    async def check(*, k: str) -> bool:
        return True

    @h.tool(side_effect=True, approval=True, requires=After('check', same=('k',), once=True))
    async def pay(*, k: str, n: int) -> int:
        paid.append(n)
        return n

    script = (
        'await check(k="a")\nout = []\nfor n in (1, 2, 3):\n    try:\n        out.append(await pay(k="a", n=n))\n'
        '    except PermissionError:\n        out.append("refused")\nout'
    )
    result = h.run_sync(script)
    h.reject(result.run_id, 2, reason='not this one')
    result = h.resume_sync(result.run_id)
    assert result.status == 'waiting' and [p.seq for p in result.waiting] == [3]  # n=2 is authorised by the check
    h.approve(result.run_id, 3)
    assert h.resume_sync(result.run_id).value == ['refused', 2, 'refused']
    assert paid == [2]


def test_a_supplied_answer_does_not_authorise_a_side_effect(make_harness: Any, refunds: list) -> None:
    """A fork's edited check result, or a resume's answer, is what a person said, not a check that ran."""
    h = desk(make_harness(), refunds, ONCE_RULE)
    script = (
        'e = await check_entitlement(ticket_id="T-NO")\n'
        'out = []\n'
        'for i in range(2):\n'
        '    try:\n'
        '        out.append(await issue_refund(ticket_id="T-NO", cents=5 + i))\n'
        '    except PermissionError as exc:\n'
        '        out.append(str(exc))\n'
        'out'
    )
    first = h.run_sync(script)
    forked = h.fork_sync(first.run_id, at=1, result={'eligible': True})
    assert [c.source for c in forked.calls[:1]] == ['answered']
    assert all('was supplied, not run' in text for text in forked.value)
    again = h.fork_sync(forked.run_id, at=2, result='refunded')  # the answered check, forked on (and resumed)
    assert again.calls[0].source == 'answered'  # still supplied: neither a fork nor a resume launders it
    assert all('was supplied, not run' in text for text in again.value)  # the rule comes before any answer
    assert refunds == []
    trusting = desk(
        make_harness(), refunds, After('check_entitlement', when=lambda r: r['eligible'], once=True, trust_answers=True)
    )
    first = trusting.run_sync(script)
    assert trusting.fork_sync(first.run_id, at=1, result={'eligible': True}).value[0] == 'refunded T-NO'
    assert refunds == [('T-NO', 5)]


def test_a_changed_predicate_is_a_catalog_change(tmp_path: Path, refunds: list) -> None:
    store = str(tmp_path / 'runs.db')
    script = (
        'e = await check_entitlement(ticket_id="T-NO")\nawait pause_here(i=1)\ntry:\n'
        '    r = await issue_refund(ticket_id="T-NO", cents=5)\nexcept PermissionError:\n    r = "refused"\nr'
    )
    with desk(Harness(store=store), refunds, REFUND_RULE, gated=True) as h:
        result = h.run_sync(script)
        assert result.status == 'waiting'
        h.approve(result.run_id, 2)
    loosened = After('check_entitlement', same=('ticket_id',), when=lambda result: True)
    with desk(Harness(store=store), refunds, loosened, gated=True) as h:
        with pytest.raises(CatalogChanged, match='issue_refund: rules changed') as info:
            h.resume_sync(result.run_id)
        assert [str(c) for c in info.value.changes] == ['issue_refund: rules changed']
        assert 'recheck' not in info.value.message and 'accept_changes=True' in info.value.message  # the fix that works
        with pytest.raises(CatalogChanged):
            h.resume_sync(result.run_id, recheck=True)  # the script still type-checks: that vouches for nothing here
    assert refunds == []
    with desk(Harness(store=store), refunds, REFUND_RULE, gated=True) as h:  # the same code again: admitted
        assert h.resume_sync(result.run_id).value == 'refused'


def test_an_unchanged_catalog_resumed_in_a_fresh_process_is_no_change(tmp_path: Path, offline_env: Any) -> None:
    """Lambdas in loops, closures, a bound method, a partial, a builtin and library functions imported by name:
    their fingerprints are the same in another process with another hash seed and another history (a library
    function is named, not followed into its module's caches), so the resume is admitted."""
    store = str(tmp_path / 'runs.db')
    worker = str(Path(__file__).parent / 'helpers' / 'predicate_worker.py')
    run = subprocess.run(
        [sys.executable, worker, 'run', store],
        env=offline_env(PYTHONHASHSEED='1'),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    run_id = run.stdout.strip().splitlines()[-1]
    resumed = subprocess.run(
        [sys.executable, worker, 'resume', store, run_id],
        env=offline_env(PYTHONHASHSEED='2'),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout.strip().splitlines()[-1]) == 'refunded T-1'


def test_an_async_predicate_is_refused_where_the_rule_is_written(make_harness: Any, refunds: list) -> None:
    """A rule is decided at the pause, without awaiting: an `async def` condition would be a coroutine, which is
    truthy, so it would pass every predecessor. It is refused when the rule is made; a condition that returns an
    awaitable anyway fails."""

    async def entitled(result: dict[str, bool]) -> bool:
        return result['eligible']

    with pytest.raises(TypeError, match='not an async function'):
        After('check_entitlement', when=entitled)
    sneaky = desk(make_harness(), refunds, After('check_entitlement', when=lambda r: entitled(r)))
    with pytest.raises(PolicyViolation, match='whose result passes its condition'):
        sneaky.run_sync('e = await check_entitlement(ticket_id="T-NO")\nawait issue_refund(ticket_id="T-NO", cents=5)')
    assert refunds == []


def assert_settings_objects_are_read_as_data(fingerprint: Any) -> None:
    """A policy's settings held in a dataclass, a pydantic model or an enum are its data: loosening one is a change
    (`Limits(max_cents=1500)` to `Limits(max_cents=99999)` between a crash and the resume), equal ones are not."""
    import dataclasses
    import enum

    from pydantic import BaseModel

    @dataclasses.dataclass(frozen=True)
    class Limits:
        max_cents: int

        def allows(self, result: Any, args: Any) -> bool:
            return args['cents'] <= self.max_cents

    class Settings(BaseModel):
        max_cents: int

    class Tier(enum.Enum):
        GOLD = 5000
        SILVER = 1500

    def under(limits: Any) -> Any:
        return lambda result, args: args['cents'] <= limits.max_cents

    for make in (Limits, Settings):
        assert fingerprint(under(make(max_cents=1500))) == fingerprint(under(make(max_cents=1500)))
        assert fingerprint(under(make(max_cents=1500))) != fingerprint(under(make(max_cents=99999)))
    assert fingerprint(Limits(1500).allows) == fingerprint(Limits(1500).allows) != fingerprint(Limits(99999).allows)

    @dataclasses.dataclass
    class Node:
        other: Any = None

    first = Node()
    first.other = Node(first)  # data that holds itself through its fields: a cycle, named
    assert fingerprint(lambda r: r is first.other) == fingerprint(lambda r: r is first.other)
    tier = Tier.SILVER
    assert fingerprint(lambda r: r['cents'] <= tier.value) != fingerprint(
        (lambda t: lambda r: r['cents'] <= t.value)(Tier.GOLD)
    )


def test_a_predicates_fingerprint_follows_its_code_and_plain_data() -> None:
    from harness._catalog._rules import fingerprint

    def limit(n: int) -> Any:
        return lambda r: r['cents'] <= n

    assert fingerprint(lambda r: r['ok']) == fingerprint(lambda r: r['ok'])
    assert fingerprint(lambda r: r['ok']) != fingerprint(lambda r: not r['ok'])
    assert fingerprint(limit(100)) == fingerprint(limit(100)) != fingerprint(limit(200))
    assert fingerprint(lambda r: r['x'] == 'a') != fingerprint(lambda r: r['x'] == 'b')
    assert fingerprint(lambda r: [x for x in r if x > 1]) != fingerprint(lambda r: [x for x in r if x > 2])
    assert fingerprint(bool) != fingerprint(callable)
    assert fingerprint(functools.partial(limit, 1)) != fingerprint(functools.partial(limit, 2))
    assert_settings_objects_are_read_as_data(fingerprint)
    graph: dict[str, Any] = {'a': {}}
    graph['a']['back'] = graph  # data that holds itself is named as a cycle, not walked until RecursionError
    assert fingerprint(lambda r: r in graph) == fingerprint(lambda r: r in graph)


# -- counters survive a resume ------------------------------------------------------------------------


def test_identical_calls_stop_at_the_same_count_when_resumed_at_every_step(make_harness: Any, refunds: list) -> None:
    script = 'for i in range(50):\n    e = await check_entitlement(ticket_id="T-1")\n    await pause_here(i=i)\n'
    plain = desk(make_harness(), [])
    with pytest.raises(WorkflowError, match='11 times') as uninterrupted:
        plain.run_sync(script)
    h = desk(make_harness(), refunds, gated=True)
    stopped, resumes = until_done(h, h.run_sync(script))
    assert isinstance(stopped, WorkflowError) and resumes == 10
    assert stopped.message == uninterrupted.value.message


def test_refusals_are_counted_across_resumes(make_harness: Any, refunds: list) -> None:
    script = (
        'for i in range(300):\n    try:\n        await issue_refund(ticket_id="T-" + str(i), cents=1)\n'
        '    except PermissionError:\n        pass\n    if i % 10 == 9:\n        await pause_here(i=i)\n'
    )
    h = desk(make_harness(), refunds, gated=True)
    stopped, resumes = until_done(h, h.run_sync(script))
    assert isinstance(stopped, WorkflowError) and 'stopped after 100 refused calls' in stopped.message
    assert resumes == 10


def test_the_same_failure_with_drifting_arguments_stops_as_stuck(make_harness: Any, refunds: list) -> None:
    script = (
        'i = 0\nwhile True:\n    i += 1\n    try:\n        await issue_refund(ticket_id="T-" + str(i), cents=0)\n'
        '    except RuntimeError:\n        pass\n'
    )
    lenient = desk(make_harness(), refunds, ())
    with pytest.raises(WorkflowError, match='looks stuck') as info:
        lenient.run_sync(script)
    message = info.value.message
    assert 'issue_refund failed 10 times in a row with the same error' in message
    assert '(issue_refund failed with ValueError)' in message and 'whatever its arguments' in message
    assert len(lenient.store.calls(info.value.run_id)) == 10  # type: ignore[union-attr]
    mixed = script.replace('while True:', 'while i < 40:').replace('cents=0', 'cents=0 if i % 5 else 1')
    assert lenient.run_sync(mixed).status == 'completed'  # a success between the failures: not stuck
    gated = desk(make_harness(), refunds, (), gated=True)
    paused = script.replace('        pass\n', '        pass\n    await pause_here(i=i)\n')
    stopped, resumes = until_done(gated, gated.run_sync(paused))
    assert isinstance(stopped, WorkflowError) and resumes == 10
    assert 'issue_refund failed 10 times in a row with the same error' in stopped.message


# -- shape bounds ----------------------------------------------------------------------------------


def test_a_loop_over_fresh_arguments_stops_at_max_tool_calls(make_harness: Any) -> None:
    h = make_harness()  # the defaults: max_tool_calls=1,000
    pings: list[int] = []

    @h.tool
    async def ping(*, i: int) -> int:
        pings.append(i)
        return i

    with pytest.raises(WorkflowError, match=r'1000/1000 tool calls'):
        h.run_sync('i = 0\nwhile True:\n    i = await ping(i=i + 1)\n')
    assert len(pings) == 1000


def test_identical_calls_in_a_loop_stop_as_stuck(make_harness: Any) -> None:
    h = make_harness()  # the defaults: max_repeats=10
    calls: list[str] = []

    @h.subagent
    async def reviewer(*, task: str) -> str:
        calls.append(task)
        return 'fine'

    with pytest.raises(WorkflowError, match=r'looks stuck.*reviewer\(\{"task":"same"\}\).*11 times') as info:
        h.run_sync('for i in range(200):\n    r = await reviewer(task="same")\n')
    assert 'Keep the first result in a variable' in info.value.message
    assert len(calls) == 1  # the nine repeats before it were answered from the first (reused)


def test_retrying_a_refused_call_forever_is_stopped(h: Harness, refunds: list) -> None:
    script = (
        'n = 0\n'
        'while True:\n'
        '    n += 1\n'
        '    try:\n'
        '        await issue_refund(ticket_id="T-" + str(n), cents=1)\n'
        '    except PermissionError:\n'
        '        pass\n'
    )
    with pytest.raises(WorkflowError, match='stopped after 100 refused calls') as info:
        h.run_sync(script)
    assert 'refused because issue_refund requires a successful check_entitlement(...)' in info.value.message
    assert refunds == []


def test_a_loop_retrying_past_the_budget_stops_naming_the_budget(make_harness: Any) -> None:
    """Issue 21.18: the 100-refusals stop says which budget refused the calls. (One fan-out past the budget
    is not a retry loop: it runs the budget's worth and its other calls are refused, issue 21.1.)"""
    h = make_harness(max_agent_calls=2)

    @h.subagent
    async def work(*, i: int) -> int:
        return i

    retrying = 'for i in range(200):\n    try:\n        await work(i=i)\n    except RuntimeError:\n        pass'
    with pytest.raises(WorkflowError, match='stopped after 100 refused calls') as info:
        h.run_sync(retrying)
    assert 'refused because the sub-agent call budget (max_agent_calls=2) is spent' in info.value.message
    fanned = h.run_sync('rs = await settle_all(*[work(i=i) for i in range(200)])\n[r["ok"] for r in rs].count(True)')
    assert fanned.value == 2


def test_call_concurrency_caps_one_callee(make_harness: Any) -> None:
    h = make_harness(call_concurrency={'slow': 2})
    running = 0
    peak = 0
    gate = asyncio.Event()

    @h.subagent
    async def slow(*, i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            gate.set()
        await gate.wait()
        await asyncio.sleep(0)
        running -= 1
        return i

    async def go() -> Any:
        return await h.run('import asyncio\nawait asyncio.gather(*[slow(i=i) for i in range(6)])')

    assert asyncio.run(go()).value == list(range(6))
    assert peak == 2


# -- static analysis -------------------------------------------------------------------------------


def test_check_warns_and_strict_refuses(make_harness: Any, refunds: list) -> None:
    loose = desk(make_harness(), refunds)
    script = 'await issue_refund(ticket_id="T-1", cents=1)'
    report = loose.check(script)
    assert report.ok
    assert report.warnings == [
        'line 1: issue_refund can run before check_entitlement has succeeded with the same ticket_id, whose '
        'result passes its condition; at run time such a call is refused.'
    ]
    strict = desk(make_harness(strict=True), refunds)
    assert not strict.check(script).ok
    unbounded = (
        'while True:\n    e = await check_entitlement(ticket_id="T")\n    await issue_refund(ticket_id="T", cents=1)'
    )
    report = strict.check(unbounded)
    assert not report.ok
    assert 'issue_refund has side effects and is called in a loop with no literal bound' in report.errors
    with pytest.raises(WorkflowTypeError, match='strict mode'):
        strict.run_sync(script)
    assert refunds == []
    good = (
        'e = await check_entitlement(ticket_id="T")\nif e["eligible"]:\n    await issue_refund(ticket_id="T", cents=1)'
    )
    assert strict.check(good).ok and strict.check(good).warnings == []
    assert [c.status for c in strict.run_sync(good).calls] == ['ok', 'ok']
    assert refunds == [('T', 1)]


def test_the_stubs_and_the_tool_description_tell_the_model(h: Harness) -> None:
    stubs = h.stubs()
    refund = stubs[stubs.index('async def issue_refund') :]
    assert 'Side effects: it changes something outside the script.' in refund
    assert 'Requires a successful check_entitlement(...) earlier in the run with the same ticket_id' in refund
    assert 'class PermissionError(OSError)' in stubs
    description = WorkflowToolset(h).description()
    assert 'A call a rule does not allow (see "Requires" in a stub' in description
    assert 'raises PermissionError naming the rule, and does not run' in description


# The corpus: scripts written as a model would write them, each compared with what a real run calls.
CORPUS = [
    'await ping(i=1)',
    'x = await ping(i=1)\ny = await ping(i=x + 1)\ny',
    'import asyncio\nawait asyncio.gather(ping(i=1), fetch(key="a"))',
    'import asyncio\nawait asyncio.gather(*[ping(i=i) for i in range(4)])',
    'for i in range(3):\n    await ping(i=i)',
    'for k in ["a", "b"]:\n    await fetch(key=k)',
    'i = 0\nwhile i < 5:\n    i = await ping(i=i + 1)',
    '[await ping(i=i) for i in range(3)]',
    '{k: await fetch(key=k) for k in ["x", "y"]}',
    'try:\n    await fail(reason="x")\nexcept Exception:\n    await ping(i=0)',
    'async def twice(i: int) -> int:\n    return await ping(i=i) + await ping(i=i + 1)\nawait twice(1)',
    'async def helper(k: str) -> str:\n    return await fetch(key=k)\n'
    'import asyncio\nawait asyncio.gather(helper("a"), helper("b"))',
    'f = ping\nawait f(i=3)',
    'fns = [ping, ping]\n[await fn(i=n) for n, fn in enumerate(fns)]',
    'r = await settled(fail(reason="no"))\nr["ok"]',
    'rs = await settle_all(ping(i=1), fail(reason="x"), fetch(key="z"))\n[r["ok"] for r in rs]',
    'import asyncio\nasync def pair(i: int) -> tuple[int, int]:\n'
    '    return await asyncio.gather(ping(i=i), ping(i=i + 10))\nawait asyncio.gather(pair(1), pair(2))',
    'words = await lookup(q="a")\nfor w in words:\n    await score(text=w)',
    'words = await lookup(q="b")\nscores = [await score(text=w) for w in words]\nmax(scores)',
    'total = 0\nfor i in range(2):\n    for j in range(3):\n        total += await ping(i=i * 3 + j)\ntotal',
    'x = await ping(i=1)\nif x > 0:\n    await fetch(key="pos")\nelse:\n    await fetch(key="neg")',
    'x = await ping(i=-1)\nif x > 0:\n    await fetch(key="pos")\nelse:\n    await fetch(key="neg")',
    'e = await check_entitlement(ticket_id="T")\nif e["eligible"]:\n    await issue_refund(ticket_id="T", cents=2)',
    'n = 0\nwhile True:\n    n = await ping(i=n + 1)\n    if n >= 3:\n        break\nn',
    'async def safe(k: str) -> str:\n    try:\n        return await fail(reason=k)\n'
    '    except Exception:\n        return await fetch(key=k)\nawait safe("q")',
    'import asyncio\nr = await asyncio.gather(*[fetch(key=str(i)) for i in range(3)])\n",".join(r)',
    'g = lookup\nws = await g(q="c")\nlen(ws)',
    'out = []\nfor w in await lookup(q="d"):\n    out.append(await score(text=w))\nout',
    'data = {"a": 1, "b": 2}\nfor k, v in data.items():\n    await ping(i=v)',
    'await ping(i=len(await lookup(q="e")))',
    'async def chain(n: int) -> int:\n    if n == 0:\n        return 0\n'
    '    return await ping(i=n) + await chain(n - 1)\nawait chain(3)',
    'x = [await fetch(key=k) for k in ["p", "q"] if k != "q"]\nx',
    'async def run_all(fs: list) -> list:\n    return [await f(i=1) for f in fs]\nawait run_all([ping])',
    'try:\n    await fail(reason="a")\nexcept Exception:\n'
    '    try:\n        await fail(reason="b")\n    except Exception:\n        await ping(i=9)',
]


@pytest.fixture(scope='module')
def corpus_harness() -> Any:
    h = Harness(store=':memory:')

    @h.tool
    async def ping(*, i: int) -> int:
        return i

    @h.tool
    async def fetch(*, key: str) -> str:
        return key.upper()

    @h.tool
    async def fail(*, reason: str) -> str:
        raise ValueError(reason)

    @h.tool
    async def lookup(*, q: str) -> list[str]:
        return [q, q + q]

    @h.tool
    async def score(*, text: str) -> int:
        return len(text)

    desk(h, [])
    yield h
    h.close()


@pytest.mark.parametrize('script', CORPUS, ids=range(len(CORPUS)))
def test_analysis_lists_every_call_a_real_run_makes(corpus_harness: Harness, script: str) -> None:
    analysis = corpus_harness.analyze(script)
    calls = corpus_harness.run_sync(script).calls
    direct = {(site.callee, site.line) for site in analysis.calls}
    dynamic = {site.callee for site in analysis.dynamic}
    for call in calls:
        assert call.callee in analysis.callees, (call, analysis.text())
        assert (call.callee, call.line) in direct or call.callee in dynamic, (call, analysis.text())
    per_line = Counter((c.callee, c.line) for c in calls)
    for site in analysis.calls:
        if site.in_loop and site.loop_bound is not None:  # a literal bound is an upper bound too
            assert per_line[(site.callee, site.line)] <= site.loop_bound * sum(
                1 for s in analysis.calls if (s.callee, s.line) == (site.callee, site.line)
            ), (site, analysis.text())
    assert len(CORPUS) >= 30


def test_analysis_reports_loops_gathers_excepts_and_values(corpus_harness: Harness) -> None:
    a = corpus_harness.analyze(
        'import asyncio\n'
        'for i in range(3):\n'
        '    await ping(i=i)\n'
        'while i < 10:\n'  # (a `while True:` with no `break` never ends: what follows it could not run)
        '    await fetch(key="k")\n'
        'await asyncio.gather(ping(i=1), fetch(key="x"))\n'
        'try:\n'
        '    await fail(reason="r")\n'
        'except Exception:\n'
        '    await lookup(q="q")\n'
        'f = score\n'
    )
    sites = {(s.callee, s.line): s for s in a.calls}
    assert sites[('ping', 3)].loop_bound == 3 and not sites[('ping', 3)].unbounded
    assert sites[('fetch', 5)].unbounded and a.unbounded == [sites[('fetch', 5)]]
    assert sites[('ping', 6)].in_gather and sites[('fetch', 6)].in_gather
    assert sites[('lookup', 10)].in_except
    assert [(s.callee, s.line) for s in a.dynamic] == [('score', 11)]
    assert a.callees == {'ping', 'fetch', 'fail', 'lookup', 'score'}


def test_mermaid_draws_the_possible_calls_and_the_path_taken(corpus_harness: Harness) -> None:
    script = 'x = await ping(i=1)\nif x > 0:\n    await fetch(key="pos")\nelse:\n    await fetch(key="neg")'
    result = corpus_harness.run_sync(script)
    chart = corpus_harness.analyze(script).mermaid(taken=[(c.callee, c.line) for c in result.calls])
    assert chart.startswith('flowchart TD')
    assert 'n0["ping<br/>line 1"]' in chart and 'n2["fetch<br/>line 5"]' in chart
    assert 'start ==> n0' in chart and 'n0 ==> n1' in chart and 'n1 ==> end_' in chart  # the path taken
    assert 'n0 --> n2' in chart and 'n2 --> end_' in chart  # the branch not taken
    assert 'class n0,n1 taken;' in chart


def test_mermaid_draws_a_gathers_calls_and_the_edges_out_of_it_as_taken(corpus_harness: Harness) -> None:
    script = (
        'import asyncio\nx = await fetch(key="first")\n'
        'a, b = await asyncio.gather(ping(i=1), ping(i=2))\nawait fetch(key="after")'
    )
    result = corpus_harness.run_sync(script)
    assert [(c.callee, c.line) for c in result.calls] == [('fetch', 2), ('ping', 3), ('ping', 3), ('fetch', 4)]
    chart = corpus_harness.analyze(script).mermaid(taken=[(c.callee, c.line) for c in result.calls])
    for edge in ('start ==> n0', 'n0 ==> n1', 'n0 ==> n2', 'n1 ==> n3', 'n2 ==> n3', 'n3 ==> end_'):
        assert edge in chart, (edge, chart)
    assert 'class n0,n1,n2,n3 taken;' in chart  # both calls of ping on line 3
    ends = corpus_harness.analyze('import asyncio\nawait asyncio.gather(ping(i=1), fetch(key="k"))')
    assert ends.path([('ping', 2), ('fetch', 2)]) == {('start', 'n0'), ('start', 'n1'), ('n0', 'end'), ('n1', 'end')}


def test_mermaid_path_of_a_gather_in_a_loop_starts_both_calls_from_what_ran_before(corpus_harness: Harness) -> None:
    """The calls of one gather are siblings, not each other's predecessors through the loop's edge back."""
    script = (
        'import asyncio\nfor x in {turns}:\n    await asyncio.gather(ping(i=x), fetch(key="k"))\nawait lookup(q="q")'
    )
    gather = {('n0', 'n2'), ('n1', 'n2'), ('n2', 'end')}
    once = corpus_harness.run_sync(script.format(turns='[1]'))
    assert [(c.callee, c.line) for c in once.calls] == [('ping', 3), ('fetch', 3), ('lookup', 4)]
    path = corpus_harness.analyze(script.format(turns='[1]')).path([(c.callee, c.line) for c in once.calls])
    assert path == {('start', 'n0'), ('start', 'n1'), *gather}
    twice = corpus_harness.run_sync(script.format(turns='[1, 2]'))
    analysis = corpus_harness.analyze(script.format(turns='[1, 2]'))
    path = analysis.path([(c.callee, c.line) for c in twice.calls])
    # The second turn's gather starts from both calls of the first.
    assert path == {('start', 'n0'), ('start', 'n1'), ('n0', 'n0'), ('n1', 'n0'), ('n0', 'n1'), ('n1', 'n1'), *gather}
    chart = analysis.mermaid(taken=[(c.callee, c.line) for c in twice.calls])
    assert 'start ==> n0' in chart and 'start ==> n1' in chart and 'n1 ==> n2' in chart, chart


def test_mermaid_path_of_a_loop_follows_each_turn(corpus_harness: Harness) -> None:
    a = corpus_harness.analyze('for i in range(3):\n    await ping(i=i)\nawait fetch(key="k")')
    assert a.path([('ping', 2)] * 3 + [('fetch', 3)]) == {('start', 'n0'), ('n0', 'n0'), ('n0', 'n1'), ('n1', 'end')}


# -- the command line ------------------------------------------------------------------------------

DESK_MODULE = """
from harness import After, Harness
h = Harness()

@h.tool
async def check_entitlement(*, ticket_id: str) -> dict[str, bool]:
    return {"eligible": True}

@h.tool(side_effect=True, requires=After("check_entitlement", same=("ticket_id",)))
async def issue_refund(*, ticket_id: str, cents: int) -> str:
    return "ok"
"""


@pytest.fixture
def cli_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / 'deskmod.py').write_text(DESK_MODULE)
    (tmp_path / 'first.py').write_text('await issue_refund(ticket_id="T", cents=1)\n')
    good = 'e = await check_entitlement(ticket_id="T")\nawait issue_refund(ticket_id="T", cents=1)\n'
    (tmp_path / 'good.py').write_text(good)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('HARNESS_STORE', str(tmp_path / 'runs.db'))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_cli_check_graph_and_mermaid(cli_project: Path) -> None:
    from harness._cli._app import app

    runner = CliRunner()
    graph = runner.invoke(app, ['check', 'first.py', '--graph', '--agents', 'deskmod:h'])
    assert graph.exit_code == 0, graph.output
    assert 'warning: first.py:line 1: issue_refund can run before check_entitlement' in graph.output
    assert 'line 1: issue_refund' in graph.output
    chart = runner.invoke(app, ['check', 'good.py', '--mermaid', '--agents', 'deskmod:h'])
    assert chart.exit_code == 0 and chart.output.startswith('flowchart TD')
    assert 'n0 --> n1' in chart.output


def test_cli_audit_text_and_json(cli_project: Path) -> None:
    from harness._cli._app import app

    runner = CliRunner()
    text = runner.invoke(app, ['audit', '--agents', 'deskmod:h'])
    assert text.exit_code == 0, text.output
    assert '1. Irreversible callees (side_effect=True): issue_refund' in text.output
    assert 'requires a successful check_entitlement(...) earlier in the run with the same ticket_id' in text.output
    data = json.loads(runner.invoke(app, ['audit', '--json', '--agents', 'deskmod:h']).output)
    assert data['irreversible'] == ['issue_refund']
    refund = next(c for c in data['callees'] if c['name'] == 'issue_refund')
    assert 'NeedsDecision' in refund['on_crash']
    assert data['bounds']['max_tool_calls'] == 1000 and data['bounds']['max_repeats (identical calls per script)'] == 10
    assert len(data['enforcement']) >= 4 and data['on_crash']


def test_the_audit_says_what_the_review_before_the_run_guarantees(make_harness: Any, refunds: list) -> None:
    """Issue 23.1/23.3: the audit states the analysis' guarantee (every call a site with a bound, every transition
    an edge, what hides a call refused, the rest incomplete and refused by strict), the consuming guard and the
    stuck detector for a callee failing the same way whatever its arguments."""
    from harness._check._audit import audit

    enforcement = '\n'.join(audit(desk(make_harness(), refunds)).enforcement)
    assert 'every call a script can make is a call site with the most times it can run' in enforcement
    assert 'every transition between two calls is an edge' in enforcement
    assert 'eval/exec, locals(), attribute access by a computed name' in enforcement
    assert 'strict=True also refuses an incomplete analysis' in enforcement
    assert 'once=True: each successful predecessor authorises one call' in enforcement
    assert 'the same error max_repeats times in a row, whatever its arguments' in enforcement
    assert 'counted again on resume' in enforcement


def ops_desk(h: Harness, refunds: list, dropped: list[str]) -> Harness:
    """The refund desk, with an irreversible tool nothing guards and one a person approves."""
    desk(h, refunds)

    @h.tool(side_effect=True)
    async def drop_table(*, name: str) -> str:
        """Drop a table."""
        dropped.append(name)
        return f'dropped {name}'

    @h.tool(side_effect=True, approval=True)
    async def send_email(*, to: str) -> str:
        return 'sent'

    return h


def test_the_audit_names_an_unguarded_irreversible_callee_plainly(make_harness: Any, refunds: list) -> None:
    from harness._check._audit import audit

    report = audit(ops_desk(make_harness(), refunds, []))
    (finding,) = report.findings  # the guarded refund and the approved email are not findings
    assert finding.startswith('drop_table: irreversible, no guard, no approval: a script can call it at step one.')
    assert 'requires= or approval=True' in finding and 'allow_unguarded' in finding
    assert [c.name for c in report.callees if c.unguarded] == ['drop_table']
    text = report.text()
    assert text.startswith('What can hurt:\n   - drop_table: irreversible, no guard, no approval')
    email = next(c for c in report.callees if c.name == 'send_email')
    assert 'a person approves each call before it runs' in email.guards[0]
    refund = next(c for c in report.callees if c.name == 'issue_refund')
    assert refund.guards[0].endswith(
        "; a check_entitlement result supplied rather than run (a fork's result=, --answer"
        ', an eval baseline) does not count (checked at each call, before it runs)'
    )
    assert any('approval=True: at the same point' in where for where in report.enforcement)
    assert report.as_json()['findings'] == [finding]
    assert audit(desk(make_harness(), refunds)).text().startswith('What can hurt: nothing found')


def test_the_audit_suspects_a_sub_agent_whose_own_tools_can_change_the_world(make_harness: Any) -> None:
    """Read from the agents' toolsets, nothing run; an explicit side_effect= is taken at its word."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset

    from harness._check._audit import audit

    ran: list[str] = []

    def delete_rows(table: str) -> str:
        ran.append(table)
        return 'deleted'

    def truncate(table: str) -> str:
        ran.append(table)
        return 'truncated'

    janitor = Agent(TestModel(), name='janitor', tools=[delete_rows], toolsets=[FunctionToolset([truncate])])

    @janitor.tool_plain
    def list_rows(table: str) -> str:
        ran.append(table)
        return ''

    h = make_harness()
    h.add_agent(janitor)
    h.add_agent(Agent(TestModel(), name='reader', tools=[list_rows]), side_effect=False)  # said so: trusted
    h.add_agent(Agent(TestModel(), name='poet'))  # no tools of its own
    h.add_agent(Agent(TestModel(), name='cleaner', tools=[delete_rows]), side_effect=True, approval=True)
    report = audit(h)
    assert report.possibly_irreversible == ['janitor']
    (finding,) = report.findings
    assert finding.startswith(
        'janitor: possibly irreversible: its own agent has tools (delete_rows, list_rows, '
        'truncate) that run when it runs, and it was registered without side_effect='
    )
    assert 'Register it with side_effect=True' in finding
    assert report.as_json()['possibly_irreversible'] == ['janitor']
    assert 'Possibly irreversible (sub-agents with tools of their own, no side_effect= given): janitor' in report.text()
    assert ran == []


def test_strict_refuses_a_script_that_can_reach_an_unguarded_irreversible_callee(
    make_harness: Any, refunds: list
) -> None:
    """At the check, so nothing runs; the message names both fixes; allowed by name, it runs."""
    from pydantic_ai.exceptions import UserError

    dropped: list[str] = []
    strict = ops_desk(make_harness(strict=True), refunds, dropped)
    script = 'e = await check_entitlement(ticket_id="T")\nawait drop_table(name="users")'
    report = strict.check(script)
    assert not report.ok
    assert report.errors == (  # what the script can do first: a model reads it, and cannot change the Harness
        'workflow.py:line 2: drop_table is irreversible (side_effect=True) and has no guard and no approval, so '
        'strict mode refuses every script that can reach it: leave drop_table out of the script. (Its owner can give '
        'it requires= or approval=True where it is registered, or allow it by name: '
        "Harness(strict=True, allow_unguarded=['drop_table']).)"
    )
    with pytest.raises(WorkflowTypeError, match=r"strict mode.*\n.*allow_unguarded=\['drop_table'\]"):
        strict.run_sync(script)
    with pytest.raises(WorkflowTypeError, match='drop_table is irreversible') as refused:
        strict.run_sync('await drop_table(name="users")')
    assert str(refused.value).startswith('The script is refused by strict mode, so nothing ran')  # no rule broken
    assert "break the catalog's rules" not in str(refused.value)
    assert dropped == []
    assert strict.check('await check_entitlement(ticket_id="T")').ok  # cannot reach it: nothing to refuse
    allowed = ops_desk(make_harness(strict=True, allow_unguarded=['drop_table']), refunds, dropped)
    assert allowed.allow_unguarded == frozenset({'drop_table'}) and allowed.check(script).ok
    assert allowed.run_sync(script).value == 'dropped users' and dropped == ['users']
    with pytest.raises(
        UserError,
        match=r'allow_unguarded takes a list of callee names, e.g. '
        r"allow_unguarded=\['drop_table'\]",
    ):
        make_harness(allow_unguarded='drop_table')
    with pytest.raises(UserError, match='allow_unguarded takes a list of callee names'):
        make_harness(allow_unguarded=5)


def test_cli_trace_mermaid_draws_the_path(cli_project: Path) -> None:
    from harness._cli._app import app

    runner = CliRunner()
    ran = runner.invoke(app, ['exec', 'good.py', '--json', '--agents', 'deskmod:h'])
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.output.strip().splitlines()[-1])['run_id']
    chart = runner.invoke(app, ['trace', run_id, '--mermaid', '--agents', 'deskmod:h'])
    assert chart.exit_code == 0, chart.output
    assert 'start ==> n0' in chart.output and 'n0 ==> n1' in chart.output and 'n1 ==> end_' in chart.output


def test_cli_trace_mermaid_draws_an_untaken_branch_from_the_runs_own_catalog(cli_project: Path) -> None:
    """The branch not taken made no call, so only the catalog the run ran on names its callee: `trace` needs
    no `--agents` to draw it."""
    from harness._cli._app import app

    script = (
        'e = await check_entitlement(ticket_id="T")\nif e["eligible"]:\n    done = "no refund"\n'
        'else:\n    done = await issue_refund(ticket_id="T", cents=1)\ndone\n'
    )
    (cli_project / 'branch.py').write_text(script)
    runner = CliRunner()
    ran = runner.invoke(app, ['exec', 'branch.py', '--json', '--agents', 'deskmod:h'])
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.output.strip().splitlines()[-1])['run_id']
    chart = runner.invoke(app, ['trace', run_id, '--mermaid'])
    assert chart.exit_code == 0, chart.output
    assert 'n1["issue_refund<br/>line 5"]' in chart.output and 'n0 --> n1' in chart.output
    assert 'start ==> n0' in chart.output and 'n0 ==> end_' in chart.output
