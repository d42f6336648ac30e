"""The worst case before anything runs: per callee the most calls a script can make, and what they can cost.

Real Monty runs the scripts; the sub-agents are pydantic-ai agents on `FunctionModel`s named after a real,
priced model (genai-prices prices their responses as it would the real model's), with known token usage, so
a real run's cost can be set against its estimate. Pricing a real model class is checked offline (nothing
constructed here opens a connection).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage, UsageLimits

from harness import Estimate, Harness
from harness._catalog._prices import model_ceiling

GPT_4O_IN, GPT_4O_OUT = 2.5e-6, 10e-6  # genai-prices: $2.50 / $10 per million tokens
LIMITS = UsageLimits(request_limit=2, input_tokens_limit=400, output_tokens_limit=100)
PER_CALL = 400 * GPT_4O_IN + 100 * GPT_4O_OUT


class Writer:
    """A sub-agent model that answers in one response of known usage, keeping every response it made (pydantic-ai
    fills in each one's cost, with genai-prices, when it receives it)."""

    def __init__(self) -> None:
        self.responses: list[ModelResponse] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        response = ModelResponse(parts=[TextPart('done')], usage=RequestUsage(input_tokens=300, output_tokens=40))
        self.responses.append(response)
        return response

    @property
    def cost(self) -> Decimal:
        assert all(r.usage.cost is not None for r in self.responses)
        return sum((r.usage.cost for r in self.responses if r.usage.cost is not None), Decimal(0))


@pytest.fixture
def writer() -> Writer:
    return Writer()


@pytest.fixture
def h(make_harness: Any, writer: Writer) -> Harness:
    h = make_harness(sub_agent_usage_limits=LIMITS)
    h.add_agent(Agent(FunctionModel(writer, model_name='gpt-4o'), name='writer'))

    @h.tool
    def topics() -> list[str]:
        """The topics to write about."""
        return ['a', 'b', 'c', 'd']

    return h


SCRIPT = """\
import asyncio
first = await asyncio.gather(writer(task="x"), writer(task="y"), writer(task="z"))
for i in range(4):
    if i % 2 == 0:
        await writer(task=str(i))
    await topics()
"""


def test_the_estimate_is_never_below_a_real_runs_calls_and_cost(h: Harness, writer: Writer) -> None:
    e = h.estimate(SCRIPT)
    assert isinstance(e, Estimate)
    assert e.calls == {'topics': 4, 'writer': 7} and e.unpriced == []
    assert e.per_callee['writer'].per_call == pytest.approx(PER_CALL)
    assert e.per_callee['writer'].source == 'gpt-4o (genai-prices)'
    assert (e.per_callee['topics'].per_call, e.per_callee['topics'].source) == (0.0, 'host tool')
    assert e.cost_usd == pytest.approx(7 * PER_CALL) and e.reasons == []

    result = h.run_sync(SCRIPT)
    assert result.status == 'completed'
    ran = [c.callee for c in result.calls]
    assert ran.count('writer') == len(writer.responses) == 5 <= e.calls['writer']
    assert ran.count('topics') == 4 <= e.calls['topics']
    assert 0 < writer.cost <= Decimal(str(e.cost_usd))  # genai-prices priced the real responses too
    assert writer.cost == Decimal(5) * (300 * Decimal('2.5e-6') + 40 * Decimal('10e-6'))

    assert 'worst case: $0.0140' in e.text()
    assert 'writer: 7 calls x $0.0020 (gpt-4o (genai-prices)) = $0.0140' in e.text()
    assert h.check(SCRIPT).estimate == e  # the check's report carries it


def test_unbounded_calls_or_an_unbounded_call_say_so(make_harness: Any, writer: Writer) -> None:
    h = make_harness(sub_agent_usage_limits=LIMITS)
    h.add_agent(Agent(FunctionModel(writer, model_name='gpt-4o'), name='writer'))

    @h.tool
    def topics() -> list[str]:
        """The topics to write about."""
        return []

    e = h.estimate('for t in await topics():\n    await writer(task=t)')
    assert e.calls == {'topics': 1, 'writer': None} and e.cost_usd is None and e.unpriced == []
    assert e.reasons == [
        'writer: unbounded calls (a loop without a literal bound, recursion, or a function used as a value)'
    ]
    # A host tool called without bound still costs nothing, so it leaves the worst case a number.
    assert h.estimate('for t in await topics():\n    await topics()').cost_usd == 0.0

    # No token limit bounds one call: priced, but unbounded per call.
    loose = make_harness(sub_agent_usage_limits=UsageLimits(request_limit=5))
    loose.add_agent(Agent(FunctionModel(writer, model_name='gpt-4o'), name='writer'))
    e = loose.estimate('await writer(task="x")')
    assert e.calls == {'writer': 1} and e.cost_usd is None and e.unpriced == []
    assert e.reasons[0].startswith(
        'writer: unbounded per call: no token limit bounds a call: set sub_agent_usage_limits'
    )
    assert 'worst case: unbounded' in e.text()


def test_unpriced_callees_are_named_never_free(make_harness: Any) -> None:
    h = make_harness(sub_agent_usage_limits=LIMITS)
    h.add_agent(Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('x')])), name='anonymous'))
    h.add_agent(Agent(TestModel(), name='tested'))
    h.add_agent(Agent(TestModel(), name='declared'), cost=0.05)

    @h.subagent
    async def helper(*, task: str) -> str:
        """Calls something we cannot see."""
        return task

    @h.subagent(cost=0.01)
    async def priced(*, task: str) -> str:
        """Says what it costs."""
        return task

    e = h.estimate('await anonymous(task="a")\nawait tested(task="b")\nawait helper(task="c")')
    assert e.unpriced == ['anonymous', 'helper', 'tested'] and e.cost_usd is None
    assert "anonymous: unpriced: genai-prices has no price for 'function:<lambda>:': give it cost=" in e.reasons
    assert 'helper: unpriced: what a sub-agent function calls is not known: give it cost=' in e.reasons
    assert 'worst case: unpriced' in e.text() and 'helper: 1 call x unpriced (sub-agent function)' in e.text()
    follower = h.add_agent(
        Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('x')]), model_name='gpt-4o'), name='follower'),
        inherit_model=True,
    )
    assert follower.name == 'follower'
    e = h.estimate('await follower(task="a")')
    assert e.unpriced == ['follower']  # its own model is not the one it runs on
    assert e.reasons == ["follower: unpriced: it runs on the orchestrator's model: give it cost="]
    e = h.estimate('await declared(task="a")\nfor i in range(3):\n    await priced(task="b")')
    assert e.unpriced == [] and e.cost_usd == pytest.approx(0.05 + 3 * 0.01)
    assert (e.per_callee['declared'].source, e.per_callee['priced'].source) == ('cost=', 'cost=')
    # A callee the run refuses costs nothing: every call of it is refused before it runs.
    assert h.estimate('await helper(task="c")', deny=['helper']).cost_usd == 0.0


