"""Dollar budgets (#24.2): `max_cost` per orchestrator run and `daily_cost` per `budget_key`, exact under any fan-out,
across processes and across a SIGKILL and resume. Real Monty, real SQLite; the sub-agents are `FunctionModel`s on a
priced model name with known token usage (`tests/helpers/cost_worker.py`)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import BudgetExceeded, Harness
from harness._dispatch._cost import today

WORKER = Path(__file__).parent / 'helpers' / 'cost_worker.py'
sys.path.insert(0, str(WORKER.parent))
from cost_worker import LIMITS, SCRIPT, build, usage_of  # noqa: E402

CEILING = 0.0015
"""One call's ceiling: 200 input and 100 output tokens of gpt-4o ($2.50 / $10 per million)."""


def priced(task: int) -> float:
    """What genai-prices charges for the usage call `task` reports, as pydantic-ai prices a response."""
    response = ModelResponse(parts=[], usage=usage_of(str(task)), model_name='gpt-4o')
    return float(response.cost().total_price)


def ran(result: Any) -> list[int]:
    return [int(c.arguments['task']) for c in result.calls if c.status == 'ok']


def test_the_ceiling_is_what_the_prices_module_says() -> None:
    from harness._catalog._prices import model_ceiling

    assert model_ceiling('gpt-4o', LIMITS).usd == pytest.approx(CEILING)


async def test_a_200_way_gather_under_max_cost_runs_exactly_the_calls_that_fit(tmp_path: Path) -> None:
    """Reserved in call order at their ceilings: 20 of 200 fit $0.03; each settles to its usage, priced."""
    h = build(str(tmp_path / 'runs.db'), max_cost=0.03)
    try:
        r = await h.run(SCRIPT, inputs={'n': 200})
    finally:
        h.close()
    assert ran(r) == list(range(20))
    refusals = [v for v in r.value if v.startswith('refused: ')]
    assert len(refusals) == 180
    assert refusals[0] == (
        'refused: The cost budget (max_cost=$0.0300) has $0.0000 left; a call of summarize can cost up to $0.0015, '
        'so it was not run (it cost nothing). Finish with the results you have.'
    )
    settled = [c.cost_usd for c in r.calls if c.status == 'ok']
    assert settled == pytest.approx([priced(i) for i in range(20)])
    assert r.cost_usd == pytest.approx(sum(priced(i) for i in range(20)))
    assert r.cost_usd <= 0.03
    refused = [c for c in r.calls if c.status == 'refused']  # journaled, as a rule's refusal; it cost nothing
    assert len(refused) == 180 and all(c.cost_usd is None for c in refused)


