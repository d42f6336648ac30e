"""The commands that take a script or the catalog and need no model: `exec`, `check`, `audit`, `agents`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.syntax import Syntax
from rich.table import Table

from .._errors import WorkflowError
from .._records import is_progress
from ._live import LiveCalls
from ._safe_text import safe, visible
from ._shared import Where, app, catalog_options, console, err, fail, interrupted, load_json, show_waiting

if TYPE_CHECKING:
    from .._check._estimate import Estimate
    from .._engine import Harness


def read_script(script: Path) -> str:
    """The script's text; `-` reads it from standard input."""
    name = 'standard input' if str(script) == '-' else str(script)
    try:
        data = sys.stdin.buffer.read() if str(script) == '-' else script.read_bytes()
        code = data.decode('utf-8-sig')  # a byte order mark some editors write is no part of the script
    except IsADirectoryError:
        raise fail(f'{script} is a directory: pass the workflow script file') from None
    except OSError as exc:
        raise fail(f'cannot read {script}: {exc.strerror}') from None
    except UnicodeDecodeError as exc:
        raise fail(f'{name} is not UTF-8 text (byte {exc.start}): save the script as UTF-8') from None
    if not code.strip():
        raise fail(f'{name} is empty: write the workflow in it (its last expression is the result)')
    return code


def parse_inputs(pairs: list[str] | None) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition('=')
        if not sep or not name.isidentifier():
            raise fail(f'--input {pair!r}: write it as name=JSON, e.g. --input files=\'["a.py"]\'')
        try:
            inputs[name] = load_json(raw, f'--input {name}')
        except json.JSONDecodeError:
            inputs[name] = raw  # a bare string is the common case
    return inputs


@app.command('exec')
@catalog_options
def exec_(
    script: Annotated[Path, typer.Argument(help='The workflow script to run.')],
    input: Annotated[list[str] | None, typer.Option('--input', help='name=JSON, bound as a global.')] = None,
    as_json: Annotated[bool, typer.Option('--json', help='Print the result as JSON only.')] = False,
    *,
    where: Where,
) -> None:
    """Run a workflow script directly, no model involved."""
    code = read_script(script)
    h, _ = where.harness(opens_store=True, on_event=None if as_json else LiveCalls(console))
    inputs = parse_inputs(input)
    try:
        result = h.run_sync(code, inputs=inputs or None)
    except WorkflowError as exc:
        message = exc.message.replace('workflow.py', str(script))
        if as_json:
            error = {'error': type(exc).__name__, 'message': message, 'run_id': exc.run_id, 'printed': exc.printed}
            print(json.dumps(error, default=str))
            raise typer.Exit(1) from None
        if exc.printed:
            console.print(safe(exc.printed), end='')
        raise fail(message) from None
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise interrupted(exc) from None
    finally:
        h.close()
    if as_json:
        print(
            json.dumps(
                {
                    'run_id': result.run_id,
                    'status': result.status,
                    'value': result.value,
                    'printed': result.printed,
                    'waiting': [p.__dict__ for p in result.waiting],
                    'progress': result.progress,
                },
                default=str,
            )
        )
        return
    if result.printed:
        console.print(safe(result.printed), end='')
    if result.status == 'waiting':
        show_waiting(result)
        return
    console.print_json(json.dumps(result.value, default=str))
    if result.note:
        console.print(f'[yellow]note:[/yellow] {safe(result.note)}')
    calls = sum(1 for c in result.calls if not is_progress(c))  # log/phase are no calls
    console.print(f'[dim]run {result.run_id} · {calls} call(s)[/dim]')


