"""The terminal's live view of a run: one line as each call starts, finishes or fails."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ._records import CallEvent, preview


class LiveCalls:
    """An `on_event` handler printing each call as it happens."""

    def __init__(self, console: Console, *, width: int | None = None) -> None:
        self.console = console
        self.width = width
        self.count = 0
        self.run_ids: list[str] = []

    def __call__(self, event: CallEvent) -> None:
        if event.run_id not in self.run_ids:
            self.run_ids.append(event.run_id)
        width = self.width or self.console.width
        args = escape(preview(event.arguments, max(20, width // 2 - 20)).strip('{}'))
        tag = '' if event.source == 'live' else f' [dim]({event.source})[/dim]'
        if event.kind == 'started':
            self.count += 1
            self.console.print(f'  [cyan]→[/cyan] #{event.seq} [bold]{event.callee}[/bold]({args}){tag}')
        elif event.kind == 'finished':
            took = f'{event.elapsed:.2f}s' if event.elapsed is not None else ''
            result = escape(preview(event.result, max(20, width - len(event.callee) - 25)))
            self.console.print(f'  [green]✓[/green] #{event.seq} {event.callee} [dim]{took}[/dim] → {result}{tag}')
        else:
            self.console.print(f'  [red]✗[/red] #{event.seq} {event.callee}: {escape(event.error or "failed")}{tag}')