async def test_an_uncaught_cost_refusal_is_budget_exceeded(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(max_cost=0.5)

    @h.tool(cost=0.2)
    def send(*, to: str) -> str:
        """Send a message."""
        return to

    with pytest.raises(
        BudgetExceeded, match=r'\$0.4000 spent of max_cost=\$0.5000; the cost budget \(max_cost=\$0.5000\)'
    ):
        await h.run('for i in range(5):\n    await send(to=str(i))\n')
    with pytest.raises(BudgetExceeded):  # the replay answers the refusal from the journal and ends as the run did
        await h.replay(h.runs(1)[0].run_id)
    r = await h.run("n = 0\nfor i in range(5):\n    try:\n        await send(to=str(i))\n        n += 1\n"
                    "    except PermissionError:\n        pass\nn")  # fmt: skip
    assert r.value == 2 and r.cost_usd == pytest.approx(0.4)  # a host tool settles at its cost=


async def test_a_call_with_no_known_ceiling_is_refused_under_max_cost(make_harness: Callable[..., Harness]) -> None:
    """An unpriced model (a FunctionModel without a real model's name) cannot be reserved: refused, naming the fix."""
    h = make_harness(max_cost=1.0)
    h.add_agent(Agent(FunctionModel(lambda _m, _i: ModelResponse(parts=[TextPart('x')])), name='helper'))
    r = await h.run(
        "try:\n    await helper(task='x')\n    out = 'ran'\nexcept PermissionError as e:\n    out = str(e)\nout"
    )
    assert 'cannot reserve a call of helper' in r.value and 'give it cost=' in r.value
    assert [c.status for c in r.calls] == ['refused']


def test_three_processes_gathering_against_one_daily_budget_never_spend_past_it(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    """Three real processes, one store, one daily budget: reserved and settled in single transactions, so together
    they never pass it, and what the store counts spent is what their calls' usage costs."""
    store, limit = str(tmp_path / 'runs.db'), 0.05
    Harness(store=store).close()  # the schema, made once before three processes open it
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    children = [
        spawn([sys.executable, str(WORKER), 'daily', store, 'tenant-a', str(limit), '40'], env=env) for _ in range(3)
    ]
    for child in children:
        assert child.expect('ready') == 'ready'
    for child in children:
        child.send('go')
    results = [json.loads(child.finish().splitlines()[-1]) for child in children]
    db = sqlite3.connect(store)
    spent, reserved = db.execute("SELECT spent, reserved FROM spend WHERE budget_key = 'tenant-a'").fetchone()
    costs = [row for row in db.execute("SELECT callee, arguments_json, cost_usd FROM calls WHERE status = 'ok'")]
    db.close()
    assert spent <= limit + 1e-9 and reserved == pytest.approx(0.0)
    assert sum(r['ok'] for r in results) == len(costs) >= math.floor(limit / CEILING)
    assert sum(r['refused'] for r in results) > 0  # the budget bound them
    tasks = [int(json.loads(arguments)['task']) for _, arguments, _ in costs]
    assert spent == pytest.approx(sum(priced(t) for t in tasks))  # settled to what their usage costs
    assert spent == pytest.approx(sum(r['cost'] or 0.0 for r in results))


def test_a_sigkill_mid_run_and_resume_never_exceed_max_cost(spawn: Callable[..., Any], tmp_path: Path) -> None:
    """Killed with call #7 in flight: the resumed run counts that attempt at its ceiling (it may have spent it),
    reserves its re-run anew, and what it and the journal's settled costs leave is all the rest may reserve."""
    store, max_cost, k = str(tmp_path / 'runs.db'), 0.015, 6
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    child = spawn([sys.executable, str(WORKER), 'hang', store, str(max_cost), '30', str(k)], env=env)
    run_id = child.expect('frozen ').split()[1]
    child.kill()
    h = build(store, max_cost=max_cost)
    try:
        before = h.store.calls(run_id)
        r = h.resume_sync(run_id)
    finally:
        h.close()
    assert [(c.status, c.cost_usd is None) for c in before] == [('ok', False)] * k + [('running', True)]
    assert r.status == 'completed'
    lost = CEILING  # the attempt of call #7 the process died in
    left = max_cost - sum(priced(t) for t in range(k)) - lost - CEILING
    assert ran(r) == list(range(k + 1 + math.floor(left / CEILING + 1e-9)))
    assert r.cost_usd == pytest.approx(sum(priced(t) for t in ran(r)))
    assert r.cost_usd + lost <= max_cost + 1e-9


def test_an_orchestrator_spends_the_daily_budget_its_runs_deps_name(tmp_path: Path) -> None:
    """`orchestrator(budget_key=lambda deps: ...)`: each agent run spends its tenant's day, kept in the store, so a
    second run is refused what the first spent; another tenant's day is untouched."""
    script = (
        'sent = 0\nfor i in range(2):\n    try:\n        await send(to=str(i))\n        sent += 1\n'
        '    except PermissionError as e:\n        print(e)\nsent'
    )

    described: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        described.extend(t.description or '' for t in info.function_tools)
        last = messages[-1]
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script})])
        return ModelResponse(parts=[TextPart(str(getattr(last.parts[-1], 'content', '')))])

    h = Harness(store=str(tmp_path / 'runs.db'), daily_cost={'tenant-a': 0.5, 'tenant-b': 0.5}, tracing=False)
    try:

        @h.tool(cost=0.2)
        def send(*, to: str) -> str:
            """Send a message."""
            return to

        agent = h.orchestrator(FunctionModel(respond), budget_key=lambda deps: deps['tenant'])
        agent.run_sync('send two', deps={'tenant': 'tenant-a'})
        second = agent.run_sync('send two', deps={'tenant': 'tenant-a'})
        assert h.store is not None
        assert "The daily cost budget of 'tenant-a' (daily_cost['tenant-a']=$0.5000) has $0.1000 left" in second.output
        assert h.store.spend_of('tenant-a', today()) == pytest.approx((0.4, 0.0))
        assert h.store.spend_of('tenant-b', today()) == (0.0, 0.0)
        assert '- Dollars (a daily budget): before a call runs, the most it can cost is reserved' in described[0]
        with pytest.raises(UserError, match=r"budget_key='tenant-c' has no daily_cost"):
            h.run_sync('1', budget_key='tenant-c')
    finally:
        h.close()


