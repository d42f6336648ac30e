"""Stored runs in the terminal and as JSON: `harness runs`, `harness show`, and the footer of a turn.

Plain data in, rich renderables (or JSON-ready dicts) out; everything is read from the run store, so
these views import neither pydantic-ai nor logfire and the commands that use them start fast.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from .._agent._usage import Totals, format_cost
from .._catalog._prelude import PROGRESS_MAX_ENTRIES
from .._records import CallRecord, RunRow, SpanDict, is_progress, progress_dropped, progress_entries
from .._store import RunStore, Turn
from .._ui._runs import exceptions_by_seq
from .._ui._text import call_text, cut, literal
from ._markdown import Answer
from ._safe_text import safe, visible

STATUS_STYLE = {
    'completed': 'green',
    'failed': 'red',
    'interrupted': 'yellow',
    'needs_decision': 'magenta',
    'running': 'cyan',
    'cancelled': 'yellow',
    'waiting': 'magenta',
}
PREVIEW = 60


def status_text(status: str) -> str:
    style = STATUS_STYLE.get(status, '')
    return f'[{style}]{status}[/{style}]' if style else safe(status)


def when(created: float, *, short: bool = False) -> str:
    """The local time; `short`: only the time for today's runs, only the date and minute for older ones."""
    moment = time.localtime(created)
    if not short:
        return time.strftime('%Y-%m-%d %H:%M:%S', moment)
    same_day = time.strftime('%Y-%m-%d', moment) == time.strftime('%Y-%m-%d')
    return time.strftime('%H:%M:%S' if same_day else '%Y-%m-%d %H:%M', moment)


def first_line(run: RunRow) -> str:
    text = (run.prompt or run.script).strip()
    return text.splitlines()[0] if text else ''


# -- runs ------------------------------------------------------------------------------------------


def runs_json(rows: Sequence[RunRow], usage: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            'run_id': r.run_id,
            'status': r.status,
            'created': r.created,
            'duration': r.duration,
            'calls': r.calls_count,
            'prompt': r.prompt,
            'script': r.script,
            'error': r.error,
            'parent_run_id': r.parent_run_id,
            'fork_at': r.fork_at,
            'orchestrator_run_id': r.orchestrator_run_id,
            'usage': usage.get(r.run_id),
        }
        for r in rows
    ]


def runs_table(
    rows: Sequence[RunRow], short: dict[str, str], usage: dict[str, dict[str, Any]], *, full: bool = False
) -> RenderableType:
    """The listing: one row per run at any width; `full`: one block per run, whole ids and prompts."""
    if not rows:
        return Text('no runs yet', style='dim')
    if full:
        return runs_blocks(rows, usage)
    # expand + ratio: the prompt column gives way first, so run ids stay whole at 80 columns (and in pipes)
    table = Table(box=None, header_style='bold', expand=True)
    for column in ('run', 'when', 'status', 'calls', 'duration', 'tokens', 'cost'):
        table.add_column(column, no_wrap=True, justify='right' if column in ('calls', 'tokens', 'cost') else 'left')
    table.add_column('prompt / script', overflow='fold' if full else 'ellipsis', no_wrap=not full, ratio=1)
    for row in rows:
        lineage = ''
        if row.parent_run_id:
            lineage = f' [dim](fork of {short.get(row.parent_run_id, row.parent_run_id[:10])} at #{row.fork_at})[/dim]'
        totals = usage.get(row.run_id)
        cost = format_cost(totals.get('cost'), totals.get('unpriced', 0)) if totals else ''
        tokens = compact((totals.get('input_tokens') or 0) + (totals.get('output_tokens') or 0)) if totals else ''
        text = (row.prompt or row.script).strip() if full else first_line(row)[:80]
        table.add_row(
            short.get(row.run_id, row.run_id) if not full else row.run_id,
            when(row.created, short=not full),
            status_text(row.status),
            str(row.calls_count),
            f'{row.duration:.2f}s' if row.duration is not None else '',
            tokens,
            cost,
            safe(text) + lineage,
        )
    return table


def runs_blocks(rows: Sequence[RunRow], usage: dict[str, dict[str, Any]]) -> RenderableType:
    blocks: list[RenderableType] = []
    for row in rows:
        facts = [status_text(row.status), when(row.created), f'{row.calls_count} call(s)']
        if row.duration is not None:
            facts.append(f'{row.duration:.2f}s')
        if row.run_id in usage:
            facts.append(Totals.from_json(usage[row.run_id]).text())
        if row.parent_run_id:
            facts.append(f'fork of {row.parent_run_id} at #{row.fork_at}')
        blocks.append(Text.from_markup(f'[bold]{row.run_id}[/bold]  ' + '  '.join(facts)))
        text = (row.prompt or row.script).rstrip()
        blocks.append(Text('\n'.join('    ' + visible(line) for line in text.splitlines()), style='dim'))
    return Group(*blocks)


