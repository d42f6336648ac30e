"""A worker process for the durable-conversation test: the `work` sub-agent (temporal_agents.py) and
an orchestrator whose model is a small `FunctionModel` stand-in, served on Temporal.

Usage: temporal_chat_worker.py ADDRESS TASK_QUEUE STORE — prints `ready` once it polls.

The stand-in model: `run I` makes it call `run_workflow` with `await work(job='chat', i=I)` and answer
with what the script returned; any other prompt makes it answer with every script result so far in
the conversation (so a test can see the history survived).
"""

from __future__ import annotations

import asyncio
import sys

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporal_agents import work

from harness import Harness
from harness._temporal._host import serve


def orchestrate(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart(f'the script returned {last.content}')])
    assert isinstance(last, UserPromptPart) and isinstance(last.content, str)
    if last.content.startswith('run '):
        code = f"await work(job='chat', i={int(last.content.split()[1])})"
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': code})])
    results = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    return ModelResponse(parts=[TextPart(f'results so far: {results}')])


async def main(address: str, queue: str, store: str) -> None:
    h = Harness(store=store, temporal=address, task_queue=queue)
    h.subagent(work)
    agent = h.orchestrator(FunctionModel(orchestrate))
    await serve(h, address, queue, orchestrator=agent, ready=lambda: print('ready', flush=True))


if __name__ == '__main__':
    asyncio.run(main(*sys.argv[1:4]))
