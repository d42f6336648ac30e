"""One orchestrator turn in the terminal, as pydantic-ai's `clai` shows a run: streamed, as it happens.

Driven by pydantic-ai's iteration API (`agent.iter`, each node's `stream`), so the model's requests are
streamed (`stream: true`) and the answer renders as Markdown while it arrives (rich `Live`). Between
requests the view shows a spinner while the model thinks, the script it wrote for `run_workflow`
(syntax highlighted, labelled with its attempt number), every call as it runs (`LiveCalls`, numbered
across the turn), and what came back: the value, or the check failure or error the model will retry on.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from pydantic_ai import Agent
from pydantic_ai.messages import FunctionToolCallEvent, FunctionToolResultEvent, ModelMessage, TextPart
from rich.console import Console
from rich.live import Live
from rich.syntax import Syntax
from rich.text import Text

from .._agent._usage import Totals, of_responses
from .._records import SpanDict
from .._tracing._setup import RECORDER
from ._live import LiveCalls
from ._markdown import Answer
from ._safe_text import visible

TOOL = 'run_workflow'
FAILURE_LINES = 12
"""Lines of a failed attempt's message shown (the model gets all of it)."""


@dataclass
class TurnOutcome:
    """What one turn did: its answer, its messages, and where to find its runs and its trace."""

    output: Any = None
    """The answer (a str), or pydantic-ai's `DeferredToolRequests` when a run waits for a person."""
    messages: list[ModelMessage] = field(default_factory=list)
    """The whole conversation after this turn (the history for the next one)."""
    new_messages: list[ModelMessage] = field(default_factory=list)
    agent_run_id: str | None = None
    """pydantic-ai's run id: the workflow runs of this turn carry it as `orchestrator_run_id`."""
    agent_run_ids: list[str] = field(default_factory=list)
    """Every agent run of the turn: one, and one more each time it continues after approvals."""
    trace_id: str | None = None
    usage: Totals = field(default_factory=Totals)
    """The orchestrator's own requests (sub-agents' tokens are on their workflow runs)."""
    attempts: int = 0
    scripts: list[str] = field(default_factory=list)
    spans: dict[str, list[SpanDict]] = field(default_factory=dict)
    """Per agent run id, the orchestrator's own spans (its agent run, model requests and tool executions; each
    workflow run keeps its own), recorded offline: the caller stores them under that id for `harness trace`."""
    tool_calls: dict[str, int] = field(default_factory=dict)
    """`run_workflow` tool call id -> the attempt number of its latest call (a call continued after approvals
    keeps its number; a model server that reuses ids makes new attempts under one id)."""


class TurnView:
    """Renders one turn on `console`; `live` prints the calls (its numbering is per turn)."""

    def __init__(
        self, console: Console, live: LiveCalls, *, code_theme: str = 'ansi_dark', label: str = 'orchestrator>'
    ) -> None:
        self.console = console
        self.live = live
        self.code_theme = code_theme
        self.label = label

    @contextlib.contextmanager
    def thinking(self) -> Generator[Any]:
        """A spinner until the first streamed event (a transient line: nothing stays behind)."""
        with self.console.status('[dim]thinking…[/dim]', spinner='dots') as status:
            yield status

    def script(self, code: str, attempt: int) -> None:
        self.console.print(Text(f'script · attempt {attempt}', style='bold magenta'))
        self.console.print(
            Syntax(
                visible(code.rstrip('\n')),
                'python',
                theme=self.code_theme,
                line_numbers=True,
                word_wrap=True,
                background_color='default',
            )
        )

    def returned(self, content: Any, attempt: int, *, retried: bool) -> None:
        if retried:
            lines = str(content).strip().splitlines()
            shown = '\n'.join(lines[:FAILURE_LINES]) + (
                f'\n… {len(lines) - FAILURE_LINES} more line(s)' if len(lines) > FAILURE_LINES else ''
            )
            self.console.print(f'[red]✗ attempt {attempt} failed; the model is told why:[/red]')
            self.console.print(Text(visible(shown), style='red'), soft_wrap=True)
        else:
            self.console.print(f'[green]✓ attempt {attempt} returned[/green]')


def text_of(parts: Sequence[Any]) -> str:
    return ''.join(p.content for p in parts if isinstance(p, TextPart))


