"""A workflow process for the dollar budget tests (`tests/test_cost.py`): sub-agents on a priced model name
(`FunctionModel(..., model_name='gpt-4o')`, priced by genai-prices as pydantic-ai prices its responses) whose
token usage is known from the task.

Usage:
  cost_worker.py daily STORE KEY LIMIT N
      Prints `ready`, waits for a line on stdin (so several processes start their gathers together), runs a gather
      of N calls against KEY's daily budget of LIMIT USD in STORE, each refusal caught, and prints one JSON line:
      {"ok": calls that ran, "refused": refusals caught, "cost": the run's settled cost}.
  cost_worker.py conversation STORE CONVERSATION_ID LIMIT N
      As `daily`, but the gather is a script an orchestrator (a `FunctionModel`) writes in a turn of the conversation
      CONVERSATION_ID, under `conversation_cost=LIMIT`; prints the turn's answer (the tool's result) as its last line.
  cost_worker.py hang STORE MAX_COST N K
      Under MAX_COST, a gather of K calls, then call K + 1 alone, whose model never answers: once it is journaled
      (and the K before it with their costs) it prints `frozen RUN_ID` and waits to be killed. Then the rest, to N.
"""

from __future__ import annotations

import asyncio
import json
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from harness import CallEvent, Harness

LIMITS = UsageLimits(input_tokens_limit=200, output_tokens_limit=100)
"""Each call's ceiling: 200 input and 100 output tokens of gpt-4o."""

SCRIPT = """\
import asyncio

async def one(i):
    try:
        return await summarize(task=str(i))
    except PermissionError as refused:
        return 'refused: ' + str(refused)

results = await asyncio.gather(*[one(i) for i in range(n)])
results
"""


def usage_of(task: str) -> RequestUsage:
    """The usage of the sub-agent call given `task` (a number): known, and different per call."""
    i = int(task)
    return RequestUsage(input_tokens=60 + 7 * (i % 13), output_tokens=20 + 3 * (i % 11))


def task_of(messages: list[ModelMessage]) -> str:
    part = messages[0].parts[-1]
    assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
    return part.content


def build(store: str, *, hang: int | None = None, **options: object) -> Harness:
    async def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        task = task_of(messages)
        if hang is not None and int(task) == hang:
            await asyncio.Event().wait()  # a request that never answers: the process is killed meanwhile
        return ModelResponse(parts=[TextPart(f'summary {task}')], usage=usage_of(task))

    h = Harness(store=store, max_agent_calls=1_000, sub_agent_usage_limits=LIMITS, tracing=False, **options)  # type: ignore[arg-type]
    h.add_agent(Agent(FunctionModel(respond, model_name='gpt-4o'), name='summarize', description='Summarize.'))
    return h


def daily(store: str, key: str, limit: float, n: int) -> None:
    h = build(store, daily_cost={key: limit})
    print('ready', flush=True)
    sys.stdin.readline()
    r = h.run_sync(SCRIPT, inputs={'n': n}, budget_key=key)
    refused = sum(1 for v in r.value if v.startswith('refused: '))
    print(json.dumps({'ok': len(r.value) - refused, 'refused': refused, 'cost': r.cost_usd}), flush=True)
    h.close()


def turn_model(code: str) -> FunctionModel:
    """An orchestrator model that runs `code` once per turn, then answers with what the tool returned."""

    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])
        return ModelResponse(parts=[TextPart(str(getattr(messages[-1].parts[-1], 'content', '')))])

    return FunctionModel(respond)


def conversation(store: str, conversation_id: str, limit: float, n: int) -> None:
    h = build(store, conversation_cost=limit)
    agent = h.orchestrator(turn_model(SCRIPT.replace('range(n)', f'range({n})')))
    print('ready', flush=True)
    sys.stdin.readline()
    answer = agent.run_sync('summarize them', conversation_id=conversation_id).output
    print(json.dumps(answer), flush=True)
    h.close()


HANG_SCRIPT = """\
import asyncio

async def one(i):
    try:
        return await summarize(task=str(i))
    except PermissionError as refused:
        return 'refused: ' + str(refused)

first = await asyncio.gather(*[one(i) for i in range(k)])
stuck = await one(k)
rest = await asyncio.gather(*[one(i) for i in range(k + 1, n)])
[*first, stuck, *rest]
"""
"""`k` calls that finish and are journaled, then call `k + 1` alone (the one that hangs), then the rest."""


def hang(store: str, max_cost: float, n: int, k: int) -> None:
    def on_event(event: CallEvent) -> None:
        if event.kind == 'started' and event.seq == k + 1:  # journaled `running`: the first k are journaled
            print(f'frozen {event.run_id}', flush=True)

    h = build(store, hang=k, max_cost=max_cost, on_event=on_event)
    h.run_sync(HANG_SCRIPT, inputs={'n': n, 'k': k})


if __name__ == '__main__':
    mode, *args = sys.argv[1:]
    if mode == 'daily':
        daily(args[0], args[1], float(args[2]), int(args[3]))
    elif mode == 'conversation':
        conversation(args[0], args[1], float(args[2]), int(args[3]))
    else:
        hang(args[0], float(args[1]), int(args[2]), int(args[3]))
