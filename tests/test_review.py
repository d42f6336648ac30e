"""Plan review (`Harness(review=...)`) and grants: a script that meets the review waits before its first call, a person
approves or rejects its plan, the approved plan's bounds hold while it runs, and one grant approves a loop's calls.

Real Monty and a real SQLite file; a fresh Harness on the same file is the restart.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import Harness, WorkflowError

SCRIPT = """\
sent = []
for to in ['ann', 'bob']:
    body = await draft(to=to)
    sent.append(await send_email(to=to, body=body))
sent
"""


def build(
    store: Path | str, calls: list[str], *, review: object = 'side_effects', extra: bool = False, **options: object
) -> Harness:
    """A catalog with a harmless tool and a side-effecting one (`extra`: one more, registered later)."""
    h = Harness(store=str(store), review=review, **options)  # type: ignore[arg-type]

    @h.tool
    async def draft(*, to: str) -> str:
        calls.append(f'draft {to}')
        return f'hello {to}'

    @h.tool(side_effect=True)
    async def send_email(*, to: str, body: str) -> str:
        calls.append(f'send {to}')
        return f'sent to {to}'

    if extra:

        @h.tool(side_effect=True)
        async def wire_money(*, to: str) -> str:
            calls.append(f'wire {to}')
            return f'wired {to}'

    return h


async def test_a_reviewed_script_runs_nothing_until_its_plan_is_approved_across_a_restart(tmp_path: Path) -> None:
    store, calls = tmp_path / 'runs.db', []
    async with build(store, calls) as h:
        r = await h.run(SCRIPT)
        assert r.status == 'waiting' and r.waiting == []
        assert r.plan is not None and r.plan.code == SCRIPT
        assert r.plan.analysis.bounds == {'draft': 2, 'send_email': 2}
        assert r.plan.estimate.calls == {'draft': 2, 'send_email': 2}
        assert r.plan.irreversible == ('send_email',)
        assert h.store is not None and h.store.calls(r.run_id) == []
        assert h.store.get_run(r.run_id).status == 'waiting'  # type: ignore[union-attr]
    assert calls == []  # nothing ran, no worker held: the run is its row in the store
    async with build(store, calls) as again:  # a restart: a fresh Harness on the same file
        still = await again.resume(r.run_id)
        assert still.status == 'waiting' and still.plan is not None and calls == []  # not approved: nothing ran
        assert again.approve(r.run_id, by='dana') == [0]
        done = await again.resume(r.run_id)
    assert done.status == 'completed' and done.value == ['sent to ann', 'sent to bob']
    assert calls == ['draft ann', 'send ann', 'draft bob', 'send bob']


async def test_a_script_the_review_does_not_meet_runs_at_once(tmp_path: Path) -> None:
    calls: list[str] = []
    async with build(tmp_path / 'runs.db', calls) as h:
        r = await h.run("await draft(to='ann')")
    assert r.status == 'completed' and r.plan is None and calls == ['draft ann']


async def test_always_and_a_callable_policy(tmp_path: Path) -> None:
    seen = []

    def costly(plan: object) -> bool:
        seen.append(plan)
        return sum(n or 0 for n in plan.analysis.bounds.values()) > 3  # type: ignore[attr-defined]

    calls: list[str] = []
    async with build(tmp_path / 'a.db', calls, review='always') as h:
        assert (await h.run("await draft(to='ann')")).status == 'waiting'
    async with build(tmp_path / 'b.db', calls, review=costly) as h:
        assert (await h.run(SCRIPT)).status == 'waiting'  # 4 calls at most
        assert (await h.run("await draft(to='ann')")).status == 'completed'
    assert len(seen) == 2 and calls == ['draft ann']
    async with build(tmp_path / 'c.db', calls, review=lambda plan: 1 / 0) as h:
        assert (await h.run("await draft(to='ann')")).status == 'waiting'  # a policy that raises holds the script


async def test_a_rejected_plan_ends_its_run_and_nothing_ran(tmp_path: Path) -> None:
    calls: list[str] = []
    async with build(tmp_path / 'runs.db', calls) as h:
        r = await h.run(SCRIPT)
        assert h.reject(r.run_id, reason='not today', by='dana') == [0]
        assert h.store is not None
        row = h.store.get_run(r.run_id)
        assert row is not None and row.status == 'failed'
        assert row.error == f'The plan of run {r.run_id} was rejected by dana: not today. Nothing ran.'
        with pytest.raises(WorkflowError, match='was rejected by dana: not today'):
            await h.resume(r.run_id)
        with pytest.raises(WorkflowError, match='does not wait for its plan: name the call to reject'):
            h.reject(r.run_id, reason='again')
    assert calls == []


async def test_an_approved_plan_bounds_the_run(tmp_path: Path) -> None:
    """The plan approved named no `wire_money` (the catalog had none when it was made); the script reaches it
    after a restart with the callee added, and the approved plan refuses it: catchable, named, nothing wired."""
    store, calls = tmp_path / 'runs.db', []
    code = """\