async def test_a_replay_spends_nothing_and_harness_show_says_what_each_call_cost(tmp_path: Path, cli: Any) -> None:
    """The settled costs are journaled (`harness show --json`: per call and the run's); a replay answers from the
    journal, refuses what the recorded run's budget refused, and writes nothing to the daily budget."""
    store = str(tmp_path / 'runs.db')
    h = build(store, max_cost=0.006, daily_cost={'tenant-a': 1.0})
    try:
        r = await h.run(SCRIPT, inputs={'n': 8}, budget_key='tenant-a')
        day = h.store.spend_of('tenant-a', today()) if h.store is not None else None
        again = await h.replay(r.run_id)
        assert h.store is not None and h.store.spend_of('tenant-a', today()) == day
    finally:
        h.close()
    assert ran(r) == [0, 1, 2, 3] and again.value == r.value
    assert day == pytest.approx((sum(priced(t) for t in range(4)), 0.0))
    shown = cli(['show', r.run_id, '--json'], cwd=tmp_path, env={'HARNESS_STORE': store})
    assert shown.exit_code == 0, shown.describe()
    as_json = json.loads(shown.stdout)
    costs = [c['cost_usd'] for c in as_json['calls']]
    assert costs[:4] == pytest.approx([priced(t) for t in range(4)]) and costs[4:] == [None] * 4  # 4 refused
    assert as_json['cost_usd'] == pytest.approx(r.cost_usd)


async def test_a_resumed_run_spends_the_daily_budget_of_the_key_it_was_started_with(tmp_path: Path) -> None:
    """The run keeps its `budget_key`: resumed after an approval (here by another Harness on the same store), its
    calls still reserve against that key's day."""
    script = (
        "await publish(text='plan')\nsent = 0\nfor i in range(3):\n    try:\n        await send(to=str(i))\n"
        '        sent += 1\n    except PermissionError:\n        pass\nsent'
    )

    def make() -> Harness:
        h = Harness(store=str(tmp_path / 'runs.db'), daily_cost={'tenant-a': 0.5}, tracing=False)

        @h.tool(cost=0.2)
        def send(*, to: str) -> str:
            """Send a message."""
            return to

        @h.tool(approval=True, side_effect=True)
        def publish(*, text: str) -> str:
            """Publish the plan."""
            return text

        return h

    first = make()
    try:
        waiting = await first.run(script, budget_key='tenant-a')
    finally:
        first.close()
    assert waiting.status == 'waiting'
    second = make()
    try:
        second.approve(waiting.run_id)
        done = await second.resume(waiting.run_id)
        assert second.store is not None
        assert second.store.spend_of('tenant-a', today()) == pytest.approx((0.4, 0.0))
    finally:
        second.close()
    assert done.value == 2 and done.cost_usd == pytest.approx(0.4)


