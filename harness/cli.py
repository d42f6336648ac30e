"""The `harness` command line (typer + rich)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from .errors import RegistrationError, WorkflowError
from .harness import Harness
from .live import LiveCalls
from .loading import find_project_config, load_object, merge_into, resolve_store
from .models import DEMO_NOTICE, ModelChoice, choose_model

app = typer.Typer(
    help='Let a model orchestrate sub-agents by writing typed Python, run in the Monty sandbox.',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

StoreOpt = Annotated[str | None, typer.Option('--store', help='Run store (else $HARNESS_STORE, else .harness/runs.db).')]
AgentsOpt = Annotated[
    list[str] | None,
    typer.Option('--agents', help='Extra sub-agents: module:attr (a Harness, an Agent, or a list of them).'),
]
RootOpt = Annotated[Path | None, typer.Option('--root', help='Workspace root the file tools may read (default: .).')]
ModelOpt = Annotated[str | None, typer.Option('--model', help='A pydantic-ai model string (else $HARNESS_MODEL).')]


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f'[red]error:[/red] {escape(message)}')
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
    except (RegistrationError, ValueError) as exc:
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
        if exc.printed and not as_json:
            console.print(escape(exc.printed), end='')
        raise fail(exc.message) from None
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
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """Type check a script against the catalog; exit 1 with ty's messages on failure."""
    code = read_script(script)
    h, _ = build_or_exit(store, agents, root)
    try:
        report = h.check(code)
    finally:
        h.close()
    if report.ok:
        console.print(f'[green]ok[/green]: {script} type-checks against the catalog')
        return
    console.print(escape(report.errors.replace('workflow.py', str(script))))
    raise typer.Exit(1)


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
    h, choice = build_or_exit(store, agents, root, model)
    announce(choice)
    live = LiveCalls(console)
    orchestrator = make_orchestrator(h, choice, live)
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
    console.print(f'[dim]orchestrator run {result.run_id} · {live.count} call(s)[/dim]')


@app.command()
def chat(
    model: ModelOpt = None,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """An interactive chat with the orchestrator (Ctrl-C cancels the current workflow; Ctrl-D exits)."""
    h, choice = build_or_exit(store, agents, root, model)
    announce(choice)
    live = LiveCalls(console)
    orchestrator = make_orchestrator(h, choice, live)
    history: list[Any] = []
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
    h.close()


def announce(choice: ModelChoice) -> None:
    if choice.demo:
        console.print(f'[yellow]{escape(DEMO_NOTICE)}[/yellow]')
    else:
        console.print(f'[dim]model: {escape(choice.label)}[/dim]')


def make_orchestrator(h: Harness, choice: ModelChoice, live: LiveCalls) -> Any:
    from .demo import demo_model

    return h.orchestrator(demo_model() if choice.demo else choice.model, on_event=live)


def main() -> None:  # pragma: no cover - console script entry
    sys.exit(app())
