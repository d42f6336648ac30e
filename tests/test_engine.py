"""The engine end to end: typed catalog, check, sandbox loop, concurrent dispatch, budgets, limits."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import BudgetExceeded, CallEvent, WorkflowError, WorkflowRuntimeError, WorkflowTypeError
from harness._settings import Settings


class Review(BaseModel):
    verdict: Literal['ok', 'needs_work']
    notes: str


def test_gather_of_three_typed_subagents_overlaps_and_joins(make_harness):
    h = make_harness()
    arrived: list[str] = []
    all_in = asyncio.Event()

    @h.subagent
    async def review(*, path: str, focus: Literal['bugs', 'style']) -> Review:
        """Review one file."""
        arrived.append(path)
        if len(arrived) == 3:
            all_in.set()
        await all_in.wait()  # returns only once all three are running at the same time
        return Review(verdict='ok' if path != 'b.py' else 'needs_work', notes=f'{path}/{focus}')

    code = (
        'import asyncio\n'
        'rs = await asyncio.gather(review(path="a.py", focus="bugs"), review(path="b.py", focus="style"),\n'
        '                          review(path="c.py", focus="bugs"))\n'
        '{"bad": [r["notes"] for r in rs if r["verdict"] == "needs_work"], "n": len(rs)}\n'
    )
    result = h.run_sync(code)
    assert result.value == {'bad': ['b.py/style'], 'n': 3}
    assert result.status == 'completed'
    assert [c.seq for c in result.calls] == [1, 2, 3]
    assert [c.arguments['path'] for c in result.calls] == ['a.py', 'b.py', 'c.py']
    assert all(c.line == 2 or c.line == 3 for c in result.calls)
    assert sorted(arrived) == ['a.py', 'b.py', 'c.py']  # all three were in flight together


@pytest.mark.parametrize(
    ('code', 'rule'),
    [
        ('r = await review(path="a", focus="bugs")\nr.verdict', 'unresolved-attribute'),
        ('r = await reveiw(path="a", focus="bugs")', 'unresolved-reference'),
        ('r = await review("a", focus="bugs")', 'too-many-positional-arguments'),
        ('r = await review(path="a", focus="speed")', 'invalid-argument-type'),
        ('r = await review(path="a", focus="bugs")\nr["verdit"]', 'invalid-key'),
    ],
)
def test_check_rejects_with_tys_message_and_nothing_runs(make_harness, code: str, rule: str):
    h = make_harness()
    ran: list[str] = []

    @h.subagent
    async def review(*, path: str, focus: Literal['bugs', 'style']) -> Review:
        ran.append(path)
        return Review(verdict='ok', notes='')

    report = h.check(code)
    assert not report.ok
    assert rule in report.errors
    assert any(d.rule == rule for d in report.diagnostics)
    with pytest.raises(WorkflowTypeError) as info:
        h.run_sync(code)
    assert rule in str(info.value)
    assert 'nothing ran' in str(info.value)
    assert ran == []


def test_subscript_of_typed_output_works(make_harness):
    h = make_harness()

    @h.subagent
    async def review(*, path: str, focus: Literal['bugs', 'style']) -> Review:
        return Review(verdict='needs_work', notes=path)

    assert h.check('r = await review(path="a", focus="bugs")\nr["verdict"]').ok
    assert h.run_sync('r = await review(path="a", focus="bugs")\nr["verdict"]').value == 'needs_work'
    stubs = h.stubs()
    assert 'class Review(TypedDict):' in stubs
    assert "async def review(*, path: str, focus: Literal['bugs', 'style']) -> Review:" in stubs


def counting_agent(h, *, delay: float = 0.0, name: str = 'work') -> dict[str, int]:
    stats = {'calls': 0, 'in_flight': 0, 'peak': 0}

    async def work(*, i: int) -> int:
        stats['calls'] += 1
        stats['in_flight'] += 1
        stats['peak'] = max(stats['peak'], stats['in_flight'])
        try:
            await asyncio.sleep(delay)
        finally:
            stats['in_flight'] -= 1
        return i * 10

    h.subagent(name=name)(work)
    return stats


def test_budget_is_exact_under_fan_out_and_can_be_caught(make_harness):
    h = make_harness(max_agent_calls=5)
    stats = counting_agent(h, delay=0.01)
    result = h.run_sync('rs = await settle_all(*[work(i=i) for i in range(10)])\n[r["ok"] for r in rs].count(True)')
    assert stats['calls'] == 5
    assert result.value == 5
    assert result.budget_exhausted
    assert 'budget' in (result.note or '')


def test_uncaught_budget_error_is_budget_exceeded_with_completed_calls(make_harness):
    h = make_harness(max_agent_calls=3)
    stats = counting_agent(h)
    with pytest.raises(BudgetExceeded) as info:
        h.run_sync('for i in range(10):\n    await work(i=i)')
    assert stats['calls'] == 3
    assert [c.result for c in info.value.completed] == [0, 10, 20]


def test_a_gather_past_the_budget_runs_the_budget_in_call_order_then_fails(make_harness):
    h = make_harness(max_agent_calls=5)
    stats = counting_agent(h)
    with pytest.raises(BudgetExceeded) as info:
        h.run_sync('import asyncio\nawait asyncio.gather(*[work(i=i) for i in range(10)])')
    assert stats['calls'] == 5
    assert '(5/5 sub-agent calls' in info.value.message
    assert [(c.seq, c.result) for c in info.value.completed] == [(1, 0), (2, 10), (3, 20), (4, 30), (5, 40)]
    with pytest.raises(BudgetExceeded) as replayed:  # the replay ends the same way, running nothing
        h.replay_sync(info.value.run_id)
    assert stats['calls'] == 5
    assert '(5/5 sub-agent calls' in replayed.value.message
    assert [(c.seq, c.result, c.source) for c in replayed.value.completed] == [
        (seq, 10 * (seq - 1), 'replayed') for seq in range(1, 6)
    ]


def test_a_fan_out_far_past_the_budget_is_not_taken_for_a_retry_loop(make_harness):
    h = make_harness(max_agent_calls=20)
    stats = counting_agent(h)
    with pytest.raises(BudgetExceeded) as info:  # 130 refusals, more than a script may retry (100)
        h.run_sync('import asyncio\nawait asyncio.gather(*[work(i=i) for i in range(150)])')
    assert stats['calls'] == 20 and len(info.value.completed) == 20
    assert '(20/20 sub-agent calls' in info.value.message
    with pytest.raises(WorkflowRuntimeError, match='stopped after 100 refused calls'):  # a loop still is one
        h.run_sync('for i in range(150):\n    try:\n        await work(i=i)\n    except RuntimeError:\n        pass')


def test_a_fan_out_thousands_past_the_budget_stops_once_the_calls_within_it_ended(make_harness):
    """Each refused call costs the sandbox a pause: past MAX_WITHHELD refusals behind one fan-out the script is
    stopped, after the budget's worth of calls has run and been journaled (a 100,000-way gather took 33 s)."""
    from harness._dispatch._dispatcher import MAX_WITHHELD

    h = make_harness(max_agent_calls=5)
    stats = counting_agent(h)
    with pytest.raises(BudgetExceeded, match=f'more than {MAX_WITHHELD:,} calls past its budget') as info:
        h.run_sync(f'import asyncio\nawait asyncio.gather(*[work(i=i) for i in range({MAX_WITHHELD * 3})])')
    assert stats['calls'] == 5 and [c.status for c in info.value.completed] == ['ok'] * 5
    assert '(5/5 sub-agent calls' in info.value.message
    [run] = h.runs()
    assert (run.status, run.calls_count) == ('failed', 5)


