"""The run_workflow tool through a real pydantic-ai Agent driven by FunctionModel."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from test_engine import sending

from harness import Harness


def retried(parts: list[Any]) -> list[str]:
    """The retry messages the model got (pydantic-ai 2.62 sends them as retried tool returns; older ones as
    `RetryPromptPart`s)."""
    found = []
    for part in parts:
        if isinstance(part, RetryPromptPart):
            found.append(part.model_response())
        elif isinstance(part, ToolReturnPart) and getattr(part, 'outcome', None) == 'retried':
            found.append(str(part.content))
    return found


def scripted(*scripts: str, seen: list[Any] | None = None) -> FunctionModel:
    """An orchestrator model that sends the given scripts one per turn, then answers with the last tool result."""
    queue = list(scripts)
    tools_seen: list[list[str]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools_seen.append([t.name for t in info.function_tools])
        last = messages[-1]
        if seen is not None and isinstance(last, ModelRequest):
            seen.extend(last.parts)
        if queue:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': queue.pop(0)})])
        part = last.parts[-1] if isinstance(last, ModelRequest) else None
        return ModelResponse(parts=[TextPart(f'final: {getattr(part, "content", "")}')])

    model = FunctionModel(respond)
    model.tools_seen = tools_seen  # type: ignore[attr-defined]
    return model


def test_orchestrator_has_exactly_one_tool_and_retries_a_type_error(make_harness):
    h = make_harness()
    runs: list[str] = []

    @h.subagent
    async def reviewer(*, task: str) -> str:
        runs.append(task)
        return f'reviewed {task}'

    seen: list[Any] = []
    model = scripted(
        'r = await reviewer(task=42)',
        'import asyncio\nrs = await asyncio.gather(reviewer(task="a"), reviewer(task="b"))\nrs',
        seen=seen,
    )
    agent = h.orchestrator(model)
    result = agent.run_sync('review a and b')
    assert model.tools_seen[0] == ['run_workflow']  # type: ignore[attr-defined]
    [retry] = retried(seen)
    assert 'invalid-argument-type' in retry
    assert 'nothing ran' in retry
    assert runs == ['a', 'b']
    assert result.output == "final: ['reviewed a', 'reviewed b']"


def test_failed_script_lists_completed_results_for_the_retry(make_harness):
    h = make_harness()

    @h.subagent
    async def step(*, n: int) -> int:
        return n * n

    seen: list[Any] = []
    script = 'a = await step(n=1)\nb = await step(n=2)\nc = await step(n=3)\nraise ValueError("then it broke")'
    h.orchestrator(scripted(script, '1', seen=seen)).run_sync('go')
    [retry] = retried(seen)
    assert 'ValueError: then it broke' in retry
    assert '#1 step({"n":1}) -> 1' in retry
    assert '#2 step({"n":2}) -> 4' in retry
    assert '#3 step({"n":3}) -> 9' in retry


def recording_step(h: Harness) -> list[int]:
    """A sub-agent `step(n)` on `h` that records each `n` it ran with."""
    ran: list[int] = []

    @h.subagent
    async def step(*, n: int) -> int:
        ran.append(n)
        return n

    return ran


def test_budget_is_shared_across_scripts_of_one_run_and_ends_with_a_result_not_a_retry(make_harness):
    h = make_harness(max_agent_calls=3)
    count = 0

    @h.subagent
    async def step(*, n: int) -> int:
        nonlocal count
        count += 1
        return n

    seen: list[Any] = []
    model = scripted('await step(n=1)\nawait step(n=2)', 'await step(n=3)\nawait step(n=4)', seen=seen)
    result = h.orchestrator(model).run_sync('go')
    assert count == 3
    returns = [p for p in seen if isinstance(p, ToolReturnPart)]
    assert 'budget' in str(returns[-1].content)
    assert retried(seen) == []
    assert result.output.startswith('final:')


def test_one_budget_is_shared_by_the_gathers_of_every_script_of_a_run(make_harness):
    h = make_harness(max_agent_calls=3)
    ran = recording_step(h)

    seen: list[Any] = []
    gather = 'import asyncio\nawait asyncio.gather({})'
    model = scripted(gather.format('step(n=1), step(n=2)'), gather.format('step(n=3), step(n=4), step(n=5)'), seen=seen)
    result = h.orchestrator(model).run_sync('go')
    assert ran == [1, 2, 3]  # the second script's first call spent the last of the budget, and ran
    last = str([p for p in seen if isinstance(p, ToolReturnPart)][-1].content)
    assert '(3/3 sub-agent calls' in last and 'step({"n":3}) -> 3' in last
    assert retried(seen) == []
    assert result.output.startswith('final:')


def test_two_run_workflow_calls_in_one_response_share_the_budget_exactly(make_harness):
    h = make_harness(max_agent_calls=4)
    ran = recording_step(h)

    scripts = [f'import asyncio\nawait asyncio.gather(*[step(n={k} + i) for i in range(3)])' for k in (0, 10)]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code}) for code in scripts])
        return ModelResponse(parts=[TextPart('done')])

    assert h.orchestrator(FunctionModel(respond)).run_sync('go').output == 'done'
    assert len(ran) == 4


def test_a_new_orchestrator_run_starts_with_a_fresh_budget(make_harness):
    h = make_harness(max_agent_calls=3)
    ran = recording_step(h)

    gather = 'import asyncio\nawait asyncio.gather(*[step(n=i) for i in range(5)])'
    agent = h.orchestrator(scripted(gather))
    assert 'budget ran out' in agent.run_sync('go').output
    assert ran == [0, 1, 2]
    assert agent.run_sync('again', model=scripted(gather)).output.startswith('final:')
    assert ran == [0, 1, 2, 0, 1, 2]


def test_sub_agents_get_deps_usage_and_do_not_see_run_workflow(make_harness):
    h = make_harness()
    inner_tools: list[list[str]] = []

    def inner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        inner_tools.append([t.name for t in info.function_tools])
        return ModelResponse(parts=[TextPart('inner answer')])

    helper: Agent[Any, str] = Agent(FunctionModel(inner), name='helper', deps_type=dict)
    # The sub-agent carries the capability itself: workflows must not nest all the same.
    helper_with_cap: Agent[Any, str] = Agent(FunctionModel(inner), name='nested', capabilities=[h.capability()])
    h.add_agent(helper)
    h.add_agent(helper_with_cap)
    agent = h.orchestrator(scripted('[await helper(task="x"), await nested(task="y")]'), deps_type=dict)
    result = agent.run_sync('go', deps={'k': 1})
    assert inner_tools == [[], []]
    baseline = h.orchestrator(scripted('["no calls"]'), deps_type=dict).run_sync('go', deps={'k': 1})
    # Sub-agent tokens join the orchestrator's report; their requests count against their own limits.
    assert result.usage.requests == baseline.usage.requests == 2
    assert result.usage.output_tokens > baseline.usage.output_tokens


def test_fifty_sub_agent_calls_through_the_orchestrator_with_defaults(make_harness):
    h = make_harness()
    h.add_agent(Agent(TestModel(custom_output_text='ok'), name='worker'))
    script = 'import asyncio\nrs = await asyncio.gather(*[worker(task=str(i)) for i in range(50)])\nlen(rs)'
    result = h.orchestrator(scripted(script)).run_sync('go')
    assert result.output == 'final: 50'


def test_tool_description_is_stable_and_carries_the_stubs(make_harness):
    h = make_harness()

    @h.subagent
    async def reviewer(*, task: str) -> str:
        return task

    descriptions: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        descriptions.extend(t.description or '' for t in info.function_tools)
        if len(descriptions) == 1:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': '1'})])
        return ModelResponse(parts=[TextPart('done')])

    h.orchestrator(FunctionModel(respond)).run_sync('x')
    assert len(descriptions) == 2 and descriptions[0] == descriptions[1]
    assert h.stubs() in descriptions[0]


async def test_concurrent_orchestrator_runs_keep_separate_budgets(make_harness):
    h = make_harness(max_agent_calls=2)

    @h.subagent
    async def step(*, n: int) -> int:
        await asyncio.sleep(0)  # let the three orchestrator runs interleave
        return n

    agent = h.orchestrator(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('x')])))

    def make_model() -> FunctionModel:
        return scripted('[await step(n=1), await step(n=2)]')

    results = await asyncio.gather(*[agent.run('go', model=make_model()) for _ in range(3)])
    assert all(r.output == 'final: [1, 2]' for r in results)


def test_the_model_is_told_which_calls_wait_for_a_person_and_what_waiting_does_to_the_turn(make_harness):
    """A callee registered with `approval=True` says so in its stub, and the `run_workflow` description says what
    happens when a script reaches it: the turn pauses until a person decides, then the script goes on."""
    h = make_harness()

    @h.tool
    async def draft(*, to: str) -> str:
        """Draft an email."""
        return f'hello {to}'

    @h.tool(side_effect=True, approval=True)
    async def send_email(*, to: str, body: str) -> str:
        """Send an email."""
        return f'sent to {to}'

    descriptions: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        descriptions.extend(t.description or '' for t in info.function_tools)
        return ModelResponse(parts=[TextPart('done')])

    h.orchestrator(FunctionModel(respond)).run_sync('x')
    stubs = h.stubs()
    send_stub = stubs[stubs.index('async def send_email') :].split('\n    ...\n')[0]
    draft_stub = stubs[stubs.index('async def draft') :].split('\n    ...\n')[0]
    assert 'Needs approval: a person must approve each call before it runs' in send_stub
    assert 'approval' not in draft_stub
    (description,) = descriptions
    assert stubs in description
    assert "- send_email needs a person's approval" in description
    assert 'this turn ends there' in description and 'raises PermissionError' in description


def test_the_description_says_nothing_of_approvals_when_no_call_needs_one(make_harness):
    h = make_harness()

    @h.tool
    async def draft(*, to: str) -> str:
        return to

    from harness._agent._toolset import WorkflowToolset

    assert 'approval' not in WorkflowToolset(h).description()


def test_a_retry_does_not_repeat_a_side_effect_that_succeeded_and_the_tool_result_says_so(make_harness):
    """Issue 23.4: a later script of the same orchestrator run repeating a side effect that succeeded gets its result
    instead of a second effect (one earlier success answers one call), and the model is told which call and where."""
    for store in (':memory:', None):  # from the journal, and without one from what the scripts remembered
        h = make_harness(store=store)
        sent = sending(h)
        seen: list[Any] = []
        first = 'await send_email(to="x", body="hi")\nraise ValueError("then it broke")'
        second = 'a = await send_email(to="x", body="hi")\nb = await send_email(to="x", body="hi")\n[a, b]'
        h.orchestrator(scripted(first, second, seen=seen)).run_sync('email x')
        assert sent == [('x', 'hi'), ('x', 'hi')]  # the retry's first call was answered; its second is one more: sent
        [retry] = retried(seen)
        assert 'then it broke' in retry
        [returned] = [p for p in seen if isinstance(p, ToolReturnPart) and 'note' in str(p.content)]
        assert returned.content['result'] == ['sent #1', 'sent #2']
        note = returned.content['note']
        assert (
            'send_email({"to":"x","body":"hi"}) was not run again: it already succeeded in an earlier script of '
            'this orchestrator run (run ' in note
        ), note
        assert note.count('was not run again') == 1


def test_a_retrys_refund_answered_from_the_earlier_one_still_needs_and_consumes_its_check(make_harness):
    """A rule is decided from the script's own calls before any answer (as `h.check` and a replay decide it): the
    retry's repeated refund, answered from the first script's, consumes the retry's check; one more refund is
    refused, not paid on the check the answered one did not need."""
    from harness import After

    h = make_harness()
    refunds: list[int] = []

    @h.tool
    async def check(*, ticket: str) -> bool:
        return True

    @h.tool(side_effect=True, requires=After('check', same=('ticket',), once=True))
    async def refund(*, ticket: str, cents: int) -> str:
        refunds.append(cents)
        return f'refunded {cents}'

    first = 'await check(ticket="T1")\nawait refund(ticket="T1", cents=500)\nraise ValueError("then it broke")'
    second = (
        'await check(ticket="T1")\na = await refund(ticket="T1", cents=500)\ntry:\n'
        '    b = await refund(ticket="T1", cents=500)\nexcept PermissionError:\n    b = "refused"\n[a, b]'
    )
    seen: list[Any] = []
    h.orchestrator(scripted(first, second, seen=seen)).run_sync('refund T1')
    [returned] = [p for p in seen if isinstance(p, ToolReturnPart) and 'note' in str(p.content)]
    assert returned.content['result'] == ['refunded 500', 'refused']
    assert refunds == [500]


def test_a_retry_that_waits_for_approval_still_does_not_repeat_the_side_effect_after_it(make_harness):
    """A retry script answered from the first one's email is answered so past a pause too: the resume after the
    approval is the same script, with the same earlier effects (not a fresh start that sends the email again). A later
    turn that has the first turn's result and waits before repeating its email still means a second one."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults

    h = make_harness()
    sent = sending(h)

    @h.tool(approval=True)
    async def pause_here(*, i: int) -> int:
        """A step a person approves."""
        return i

    def approved(agent: Any, first: Any) -> Any:
        assert isinstance(first.output, DeferredToolRequests), first.output
        (call,) = first.output.approvals
        return agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}),
        )

    seen: list[Any] = []
    waits = 'await pause_here(i=1)\nawait send_email(to="x", body="hi")'
    agent = h.orchestrator(
        scripted('await send_email(to="x", body="hi")\nraise ValueError("then it broke")', waits, seen=seen)
    )
    turn = approved(agent, agent.run_sync('email x'))
    assert sent == [('x', 'hi')]  # the retry's email, after the pause, was the first one's
    assert 'was not run again' in str(turn.output)
    again = h.orchestrator(scripted(waits))
    approved(again, again.run_sync('email x again', message_history=turn.all_messages()))
    assert sent == [('x', 'hi')] * 2  # a turn that had the first one's result: a second email was meant