def test_two_processes_in_one_conversation_never_spend_past_its_conversation_cost(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    """`conversation_cost` is a window in the store over every turn of one conversation: two processes each running a
    turn of it at once (a 40-way gather each) never pass it between them, and what the store counts spent is what
    their calls' usage costs."""
    store, limit = str(tmp_path / 'runs.db'), 0.03
    Harness(store=store).close()
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    children = [
        spawn([sys.executable, str(WORKER), 'conversation', store, 'conv-1', str(limit), '40'], env=env)
        for _ in range(2)
    ]
    for child in children:
        assert child.expect('ready') == 'ready'
    for child in children:
        child.send('go')
    answers = [json.loads(child.finish().splitlines()[-1]) for child in children]
    db = sqlite3.connect(store)
    spent, reserved = db.execute("SELECT spent, reserved FROM spend WHERE budget_key = 'conv-1'").fetchone()
    costs = [row for row in db.execute("SELECT arguments_json, cost_usd FROM calls WHERE status = 'ok'")]
    conversations = {row[0] for row in db.execute('SELECT conversation_id FROM runs')}
    db.close()
    assert conversations == {'conv-1'}
    assert spent <= limit + 1e-9 and reserved == pytest.approx(0.0)
    assert len(costs) >= math.floor(limit / CEILING)
    assert spent == pytest.approx(sum(priced(int(json.loads(arguments)['task'])) for arguments, _ in costs))
    assert all('The conversation cost budget (conversation_cost=$0.0300) has $' in a for a in answers)


async def test_a_conversation_cost_holds_across_turns_and_a_new_conversation_starts_fresh(tmp_path: Path) -> None:
    """Turn 1 spends $0.40 of conversation_cost=$0.50; turn 2 of the same conversation (its history carries the id)
    is refused its first call, told what is left; another conversation has its own $0.50. A direct `run` (of no
    conversation) is not bound by it."""
    script = (
        'sent = 0\nfor i in range(2):\n    try:\n        await send(to=str(i))\n        sent += 1\n'
        '    except PermissionError as e:\n        print(e)\nsent'
    )
    sys.path.insert(0, str(WORKER.parent))
    from cost_worker import turn_model

    h = Harness(store=str(tmp_path / 'runs.db'), conversation_cost=0.5, tracing=False)
    try:

        @h.tool(cost=0.2)
        def send(*, to: str) -> str:
            """Send a message."""
            return to

        agent = h.orchestrator(turn_model(script))
        first = await agent.run('send two')
        second = await agent.run('send two more', message_history=first.all_messages())
        assert second.conversation_id == first.conversation_id
        other = await agent.run('send two')
        assert h.store is not None
        assert h.store.spend_of(first.conversation_id, 'conversation') == pytest.approx((0.4, 0.0))
        assert h.store.spend_of(other.conversation_id, 'conversation') == pytest.approx((0.4, 0.0))
        direct = await h.run(script)
    finally:
        h.close()
    dollars = "'dollars': '$0.4000 spent in this run; this conversation: $0.4000 spent, $0.0000 reserved of $0.5000'"
    assert first.output == other.output == "{'result': 2, " + dollars + '}'  # the turn's dollars, for the model
    assert (
        'The conversation cost budget (conversation_cost=$0.5000) has $0.1000 left; a call of send can cost up to '
        '$0.2000, so it was not run (it cost nothing).'
    ) in second.output
    assert "'result': 0" in second.output
    assert direct.value == 2


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'conversation_cost': -1.0}, r'conversation_cost must be 0 or more USD \(None: no limit\), not -1.0'),
        ({'conversation_cost': 'five'}, r"conversation_cost must be 0 or more USD \(None: no limit\), not 'five'"),
        ({'conversation_cost': 1.0, 'store': None}, r'conversation_cost is kept in the run store: give the Harness'),
        ({'max_cost': -0.5}, r'max_cost must be 0 or more USD'),
    ],
)
def test_the_dollar_settings_are_validated(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        Harness(tracing=False, **options)


def test_a_budget_refusal_tells_the_model_the_scripts_worst_case(tmp_path: Path) -> None:
    """An uncaught refusal of `max_cost` (or of a call budget) ends `run_workflow`; what the model reads then holds the
    script's estimate, per callee the most calls and the most they cost, unpriced and unbounded said so, so it can
    write a smaller script."""
    sys.path.insert(0, str(WORKER.parent))
    from cost_worker import turn_model

    loop = 'out = []\nfor i in range(10):\n    out.append(await summarize(task=str(i)))\nout'
    h = build(str(tmp_path / 'runs.db'), max_cost=2 * CEILING)
    h.add_agent(Agent(FunctionModel(lambda _m, _i: ModelResponse(parts=[TextPart('x')])), name='helper'))
    try:
        priced_out = h.orchestrator(turn_model(loop)).run_sync('summarize ten').output
        forever = "await helper(task='x')\nwhile True:\n    await summarize(task='1')"
        unpriced_out = h.orchestrator(turn_model(forever)).run_sync('go').output
    finally:
        h.close()
    assert 'The script stopped because a call budget ran out' in priced_out
    assert 'The cost budget (max_cost=$0.0030) has' in priced_out
    assert (
        'The worst case of that script, from its static bounds (before it ran):\nworst case: $0.0150\n'
        '  summarize: 10 calls x $0.0015 (gpt-4o (genai-prices)) = $0.0150\n'
        'Write a smaller script: fewer calls (a literal bound on each loop), each within what is left.'
    ) in priced_out
    assert 'cannot reserve a call of helper' in unpriced_out
    assert '  helper: 1 call x unpriced (' in unpriced_out and '  summarize: unbounded x $0.0015' in unpriced_out
    assert 'helper: unpriced: ' in unpriced_out and 'summarize: unbounded calls' in unpriced_out


PAID_TOOLS = """\
import asyncio

from harness import Harness

h = Harness(store=None)
first_done = asyncio.Event()


@h.tool(cost=0.2)
async def fetch(*, key: str) -> str:
    \"\"\"Fetch a key.\"\"\"
    first_done.set()
    return key


@h.tool(cost=0.3)
async def fetch_after(*, key: str) -> str:
    \"\"\"Fetch a key once fetch has.\"\"\"
    await first_done.wait()
    return key
"""


def test_ask_shows_what_each_call_cost_and_the_turns_dollars(tmp_path: Path, cli: Any, monkeypatch: Any) -> None:
    """`harness ask` under `[tool.harness] max_cost`: a call's line says what it settled to, and while other calls
    still hold reservations the turn's dollars with them; the turn's footer says what it spent of max_cost."""
    from test_cli import scripted

    import harness._cli._shared
    from harness._ui._models import ModelChoice

    code = "import asyncio\nawait asyncio.gather(fetch_after(key='b'), fetch(key='a'))"

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code}, tool_call_id='call_1')])
        return ModelResponse(parts=[TextPart(f'fetched: {getattr(messages[-1].parts[-1], "content", "")}')])

    monkeypatch.setattr(
        harness._cli._shared, 'choose_model', lambda *a, **k: ModelChoice(scripted(respond), 'scripted', demo=False)
    )
    (tmp_path / 'pyproject.toml').write_text('[tool.harness]\nagents = ["paid:h"]\nmax_cost = 1.0\n')
    (tmp_path / 'paid.py').write_text(PAID_TOOLS)
    done = cli(['ask', 'fetch a and b'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')}, columns=160)
    out = done.stdout
    assert done.exit_code == 0, out + done.stderr
    lines = [line.strip() for line in out.splitlines()]
    assert "✓ #2 fetch 0.00s → 'a' · $0.2000 · $0.2000 spent, $0.3000 reserved of max_cost=$1.00" in lines, out
    assert "✓ #1 fetch_after 0.00s → 'b' · $0.3000" in lines, out  # nothing in flight any more: its cost alone
    assert 'dollars: $0.5000 spent of max_cost=$1.00' in lines, out
    (tmp_path / 'pyproject.toml').write_text('[tool.harness]\nmax_cost = "lots"\n')
    bad = cli(['ask', 'x'], cwd=tmp_path, env={'HARNESS_STORE': str(tmp_path / 'runs.db')})
    assert bad.exit_code != 0 and '[tool.harness] max_cost is USD, 0 or more, e.g. max_cost = 1.50' in bad.stderr


async def test_each_call_event_carries_the_runs_dollars_spent_and_reserved(tmp_path: Path) -> None:
    """`CallEvent.spent_usd` / `reserved_usd` / `dollars`: the run's dollars at the event, a `started` after its own
    reservation, a `finished` after it settled; None with no dollar budget."""
    namespace: dict[str, Any] = {}
    exec(PAID_TOOLS.replace('store=None', f'store={str(tmp_path / "runs.db")!r}, max_cost=1.0'), namespace)
    h: Harness = namespace['h']
    seen: list[tuple[str, str, float | None, float | None, str | None]] = []

    def dollars_of(e: Any) -> tuple[float | None, float | None, str | None]:
        return e.spent_usd, e.reserved_usd, e.dollars

    code = "import asyncio\nawait asyncio.gather(fetch_after(key='b'), fetch(key='a'))"
    try:
        r = await h.run(code, on_event=lambda e: seen.append((e.kind, e.callee, *dollars_of(e))))
    finally:
        h.close()
    assert r.cost_usd == pytest.approx(0.5)
    assert seen == [
        ('started', 'fetch_after', 0.0, pytest.approx(0.5), '$0.0000 spent, $0.5000 reserved of max_cost=$1.00'),
        ('started', 'fetch', 0.0, pytest.approx(0.5), '$0.0000 spent, $0.5000 reserved of max_cost=$1.00'),
        (
            'finished',
            'fetch',
            pytest.approx(0.2),
            pytest.approx(0.3),
            '$0.2000 spent, $0.3000 reserved of max_cost=$1.00',
        ),
        ('finished', 'fetch_after', pytest.approx(0.5), 0.0, '$0.5000 spent of max_cost=$1.00'),
    ]