async def run_turn(
    agent: Agent[Any, Any],
    prompt: str | None,
    *,
    history: Sequence[ModelMessage] | None,
    view: TurnView,
    outcome: TurnOutcome | None = None,
    deferred: Any = None,
    conversation_id: str | None = None,
) -> TurnOutcome:
    """Run one turn, streaming it to `view`. `outcome` (when given) is filled in as the turn goes, so a
    caller that is interrupted still knows the turn's run id and trace. With `deferred` (pydantic-ai's
    `DeferredToolResults`), the turn goes on after a person decided on the calls it waited for.
    `conversation_id`: the stored conversation the turn is one of, which its scripts' runs carry."""
    outcome = outcome if outcome is not None else TurnOutcome()
    console = view.console
    # The calls this agent run continues: pydantic-ai calls each approved one again, once, first. A tool call
    # id alone does not say so: some model servers give every tool call the same id.
    going_on = set(deferred.approvals) if deferred is not None else set()
    agent_run_id = str(uuid.uuid4())  # chosen here, so the recorder knows the agent run's span when it starts
    RECORDER.expect(agent_run_id)
    try:
        async with agent.iter(
            prompt,
            message_history=list(history or []),
            deferred_tool_results=deferred,
            run_id=agent_run_id,
            conversation_id=conversation_id,
        ) as run:
            outcome.agent_run_id = run.run_id
            outcome.agent_run_ids.append(run.run_id)
            context = trace.get_current_span().get_span_context()  # the agent run's span, when traced
            if context.is_valid:
                outcome.trace_id = format(context.trace_id, '032x')
            await _iterate(run, view, outcome, going_on)
            result = run.result
    finally:  # the agent run's span has ended: what was recorded of it is complete
        outcome.spans[agent_run_id] = RECORDER.drain(agent_run_id)
    assert result is not None
    outcome.output = result.output
    outcome.messages = result.all_messages()
    new = result.new_messages()
    outcome.new_messages += new
    outcome.usage.add(of_responses(new))  # this agent run's requests only: a turn that went on has two runs
    console.print()
    return outcome


async def _iterate(run: Any, view: TurnView, outcome: TurnOutcome, going_on: set[str]) -> None:
    """Stream every node of the agent run: the model's responses, the scripts and what they returned."""
    async for node in run:
        if Agent.is_model_request_node(node):
            await _stream_response(node, run, view)
        elif Agent.is_call_tools_node(node):
            async with node.stream(run.ctx) as events:
                async for event in events:
                    if isinstance(event, FunctionToolCallEvent) and event.part.tool_name == TOOL:
                        call_id = event.part.tool_call_id
                        if call_id in going_on and call_id in outcome.tool_calls:  # approved: the script goes on
                            going_on.discard(call_id)
                            view.console.print(f'[dim]attempt {outcome.tool_calls[call_id]} goes on[/dim]')
                            continue
                        outcome.attempts += 1
                        outcome.tool_calls[call_id] = outcome.attempts
                        code = str(event.part.args_as_dict().get('code', ''))
                        outcome.scripts.append(code)
                        view.script(code, outcome.attempts)
                    elif isinstance(event, FunctionToolResultEvent) and event.part.tool_name == TOOL:
                        retried = getattr(event.part, 'outcome', None) == 'retried'
                        attempt = outcome.tool_calls.get(event.part.tool_call_id, outcome.attempts)
                        view.returned(event.part.content, attempt, retried=retried)


async def _stream_response(node: Any, run: Any, view: TurnView) -> None:
    """One model request, streamed: a spinner until the first event, then the text as Markdown."""
    console = view.console
    live: Live | None = None
    with contextlib.ExitStack() as stack:
        status = stack.enter_context(view.thinking())
        async with node.stream(run.ctx) as stream:
            async for _event in stream:
                text = text_of(stream.response.parts)
                if not text.strip():
                    continue
                if live is None:  # cut at the screen's height while it streams (no scrolled copies); whole at the end
                    status.stop()
                    console.print(Text(view.label, style='bold green'))
                    live = stack.enter_context(
                        Live(console=console, refresh_per_second=12, vertical_overflow='ellipsis')
                    )
                live.update(Answer(visible(text), code_theme=view.code_theme))
            text = text_of(stream.response.parts)
            if live is not None:
                live.update(Answer(visible(text), code_theme=view.code_theme), refresh=True)