def test_a_turn_with_an_earlier_ones_result_repeats_its_side_effect_a_retry_of_a_lost_turn_does_not(make_harness):
    """Issue 23.4, the Python API: turns of one conversation are told apart by pydantic-ai's `conversation_id`, which
    the history's messages carry. A turn that has an earlier turn's result in its history and repeats its email means
    a second one: it is sent. The same turn run again with the history it had (as when its messages were lost with
    its process) is answered from the email it sent, and told where it ran. Another conversation sends its own."""
    h = make_harness()
    sent = sending(h)
    script = 'await send_email(to="x", body="hi")'
    first = h.orchestrator(scripted(script)).run_sync('email x')
    h.orchestrator(scripted(script)).run_sync('email x again', message_history=first.all_messages())
    assert sent == [('x', 'hi')] * 2  # the second turn had the first one's result: a second email was meant
    seen: list[Any] = []
    h.orchestrator(scripted(script, seen=seen)).run_sync('email x again', message_history=first.all_messages())
    assert sent == [('x', 'hi')] * 2
    [returned] = [p for p in seen if isinstance(p, ToolReturnPart)]
    assert 'it already succeeded in an earlier script of this conversation (run ' in returned.content['note']
    assert 'in a turn whose messages you do not have' in returned.content['note']
    h.orchestrator(scripted(script)).run_sync('email x')  # another conversation: its own email
    assert sent == [('x', 'hi')] * 3