def compact(n: int) -> str:
    """`950`, `1.2k`, `3.4M`: a token count in a narrow column."""
    if n < 1_000:
        return str(n)
    if n < 1_000_000:
        return f'{n / 1_000:.1f}k'
    return f'{n / 1_000_000:.1f}M'


# -- show ------------------------------------------------------------------------------------------


def show_run(
    console: Console,
    run: RunRow,
    calls: Sequence[CallRecord],
    spans: Sequence[SpanDict],
    *,
    usage: dict[str, Any] | None,
    turn: Turn | None,
    conversation: Sequence[Turn],
    siblings: Sequence[RunRow],
    short: dict[str, str],
    full: bool = False,
) -> None:
    """`harness show RUN`: the run, its orchestrator turn (prompt, answer, the conversation around it), its
    script, its calls (a failed call's real exception under it), the script's `log`/`phase` progress, its value
    and its totals."""
    console.print(
        f'[bold]run {run.run_id}[/bold]  {status_text(run.status)}'
        + (f'  {run.duration:.2f}s' if run.duration is not None else '')
        + f'  [dim]{when(run.created)}[/dim]'
    )
    if run.parent_run_id:
        console.print(f'[dim]forked from {run.parent_run_id} at call #{run.fork_at}[/dim]')
    if turn is not None:
        show_turn(console, run, turn, conversation, siblings, short, full=full)
    elif run.prompt:
        console.print(f'[dim]prompt:[/dim] {safe(run.prompt)}')
    console.print(Syntax(visible(run.script), 'python', line_numbers=True, theme='ansi_dark', word_wrap=True))
    show_calls(console, run, [c for c in calls if not is_progress(c)], exceptions_by_seq(spans), full=full)
    show_progress(console, [c for c in calls if is_progress(c)], full=full)
    if usage:
        console.print(f'[dim]sub-agents: {Totals.from_json(usage).text()}[/dim]')
    if run.status == 'completed':
        console.print('[bold]value:[/bold]')
        console.print_json(json.dumps(run.value, default=str))
    elif run.error:
        console.print(f'[red]error:[/red] {safe(run.error)}')
    if turn is not None:
        if turn.answer is not None:
            console.print(Text('orchestrator>', style='bold green'))
            console.print(Answer(visible(turn.answer if full else cut(turn.answer, 4_000))))
        elif turn.status != 'completed':
            console.print(f'[dim]the turn ended {turn.status}{": " + safe(turn.error) if turn.error else ""}[/dim]')
        if turn.usage:
            console.print(f'[dim]orchestrator: {Totals.from_json(turn.usage).text()}[/dim]')


def show_turn(
    console: Console,
    run: RunRow,
    turn: Turn,
    conversation: Sequence[Turn],
    siblings: Sequence[RunRow],
    short: dict[str, str],
    *,
    full: bool,
) -> None:
    """The orchestrator turn a run belongs to: the turns before it (the last three without `--full`), its prompt,
    and the turn's other scripts."""
    earlier = [t for t in conversation if t.turn < turn.turn]
    if earlier:
        console.print(
            f'[dim]conversation {turn.conversation_id[:10]}, turn {turn.turn} '
            f'(`harness chat --continue {turn.conversation_id[:10]}`); before it:[/dim]'
        )
        for t in earlier[-3:] if not full else earlier:
            console.print(f'[dim]  you> {safe(cut(t.prompt, 100))}[/dim]')
            if t.answer:
                console.print(f'[dim]  orchestrator> {safe(cut(" ".join(t.answer.split()), 100))}[/dim]')
    console.print(f'[bold cyan]you>[/bold cyan] {safe(turn.prompt)}')
    attempts = [r for r in siblings if r.run_id != run.run_id]
    if attempts:
        console.print(
            '[dim]other scripts of this turn: '
            + ', '.join(f'{short.get(r.run_id, r.run_id)} ({r.status})' for r in attempts)
            + '[/dim]'
        )


def show_calls(
    console: Console,
    run: RunRow,
    calls: Sequence[CallRecord],
    exceptions: dict[int, list[dict[str, str]]],
    *,
    full: bool,
) -> None:
    """A run's calls (not its progress): a table, or with `--full` each call whole; a failed call's real
    exception under it."""
    if calls and full:  # each call whole, as `--call K` shows it: a table column would fold a long value
        for call in calls:
            print_call(console, run, call, exceptions.get(call.seq, []))
    elif calls:
        table = Table(box=None, header_style='bold')
        for column in ('#', 'callee', 'line', 'status', 'time', 'source', 'call -> result'):
            table.add_column(column, overflow='fold')
        for call in calls:
            outcome = literal(call.result, PREVIEW) if call.status == 'ok' else (call.error or '')
            text = f'{call_text(call.callee, call.arguments, PREVIEW)} -> {outcome}'
            table.add_row(
                str(call.seq),
                safe(call.callee),
                str(call.line or ''),
                call.status,
                f'{call.duration:.2f}s' if call.duration is not None else '',
                safe(call.source) + (f' (attempt {call.attempt})' if call.attempt > 1 else ''),
                safe(cut(text, 160)),
            )
            for exc in exceptions.get(call.seq, []):
                table.add_row(
                    '', '', '', '', '', '', Text(visible(f'raised {exc["type"]}: {exc["message"]}'), style='red')
                )
        console.print(table)
        if exceptions:
            console.print('[dim]stack traces: harness show RUN --call K (or --full)[/dim]')
    else:
        console.print('[dim]no calls[/dim]')