sent = await send_email(to='ann', body='hi')
try:
    wired = await wire_money(to='ann')
except PermissionError as e:
    wired = str(e)
[sent, wired]
"""
    async with build(store, calls, type_check=False) as h:  # unchecked: wire_money is not in this catalog yet
        r = await h.run(code)
        assert r.status == 'waiting' and r.plan is not None and r.plan.bounds == {'send_email': 1}
    async with build(store, calls, extra=True, type_check=False) as h:
        h.approve(r.run_id)
        done = await h.resume(r.run_id)
    assert done.value == [
        'sent to ann',
        'wire_money is past the approved plan of this run, which allows 0 call(s) of it; it was not called.',
    ]
    assert calls == ['send ann']
    assert [(c.callee, c.status) for c in done.calls] == [('send_email', 'ok'), ('wire_money', 'refused')]


LOOP = """\
sent = 0
for i in range(50):
    await send_email(to=f'user{i}@example.com', body='hi')
    sent += 1
await send_email(to='eve@elsewhere.org', body='hi')
sent
"""


def gated(store: Path, sent: list[str]) -> Harness:
    h = Harness(store=str(store), review='side_effects')

    @h.tool(side_effect=True, approval=True)
    async def send_email(*, to: str, body: str) -> str:
        sent.append(to)
        return 'sent'

    return h


async def test_one_grant_lets_a_50_call_loop_of_gated_calls_run(tmp_path: Path) -> None:
    sent: list[str] = []
    async with gated(tmp_path / 'runs.db', sent) as h:
        r = await h.run(LOOP)
        assert r.status == 'waiting' and r.plan is not None and r.plan.bounds == {'send_email': 51}
        h.approve(r.run_id)
        h.grant(r.run_id, 'send_email', max_calls=50, when=lambda args: args['to'].endswith('@example.com'))
        r = await h.resume(r.run_id)  # one decision covered the loop; the call it does not cover waits
        assert sent == [f'user{i}@example.com' for i in range(50)]
        assert r.status == 'waiting' and [(p.seq, p.arguments['to']) for p in r.waiting] == [(51, 'eve@elsewhere.org')]
        assert h.approve(r.run_id) == [51]
        r = await h.resume(r.run_id)
    assert r.status == 'completed' and r.value == 50 and sent[-1] == 'eve@elsewhere.org'


async def test_a_grant_covers_at_most_max_calls(tmp_path: Path) -> None:
    sent: list[str] = []
    async with gated(tmp_path / 'runs.db', sent) as h:
        r = await h.run(LOOP)
        h.approve(r.run_id)
        h.grant(r.run_id, 'send_email', max_calls=20)
        r = await h.resume(r.run_id)
        assert len(sent) == 20 and [p.seq for p in r.waiting] == [21]
        with pytest.raises(UserError, match='approval=True'):
            h.grant(r.run_id, 'draft')


@pytest.mark.parametrize('bad', ['sometimes', 3])
def test_review_takes_a_policy(bad: object) -> None:
    with pytest.raises(UserError, match="review= takes 'side_effects', 'always' or a callable"):
        Harness(store=':memory:', review=bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='give a store'):
        Harness(store=None, review='always')


async def test_the_cli_shows_the_plan_and_approves_it(tmp_path: Path, cli: Any) -> None:
    store, calls = tmp_path / 'runs.db', []
    async with build(store, calls) as h:
        r = await h.run(SCRIPT)
    listed = cli(['pending', '--store', str(store)], cwd=tmp_path, columns=120)
    assert listed.exit_code == 0, listed.stdout + listed.stderr
    out = listed.stdout
    assert f'plan of run {r.run_id}' in out and "  | for to in ['ann', 'bob']:" in out
    assert 'bounds: draft 2 calls, send_email 2 calls' in out and 'irreversible: send_email' in out
    assert 'worst case: $0.0000' in out and 'harness approve RUN' in out
    as_json = json.loads(cli(['pending', '--json', '--store', str(store)], cwd=tmp_path).stdout)
    assert as_json == [{'run_id': r.run_id, 'plan': r.plan.stored(), 'script': SCRIPT}]  # type: ignore[union-attr]
    as_shown = json.loads(cli(['show', r.run_id, '--json', '--store', str(store)], cwd=tmp_path).stdout)
    assert as_shown['plan'] == r.plan.stored()  # type: ignore[union-attr]
    shown = cli(['show', r.run_id, '--store', str(store)], cwd=tmp_path, columns=120)
    assert shown.exit_code == 0 and 'bounds: draft 2 calls, send_email 2 calls' in shown.stdout
    assert shown.stdout.count("for to in ['ann', 'bob']:") == 1  # the script once, above the plan
    assert 'SEQ' not in out  # no call waits: only the plan's way to decide is shown
    approved = cli(['approve', r.run_id, '--by', 'dana', '--store', str(store)], cwd=tmp_path, columns=120)
    assert approved.exit_code == 0 and f'approved the plan of run {r.run_id}' in approved.stdout
    assert 'nothing waits for approval' in cli(['pending', '--store', str(store)], cwd=tmp_path).stdout
    async with build(store, calls) as h:
        assert (await h.resume(r.run_id)).status == 'completed'
    assert calls == ['draft ann', 'send ann', 'draft bob', 'send bob']


def writes_the_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The orchestrator's model: runs SCRIPT, then reports what the tool answered."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart | RetryPromptPart):
            return ModelResponse(parts=[TextPart(f'done: {part.content}')])
    return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': SCRIPT})])


def test_under_an_orchestrator_the_plan_is_a_deferred_approval_of_run_workflow(tmp_path: Path) -> None:
    calls: list[str] = []

    with build(tmp_path / 'runs.db', calls) as h:
        agent = h.orchestrator(FunctionModel(writes_the_script))
        first = agent.run_sync('email ann and bob')
        assert isinstance(first.output, DeferredToolRequests) and calls == []
        (call,) = first.output.approvals
        plan = first.output.metadata[call.tool_call_id]['plan']
        assert plan['code'] == SCRIPT and plan['bounds'] == {'draft': 2, 'send_email': 2}
        assert plan['irreversible'] == ['send_email'] and plan['worst_case'] == '$0.0000'
        results = DeferredToolResults(approvals={call.tool_call_id: True})
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == "done: ['sent to ann', 'sent to bob']"
    assert calls == ['draft ann', 'send ann', 'draft bob', 'send bob']


def test_a_plan_rejected_in_the_store_tells_the_model_its_worst_case(tmp_path: Path) -> None:
    """Rejected where the studio rejects it (`h.reject`), the turn going on reads the rejection with the script's
    estimate, so the model can write a smaller script."""
    calls: list[str] = []

    with build(tmp_path / 'runs.db', calls) as h:
        agent = h.orchestrator(FunctionModel(writes_the_script))
        first = agent.run_sync('email ann and bob')
        assert isinstance(first.output, DeferredToolRequests)
        (call,) = first.output.approvals
        h.reject(first.output.metadata[call.tool_call_id]['run_id'], reason='too many', by='dana')
        results = DeferredToolResults(approvals={call.tool_call_id: True})
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert 'was rejected by dana: too many. Nothing ran.' in second.output
    assert (
        'The worst case of that script, from its static bounds (nothing of it ran):\nworst case: $0.0000\n'
        '  draft: 2 calls x $0.0000 (host tool) = $0.0000\n  send_email: 2 calls x $0.0000 (host tool) = $0.0000\n'
    ) in second.output
    assert calls == []


async def test_other_branches_of_a_gather_keep_running_while_one_call_waits(tmp_path: Path) -> None:
    code = """\
