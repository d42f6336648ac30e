"""What every command of the `harness` command line shares: the typer `app`, the consoles, `fail`, the options
several commands take (`catalog_options` hands --store, --agents, --tools and --root to a command as one `Where`),
`build` (the Harness a command works with), opening the run store, and the endings of a run shown alike.

The commands live in their modules by job (`_run_commands`, `_session_commands`, `_stored_commands`,
`_eval_commands`), each registering on this `app`; `_app` imports them, in the order `harness --help` lists them.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._store import RunStore, StoreError
from .._ui._models import DEMO_NOTICE, ModelChoice, choose_model
from ._last_resort import Edge
from ._loading import ConfigError, find_project_config, load_object, merge_into, merge_tools, resolve_store
from ._safe_text import SafeConsole, safe

if TYPE_CHECKING:
    from .._engine import Harness
    from .._records import EventHandler, WorkflowResult


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f'harness {version("harness")}')
        raise typer.Exit()


app = typer.Typer(
    cls=Edge,  # no traceback ever: the last resort for what no command caught
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
console = SafeConsole(highlight=False)  # what a script, a callee or the store wrote is shown, never obeyed
err = SafeConsole(stderr=True, highlight=False)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        '--store',
        help='Run store (else $HARNESS_STORE, else \\[tool.harness] store, else the '
        '.harness/runs.db of the project: found walking up to the nearest pyproject.toml or .git).',
    ),
]
AgentsOpt = Annotated[
    list[str] | None,
    typer.Option(
        '--agents', help='Extra sub-agents: module:attr (a Harness, an Agent, an async function, or a list of them).'
    ),
]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option('--tools', help='Extra host tools: module:attr (a function, sync or async, or a list of them).'),
]
RootOpt = Annotated[Path | None, typer.Option('--root', help='Workspace root the file tools may read (default: .).')]
ModelOpt = Annotated[str | None, typer.Option('--model', help='A pydantic-ai model string (else $HARNESS_MODEL).')]
JsonOpt = Annotated[bool, typer.Option('--json', help='Print JSON instead (whole values).')]
LIMIT_MAX = 1_000_000
"""The most rows a listing (`runs`, `evals`) prints: a larger `--limit` is a usage error, not an overflow."""
SEQ_MAX = 2**62
"""The largest call number an option takes (a call's number is a SQLite INTEGER)."""
PORT_MAX = 65_535


def load_json(text: str, what: str) -> Any:
    """`json.loads(text)` for an option's value; `json.JSONDecodeError` is the caller's to word, and a value too deep
    or a number too long to hold is one line naming `what`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise fail(f'{what}: the JSON is nested too deeply (keep it under a few hundred levels)') from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise fail(f'{what}: {exc}') from None


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f'[red]error:[/red] {safe(message)}', soft_wrap=True)  # unwrapped: one line stays one line
    return typer.Exit(code)


@dataclass(frozen=True)
class Where:
    """Where a command's catalog and run store come from: its --store, --agents, --tools and --root."""

    store: str | None = None
    agents: list[str] | None = None
    tools: list[str] | None = None
    root: Path | None = None

    def harness(
        self,
        model: str | None = None,
        *,
        opens_store: bool = False,
        temporal: str | None = None,
        calls_models: bool = True,
        on_event: EventHandler | None = None,
        task_queue: str = 'harness',
    ) -> tuple[Harness, ModelChoice]:
        """`build`, with its expected failures as one-line errors; `opens_store` opens the store now, so a bad
        one is reported before anything runs. A command that `calls_models` not needs no model server."""
        from pydantic_ai.exceptions import UserError

        try:
            h, choice = build(
                self, model, temporal, calls_models=calls_models, on_event=on_event, task_queue=task_queue
            )
        except (UserError, ValueError, StoreError) as exc:  # RegistrationError is a UserError; ConfigError a ValueError
            raise fail(str(exc)) from None
        if opens_store:
            try:
                _ = h.store
            except StoreError as exc:
                h.close()
                raise fail(str(exc)) from None
            except OSError as exc:  # a path the system refuses outright (too long, ...)
                h.close()
                raise fail(f'cannot open the run store {h.store_path}: {exc.strerror or exc}') from None
        return h, choice

    def stored_run_harness(self, *, calls_models: bool = True, on_event: EventHandler | None = None) -> Harness:
        """The Harness for a command on a stored run: its store must exist (reading a run never makes one)."""
        require_store(self.store)
        h, _ = self.harness(opens_store=True, calls_models=calls_models, on_event=on_event)
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
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
        for name, annotation in WHERE_OPTIONS.items()
    ]
    params[at : at + 1] = shared

    @functools.wraps(command)
    def with_where(**options: Any) -> None:
        where = Where(**{name: options.pop(name) for name in WHERE_OPTIONS})
        command(**options, where=where)

    with_where.__signature__ = signature.replace(parameters=params)  # ty: ignore[missing-attribute]
    with_where.__annotations__ = {p.name: p.annotation for p in params} | {'return': signature.return_annotation}
    return with_where