PROGRESS_SHOWN = 30
"""`log`/`phase` entries `harness show` prints without `--full`: the last ones."""


def show_progress(console: Console, rows: Sequence[CallRecord], *, full: bool) -> None:
    """The script's own progress, in order: `#seq ▸ phase` and `#seq │ log line`."""
    entries = progress_entries(rows)
    dropped = progress_dropped(rows)
    if not entries:
        return
    shown = entries if full else entries[-PROGRESS_SHOWN:]
    console.print(
        '[bold]progress:[/bold]'
        + (
            f' [dim](the last {len(shown)} of {len(entries)}; --full shows all)[/dim]'
            if len(shown) < len(entries)
            else ''
        )
    )
    for entry in shown:
        text = safe(str(entry['text']))
        mark = f'[bold magenta]▸ {text}[/bold magenta]' if entry['kind'] == 'phase' else f'[dim]│[/dim] {text}'
        console.print(f'  [dim]#{entry["seq"]}[/dim] {mark}')
    if dropped:
        console.print(
            f'  [dim]… and {dropped:,} more entries past the cap of {PROGRESS_MAX_ENTRIES:,} (counted, not kept)[/dim]'
        )


def show_call(console: Console, run: RunRow, call: CallRecord, spans: Sequence[SpanDict]) -> None:
    """`harness show RUN --call K`: one call whole: arguments, result or error, its real exception with
    the stack trace, timing, and where its result came from."""
    print_call(console, run, call, exceptions_by_seq(spans).get(call.seq, []))


def print_call(console: Console, run: RunRow, call: CallRecord, exceptions: Sequence[dict[str, str]]) -> None:
    """One call whole (`show --call K`, and each call of `show --full`), with the exceptions its span recorded."""
    console.print(
        f'[bold]#{call.seq} {safe(call.callee)}[/bold]  {status_text(call.status)}'
        f'  [dim]run {run.run_id}, line {call.line or "?"}, {call.source}'
        + (f', attempt {call.attempt}' if call.attempt > 1 else '')
        + (f', {call.duration:.3f}s' if call.duration is not None else '')
        + '[/dim]'
    )
    console.print('[bold]arguments:[/bold]')
    console.print_json(json.dumps(call.arguments, default=str))
    if call.status == 'ok':
        console.print('[bold]result:[/bold]')
        console.print_json(json.dumps(call.result, default=str))
    elif call.error:
        console.print(f'[bold]the script saw:[/bold] [red]{safe(call.error)}[/red]')
    for exc in exceptions:
        console.print(f'[bold]raised:[/bold] [red]{safe(exc["type"])}: {safe(exc["message"])}[/red]')
        console.print(Text(visible(exc.get('stacktrace', '').rstrip()), style='dim'))


def footer_lines(
    db: RunStore | None,
    run_ids: Sequence[str],
    rows: Sequence[RunRow],
    calls: int,
    orchestrator: Totals | None = None,
    dollars: str | None = None,
) -> list[str]:
    """The end of a turn: its runs (failed attempts too) with their calls and costs, the orchestrator's, and under a
    dollar budget what the turn's calls spent (and hold reserved, if any still run)."""
    if not rows:
        return ['[dim]no calls were made[/dim]' if not run_ids else f'[dim]run {", ".join(run_ids)}[/dim]']
    short = db.short_ids([r.run_id for r in rows]) if db is not None else {}
    usage = db.usage([r.run_id for r in rows]) if db is not None else {}
    totals = Totals()
    for run_id in usage:
        totals.add(Totals.from_json(usage[run_id]))
    names = [short.get(r.run_id, r.run_id) + ('' if r.status == 'completed' else f' ({r.status})') for r in rows]
    line = f'run {", ".join(names)} · {calls} call(s)'
    lines = [f'[dim]{safe(line)}[/dim]']
    costs = []
    if not totals.empty:
        costs.append(f'sub-agents {totals.text()}')
    if orchestrator is not None and not orchestrator.empty:
        costs.append(f'orchestrator {orchestrator.requests} request(s), {orchestrator.text()}')
    if costs:
        lines.append(f'[dim]{safe(" · ".join(costs))}[/dim]')
    if dollars:
        lines.append(f'[dim]dollars: {safe(dollars)}[/dim]')
    return lines