def test_a_run_that_went_past_its_budget_replays_to_the_same_value(make_harness):
    h = make_harness(max_agent_calls=2)
    stats = counting_agent(h)

    @h.tool
    async def tally(*, n: int) -> int:
        return n

    code = 'rs = await settle_all(*[work(i=i) for i in range(4)])\nawait tally(n=[r["ok"] for r in rs].count(True))'
    result = h.run_sync(code)
    assert (result.value, stats['calls']) == (2, 2)
    assert [c.callee for c in result.calls] == ['work', 'work', 'tally']  # the refused calls have no record
    replayed = h.replay_sync(result.run_id)  # refused again, not taken for the journal's next call
    assert (replayed.value, stats['calls'], replayed.budget_exhausted) == (2, 2, True)


def test_a_later_script_of_an_orchestrator_run_replays_with_the_budget_it_had(make_harness):
    h = make_harness(max_agent_calls=3)
    stats = counting_agent(h)
    scope = h.new_scope(orchestrator_run_id='orch-1')
    assert h.run_sync('[await work(i=1), await work(i=2)]', scope=scope).value == [10, 20]
    # work(i=1) is reused (no budget), work(i=3) spends the last of it, work(i=4) and work(i=5) are refused
    code = '[r["ok"] for r in await settle_all(work(i=1), work(i=3), work(i=4), work(i=5))]'
    result = h.run_sync(code, scope=scope)
    assert (result.value, stats['calls']) == ([True, True, False, False], 3)
    replayed = h.replay_sync(result.run_id)
    assert (replayed.value, stats['calls'], replayed.budget_exhausted) == ([True, True, False, False], 3, True)


