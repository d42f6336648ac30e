"""The `harness` command line (typer + rich)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic_ai.exceptions import UserError
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from ._analysis import analyze
from ._engine import Harness
from ._errors import WorkflowError
from ._live import LiveCalls
from ._loading import find_project_config, load_object, merge_into, resolve_store
from ._models import DEMO_NOTICE, ModelChoice, choose_model
from ._records import WorkflowResult, preview
from ._store import RunRow, RunStore, StoreError

app = typer.Typer(
    help='Let a model orchestrate sub-agents by writing typed Python, run in the Monty sandbox.',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# The CLI owns its output: pydantic-ai's first-run banner would land between prompt and live lines.
os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')
console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

StoreOpt = Annotated[
    str | None, typer.Option('--store', help='Run store (else $HARNESS_STORE, else .harness/runs.db).')
]
AgentsOpt = Annotated[
    list[str] | None,
    typer.Option('--agents', help='Extra sub-agents: module:attr (a Harness, an Agent, or a list of them).'),
]
RootOpt = Annotated[Path | None, typer.Option('--root', help='Workspace root the file tools may read (default: .).')]
ModelOpt = Annotated[str | None, typer.Option('--model', help='A pydantic-ai model string (else $HARNESS_MODEL).')]


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f'[red]error:[/red] {escape(message)}', soft_wrap=True)  # unwrapped: one line stays one line
    return typer.Exit(code)


def build(
    store: str | None, agents: list[str] | None, root: Path | None, model: str | None = None
) -> tuple[Harness, ModelChoice]:
    """The Harness the CLI works with: built-in sub-agents, workspace tools, then the user's additions."""
    from subagents import register_builtins
    from tools.workspace import register_workspace_tools

    config = find_project_config()
    choice = choose_model(model, config_model=config.model)
    h = Harness(store=resolve_store(store))
    register_builtins(h, model=None if choice.demo else choice.model)
    workspace = root or (Path(config.workspace) if config.workspace else Path('.'))
    register_workspace_tools(h, workspace)
    for spec in [*config.agents, *(agents or [])]:
        merge_into(h, load_object(spec, search_path=config.root), spec=spec)
    return h, choice


def build_or_exit(*args: Any) -> tuple[Harness, ModelChoice]:
    try:
        return build(*args)
    except (UserError, ValueError) as exc:  # RegistrationError is a UserError
        raise fail(str(exc)) from None


def read_script(script: Path) -> str:
    try:
        return script.read_text()
    except OSError as exc:
        raise fail(f'cannot read {script}: {exc.strerror}') from None


def parse_inputs(pairs: list[str] | None) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition('=')
        if not sep or not name.isidentifier():
            raise fail(f'--input {pair!r}: write it as name=JSON, e.g. --input files=\'["a.py"]\'')
        try:
            inputs[name] = json.loads(raw)
        except json.JSONDecodeError:
            inputs[name] = raw  # a bare string is the common case
    return inputs


