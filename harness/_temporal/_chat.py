"""A durable conversation with the orchestrator: one Temporal workflow per conversation.

Each turn is a workflow update (`ask`) that runs the orchestrator agent in workflow code: pydantic-ai's
`TemporalDurability` capability moves its model requests into activities, and its `run_workflow`
tool starts each script as a child workflow (`ScriptWorkflow`). The message history lives in the
workflow, so a worker killed between two turns, or in the middle of a script, loses nothing: another
worker replays the history and carries on. Workflow code: it imports only what is deterministic.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from temporalio import workflow

ORCHESTRATORS: dict[str, Agent[Any, Any]] = {}
"""The orchestrator agents this worker serves, by name (filled in when the worker starts)."""


@dataclass
class ConversationStart:
    conversation_id: str
    agent: str = 'orchestrator'
    messages: str | None = None
    """The history so far, as pydantic-ai's JSON (carried across continue-as-new)."""


def conversation_workflow_id(conversation_id: str) -> str:
    return f'harness-chat-{conversation_id}'


@workflow.defn(name='HarnessConversation')
class ConversationWorkflow:
    def __init__(self) -> None:
        self.history: list[ModelMessage] = []
        self.turn = asyncio.Lock()  # one turn at a time, in the order the updates arrived
        self.closed = False
        self.agent = 'orchestrator'
        self.conversation_id: str | None = None

    @workflow.run
    async def run(self, start: ConversationStart) -> str:
        self.agent, self.conversation_id = start.agent, start.conversation_id
        if start.messages:
            self.history = list(ModelMessagesTypeAdapter.validate_json(start.messages))
        await workflow.wait_condition(
            lambda: self.closed or (workflow.info().is_continue_as_new_suggested() and not self.turn.locked())
        )
        messages = self.messages()
        if not self.closed:
            workflow.continue_as_new(ConversationStart(start.conversation_id, start.agent, messages))
        return messages

    @workflow.update
    async def ask(self, prompt: str) -> str:
        """One turn: the orchestrator answers `prompt`, with the conversation so far."""
        async with self.turn:
            agent = ORCHESTRATORS[self.agent]
            # The conversation's id, so its scripts' runs carry it: a later turn is answered from its side effects.
            result = await agent.run(prompt, message_history=self.history, conversation_id=self.conversation_id)
            self.history = result.all_messages()
            return str(result.output)

    @workflow.query
    def messages(self) -> str:
        return ModelMessagesTypeAdapter.dump_json(self.history).decode()

    @workflow.signal
    def close(self) -> None:
        self.closed = True