def test_call_caps_are_exact_per_callee(make_harness):
    h = make_harness(call_caps={'work': 2})
    stats = counting_agent(h)
    other = counting_agent(h, name='other')
    result = h.run_sync(
        'rs = await settle_all(*[work(i=i) for i in range(6)], *[other(i=i) for i in range(4)])\n[r["ok"] for r in rs]'
    )
    assert stats['calls'] == 2
    assert other['calls'] == 4
    assert result.value == [True, True, False, False, False, False, True, True, True, True]


def test_every_budget_refusal_names_the_budget_that_refused_it(make_harness):
    """Issue 21.18: what the script is told, and the note on its result, say which budget is spent."""
    h = make_harness(max_agent_calls=2, max_tool_calls=1, call_caps={'work': 1})
    counting_agent(h)
    counting_agent(h, name='other')

    @h.tool
    def ping() -> int:
        return 1

    result = h.run_sync(
        'rs = await settle_all(work(i=1), work(i=2), other(i=1), other(i=2), ping(), ping())\n'
        '[r.get("error") for r in rs]'
    )
    ok_1, cap, ok_2, agents, ok_3, tools = result.value
    assert ok_1 is None and ok_2 is None and ok_3 is None
    assert cap.startswith("The call cap for work (call_caps['work']=1) is spent"), cap
    assert agents.startswith('The sub-agent call budget (max_agent_calls=2) is spent'), agents
    assert tools.startswith('The tool call budget (max_tool_calls=1) is spent'), tools
    note = result.note or ''
    for budget in ("call_caps['work']=1", 'max_agent_calls=2', 'max_tool_calls=1'):
        assert budget in note, note


def live_view(width: int = 200) -> tuple[Any, Any]:
    """The terminal's live view of calls (`harness ask`, `harness exec`) on a recording console."""
    from rich.console import Console

    from harness._cli._live import LiveCalls

    console = Console(record=True, width=width, color_system=None)
    return LiveCalls(console), console


def test_calls_a_budget_refuses_are_shown_live_and_not_journaled(make_harness):
    """Issue 21.18: each call the budget refuses is an event (`refused`, no journal position) the terminal
    shows as it happens, naming the budget; it is not a call of the run and spent nothing."""
    h = make_harness(max_agent_calls=2)
    counting_agent(h)
    events: list[CallEvent] = []
    live, console = live_view()

    def on_event(event: CallEvent) -> None:
        events.append(event)
        live(event)

    result = h.run_sync(
        'rs = await settle_all(*[work(i=i) for i in range(4)])\n[r["ok"] for r in rs]', on_event=on_event
    )
    assert result.value == [True, True, False, False]
    refused = [e for e in events if e.kind == 'refused']
    assert [(e.seq, e.arguments) for e in refused] == [(0, {'i': 2}), (0, {'i': 3})]
    assert [c.seq for c in result.calls] == [1, 2] and [c.status for c in result.calls] == ['ok', 'ok']
    shown = console.export_text()
    for i in (2, 3):
        assert f'⊘ work(i={i}) refused: The sub-agent call budget (max_agent_calls=2) is spent' in shown, shown
    assert '→ #3' not in shown and '#0' not in shown  # no number: it never got a place in the journal


