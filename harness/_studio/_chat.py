"""`POST /api/chat`: one orchestrator turn of a studio conversation, streamed through pydantic-ai's Vercel AI
adapter (the UI message stream protocol: `text-delta`, `tool-input-available`, `tool-output-available`, ...).

Two kinds of `data-*` part ride along in the same stream, so the page can show what the terminal shows:
`data-call` as each call of a script starts, finishes, fails, is refused or is skipped, and as the script calls
`log`/`phase` (kind `progress`; the Harness's `on_event`), and one `data-turn` at the end: how the turn ended,
its runs, its tokens, and the calls it waits on when a run needs a person. The history lives on the server, in
the run store's conversations (the ones `harness chat` keeps, so `harness chat --continue ID` picks up a studio
conversation): the page sends only its new message, and `?continue=1` (no message) goes on after the person
decided on the calls a turn waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.response_types import BaseChunk, DataChunk, ErrorChunk
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._agent._usage import Totals, of_responses
from .._records import CallEvent
from .._store import Conversation, RunStore, StoreError, Turn
from .._tracing._setup import RECORDER
from .._ui._runs import runs_of_turn
from .._ui._text import RESULT_CHARS, call_text, cut, literal
from .._ui._turns import new_conversation, record_turn
from ._views import pending_of, plan_json, progress_json, run_summary

TOOL = 'run_workflow'
CONVERSATION_ID = re.compile(r'[A-Za-z0-9_-]{8,64}')
"""A conversation id the page makes up (random hex); store ids match it too."""


def problem(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({'error': error, 'message': message}, status_code=status)


def call_event_json(event: CallEvent) -> dict[str, Any]:
    """A call as the chat shows it live; read now: the record changes after the handler returns."""
    call = event.call
    return {
        'kind': event.kind,
        'run_id': event.run_id,
        'seq': call.seq,
        'callee': call.callee,
        'text': call_text(call.callee, call.arguments),
        'source': call.source,
        'elapsed': event.elapsed,
        'error': call.error if event.kind in ('failed', 'refused', 'skipped') else None,
        'result': cut(literal(call.result), RESULT_CHARS) if event.kind == 'finished' else None,
        'progress': progress_json(call),
        'cost_usd': call.cost_usd if event.kind in ('finished', 'failed') else None,
        'reserved_usd': event.reserved_usd,
        'dollars': event.dollars,
    }


def text_of(message: Any) -> str:
    """The text a Vercel AI UI message holds (its text parts, joined)."""
    return ''.join(getattr(part, 'text', '') for part in message.parts if getattr(part, 'type', '') == 'text')


def waiting_tool_calls(history: list[ModelMessage]) -> list[ToolCallPart]:
    """The `run_workflow` calls the conversation's last response made and nothing answered: the deferred ones."""
    if not history or not isinstance(history[-1], ModelResponse):
        return []
    return [p for p in history[-1].parts if isinstance(p, ToolCallPart) and p.tool_name == TOOL]


