"""The terminal's live view of calls: one line as each call starts, finishes, fails, is refused or is skipped,
and one for each `phase(name)` (`▸ name`, the stage the script reached) and `log(text)` (`│ text`) of the script.

Calls are written as the script wrote them, in Python: `reviewer(path='a.py', focus='bugs')`, each value
cut on its own (a long string keeps its start and says how long it was) rather than the whole line at
the terminal's edge. Numbers run across a whole orchestrator turn: a second attempt's first call is
numbered after the first attempt's last, so `#7` names one call of the turn. A call a budget refused has
no number: it never got a place in the run's journal (its event's seq is 0).
"""

from __future__ import annotations

from rich.console import Console

from .._agent._usage import format_cost
from .._records import CallEvent, progress_kind
from .._ui._text import RESULT_CHARS, call_text, cut, literal
from ._safe_text import safe

PROGRESS_CHARS = 200
"""A `log` line in the live view: its start (the run keeps up to 1,000 characters)."""


class LiveCalls:
    """An `on_event` handler printing each call as it happens; `new_turn()` starts the numbering over."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.count = 0
        """Calls of the turn's runs since `new_turn()`: started, or refused by a rule (journaled, never run)."""
        self.run_ids: list[str] = []
        """The runs that made those calls, in order of their first call."""
        self._offsets: dict[str, int] = {}
        self._highest = 0
        self.dollars: str | None = None
        """Under a dollar budget, the turn's dollars at its latest event: spent, and reserved while calls run."""

    def new_turn(self) -> None:
        self.count = 0
        self.dollars = None
        self.run_ids.clear()
        self._offsets.clear()
        self._highest = 0

    def number(self, event: CallEvent) -> int:
        """The call's number in this turn: its `seq`, after the calls of the turn's earlier runs."""
        if event.run_id not in self._offsets:
            self._offsets[event.run_id] = self._highest
            self.run_ids.append(event.run_id)
        number = self._offsets[event.run_id] + event.seq
        self._highest = max(self._highest, number)
        return number

    def __call__(self, event: CallEvent) -> None:
        if event.kind == 'progress':  # the script's own words: no call, so no number
            self.progress(event)
            return
        number = self.number(event) if event.seq else None
        tag = '' if event.source == 'live' else f' [dim]({event.source})[/dim]'
        self.dollars = event.dollars or self.dollars
        if event.kind in ('finished', 'failed') and event.call.cost_usd is not None:  # what it settled to
            tag += f' [dim]· {format_cost(event.call.cost_usd)}[/dim]'
            if event.reserved_usd:  # other calls still hold reservations: the turn's dollars with them
                tag += f' [dim]· {safe(event.dollars or "")}[/dim]'
        if event.kind == 'refused':
            if number is not None:  # a rule's refusal is a call of the run (journaled); a budget's is not
                self.count += 1
            call = safe(call_text(event.callee, event.arguments))
            where = f'#{number} ' if number is not None else ''
            self.console.print(f'  [yellow]⊘[/yellow] {where}{call} refused: {safe(event.error or "")}{tag}')
        elif event.kind == 'skipped':
            self.console.print(f'  [dim]– #{number} {safe(event.callee)} skipped: {safe(event.error or "")}[/dim]')
        elif event.kind == 'started':
            self.count += 1
            call = safe(call_text(event.callee, event.arguments))
            self.console.print(
                f'  [cyan]→[/cyan] #{number} [bold]{safe(event.callee)}[/bold]{call[len(event.callee) :]}{tag}'
            )
        elif event.kind == 'finished':
            took = f'{event.elapsed:.2f}s' if event.elapsed is not None else ''
            result = safe(cut(literal(event.result), RESULT_CHARS))
            self.console.print(f'  [green]✓[/green] #{number} {safe(event.callee)} [dim]{took}[/dim] → {result}{tag}')
        else:
            error = safe(event.error or 'failed')
            self.console.print(f'  [red]✗[/red] #{number} {safe(event.callee)}: {error}{tag}')

    def progress(self, event: CallEvent) -> None:
        text = safe(cut(str(event.arguments.get('text') or ''), PROGRESS_CHARS))
        tag = '' if event.source == 'live' else f' [dim]({event.source})[/dim]'
        if progress_kind(event.call) == 'phase':
            self.console.print(f'  [bold magenta]▸ {text}[/bold magenta]{tag}')
        else:
            self.console.print(f'  [dim]│[/dim] {text}{tag}')