def test_calls_skipped_when_the_script_ends_are_shown_live(make_harness):
    """Issue 21.18: a call the script ended before it started is shown as `skipped`, as it is journaled."""
    h = make_harness(call_concurrency={'slow': 1})
    running = asyncio.Event()

    @h.tool
    async def fail_soon() -> int:
        await running.wait()
        raise ValueError('no')

    @h.tool
    async def slow(*, i: int) -> int:
        running.set()  # the second one waits behind this one (call_concurrency) and never starts
        await asyncio.Event().wait()
        return i

    events: list[CallEvent] = []
    live, console = live_view()

    def on_event(event: CallEvent) -> None:
        events.append(event)
        live(event)

    with pytest.raises(WorkflowError) as info:
        h.run_sync('import asyncio\nawait asyncio.gather(fail_soon(), slow(i=1), slow(i=2))', on_event=on_event)
    statuses = [c.status for c in h.store.calls(info.value.run_id)]  # type: ignore[union-attr]
    assert statuses == ['error', 'cancelled', 'skipped']
    assert ('skipped', 3) in [(e.kind, e.seq) for e in events]
    assert '– #3 slow skipped: the script ended before this call started' in console.export_text()


def test_max_concurrency_bounds_calls_in_flight(make_harness):
    h = make_harness(max_concurrency=2)
    stats = counting_agent(h, delay=0.02)
    result = h.run_sync('import asyncio\nsum(await asyncio.gather(*[work(i=i) for i in range(8)]))')
    assert result.value == sum(i * 10 for i in range(8))
    assert stats['peak'] == 2


@pytest.mark.parametrize('n', [2_500, pytest.param(10_000, marks=pytest.mark.slow)])
def test_a_gather_far_past_montys_default_suspension_limit_completes(make_harness, n):
    """Monty stops a checkout after 1,000 suspensions by default (a call and its result are two): 2,500 calls are
    past it in the default tier, the design's 10,000 in the slow tier."""
    h = make_harness(max_tool_calls=None)

    @h.tool
    def double(x: int) -> int:
        return 2 * x

    # A sync tool runs on a thread; an async one stays on the loop. Use the async path for speed.
    @h.tool
    async def triple(*, x: int) -> int:
        return 3 * x

    result = h.run_sync(f'import asyncio\nrs = await asyncio.gather(*[triple(x=i) for i in range({n})])\nsum(rs)')
    assert result.value == 3 * sum(range(n))
    assert len(result.calls) == n


@pytest.mark.parametrize(
    ('code', 'expected'),
    [
        ('while True:\n    pass', 'time limit'),
        ('x = []\nwhile True:\n    x.append("a" * 100000)', 'memory limit'),
        ('def f(n):\n    return f(n + 1)\nf(0)', 'Recursion'),
        ('while True:\n    print("flood " * 100)', 'time limit'),
        ('open("/etc/passwd").read()', 'open'),
        ('import os\nos.getenv("HOME")', 'os.getenv'),
        ('__import__("os")', '__import__'),
        ('await not_registered(x=1)', 'not_registered'),
    ],
)
@pytest.mark.parametrize('type_check', [True, False])
def test_hostile_scripts_end_in_a_clear_error_and_the_next_run_works(make_harness, code, expected, type_check):
    h = make_harness(limits={'max_duration_secs': 0.5, 'max_memory': 32 * 1024 * 1024}, type_check=type_check)

    @h.tool
    def ping() -> str:
        return 'pong'

    with pytest.raises(WorkflowError) as info:
        h.run_sync(code)
    assert expected in str(info.value)
    assert '/etc/passwd' not in str(info.value) or 'open' in code
    assert h.run_sync('await ping()').value == 'pong'