@dataclass
class Chat:
    """What `POST /api/chat` needs from the server: the Harness, the model, and the conversations in use."""

    harness: Any
    model: Any
    model_label: str
    busy: set[str] = field(default_factory=set)
    """Conversations with a turn streaming: a second request for one of them is refused, not interleaved."""

    @property
    def store(self) -> RunStore:
        return self.harness.store

    async def respond(self, request: Request) -> Response:
        if request.headers.get('content-type', '').split(';')[0].strip() != 'application/json':
            # Also what keeps another web page from posting here: a JSON body needs a CORS preflight we never answer.
            return problem(415, 'unsupported_media_type', 'POST /api/chat takes application/json.')
        try:
            run_input = VercelAIAdapter.build_run_input(await request.body())
        except ValidationError as exc:
            return problem(422, 'invalid_request', f'not a Vercel AI chat request: {exc.errors()[0]["msg"]}')
        conversation_id = run_input.id
        if not CONVERSATION_ID.fullmatch(conversation_id):
            return problem(400, 'invalid_request', 'the chat id must be 8 to 64 letters, digits, _ or -.')
        if conversation_id in self.busy:
            return problem(409, 'busy', f'conversation {conversation_id} has a turn running; wait for it to end.')
        try:
            turn = self.prepare(run_input, continuing=request.query_params.get('continue') in ('1', 'true'))
        except (ValueError, StoreError) as exc:
            return problem(409, 'conflict', str(exc))
        agent_run_id = str(uuid.uuid4())  # chosen here, so the turn's runs are found even if it fails
        turn.agent_run_id = turn.agent_run_id or agent_run_id
        turn.agent_run_ids.append(agent_run_id)
        events: asyncio.Queue[BaseChunk | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def on_event(event: CallEvent) -> None:
            chunk = DataChunk(type='data-call', id=f'{event.run_id}:{event.seq}', data=call_event_json(event))
            if _on_loop(loop):
                events.put_nowait(chunk)
            else:  # a sync tool's thread
                loop.call_soon_threadsafe(events.put_nowait, chunk)

        agent = self.harness.orchestrator(self.model, on_event=on_event)
        adapter = VercelAIAdapter(agent=agent, run_input=run_input, accept=request.headers.get('accept'))

        async def on_complete(result: Any) -> AsyncIterator[BaseChunk]:
            waiting = isinstance(result.output, DeferredToolRequests)
            turn.status = 'waiting' if waiting else 'completed'
            turn.answer = None if waiting else str(result.output)
            turn.messages = result.all_messages()
            turn.usage.add(of_responses(result.new_messages()))
            yield self.record(turn)

        stream = adapter.run_stream(
            message_history=turn.history,
            deferred_tool_results=turn.deferred,
            run_id=agent_run_id,
            conversation_id=turn.conversation_id,
            on_complete=on_complete,
        )
        return adapter.streaming_response(self.merged(stream, events, turn))

    def prepare(self, run_input: Any, *, continuing: bool) -> StudioTurn:
        """The turn a request asks for: a new prompt (the request's last user message), or the waiting
        turn going on (its deferred `run_workflow` calls approved: each run resumes with the decisions made)."""
        conversation_id = run_input.id
        found = self.store.get_conversation(conversation_id)
        if found is not None and found.conversation_id != conversation_id:
            found = None  # a prefix of another id: this is a new conversation
        history = list(ModelMessagesTypeAdapter.validate_json(found.messages_json)) if found else []
        turns = self.store.turns(conversation_id) if found else []
        last = turns[-1] if turns else None
        if continuing:
            deferred = waiting_tool_calls(history)
            if last is None or last.status != 'waiting' or not deferred:
                raise ValueError(f'conversation {conversation_id} has no turn waiting for approval to continue.')
            for run in runs_of_turn(self.store, [last.agent_run_id, *last.agent_run_ids]):
                if plan_json(run, self.store.decisions(run.run_id)) is not None:  # going on would approve it unseen
                    raise ValueError(f'run {run.run_id} waits for approval of its plan: approve or reject it first.')
            run_input.messages = []
            return StudioTurn(
                conversation_id,
                found,
                last.turn,
                last.prompt,
                history,
                agent_run_id=last.agent_run_id,
                agent_run_ids=list(last.agent_run_ids),
                deferred=DeferredToolResults(approvals={p.tool_call_id: True for p in deferred}),
                usage=Totals.from_json(last.usage),
            )
        users = [m for m in run_input.messages if m.role == 'user']
        if not users or not text_of(users[-1]).strip():
            raise ValueError('the request holds no user message with text.')
        if last is not None and last.status == 'waiting':
            raise ValueError(
                f'conversation {conversation_id} waits for approval: approve or reject its calls, '
                'then continue it (POST /api/chat?continue=1).'
            )
        run_input.messages = users[-1:]  # the server holds the history; the page may send all of it
        return StudioTurn(conversation_id, found, (last.turn if last else 0) + 1, text_of(users[-1]), history)

    async def merged(
        self, stream: AsyncIterator[BaseChunk], events: asyncio.Queue[BaseChunk | None], turn: StudioTurn
    ) -> AsyncIterator[BaseChunk]:
        """The adapter's chunks and the calls' `data-call` parts, in the order they happened. The conversation
        is marked busy, and the recorder told to expect this request's agent run, here, where the turn starts:
        a response whose client left before its body began never runs this, so leaves neither behind (the
        `finally` below clears both)."""
        if turn.conversation_id in self.busy:
            yield ErrorChunk(error_text=f'conversation {turn.conversation_id} has a turn running; wait for it to end.')
            return
        self.busy.add(turn.conversation_id)
        RECORDER.expect(turn.agent_run_ids[-1])  # the orchestrator's own spans, drained and stored by `keep_spans`

        async def pump() -> None:
            try:
                async for chunk in stream:
                    events.put_nowait(chunk)
            finally:
                close = getattr(stream, 'aclose', None)  # the adapter's generator: close it in this task
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
                events.put_nowait(None)

        task = asyncio.create_task(pump())
        try:
            while (chunk := await events.get()) is not None:
                yield chunk
                if isinstance(chunk, ErrorChunk) and turn.status == 'running':
                    turn.status, turn.error = 'failed', chunk.error_text
                    yield self.record(turn)
        finally:
            if not task.done():  # the page went away: the turn is cancelled, its run ends interrupted
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            if turn.status == 'running':
                turn.status = 'cancelled'
                with contextlib.suppress(Exception):
                    self.record(turn)
            self.keep_spans(turn.agent_run_ids[-1])
            self.busy.discard(turn.conversation_id)

    def keep_spans(self, agent_run_id: str) -> None:
        """Store the spans of this request's agent run (it has ended; its turn is stored), as `harness chat`
        does, for the span tree."""
        spans = RECORDER.drain(agent_run_id)
        if spans:
            with contextlib.suppress(StoreError):  # the turn is stored; its orchestrator spans are a nicety
                self.store.add_orchestrator_spans(agent_run_id, spans)

    def record(self, turn: StudioTurn) -> DataChunk:
        """Store the turn and the conversation (its messages only when the turn produced them); the `data-turn`
        part that tells the page how the turn ended."""
        stored = Turn(
            turn.conversation_id,
            turn.number,
            turn.agent_run_id,
            turn.prompt,
            turn.answer,
            turn.status,
            error=turn.error,
            usage=None if turn.usage.empty else turn.usage.as_json(),
            agent_run_ids=turn.agent_run_ids,
        )
        messages = ModelMessagesTypeAdapter.dump_json(turn.messages).decode() if turn.messages is not None else None
        if turn.conversation is None:
            turn.conversation = new_conversation(turn.conversation_id, turn.prompt, self.model_label)
        error = None
        try:
            record_turn(self.store, turn.conversation, stored, model_label=self.model_label, messages_json=messages)
        except StoreError as exc:  # the answer is on the page; losing its record is worth a line, not the turn
            error = f'the turn was not stored: {exc}'
        return DataChunk(type='data-turn', data={**self.turn_data(turn), 'store_error': error})

    def turn_data(self, turn: StudioTurn) -> dict[str, Any]:
        runs = runs_of_turn(self.store, [turn.agent_run_id, *turn.agent_run_ids])
        ids = [r.run_id for r in runs]
        short, usage = self.store.short_ids(ids), self.store.usage(ids)
        sub = Totals()
        for each in usage.values():
            sub.add(Totals.from_json(each))
        waiting = [
            {
                **run_summary(r, short, usage),
                'pending': pending_of(self.store.calls(r.run_id), self.store.decisions(r.run_id)),
                'plan': plan_json(r, self.store.decisions(r.run_id)),
            }
            for r in runs
            if r.status == 'waiting'
        ]
        return {
            'conversation_id': turn.conversation_id,
            'turn': turn.number,
            'status': turn.status,
            'error': turn.error,
            'model': self.model_label,
            'runs': [run_summary(r, short, usage) for r in runs],
            'waiting': waiting,
            'usage': {
                'orchestrator': None if turn.usage.empty else turn.usage.as_json(),
                'sub_agents': None if sub.empty else sub.as_json(),
            },
        }


@dataclass
class StudioTurn:
    """One turn as it streams: where it is stored and what it ran on."""

    conversation_id: str
    conversation: Conversation | None
    number: int
    prompt: str
    history: list[ModelMessage]
    agent_run_id: str | None = None
    """The orchestrator run the turn is stored under (for a continued turn: the one that started it)."""
    agent_run_ids: list[str] = field(default_factory=list)
    """Every orchestrator run of the turn, this request's last (a continued turn's scripts may belong to any)."""
    deferred: DeferredToolResults | None = None
    usage: Totals = field(default_factory=Totals)
    status: str = 'running'
    answer: str | None = None
    error: str | None = None
    messages: list[ModelMessage] | None = None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