import asyncio
async def team():
    for i in range(5):
        await send_email(to=f'user{i}@example.com', body='hi')
    return 5
(await asyncio.gather(send_email(to='eve@elsewhere.org', body='hi'), team()))[1]
"""
    sent: list[str] = []
    async with gated(tmp_path / 'runs.db', sent) as h:
        r = await h.run(code)
        h.approve(r.run_id)
        h.grant(r.run_id, 'send_email', when=lambda args: args['to'].endswith('@example.com'))
        r = await h.resume(r.run_id)
        assert r.status == 'waiting' and [p.arguments['to'] for p in r.waiting] == ['eve@elsewhere.org']
        assert sent == [f'user{i}@example.com' for i in range(5)]  # the branch beside the waiting call ran on
        h.approve(r.run_id)
        r = await h.resume(r.run_id)
    assert r.value == 5 and sent[-1] == 'eve@elsewhere.org'


MAILER = """\
from harness import Harness

h = Harness(store=None)


@h.tool(side_effect=True)
async def send_email(*, to: str, body: str) -> str:
    \"\"\"Send an email.\"\"\"
    return f'sent to {to}'
"""


def test_the_project_config_turns_review_on_for_the_cli(tmp_path: Path, cli: Any) -> None:
    (tmp_path / 'pyproject.toml').write_text('[tool.harness]\nagents = ["mailer:h"]\nreview = "side_effects"\n')
    (tmp_path / 'mailer.py').write_text(MAILER)
    (tmp_path / 'mail.py').write_text("await send_email(to='ann', body='hi')\n")
    store = str(tmp_path / 'runs.db')
    held = cli(['exec', 'mail.py', '--store', store], cwd=tmp_path, columns=120)
    assert held.exit_code == 0, held.stdout + held.stderr
    assert 'waits for approval of its plan' in held.stdout and 'bounds: send_email 1 call' in held.stdout
    (run_id,) = [line.split()[1] for line in held.stdout.splitlines() if line.startswith('run ')]
    assert cli(['approve', run_id, '--store', store], cwd=tmp_path).exit_code == 0
    resumed = cli(['resume', run_id, '--store', store], cwd=tmp_path, columns=120)
    assert resumed.exit_code == 0 and 'sent to ann' in resumed.stdout, resumed.stdout + resumed.stderr
    (tmp_path / 'pyproject.toml').write_text('[tool.harness]\nreview = "often"\n')
    bad = cli(['exec', 'mail.py', '--store', store], cwd=tmp_path, columns=120)
    assert bad.exit_code != 0 and '[tool.harness] review is "side_effects"' in bad.stdout + bad.stderr
    assert 'Traceback' not in bad.stdout + bad.stderr


async def test_the_plan_bounds_count_the_calls_before_a_restore(tmp_path: Path) -> None:
    """The bounds are counted over the whole run: the calls before a pause's snapshot count after the resume."""
    from harness._catalog._rules import Access

    sent: list[str] = []
    h = Harness(store=str(tmp_path / 'runs.db'))

    @h.tool(side_effect=True)
    async def send(*, to: str) -> str:
        sent.append(to)
        return f'sent {to}'

    @h.tool(approval=True)
    async def gate() -> str:
        return 'open'

    code = """\
out = [await send(to='a')]
await gate()
for to in ['b', 'c']:
    try:
        out.append(await send(to=to))
    except PermissionError as e:
        out.append(str(e))
out
"""
    async with h:
        plan = {'bounds': {'send': 2, 'gate': 1}, 'complete': True}  # as approved: two sends
        r = await h.run(code, scope=h.new_scope(access=Access(plan=plan)))
        assert r.status == 'waiting' and sent == ['a']
        h.approve(r.run_id)
    async with Harness(store=str(tmp_path / 'runs.db')) as again:  # restored from the snapshot at the gate
        again.add_callee(h.callees['send'])
        again.add_callee(h.callees['gate'])
        done = await again.resume(r.run_id)
    assert done.value == [
        'sent a',
        'sent b',
        'send is past the approved plan of this run, which allows 2 call(s) of it; it was not called.',
    ]
    assert sent == ['a', 'b']