def test_callee_exception_message_never_reaches_the_script(make_harness):
    h = make_harness()

    @h.subagent
    async def leaky(*, task: str) -> str:
        raise ValueError('password=hunter2 at /srv/secret/config.toml')

    result = h.run_sync('r = await settled(leaky(task="x"))\nr')
    assert result.value == {'ok': False, 'error': 'leaky failed with ValueError'}
    assert 'hunter2' not in repr(result)
    with pytest.raises(WorkflowRuntimeError) as info:
        h.run_sync('await leaky(task="x")')
    assert 'hunter2' not in str(info.value) and '/srv' not in str(info.value)
    assert 'leaky failed with ValueError' in str(info.value)


def test_a_host_can_opt_in_to_error_messages(make_harness):
    h = make_harness()

    @h.tool(expose_errors=True)
    def lookup(*, key: str) -> str:
        raise KeyError(f'no entry {key}')

    result = h.run_sync('(await settled(lookup(key="k1")))["error"]')
    assert result.value == "lookup failed with KeyError: 'no entry k1'"


def test_arguments_are_validated_before_the_callee_runs_and_cost_no_budget(make_harness):
    h = make_harness(max_agent_calls=1)
    stats = counting_agent(h)
    code = (
        'import json\n'
        'bad = json.loads(\'"seven"\')\n'
        'try:\n'
        '    await work(i=bad)\n'
        'except TypeError as e:\n'
        '    msg = str(e)\n'
        'ok = await work(i=4)\n'
        '[msg, ok]'
    )
    result = h.run_sync(code)
    assert stats['calls'] == 1
    assert result.value[1] == 40
    assert "work(): argument 'i'" in result.value[0]


def test_outputs_that_cannot_become_plain_data_are_refused_without_repr(make_harness):
    h = make_harness()

    class Secretive:
        def __repr__(self) -> str:
            return 'Secretive(token=abc123)'

    @h.tool
    def opaque() -> Any:
        return Secretive()

    result = h.run_sync('(await settled(opaque()))["error"]')
    assert result.value == 'opaque returned Secretive, which cannot cross into the sandbox as plain data'
    assert 'abc123' not in repr(result)


def test_dict_keys_json_can_hold_become_its_strings_and_the_result_says_so(make_harness):
    h = make_harness()
    stats = counting_agent(h)
    seen: list[Any] = []

    @h.tool
    def keep(*, item: Any) -> Any:
        seen.append(item)
        return {7: 'seven', 8: item}

    code = (
        'import asyncio\n'
        'rs = await asyncio.gather(work(i=1), work(i=2))\n'
        'kept = await keep(item={1: "a", None: "b"})\n'
        '{"by_index": {i: r for i, r in enumerate(rs)}, "mixed": {2.5: 1, False: 2, None: 3}, "kept": kept}'
    )
    result = h.run_sync(code)
    assert stats['calls'] == 2
    assert seen == [{'1': 'a', 'null': 'b'}]  # an argument crosses by the same rule
    assert result.value == {
        'by_index': {'0': 10, '1': 20},
        'mixed': {'2.5': 1, 'false': 2, 'null': 3},
        'kept': {'7': 'seven', '8': {'1': 'a', 'null': 'b'}},
    }
    note = result.note or ''
    assert 'Dict keys in the final value that were not str became strings, as in JSON: ' in note
    for shown in ("0 -> '0'", "1 -> '1'", "2.5 -> '2.5'", "False -> 'false'", "None -> 'null'"):
        assert shown in note
    assert h.run_sync('{"a": 1}').note is None


def test_dict_keys_that_would_collide_as_json_strings_are_refused_by_name(make_harness):
    h = make_harness()

    @h.tool
    def clash() -> Any:
        return {1: 'int', '1': 'str'}

    with pytest.raises(WorkflowRuntimeError, match=r"holds a dict whose keys 1 and '1' are the same in JSON"):
        h.run_sync('{1: "int", "1": "str"}')
    with pytest.raises(WorkflowRuntimeError, match='holds a dict with tuple keys'):
        h.run_sync('{(1, 2): "pair"}')
    with pytest.raises(WorkflowRuntimeError, match="clash returned a dict whose keys 1 and '1' are the same in JSON"):
        h.run_sync('await clash()')