@app.command('exec')
def exec_(
    script: Annotated[Path, typer.Argument(help='The workflow script to run.')],
    input: Annotated[list[str] | None, typer.Option('--input', help='name=JSON, bound as a global.')] = None,
    as_json: Annotated[bool, typer.Option('--json', help='Print the result as JSON only.')] = False,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """Run a workflow script directly, no model involved."""
    code = read_script(script)
    h, _ = build_or_exit(store, agents, root)
    inputs = parse_inputs(input)
    if not as_json:
        h.on_event = LiveCalls(console)
    try:
        result = h.run_sync(code, inputs=inputs or None)
    except WorkflowError as exc:
        message = exc.message.replace('workflow.py', str(script))
        if as_json:
            error = {'error': type(exc).__name__, 'message': message, 'run_id': exc.run_id, 'printed': exc.printed}
            print(json.dumps(error, default=str))
            raise typer.Exit(1) from None
        if exc.printed:
            console.print(escape(exc.printed), end='')
        raise fail(message) from None
    finally:
        h.close()
    if as_json:
        print(json.dumps({'run_id': result.run_id, 'value': result.value, 'printed': result.printed}, default=str))
        return
    if result.printed:
        console.print(escape(result.printed), end='')
    console.print_json(json.dumps(result.value, default=str))
    if result.note:
        console.print(f'[yellow]note:[/yellow] {escape(result.note)}')
    console.print(f'[dim]run {result.run_id} · {len(result.calls)} call(s)[/dim]')


@app.command()
def check(
    script: Annotated[Path, typer.Argument(help='The workflow script to check.')],
    graph: Annotated[bool, typer.Option('--graph', help='Also print what the script can call, and where.')] = False,
    mermaid: Annotated[
        bool, typer.Option('--mermaid', help="Print a Mermaid flowchart of the script's possible calls instead.")
    ] = False,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """Type check a script against the catalog and its rules; exit 1 with the messages on failure."""
    code = read_script(script)
    h, _ = build_or_exit(store, agents, root)
    try:
        report = h.check(code)
        analysis = h.analyze(code) if report.ok and (graph or mermaid) else None
    finally:
        h.close()
    if not report.ok:
        console.print(escape(report.errors.replace('workflow.py', str(script))), soft_wrap=True)
        raise typer.Exit(1)
    if mermaid and analysis is not None:
        print(analysis.mermaid())
        return
    for warning in report.warnings:
        console.print(f'[yellow]warning:[/yellow] {escape(str(script))}:{escape(warning)}', soft_wrap=True)
    if analysis is not None:
        console.print(escape(analysis.text()), soft_wrap=True)
    console.print(f'[green]ok[/green]: {script} type-checks against the catalog')


@app.command()
def audit(
    as_json: Annotated[bool, typer.Option('--json', help='Print the audit as JSON.')] = False,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """For the current catalog: what is irreversible, what guards each callee and where, the bounds,
    and what a crash at any point would do."""
    from ._audit import audit as audit_catalog

    h, _ = build_or_exit(store, agents, root)
    try:
        report = audit_catalog(h)
    finally:
        h.close()
    if as_json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        console.print(escape(report.text()), soft_wrap=True)


@app.command()
def agents(
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
    plain: Annotated[bool, typer.Option('--plain', help='No colours.')] = False,
) -> None:
    """The catalog: every sub-agent and tool with its signature, as the model sees it."""
    h, _ = build_or_exit(store, agents, root)
    stubs = h.stubs()
    h.close()
    if plain or not console.is_terminal:
        print(stubs, end='')
    else:
        console.print(Syntax(stubs, 'python', theme='ansi_dark', word_wrap=True))


@app.command()
def ask(
    prompt: Annotated[str, typer.Argument(help='What to ask the orchestrator.')],
    model: ModelOpt = None,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """One orchestrator turn: a live view of every call, then the answer and the run id."""
    h, live, orchestrator = start_orchestrator(store, agents, root, model)
    try:
        result = orchestrator.run_sync(prompt)
    except KeyboardInterrupt:
        raise fail('cancelled', 130) from None
    except Exception as exc:
        raise fail(f'{type(exc).__name__}: {exc}') from None
    finally:
        h.close()
    console.print()
    console.print(escape(result.output))
    footer(live)


@app.command()
def chat(
    model: ModelOpt = None,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """An interactive chat with the orchestrator (Ctrl-C cancels the current workflow; Ctrl-D exits)."""
    h, live, orchestrator = start_orchestrator(store, agents, root, model)
    history: list[Any] = []
    try:
        with asyncio.Runner() as runner:
            while True:
                try:
                    prompt = console.input('[bold cyan]you>[/bold cyan] ')
                except (EOFError, KeyboardInterrupt):
                    console.print()
                    break
                if not prompt.strip():
                    continue
                if prompt.strip() in {'/exit', '/quit'}:
                    break
                live.run_ids.clear()  # this turn's runs only, also after a cancelled or failed turn
                live.count = 0
                try:
                    result = runner.run(orchestrator.run(prompt, message_history=history))
                except KeyboardInterrupt:
                    console.print('[yellow]cancelled[/yellow]')
                    continue
                except Exception as exc:
                    console.print(f'[red]error:[/red] {escape(f"{type(exc).__name__}: {exc}")}')
                    continue
                history = result.all_messages()
                console.print(f'[bold green]orchestrator>[/bold green] {escape(result.output)}')
                footer(live)
    finally:
        h.close()


# -- stored runs ----------------------------------------------------------------------------------


def require_store(store: str | None) -> str:
    """The store path, or a one-line error if it does not exist (reading a run must not create a store)."""
    path = resolve_store(store)
    if path != ':memory:' and not Path(path).exists():
        raise fail(f'no run store at {path}: run a workflow first, or pass --store / set HARNESS_STORE.')
    return path


def open_store(store: str | None) -> RunStore:
    path = require_store(store)
    try:
        return RunStore(path)
    except StoreError as exc:
        raise fail(str(exc)) from None


def find_run(db: RunStore, run_id: str) -> RunRow:
    try:
        run = db.get_run(run_id)
    except StoreError as exc:
        raise fail(str(exc)) from None
    if run is None:
        raise fail(f'no run {run_id!r} in {db.path}; `harness runs` lists them.')
    return run


STATUS_STYLE = {'completed': 'green', 'failed': 'red', 'interrupted': 'yellow', 'needs_decision': 'magenta',
                'running': 'cyan'}


@app.command()
def runs(
    limit: Annotated[int, typer.Option('--limit', '-n', help='How many runs to list.')] = 20,
    store: StoreOpt = None,
) -> None:
    """Stored runs, newest first."""
    with open_store(store) as db:
        rows = db.list_runs(limit)
    # expand + ratio: the prompt column gives way first, so run ids stay whole at 80 columns (and in pipes)
    table = Table(box=None, header_style='bold', expand=True)
    for column in ('run', 'when', 'status', 'calls', 'duration'):
        table.add_column(column, no_wrap=True)
    table.add_column('prompt / script', overflow='ellipsis', no_wrap=True, ratio=1)
    for row in rows:
        first = (row.prompt or row.script).strip().splitlines()[0] if (row.prompt or row.script).strip() else ''
        style = STATUS_STYLE.get(row.status, '')
        lineage = f' [dim](fork of {row.parent_run_id[:10]} at #{row.fork_at})[/dim]' if row.parent_run_id else ''
        table.add_row(
            row.run_id,
            time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(row.created)),
            f'[{style}]{row.status}[/{style}]' if style else row.status,
            str(row.calls_count),
            f'{row.duration:.2f}s' if row.duration is not None else '',
            escape(first[:60]) + lineage,
        )
    console.print(table if rows else '[dim]no runs yet[/dim]')


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help='A run id (or a unique prefix).')],
    store: StoreOpt = None,
) -> None:
    """One run: its script with line numbers, its calls with status and timing, and its value."""
    with open_store(store) as db:
        run = find_run(db, run_id)
        calls = db.calls(run.run_id)
    style = STATUS_STYLE.get(run.status, 'white')
    console.print(f'[bold]run {run.run_id}[/bold]  [{style}]{run.status}[/{style}]'
                  + (f'  {run.duration:.2f}s' if run.duration is not None else ''))
    if run.prompt:
        console.print(f'[dim]prompt:[/dim] {escape(run.prompt)}')
    if run.parent_run_id:
        console.print(f'[dim]forked from {run.parent_run_id} at call #{run.fork_at}[/dim]')
    console.print(Syntax(run.script, 'python', line_numbers=True, theme='ansi_dark', word_wrap=True))
    table = Table(box=None, header_style='bold')
    for column in ('#', 'callee', 'line', 'status', 'time', 'source', 'arguments -> result'):
        table.add_column(column)
    for call in calls:
        outcome = preview(call.result, 60) if call.status == 'ok' else (call.error or '')
        table.add_row(str(call.seq), call.callee, str(call.line or ''), call.status,
                      f'{call.duration:.2f}s' if call.duration is not None else '',
                      call.source + (f' (attempt {call.attempt})' if call.attempt > 1 else ''),
                      escape(f'{preview(call.arguments, 50)} -> {outcome}'))
    console.print(table if calls else '[dim]no calls[/dim]')
    if run.status == 'completed':
        console.print('[bold]value:[/bold]')
        console.print_json(json.dumps(run.value, default=str))
    elif run.error:
        console.print(f'[red]error:[/red] {escape(run.error)}')


@app.command()
def trace(
    run_id: Annotated[str, typer.Argument(help='A run id (or a unique prefix).')],
    mermaid: Annotated[
        bool, typer.Option('--mermaid', help="Mermaid flowchart of the script's possible calls; the path taken thick.")
    ] = False,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """The run's nested span tree in the terminal (no Logfire account needed)."""
    from ._trace_view import render_tree

    with open_store(store) as db:
        run = find_run(db, run_id)
        spans = db.spans(run.run_id)
        calls = db.calls(run.run_id)
    if mermaid:
        h, _ = build_or_exit(store, agents, root)
        h.close()
        names = set(h.callees) | {c.callee for c in calls}
        try:
            analysis = analyze(run.script, names)
        except SyntaxError:
            raise fail(f'run {run.run_id} holds a script that does not parse; nothing to draw.') from None
        print(analysis.mermaid(taken=[(c.callee, c.line) for c in calls]))
        return
    if not spans:
        raise fail(f'run {run.run_id} has no stored spans (tracing was off, or HARNESS_TRACING=off).')
    console.print(render_tree(spans))


def finish_run(h: Harness, action: Callable[[], WorkflowResult], what: str) -> None:
    h.on_event = LiveCalls(console)
    try:
        result = action()
    except WorkflowError as exc:
        raise fail(exc.message) from None
    finally:
        h.close()
    console.print_json(json.dumps(result.value, default=str))
    console.print(f'[dim]{what} run {result.run_id} · {len(result.calls)} call(s)[/dim]')


@app.command()
def replay(
    run_id: Annotated[str, typer.Argument(help='A run id (or a unique prefix).')],
    from_seq: Annotated[int | None, typer.Option('--from', help='Start from the snapshot at call K.')] = None,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """Re-run a stored run from its journal; no sub-agent or tool is called."""
    require_store(store)
    h, _ = build_or_exit(store, agents, root)
    finish_run(h, lambda: h.replay_sync(run_id, from_seq=from_seq), 'replayed')


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help='A run id (or a unique prefix).')],
    retry_unknown: Annotated[
        bool, typer.Option('--retry-unknown', help='Re-run side-effecting calls whose outcome is unknown.')
    ] = False,
    answer: Annotated[
        list[str] | None, typer.Option('--answer', help='SEQ=JSON: the result of an unknown call.')
    ] = None,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """Continue an interrupted run; recorded calls are not repeated."""
    answers: dict[int, Any] = {}
    for item in answer or []:
        seq, sep, raw = item.partition('=')
        try:
            answers[int(seq)] = json.loads(raw)
        except ValueError:
            raise fail(f'--answer {item!r}: write it as SEQ=JSON, e.g. --answer 7=\'"refunded"\'') from None
        if not sep:
            raise fail(f'--answer {item!r}: write it as SEQ=JSON')
    require_store(store)
    h, _ = build_or_exit(store, agents, root)
    finish_run(h, lambda: h.resume_sync(run_id, retry_unknown=retry_unknown, answers=answers), 'resumed')


@app.command()
def fork(
    run_id: Annotated[str, typer.Argument(help='A run id (or a unique prefix).')],
    at: Annotated[int, typer.Option('--at', help='The call to answer differently (1-based).')],
    result: Annotated[str, typer.Option('--result', help='Its result, as JSON.')],
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """A new run: calls before K from the journal, call K answered with RESULT, later calls live."""
    try:
        value = json.loads(result)
    except json.JSONDecodeError:
        raise fail(f'--result {result!r} is not JSON (a string needs quotes: --result \'"text"\')') from None
    require_store(store)
    h, _ = build_or_exit(store, agents, root)
    finish_run(h, lambda: h.fork_sync(run_id, at=at, result=value), 'forked')


def footer(live: LiveCalls) -> None:
    """The run ids of this turn's workflows, and where to see their traces."""
    if not live.run_ids:
        console.print('[dim]no calls were made[/dim]')
        return
    ids = ', '.join(live.run_ids)
    console.print(f'[dim]run {ids} · {live.count} call(s)[/dim]')
    console.print(f'[dim]trace: harness trace {live.run_ids[-1]}[/dim]')


def start_orchestrator(
    store: str | None, agents: list[str] | None, root: Path | None, model: str | None
) -> tuple[Harness, LiveCalls, Any]:
    """The Harness, its live call view, and the orchestrator on the chosen model (or the offline planner)."""
    from subagents.planner import demo_model

    h, choice = build_or_exit(store, agents, root, model)
    if choice.demo:
        console.print(f'[yellow]{escape(DEMO_NOTICE)}[/yellow]')
    else:
        console.print(f'[dim]model: {escape(choice.label)}[/dim]')
    live = LiveCalls(console)
    return h, live, h.orchestrator(demo_model() if choice.demo else choice.model, on_event=live)