@app.command()
@catalog_options
def check(
    script: Annotated[Path, typer.Argument(help='The workflow script to check.')],
    graph: Annotated[
        bool, typer.Option('--graph', help='Also print what the script can call, where, and its worst case.')
    ] = False,
    mermaid: Annotated[
        bool, typer.Option('--mermaid', help="Print a Mermaid flowchart of the script's possible calls instead.")
    ] = False,
    estimate: Annotated[
        bool, typer.Option('--estimate', help='Also print the worst case: per callee the most calls and USD.')
    ] = False,
    *,
    where: Where,
) -> None:
    """Type check a script against the catalog and its rules; exit 1 with the messages on failure."""
    code = read_script(script)
    h, _ = where.harness(calls_models=False)
    try:
        report = h.check(code)
        analysis = h.analyze(code) if report.ok and (graph or mermaid) else None
    finally:
        h.close()
    if not report.ok:
        console.print(safe(report.errors.replace('workflow.py', str(script))), soft_wrap=True)
        raise typer.Exit(1)
    if mermaid and analysis is not None:
        print(visible(analysis.mermaid()))
        return
    for warning in report.warnings:
        console.print(f'[yellow]warning:[/yellow] {safe(str(script))}:{safe(warning)}', soft_wrap=True)
    if analysis is not None:
        console.print(safe(analysis.text()), soft_wrap=True)
    if (estimate or graph) and report.estimate is not None:
        print_estimate(report.estimate)
    console.print(f'[green]ok[/green]: {safe(script)} type-checks against the catalog')


def print_estimate(e: Estimate) -> None:
    """The worst case as one table, each reason it has none on a line of its own."""
    from .._check._estimate import usd

    table = Table('callee', 'most calls', 'per call', 'worst case', 'price from', box=None, header_style='bold')
    for part in e.per_callee.values():
        table.add_row(
            safe(part.callee),
            'unbounded' if part.calls is None else str(part.calls),
            usd(part.per_call, part.unpriced),
            usd(part.cost_usd, part.unpriced),
            safe(part.source),
        )
    console.print(table)
    for reason in e.reasons:
        console.print(f'[yellow]{safe(reason)}[/yellow]', soft_wrap=True)
    console.print(f'[bold]worst case: {e.worst_case}[/bold]')


@app.command()
@catalog_options
def audit(
    as_json: Annotated[bool, typer.Option('--json', help='Print the audit as JSON.')] = False, *, where: Where
) -> None:
    """The catalog's audit: what is irreversible, what guards each callee, the bounds, what a crash does.

    For each callee: whether it has side effects, which rules guard it and where they are enforced; the
    length and shape bounds; and what a crash at any point of a run would do.
    """
    from .._check._audit import audit as audit_catalog

    h, _ = where.harness(calls_models=False)
    try:
        report = audit_catalog(h)
    finally:
        h.close()
    if as_json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        console.print(safe(report.text()), soft_wrap=True)


@app.command()
@catalog_options
def agents(*, where: Where, plain: Annotated[bool, typer.Option('--plain', help='No colours.')] = False) -> None:
    """The catalog: every sub-agent and tool with its signature, as the model sees it."""
    h, _ = where.harness(calls_models=False)
    stubs = h.stubs()
    kinds = kinds_line(h)
    h.close()
    err.print(f'[dim]{safe(kinds)}[/dim]', soft_wrap=True)  # stderr: stdout is the stubs, byte for byte
    if plain or not console.is_terminal:
        print(visible(stubs), end='')
    else:
        console.print(Syntax(visible(stubs), 'python', theme='ansi_dark', word_wrap=True))


def kinds_line(h: Harness) -> str:
    """Which callees are sub-agents and which host tools: the stubs look alike, the budgets differ, and a plain
    function given with --agents becomes a sub-agent."""
    agents = sorted(name for name, c in h.callees.items() if c.kind == 'agent')
    tools = sorted(name for name, c in h.callees.items() if c.kind == 'tool')
    return (
        f'sub-agents (max_agent_calls): {", ".join(agents) or "none"}; host tools (max_tool_calls): '
        f'{", ".join(tools) or "none"}. A function given with --agents is a sub-agent; --tools module:attr makes '
        'it a host tool.'
    )