def test_print_capture_inputs_and_events(make_harness):
    h = make_harness()
    stats = counting_agent(h)
    events: list[CallEvent] = []
    result = h.run_sync(
        'print("starting", len(files))\nt = 0\nfor f in files:\n    t += await work(i=len(f))\nt',
        inputs={'files': ['a.py', 'bb.py']},
        on_event=events.append,
    )
    assert result.value == 40 + 50
    assert result.printed == 'starting 2\n'
    assert stats['calls'] == 2
    assert [(e.kind, e.seq) for e in events] == [('started', 1), ('finished', 1), ('started', 2), ('finished', 2)]
    assert events[1].elapsed is not None and events[1].result == 40


def test_failed_call_event(make_harness):
    h = make_harness()

    @h.tool
    def broken() -> int:
        raise RuntimeError('nope')

    events: list[CallEvent] = []
    h.run_sync('await settled(broken())', on_event=events.append)
    assert [e.kind for e in events] == ['started', 'failed']
    assert events[1].error == 'broken failed with RuntimeError'


def echo_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = messages[0].parts[-1].content  # type: ignore[union-attr]
    return ModelResponse(parts=[TextPart(f'echo:{prompt}')])


def test_agent_with_typed_params_gets_an_xml_prompt(make_harness):
    class Ask(BaseModel):
        question: str
        depth: int = 1

    h = make_harness()
    h.add_agent(Agent(FunctionModel(echo_model), name='asker', description='Answers questions.'), params=Ask)
    assert 'async def asker(*, question: str, depth: int = 1) -> str:' in h.stubs()
    result = h.run_sync('await asker(question="why?", depth=2)')
    assert '<question>why?</question>' in result.value
    assert '<depth>2</depth>' in result.value


def test_fifty_sub_agent_calls_work_with_default_settings(make_harness):
    h = make_harness()
    h.add_agent(Agent(FunctionModel(echo_model), name='helper'))
    result = h.run_sync('import asyncio\nrs = await asyncio.gather(*[helper(task=str(i)) for i in range(50)])\nlen(rs)')
    assert result.value == 50


async def test_async_run_and_concurrent_workflows_share_one_pool(make_harness):
    h = make_harness()
    counting_agent(h, delay=0.05)
    results = await asyncio.gather(*[h.run(f'await work(i={i})') for i in range(8)])
    assert [r.value for r in results] == [i * 10 for i in range(8)]
    assert len({r.run_id for r in results}) == 8


def test_a_completed_run_past_its_budget_replays_whatever_its_fan_out(make_harness):
    """Refusals of one fan-out count once towards the retry guard in every mode: the run completed with 150 calls
    past a budget of 20 (settle_all keeps going) replays to the same value instead of stopping as a retry loop."""
    h = make_harness(max_agent_calls=20)
    counting_agent(h)
    code = 'rs = await settle_all(*[work(i=i) for i in range(150)])\n[r["ok"] for r in rs].count(True)'
    result = h.run_sync(code)
    assert result.value == 20
    assert h.replay_sync(result.run_id).value == 20