@pytest.mark.parametrize('decision', ['approve', 'reject', 'no answer'])
def test_ask_shows_the_plan_and_asks_before_anything_runs(
    tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch, decision: str
) -> None:
    """`harness ask` with review on: the plan is shown and asked about (never approved unasked); a rejection ends
    the run and the model reads why; with no one to answer, the run stays waiting."""
    from test_cli import scripted

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                return ModelResponse(parts=[TextPart(f'result: {part.content}')])
        code = "await send_email(to='ann', body='hi')"
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code}, tool_call_id='call_1')])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    (tmp_path / 'pyproject.toml').write_text('[tool.harness]\nagents = ["mailer:h"]\nreview = "side_effects"\n')
    (tmp_path / 'mailer.py').write_text(MAILER)
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    answers = {'approve': 'y\n', 'reject': 'n\nnot today\n', 'no answer': ''}[decision]
    done = cli(['ask', 'email ann'], cwd=tmp_path, env=env, input=answers, columns=120)
    out = done.stdout
    assert done.exit_code == 0, out + done.stderr
    assert 'waits for approval of its plan' in out and 'bounds: send_email 1 call' in out
    assert 'approve the plan? [y/N]' in out
    [run] = json.loads(cli(['runs', '--json'], cwd=tmp_path, env=env).stdout)
    if decision == 'approve':
        assert 'result: sent to ann' in out and run['status'] == 'completed'
    elif decision == 'reject':
        assert 'The person rejected the plan of this script: not today' in out and run['status'] == 'failed'
        assert 'The worst case of that script, from its static bounds (nothing of it ran)' in ' '.join(out.split())
    else:
        assert f'left waiting: harness approve {run["run_id"]}' in out and run['status'] == 'waiting'


async def test_a_hundred_held_plans_hold_no_worker(tmp_path: Path) -> None:
    h = Harness(store=str(tmp_path / 'runs.db'), review='always', max_workers=1)  # a held plan with a worker: stuck
    done: list[int] = []

    @h.tool
    async def act(*, i: int) -> int:
        done.append(i)
        return i

    async with h:
        held = await asyncio.gather(*[h.run(f'await act(i={i})') for i in range(100)])
        assert {r.status for r in held} == {'waiting'} and done == []
        for r in held:
            h.approve(r.run_id)
        resumed = await asyncio.gather(*[h.resume(r.run_id) for r in held])
    assert sorted(r.value for r in resumed) == list(range(100)) == sorted(done)