def test_a_real_model_is_priced_offline_from_its_limits() -> None:
    gpt = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(api_key='not-used'))
    both = model_ceiling(gpt, UsageLimits(input_tokens_limit=1000, output_tokens_limit=100))
    assert (both.usd, both.source, both.unpriced) == (
        pytest.approx(1000 * GPT_4O_IN + 100 * GPT_4O_OUT),
        'gpt-4o (genai-prices)',
        False,
    )
    # Only a total: every token priced as the dearer kind (output, here).
    assert model_ceiling(gpt, UsageLimits(total_tokens_limit=1000)).usd == pytest.approx(1000 * GPT_4O_OUT)
    # Input capped, total larger: the rest of the total goes to output.
    capped = model_ceiling(gpt, UsageLimits(input_tokens_limit=100, total_tokens_limit=1000))
    assert capped.usd == pytest.approx(1000 * GPT_4O_OUT)
    capped = model_ceiling(gpt, UsageLimits(output_tokens_limit=100, total_tokens_limit=1000))
    assert capped.usd == pytest.approx(100 * GPT_4O_OUT + 900 * GPT_4O_IN)
    # cost_limit caps it; alone it bounds a priced model's call.
    assert model_ceiling(gpt, UsageLimits(total_tokens_limit=1000, cost_limit=Decimal('0.001'))).usd == 0.001
    assert model_ceiling(gpt, UsageLimits(cost_limit=Decimal('0.25'))).usd == 0.25
    # Input priced as cache writes where those cost more (Anthropic: $3.75 against $3 per million).
    claude = model_ceiling('anthropic:claude-sonnet-4-5', UsageLimits(input_tokens_limit=1000, output_tokens_limit=0))
    assert claude.usd == pytest.approx(1000 * 3.75e-6)
    unknown = model_ceiling('nonesuch-model', UsageLimits(total_tokens_limit=1000))
    assert unknown.usd is None and unknown.unpriced


ESTIMATE_MODULE = '''\
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from harness import Harness

extras = Harness(store=":memory:")


@extras.subagent(cost=0.01)
async def translate(*, text: str) -> str:
    """Translate a greeting."""
    return text


shouter = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("!")]), model_name="gpt-4o"), name="shouter")
agents = [shouter]
'''


def test_check_estimate_prints_the_worst_case(cli: Any, tmp_path: Path) -> None:
    (tmp_path / 'costs.py').write_text(ESTIMATE_MODULE)
    (tmp_path / 'flow.py').write_text('for i in range(3):\n    await translate(text="hi")\n')
    (tmp_path / 'loud.py').write_text('await shouter(task="hi")\n')
    options = ['--agents', 'costs:extras', '--agents', 'costs:agents']
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    out = cli(['check', 'flow.py', '--estimate', *options], cwd=tmp_path, env=env, columns=120)
    assert out.exit_code == 0 and not out.traceback, out.describe()
    assert 'worst case: $0.0300' in out.stdout
    row = next(line for line in out.stdout.splitlines() if 'translate' in line)
    assert row.split() == ['translate', '3', '$0.0100', '$0.0300', 'cost=']
    loud = cli(['check', 'loud.py', '--estimate', *options], cwd=tmp_path, env=env, columns=120)
    assert loud.exit_code == 0 and 'worst case: unbounded' in loud.stdout
    assert 'shouter: unbounded per call: no token limit bounds a call' in loud.stdout
    graph = cli(['check', 'flow.py', '--graph', *options], cwd=tmp_path, env=env, columns=120)
    assert 'line 2: translate  [max 3]' in graph.stdout and 'worst case: $0.0300' in graph.stdout