def test_a_harness_is_what_it_was_made_with(make_harness):
    """The settings are validated once into a frozen `Settings`; each reads as an attribute of the Harness
    and none can be set: other settings are another Harness."""
    h = make_harness(max_agent_calls=7, call_caps={'fetch': 2}, strict=True, task_queue='q')
    twin = make_harness(max_agent_calls=7, call_caps={'fetch': 2}, strict=True, task_queue='q')
    assert h.settings == twin.settings and h.settings.call_caps is not twin.settings.call_caps  # its own copies
    assert (h.max_agent_calls, h.call_caps, h.strict, h.task_queue, h.store_path) == (
        7,
        {'fetch': 2},
        True,
        'q',
        ':memory:',
    )
    for field in dataclasses.fields(Settings):
        assert getattr(h, field.name) is getattr(h.settings, field.name)
        with pytest.raises(AttributeError):
            setattr(h, field.name, getattr(h, field.name))
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.settings.strict = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        h.settings = twin.settings  # type: ignore[misc]
    with pytest.raises(TypeError):  # the mappings are read-only copies, not a way around the checks
        h.call_caps['fetch'] = -5  # type: ignore[index]
    assert h.sub_agent_usage_limits is not twin.sub_agent_usage_limits  # each Harness its own (UsageLimits is mutable)
    with pytest.raises(UserError, match=r"call_caps\['fetch'\] must be a whole number of at least 0"):
        make_harness(call_caps={'fetch': -1})


def test_where_a_call_runs_is_the_starter_handed_in(make_harness):
    """The starter seam (issue 22): the engine hands the dispatcher a `Starter`; the default runs calls here, and
    one that holds them (as Temporal's does, for its activities) stops the run waiting on them, nothing run."""
    from harness._catalog._rules import Access
    from harness._dispatch._starters import LocalTasks
    from harness._records import new_run_id

    h = make_harness()
    ran: list[int] = []

    @h.tool
    async def ping(*, i: int) -> int:
        ran.append(i)
        return i

    class Counting(LocalTasks):
        def __init__(self) -> None:
            self.started: list[int] = []

        def start(self, dispatcher, item) -> None:
            self.started.append(item.record.seq)
            super().start(dispatcher, item)

    class Holding:
        def start(self, dispatcher, item) -> None:
            dispatcher.held[item.record.seq] = item.future

        async def drain(self, dispatcher) -> None:
            return None

    code = 'import asyncio\nawait asyncio.gather(ping(i=1), ping(i=2))'
    counting = Counting()
    done = asyncio.run(h.start_run(new_run_id(), code, None, h.new_scope(), Access(), starter=counting))
    assert done.value == [1, 2] and counting.started == [1, 2] and ran == [1, 2]
    waiting = asyncio.run(h.start_run(new_run_id(), code, None, h.new_scope(), Access(), starter=Holding()))
    assert waiting.status == 'waiting' and [p.seq for p in waiting.waiting] == [1, 2]
    assert [c.status for c in h.store.calls(waiting.run_id)] == ['running', 'running'] and ran == [1, 2]


def sending(h) -> list[tuple[str, str]]:
    """A side-effecting tool `send_email(to, body)` on `h` that records every email it really sent."""
    sent: list[tuple[str, str]] = []

    @h.tool(side_effect=True)
    async def send_email(*, to: str, body: str) -> str:
        """Send an email."""
        sent.append((to, body))
        return f'sent #{len(sent)}'

    return sent


def test_identical_side_effecting_calls_of_one_script_all_run(make_harness):
    """Issue 23.4: the code's calls happen as written; a side effect is never answered from an identical earlier
    call of the same script (an idempotent callee still is, as `reuse_results` says)."""
    h = make_harness()
    sent = sending(h)
    result = h.run_sync('out = []\nfor i in range(3):\n    out.append(await send_email(to="x", body="same"))\nout')
    assert result.value == ['sent #1', 'sent #2', 'sent #3'] and len(sent) == 3
    assert [c.source for c in result.calls] == ['live'] * 3 and result.note is None
    # ... and the stuck detector still stops a loop of them, after `max_repeats` (10) real sends
    with pytest.raises(WorkflowError, match=r'looks stuck.*send_email'):
        h.run_sync('for i in range(200):\n    await send_email(to="y", body="same")\n')
    assert sent.count(('y', 'same')) == 10
    # A later script of the same scope (one orchestrator run) repeating them is answered: one success per call.
    scope = h.new_scope()
    h.run_sync('await send_email(to="z", body="once")', scope=scope)
    again = h.run_sync('[await send_email(to="z", body="once"), await send_email(to="z", body="once")]', scope=scope)
    assert sent.count(('z', 'once')) == 2 and [c.source for c in again.calls] == ['reused', 'live']