def build(
    where: Where,
    model: str | None = None,
    temporal: str | None = None,
    *,
    calls_models: bool = True,
    on_event: EventHandler | None = None,
    task_queue: str = 'harness',
) -> tuple[Harness, ModelChoice]:
    """The Harness the CLI works with: built-in sub-agents, workspace tools, then the user's additions.

    It runs scripts on Temporal when `--temporal`, else `HARNESS_TEMPORAL`, else `[tool.harness] temporal`
    names a server (on `task_queue`). `on_event` sees every call (the live calls of a command that shows them):
    settings are given here, as a Harness is never changed once made."""
    from subagents import register_builtins
    from tools.workspace import register_workspace_tools

    from .._engine import Harness

    config = find_project_config()
    choice = choose_model(model, config_model=config.model, ask_server=calls_models)
    address = temporal or os.environ.get('HARNESS_TEMPORAL') or config.temporal
    if address is not None:
        check_address(address)
    h = Harness(
        store=resolve_store(where.store, config),
        temporal=address,
        task_queue=task_queue,
        task_queues=config.task_queues,
        on_event=on_event,
        review=config.review,
        max_cost=config.max_cost,
        conversation_cost=config.conversation_cost,
    )
    register_builtins(h, model=None if choice.demo else choice.model)
    workspace = where.root or (Path(config.workspace) if config.workspace else Path('.'))
    register_workspace_tools(h, workspace)
    for spec in [*config.agents, *(where.agents or [])]:
        merge_into(h, load_object(spec, search_path=config.root), spec=spec)
    for spec in [*config.tools, *(where.tools or [])]:
        merge_tools(h, load_object(spec, search_path=config.root, option='--tools'), spec=spec)
    return h, choice


def check_address(address: str) -> None:
    """A Temporal server's address is `host:port`; anything else is a `ConfigError` now, not the client's later."""
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() for c in address):
        raise ConfigError(
            f'the Temporal address {address[:100]!r} is not host:port (e.g. 127.0.0.1:7233): fix --temporal, '
            '$HARNESS_TEMPORAL or [tool.harness] temporal'
        )


def require_store(store: str | None) -> str:
    """The store path, or a one-line error if it does not exist (reading a run must not create a store)."""
    try:
        path = resolve_store(store)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    try:
        exists = path == ':memory:' or Path(path).exists()
    except OSError as exc:  # a path the system refuses outright (too long, ...)
        raise fail(f'cannot open the run store {path}: {exc.strerror or exc}') from None
    if not exists:
        raise fail(f'no run store at {path}: run a workflow first, or pass --store / set HARNESS_STORE.')
    return path


def open_store(store: str | None) -> RunStore:
    path = require_store(store)
    try:
        return RunStore(path)
    except StoreError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f'cannot open the run store {path}: {exc.strerror or exc}') from None


def model_for(choice: ModelChoice, *, announce: bool = False) -> Any:
    """The model object the orchestrator runs on: the chosen model, or the offline planner when none is set."""
    if choice.demo:
        from subagents.planner import demo_model

        if announce:
            console.print(f'[yellow]{safe(DEMO_NOTICE)}[/yellow]')
        return demo_model()
    if announce:
        console.print(f'[dim]model: {safe(choice.label)}[/dim]')
    return choice.model


def interrupted(exc: BaseException) -> typer.Exit:
    """Ctrl-C, or `harness cancel` from another process: one line naming the run and how to finish it."""
    run_id = getattr(exc, 'run_id', None)
    by = ' by `harness cancel`' if run_id else ''
    where = f': run {run_id} is interrupted; `harness resume {run_id}` finishes it' if run_id else ''
    return fail(f'cancelled{by}{where}', 130)


def show_waiting(result: WorkflowResult) -> None:
    """A run that stopped for approvals: what it waits on, and how to go on."""
    from .._records import preview

    if result.plan is not None:
        from .._check._plan import plan_text

        console.print(f'[magenta]run {result.run_id} waits for approval of its plan:[/magenta]')
        console.print(safe(plan_text(result.plan.stored(), result.plan.code, lines=5)), soft_wrap=True)
        console.print(
            f'[dim]decide with: harness approve {result.run_id} | harness reject {result.run_id} --reason TEXT; '
            f'then: harness resume {result.run_id}[/dim]'
        )
        return
    console.print(f'[magenta]run {result.run_id} waits for approval of:[/magenta]')
    for p in result.waiting:
        console.print(f'  #{p.seq} [bold]{safe(p.callee)}[/bold]({safe(preview(p.arguments, 200))})')
    console.print(
        f'[dim]decide with: harness approve {result.run_id} [SEQ] | harness reject {result.run_id} SEQ '
        f'--reason TEXT; then: harness resume {result.run_id}[/dim]'
    )
