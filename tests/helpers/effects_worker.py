"""An orchestrator process for the side-effect tests: a turn asked "refund ticket T-1" whose script refunds, then
calls `follow_up`, which (with `EFFECTS_HANG=1`) prints `journaled` and never returns: by then the refund's result
is in the journal (the sandbox got it, so it was written first), and the test SIGKILLs the process.

`refund` appends a line to `$EFFECTS_MARKERS/refunds` each time it really runs, so the test counts refunds.

Usage:
  effects_worker.py chat STORE      `harness chat --agents effects_worker:catalog` on STORE, the prompt on stdin
  effects_worker.py api STORE ID    `h.orchestrator(model).run_sync(PROMPT, conversation_id=ID)` on STORE
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from harness import Harness

PROMPT = 'refund ticket T-1'
SCRIPT = 'receipt = await refund(ticket="T-1")\nawait follow_up(ticket="T-1")\nreceipt'
INSTRUCTIONS: list[str] = []
"""The instructions each model request of this process carried (what the model was told)."""
RETURNED: list[Any] = []
"""What each `run_workflow` call returned to the model."""

catalog = Harness(store=None, tracing=False)


@catalog.tool(side_effect=True)
async def refund(*, ticket: str) -> str:
    """Refund the ticket's customer."""
    with (Path(os.environ['EFFECTS_MARKERS']) / 'refunds').open('a') as f:
        f.write(f'{ticket}\n')
    return f'refunded {ticket}'


@catalog.tool
async def follow_up(*, ticket: str) -> str:
    """Note the refund on the ticket."""
    if os.environ.get('EFFECTS_HANG') == '1':
        print('journaled', flush=True)
        await asyncio.Event().wait()
    return f'noted {ticket}'


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The orchestrator model: the same script for every prompt, then the script's value as the answer."""
    INSTRUCTIONS.append(info.instructions or '')
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returned:
        RETURNED.append(returned[-1].content)
        return ModelResponse(parts=[TextPart(f'done: {returned[-1].content}')])
    return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': SCRIPT})])


def model() -> FunctionModel:
    """`respond` as a FunctionModel, streamed too (the CLI streams every request)."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        for part in respond(messages, info).parts:
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {
                    0: DeltaToolCall(
                        name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id
                    )
                }

    return FunctionModel(respond, stream_function=stream, model_name='scripted')


def harness_on(store: str) -> Harness:
    h = Harness(store=store)
    for callee in catalog.callees.values():
        h.add_callee(callee)
    return h


def main(argv: list[str]) -> Any:
    mode, store = argv[0], argv[1]
    if mode == 'chat':
        import harness._cli._shared
        from harness._cli._app import app
        from harness._ui._models import ModelChoice

        harness._cli._shared.choose_model = lambda *a, **k: ModelChoice(model(), 'scripted', demo=False)
        return app(['chat', '--agents', 'effects_worker:catalog', '--store', store])
    return harness_on(store).orchestrator(model()).run_sync(PROMPT, conversation_id=argv[2])


if __name__ == '__main__':
    main(sys.argv[1:])
