"""Orchestrator turns in the terminal: `harness ask` (one turn) and `harness chat` (many), as pydantic-ai's
`clai` has them: streamed Markdown answers, multiline input with history, slash commands, and every
conversation kept in the run store, so `harness chat --continue` picks it up and `harness show RUN` shows
the turn a script belongs to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from .._dispatch._effects import interrupted_runs
from .._records import RunRow, new_run_id
from .._store import Conversation, RunStore, StoreError, Turn
from .._ui._runs import runs_of_turn, trace_spans, turn_agent_runs
from .._ui._text import call_text, cut
from .._ui._turns import new_conversation, record_turn
from ._live import LiveCalls
from ._safe_text import safe
from ._turn import TurnOutcome, TurnView, run_turn
from ._views import footer_lines

PROMPT = 'you> '
SLASH_HELP = {
    '/runs': "this conversation's workflow runs",
    '/trace [RUN]': "the span tree of the last run (or RUN's)",
    '/script': 'the scripts the model wrote in the last turn',
    '/retry': 'send the last prompt again (its answer is dropped from the conversation)',
    '/model [NAME]': 'show the model, or switch to NAME (a pydantic-ai model string)',
    '/multiline': 'toggle multiline input (then Enter adds a line, Esc then Enter sends)',
    '/exit': 'leave (Ctrl-D does too)',
}


@dataclass
class Session:
    """One orchestrator conversation: the Harness, the agent on the chosen model, the terminal views,
    and the conversation as stored (created on the first turn)."""

    harness: Any
    console: Console
    make_agent: Callable[[Any], Any]
    """Builds the orchestrator for a model (the choice's model, or a `/model` switch)."""
    model: Any
    model_label: str
    live: LiveCalls
    conversation: Conversation | None = None
    history: list[Any] = field(default_factory=list)
    turns: int = 0
    last: TurnOutcome | None = None
    last_prompt: str | None = None
    multiline: bool = False
    runner: asyncio.Runner | None = None
    agent: Any = None

    def __post_init__(self) -> None:
        self.agent = self.make_agent(self.model)
        self.view = TurnView(self.console, self.live)

    @property
    def store(self) -> RunStore | None:
        return self.harness.store

    # -- conversations ---------------------------------------------------------------------------

    def resume_conversation(self, conversation_id: str | None) -> None:
        """Continue a stored conversation (the latest when `conversation_id` is None)."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        if self.store is None:
            raise StoreError('no run store: conversations are kept in one (pass --store).')
        found = self.store.get_conversation(conversation_id)
        if found is None:
            what = f'conversation {conversation_id!r}' if conversation_id else 'conversation'
            raise StoreError(f'no {what} in {self.store.path}: start one with `harness chat`.')
        self.conversation = found
        self.history = list(ModelMessagesTypeAdapter.validate_json(found.messages_json))
        turns = self.store.turns(found.conversation_id)
        self.turns = max((t.turn for t in turns), default=0)
        self.console.print(
            f'[dim]continuing conversation {found.conversation_id[:10]} '
            f'({self.turns} turn(s), {when(found.updated)}):[/dim]'
        )
        for t in turns[-3:]:
            self.console.print(f'[dim]you> {safe(cut(t.prompt, 200))}[/dim]')
            if t.answer:
                self.console.print(f'[dim]orchestrator> {safe(cut(" ".join(t.answer.split()), 200))}[/dim]')
        for run_id, calls in interrupted_runs(self.store, found.conversation_id):  # the next turn is told too
            self.console.print(
                f'[yellow]run {run_id} of an earlier turn was interrupted after {len(calls)} call(s); '
                f'the next turn is told what it finished (harness show {run_id})[/yellow]'
            )

    def begin(self, prompt: str) -> str | None:
        """The stored conversation this turn is one of, saved before the turn runs: a turn whose process dies is still
        in it, so `chat --continue` continues it, and its next turn is told what the dead one left and is answered
        from the side effects it finished (its scripts' runs carry the conversation's id)."""
        if self.store is None:
            return None
        if self.conversation is None:
            self.conversation = new_conversation(new_run_id(), prompt, self.model_label)
            with contextlib.suppress(StoreError):  # the turn's record tries again (`record`), and says if it fails
                self.store.save_conversation(self.conversation)
        return self.conversation.conversation_id

    def record(self, prompt: str, outcome: TurnOutcome, status: str, error: str | None = None) -> None:
        """Store the turn, and the conversation's messages after it (only a completed turn adds messages)."""
        if self.store is None:
            return
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        if self.conversation is None:  # `begin` made it; this is for a caller that did not
            self.conversation = new_conversation(new_run_id(), prompt, self.model_label)
        first_run = outcome.agent_run_ids[0] if outcome.agent_run_ids else None  # its scripts' runs carry it
        turn = Turn(
            self.conversation.conversation_id,
            self.turns,
            first_run,
            prompt,
            outcome.output,
            status,
            error=error,
            usage=None if outcome.usage.empty else outcome.usage.as_json(),
            trace_id=outcome.trace_id,
            agent_run_ids=outcome.agent_run_ids,
        )
        messages = ModelMessagesTypeAdapter.dump_json(self.history).decode() if status == 'completed' else None
        try:
            record_turn(self.store, self.conversation, turn, model_label=self.model_label, messages_json=messages)
            for agent_run_id, spans in outcome.spans.items():  # the orchestrator's own, beside its runs' spans
                if spans:
                    self.store.add_orchestrator_spans(agent_run_id, spans)
        except StoreError as exc:  # the answer is on screen; losing its record is worth a line, not the session
            self.console.print(f'[yellow]note:[/yellow] the turn was not stored: {safe(str(exc))}')

    # -- one turn --------------------------------------------------------------------------------

    def turn(self, prompt: str) -> TurnOutcome:
        """Run one turn; KeyboardInterrupt (Ctrl-C) and `asyncio.CancelledError` (`harness cancel`) propagate
        after the turn is recorded as cancelled and the view says what can be resumed."""
        assert self.runner is not None
        self.live.new_turn()
        self.turns += 1
        self.last_prompt = prompt
        outcome = TurnOutcome()
        self.last = outcome
        conversation_id = self.begin(prompt)
        try:
            self.runner.run(
                run_turn(
                    self.agent,
                    prompt,
                    history=self.history,
                    view=self.view,
                    outcome=outcome,
                    conversation_id=conversation_id,
                )
            )
            while not isinstance(outcome.output, str | None):  # a run waits for a person: ask, then go on
                decided = self.decide(outcome.output)
                if decided is None:
                    break
                self.runner.run(
                    run_turn(
                        self.agent,
                        None,
                        history=outcome.messages,
                        view=self.view,
                        outcome=outcome,
                        deferred=decided,
                        conversation_id=conversation_id,
                    )
                )
        except (KeyboardInterrupt, asyncio.CancelledError) as exc:
            by = 'by `harness cancel`' if isinstance(exc, asyncio.CancelledError) else ''
            self.cancelled(outcome, by)
            self.record(prompt, outcome, 'cancelled')
            raise
        except Exception as exc:
            self.record(prompt, outcome, 'failed', error=f'{type(exc).__name__}: {exc}')
            raise
        self.history = outcome.messages
        if not isinstance(outcome.output, str | None):
            outcome.output = None
            self.record(prompt, outcome, 'waiting')
        else:
            self.record(prompt, outcome, 'completed')
        return outcome

    def decide(self, requests: Any) -> Any:
        """Ask the person about every call a run waits on (approve, or reject with a reason) and record
        each decision; pydantic-ai's `DeferredToolResults` to go on with, or None when nobody can answer
        (no input): then the run stays waiting for `harness approve` / `harness reject`."""
        from pydantic_ai.tools import DeferredToolResults

        approvals: dict[str, Any] = {}
        for call in requests.approvals:
            meta = requests.metadata.get(call.tool_call_id, {})
            run_id = meta.get('run_id')
            if meta.get('plan') is not None:  # held for review: the plan is the one decision
                decided = self.decide_plan(run_id, meta['plan'])
                if decided is None:
                    return None
                approvals[call.tool_call_id] = decided
                continue
            for waiting in meta.get('waiting', []):
                text = call_text(waiting['callee'], waiting.get('arguments') or {})
                self.console.print(
                    f'[magenta]run {run_id} waits for approval of #{waiting["seq"]} {safe(text)}[/magenta]'
                )
                asked = self.ask_approval(run_id, 'approve? ')
                if asked is None:
                    return None
                approved, reason = asked
                if approved:
                    self.harness.approve(run_id, waiting['seq'])
                else:
                    self.harness.reject(run_id, waiting['seq'], reason=reason)
            approvals[call.tool_call_id] = True  # the tool call goes on: the run resumes with the decisions
        return DeferredToolResults(approvals=approvals)

    def ask_approval(self, run_id: str, question: str) -> tuple[bool, str] | None:
        """The person's yes (True) or no with a reason; None when nobody can answer (no input: it stays waiting)."""
        try:
            answer = self.console.input(question + '\\[y/N] ').strip().lower()
            reason = '' if answer in ('y', 'yes') else self.console.input('reason (optional): ').strip()
        except EOFError:
            self.console.print(
                f'[dim]left waiting: harness approve {run_id} (or reject), then harness resume {run_id}[/dim]'
            )
            return None
        return answer in ('y', 'yes'), reason or 'rejected in the chat'

    def decide_plan(self, run_id: str, plan: dict[str, Any]) -> Any:
        """Show a script's plan and ask the person to approve it: True (approved: the script runs), a `ToolDenied`
        with the reason (the run ended; the model reads why), or None when nobody can answer (it stays waiting)."""
        from pydantic_ai.tools import ToolDenied

        from .._check._plan import plan_denied, plan_text

        self.console.print(f'[magenta]run {run_id} waits for approval of its plan:[/magenta]')
        self.console.print(safe(plan_text(plan, plan.get('code') or '', lines=10)), soft_wrap=True)
        asked = self.ask_approval(run_id, 'approve the plan? ')
        if asked is None:
            return None
        approved, reason = asked
        if approved:
            self.harness.approve(run_id)
            return True
        self.harness.reject(run_id, reason=reason)
        return ToolDenied(plan_denied(plan, reason))

    def turn_runs(self, outcome: TurnOutcome) -> list[RunRow]:
        """The workflow runs of a turn, oldest first: every attempt, the one that failed its check too."""
        if self.store is None:
            return []
        return runs_of_turn(self.store, outcome.agent_run_ids)

    def cancelled(self, outcome: TurnOutcome, by: str = '') -> None:
        rows = self.turn_runs(outcome)
        stopped = [r for r in rows if r.status in ('interrupted', 'running')]
        line = f'cancelled{" " + by if by else ""}'
        if stopped:
            run = stopped[-1]
            short = self.store.short_ids([run.run_id])[run.run_id] if self.store is not None else run.run_id
            line += f' · run {short} stopped after {run.calls_count} call(s); finish its script: harness resume {short}'
        self.console.print(f'[yellow]{safe(line)}[/yellow]')

    def footer(self, outcome: TurnOutcome) -> None:
        rows = self.turn_runs(outcome)
        lines = footer_lines(self.store, self.live.run_ids, rows, self.live.count, outcome.usage, self.live.dollars)
        for line in lines:
            self.console.print(line)
        if rows:
            short = self.store.short_ids([rows[-1].run_id]) if self.store is not None else {}
            self.console.print(f'[dim]trace: harness trace {short.get(rows[-1].run_id, rows[-1].run_id)}[/dim]')
        where = trace_destination(outcome.trace_id)
        if where:
            self.console.print(f'[dim]{safe(where)}[/dim]')

    # -- the chat loop ---------------------------------------------------------------------------

    def chat(self) -> None:
        """Read prompts until /exit, Ctrl-D (or Ctrl-C at the prompt)."""
        reader = PromptReader(self.console, self.store)
        self.console.print(
            '[dim]/help lists the commands; end a line with \\ to add another; Ctrl-C cancels a '
            'turn, Ctrl-D leaves.[/dim]'
        )
        while True:
            try:
                text = reader.read(multiline=self.multiline)
            except (EOFError, KeyboardInterrupt):
                self.console.print()
                return
            if not text.strip():
                continue
            if text.strip().startswith('/'):
                if self.slash(text.strip()) == 'exit':
                    return
                continue
            self.ask(text)

    def ask(self, text: str) -> None:
        try:
            outcome = self.turn(text)
        except (KeyboardInterrupt, asyncio.CancelledError):
            return
        except Exception as exc:
            self.console.print(f'[red]error:[/red] {safe(one_line(exc))}')
            return
        self.footer(outcome)

    def slash(self, command: str) -> str | None:
        name, _, argument = command.partition(' ')
        argument = argument.strip()
        if name in ('/exit', '/quit'):
            return 'exit'
        if name == '/help':
            for usage, what in SLASH_HELP.items():
                self.console.print(f'  [bold]{usage}[/bold]  {what}')
        elif name == '/multiline':
            self.multiline = not self.multiline
            self.console.print(
                'multiline input on: Enter adds a line, Esc then Enter sends'
                if self.multiline
                else 'multiline input off: Enter sends'
            )
        elif name == '/model':
            self.switch_model(argument)
        elif name == '/script':
            scripts = self.last.scripts if self.last is not None else []
            if not scripts:
                self.console.print('[dim]no script yet in this conversation[/dim]')
            for attempt, code in enumerate(scripts, 1):
                self.view.script(code, attempt)
        elif name == '/retry':
            if self.last_prompt is None:
                self.console.print('[dim]nothing to retry yet[/dim]')
            else:
                if self.last is not None and self.last.messages and self.history is self.last.messages:
                    self.history = self.history[: len(self.history) - len(self.last.new_messages)]
                self.console.print(f'[dim]again: {safe(cut(self.last_prompt, 200))}[/dim]')
                self.ask(self.last_prompt)
        elif name == '/runs':
            self.list_runs()
        elif name == '/trace':
            self.show_trace(argument)
        else:
            self.console.print(f'[red]unknown command {safe(name)}[/red]; /help lists them')
        return None

    def switch_model(self, name: str) -> None:
        from .._ui._models import ModelError, choose_model

        if not name:
            self.console.print(f'model: {safe(self.model_label)}')
            return
        try:
            choice = choose_model(name)
        except ModelError as exc:
            self.console.print(f'[red]error:[/red] {safe(str(exc))}')
            return
        self.model, self.model_label = choice.model, choice.label
        self.agent = self.make_agent(self.model)
        self.console.print(f'model: {safe(self.model_label)}')

    def list_runs(self) -> None:
        from ._views import runs_table

        if self.store is None or self.conversation is None:
            self.console.print('[dim]no runs in this conversation yet[/dim]')
            return
        turns = self.store.turns(self.conversation.conversation_id)
        rows = runs_of_turn(self.store, [a for t in turns for a in turn_agent_runs(t)])[::-1]  # newest first
        short = self.store.short_ids([r.run_id for r in rows])
        self.console.print(runs_table(rows, short, self.store.usage([r.run_id for r in rows])))

    def show_trace(self, run_id: str) -> None:
        from .._tracing._tree import render_tree

        if self.store is None:
            return
        if not run_id:
            rows = self.turn_runs(self.last) if self.last is not None else []
            if not rows:
                self.console.print('[dim]no run in the last turn; /trace RUN for another[/dim]')
                return
            run_id = rows[-1].run_id
        try:
            run = self.store.get_run(run_id)
        except StoreError as exc:
            self.console.print(f'[red]error:[/red] {safe(str(exc))}')
            return
        if run is None:
            self.console.print(f'[red]error:[/red] no run {safe(run_id)!r}')
            return
        spans = trace_spans(self.store, run)
        self.console.print(render_tree(spans) if spans else '[dim]no spans stored (tracing was off)[/dim]')


class PromptReader:
    """Reads a prompt: prompt-toolkit on a terminal (editing, history kept beside the store, multiline),
    plain lines otherwise (a line ending in a backslash continues on the next)."""

    def __init__(self, console: Console, store: RunStore | None) -> None:
        self.console = console
        self.session: Any = None
        if sys.stdin.isatty() and sys.stdout.isatty():
            from prompt_toolkit import PromptSession
            from prompt_toolkit.filters import Condition
            from prompt_toolkit.history import FileHistory, InMemoryHistory
            from prompt_toolkit.key_binding import KeyBindings

            history: Any = InMemoryHistory()
            if store is not None and store.path != ':memory:':
                path = Path(store.path).with_name('chat-history')
                try:
                    path.touch(exist_ok=True)
                    history = FileHistory(str(path))
                except OSError:
                    pass
            keys = KeyBindings()
            continued = Condition(lambda: self.session.default_buffer.document.text_before_cursor.endswith('\\'))

            @keys.add('enter', filter=continued)
            def _(event: Any) -> None:  # a trailing backslash: Enter starts a new line instead of sending
                event.current_buffer.delete_before_cursor(1)
                event.current_buffer.insert_text('\n')

            # In /multiline mode prompt-toolkit's own keys apply: Enter adds a line, Esc then Enter sends.
            self.session = PromptSession(history=history, key_bindings=keys)

    def read(self, *, multiline: bool = False) -> str:
        if self.session is not None:
            from prompt_toolkit.formatted_text import ANSI

            return self.session.prompt(
                ANSI(f'\x1b[1;36m{PROMPT}\x1b[0m'), multiline=multiline, prompt_continuation='... '
            )
        lines = [self.console.input(f'[bold cyan]{PROMPT}[/bold cyan]')]
        while lines[-1].endswith('\\'):
            lines[-1] = lines[-1][:-1]
            lines.append(self.console.input('... '))
        return '\n'.join(lines)


def when(timestamp: float) -> str:
    return time.strftime('%Y-%m-%d %H:%M', time.localtime(timestamp))


def one_line(exc: BaseException) -> str:
    return ' '.join(f'{type(exc).__name__}: {exc}'.split())


def trace_destination(trace_id: str | None) -> str | None:
    """Where the turn's trace went, when it left the machine: the trace id, and a link if one is known
    (`HARNESS_TRACE_URL`, e.g. `http://localhost:16686/trace/{trace_id}` for Jaeger)."""
    if trace_id is None:
        return None
    from .._tracing._setup import exporting

    where = exporting()
    if where is None:
        return None
    template = os.environ.get('HARNESS_TRACE_URL')
    link = f' · {template.format(trace_id=trace_id)}' if template and '{trace_id}' in template else ''
    return f'trace {trace_id} sent to {where}{link}'
