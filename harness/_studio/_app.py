"""The studio (`harness ui`): a local web app over the run store and the orchestrator, served on 127.0.0.1.

One Starlette app: the page (`static/`: plain HTML, CSS and JavaScript written here, no CDN and no
build step), the JSON API it uses (shapes in `_studio._views`, the chat stream in `_studio._chat`), and the
actions (approve, reject, resume, replay, fork), which call the same `Harness` methods as the CLI and answer
with the run they made. It is for the person at this machine: it listens on loopback only, accepts only
`Host: 127.0.0.1` or `localhost` (a web page elsewhere cannot reach it by DNS rebinding) and only JSON
bodies on POST (which a page elsewhere cannot send without a CORS preflight, never answered here). What a
client may send, and how slowly, is bounded (`_limits`: a body's size, nesting and time, a request head's
time). It closes the Harness only after the requests it cancelled at shutdown have ended (`Answering`), so a resume cut
short still records how its run stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._errors import WorkflowError
from .._records import RunRow, WorkflowResult
from .._store import StoreError
from .._store._approvals import plans_waiting
from .._ui._runs import call_json
from ._chat import Chat, problem
from ._limits import BodyLimits, Limits
from ._limits import config as server_config
from ._views import API_VERSION, RUN_STATUSES, conversation_page, pending_of, plan_json, run_page, runs_page

ASSETS = Path(__file__).with_name('static')
HOST = '127.0.0.1'
MAX_LIMIT = 1_000
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
"""Only this app's own files run in the page: model text that slipped into the DOM as markup still could not."""
SHUTDOWN_PATIENCE = 10.0
"""Seconds the shutdown gives cancelled requests to record how their runs stopped before the Harness closes."""


class Refused(Exception):
    """A request the API turns down: its status, a stable error code and a message for the person."""

    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.extra = status, error, message, extra


def create_app(
    harness: Any, *, model: Any, model_label: str, demo: bool = False, notice: str = '', limits: Limits | None = None
) -> Starlette:
    """The studio over `harness` (its store and catalog), chatting on `model` (a pydantic-ai model or model
    string), taking from clients what `limits` allow (`serve` serves it within them). The caller owns the Harness;
    the app only closes its sandbox workers when it shuts down."""
    limits = limits or Limits()
    chat = Chat(harness, model, model_label)

    def store() -> Any:
        db = harness.store
        if db is None:
            raise Refused(409, 'no_store', 'this Harness keeps no run store (store=None): there is nothing to show.')
        return db

    def find(run_id: str) -> RunRow:
        try:
            run = store().get_run(run_id)
        except StoreError as exc:
            raise Refused(400, 'ambiguous', str(exc)) from None
        if run is None:
            raise Refused(404, 'not_found', f'no run {run_id!r} in {store().path}.')
        return run

    def page(_request: Request) -> Response:
        return FileResponse(ASSETS / 'index.html', headers={'Cache-Control': 'no-store'})

    def info(_request: Request) -> JSONResponse:
        from importlib.metadata import version

        db = harness.store
        return JSONResponse(
            {
                'api': API_VERSION,
                'version': version('harness'),
                'model': model_label,
                'demo': demo,
                'notice': notice,
                'store': db.path if db is not None else None,
                'statuses': list(RUN_STATUSES),
                'callees': sorted(harness.callees),
            }
        )

    def runs(request: Request) -> JSONResponse:
        statuses = request.query_params.getlist('status')
        for status in statuses:
            if status not in RUN_STATUSES:
                raise Refused(400, 'invalid_request', f'status {status!r}: use one of {", ".join(RUN_STATUSES)}.')
        limit = integer(request.query_params.get('limit', '100'), 'limit', low=1, high=MAX_LIMIT)
        return JSONResponse(runs_page(store(), statuses=statuses, limit=limit))

    def run(request: Request) -> JSONResponse:
        found = find(request.path_params['run_id'])
        return JSONResponse(run_page(store(), found, harness.callees, harness.sub_agent_usage_limits))

    def pending(_request: Request) -> JSONResponse:
        db = store()
        found = [
            {'run_id': rid, **p} for rid in db.waiting_runs() for p in pending_of(db.calls(rid), db.decisions(rid))
        ]
        plans = [{'run_id': r.run_id, **(plan_json(r, {}) or {})} for r in plans_waiting(db)]
        return JSONResponse({'pending': found, 'plans': plans})

    def conversations(request: Request) -> JSONResponse:
        limit = integer(request.query_params.get('limit', '50'), 'limit', low=1, high=MAX_LIMIT)
        return JSONResponse({'conversations': store().list_conversations(limit)})

    def conversation(request: Request) -> JSONResponse:
        conversation_id = request.path_params['conversation_id']
        db = store()
        try:
            found = db.get_conversation(conversation_id)
        except StoreError as exc:
            raise Refused(400, 'ambiguous', str(exc)) from None
        if found is None or found.conversation_id != conversation_id:  # the store also matches a prefix
            raise Refused(404, 'not_found', f'no conversation {conversation_id!r}.')
        turns = db.turns(conversation_id)
        head = {
            'conversation_id': found.conversation_id,
            'created': found.created,
            'updated': found.updated,
            'title': found.title,
            'model': found.model,
            'turns': len(turns),
        }
        return JSONResponse(conversation_page(db, head, turns))

    async def decide(request: Request) -> JSONResponse:
        body = await json_body(request)
        run_id = (await run_in_threadpool(find, request.path_params['run_id'])).run_id
        action = request.path_params['action']
        by = optional_text(body, 'by')
        if action == 'approve':
            seq = body.get('seq')
            decided = await run_in_threadpool(
                lambda: harness.approve(run_id, None if seq is None else integer(seq, 'seq', low=1), by=by)
            )
        else:
            seq = None if body.get('seq') is None else integer(body.get('seq'), 'seq', low=1)  # None: the plan
            reason = optional_text(body, 'reason')
            if not reason:
                raise Refused(400, 'invalid_request', 'a rejection needs a reason: the script sees it.')
            decided = await run_in_threadpool(lambda: harness.reject(run_id, seq, reason=reason, by=by))
        db = store()
        left = await run_in_threadpool(lambda: pending_of(db.calls(run_id), db.decisions(run_id)))
        return JSONResponse({'run_id': run_id, 'action': action, 'decided': decided, 'pending': left})

    async def act(request: Request) -> JSONResponse:
        body = await json_body(request)
        run_id = (await run_in_threadpool(find, request.path_params['run_id'])).run_id
        action = request.path_params['action']
        options = {'recheck': flag(body, 'recheck'), 'accept_changes': flag(body, 'accept_changes')}
        if action == 'resume':
            answers = body.get('answers') or {}
            if not isinstance(answers, dict):
                raise Refused(400, 'invalid_request', 'answers: an object of {"SEQ": result}.')
            result = await harness.resume(
                run_id,
                retry_unknown=flag(body, 'retry_unknown'),
                answers={integer(k, 'answers key', low=1): v for k, v in answers.items()},
                **options,
            )
        elif action == 'replay':
            from_seq = body.get('from_seq')
            result = await harness.replay(
                run_id, from_seq=None if from_seq is None else integer(from_seq, 'from_seq', low=0), **options
            )
        else:
            if 'result' not in body:
                raise Refused(400, 'invalid_request', 'a fork needs "result": the JSON value call AT returns instead.')
            result = await harness.fork(
                run_id, at=integer(body.get('at'), 'at', low=1), result=body['result'], **options
            )
        return JSONResponse(result_json(result, action, run_id))

    async def chat_endpoint(request: Request) -> Response:
        store()
        return await chat.respond(request)

    answering: set[asyncio.Task[Any]] = set()
    """The tasks of the requests being answered (a resume, a chat turn...)."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[None]:
        yield
        # The server cancels what outlived its grace period and goes on to this shutdown without waiting: let
        # those requests end first (a cancelled resume records that its run is interrupted and gives its hold
        # back), or they would find the store closed under them and leave their runs `running`.
        if left := [task for task in answering if task is not asyncio.current_task() and not task.done()]:
            await asyncio.wait(left, timeout=SHUTDOWN_PATIENCE)
        await harness.aclose()  # the sandbox workers were started on this loop: stop them on it

    async def refused(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return JSONResponse({'error': exc.error, 'message': exc.message, **exc.extra}, status_code=exc.status)

    async def workflow_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WorkflowError)
        return JSONResponse(
            {'error': type(exc).__name__, 'message': exc.message, 'run_id': exc.run_id}, status_code=409
        )

    async def store_error(_request: Request, exc: Exception) -> Response:
        return problem(500, 'store', str(exc))

    routes = [
        Route('/', page),
        Route('/chat', page),
        Route('/chat/{conversation_id}', page),
        Route('/runs', page),
        Route('/runs/{run_id}', page),
        Route('/api/info', info),
        Route('/api/runs', runs),
        Route('/api/runs/{run_id}', run),
        Route('/api/runs/{run_id}/{action:str}', decide_or_act(decide, act), methods=['POST']),
        Route('/api/pending', pending),
        Route('/api/conversations', conversations),
        Route('/api/conversations/{conversation_id}', conversation),
        Route('/api/chat', chat_endpoint, methods=['POST']),
        Mount('/static', StaticFiles(directory=ASSETS), name='static'),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=[HOST, 'localhost']),
            Middleware(SecurityHeaders),
            Middleware(BodyLimits, limits=limits),
            Middleware(OneLineErrors),
            Middleware(Answering, tasks=answering),
        ],
        exception_handlers={Refused: refused, WorkflowError: workflow_error, StoreError: store_error},
        lifespan=lifespan,
    )
    app.state.limits = limits
    return app


class HttpMiddleware:
    """A plain ASGI middleware that acts on HTTP requests only (`http`) and passes anything else through untouched;
    plain ASGI, so streamed bodies pass as they are."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


class Answering(HttpMiddleware):
    """Keeps the task of each request while it is answered (its streamed body included), so the app's shutdown
    can let them end before it closes the Harness."""

    def __init__(self, app: Any, *, tasks: set[asyncio.Task[Any]]) -> None:
        super().__init__(app)
        self.tasks = tasks

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        task = asyncio.current_task()
        if task is None:
            await self.app(scope, receive, send)
            return
        self.tasks.add(task)
        try:
            await self.app(scope, receive, send)
        finally:
            self.tasks.discard(task)


class SecurityHeaders(HttpMiddleware):
    """Adds the content security policy (and friends) to every response."""

    HEADERS = (
        (b'content-security-policy', CSP.encode()),
        (b'x-content-type-options', b'nosniff'),
        (b'referrer-policy', b'no-referrer'),
    )

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        async def with_headers(message: Any) -> None:
            if message['type'] == 'http.response.start':
                message = {**message, 'headers': [*message.get('headers', []), *self.HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


class OneLineErrors(HttpMiddleware):
    """Anything else that goes wrong in a request is one line: in the answer (a 500 with the error's type and
    message, when nothing was sent yet) and on the server's stderr; never a traceback. (Starlette's own
    handler for `Exception` would log the traceback and raise again.)"""

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        started = False

        async def watch(message: Any) -> None:
            nonlocal started
            started = started or message['type'] == 'http.response.start'
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            line = ' '.join(f'{type(exc).__name__}: {exc}'.split())
            print(f'studio: {scope.get("method")} {scope.get("path")} failed: {line}', file=sys.stderr, flush=True)
            if not started:
                await problem(500, 'internal', line)(scope, receive, send)


def decide_or_act(decide: Callable[[Request], Any], act: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        action = request.path_params['action']
        if action in ('approve', 'reject'):
            return await decide(request)
        if action in ('resume', 'replay', 'fork'):
            return await act(request)
        raise Refused(404, 'not_found', f'no action {action!r}: approve, reject, resume, replay or fork.')

    return endpoint


def result_json(result: WorkflowResult, action: str, run_id: str) -> dict[str, Any]:
    """What an action made: the run to show (a replay stores nothing, so it carries its calls)."""
    out: dict[str, Any] = {
        'action': action,
        'from_run_id': run_id,
        'run_id': result.run_id,
        'status': result.status,
        'value': result.value,
        'printed': result.printed,
        'note': result.note,
        'stored': action != 'replay',
        'waiting': [{'seq': p.seq, 'callee': p.callee, 'arguments': p.arguments} for p in result.waiting],
    }
    if action == 'replay':
        out['calls'] = [call_json(c) for c in result.calls]
    return out


async def json_body(request: Request) -> dict[str, Any]:
    if request.headers.get('content-type', '').split(';')[0].strip() != 'application/json':
        raise Refused(415, 'unsupported_media_type', f'POST {request.url.path} takes application/json.')
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):  # `BodyLimits` refused deeper nesting already
        raise Refused(400, 'invalid_request', 'the body is not JSON.') from None
    if not isinstance(body, dict):
        raise Refused(400, 'invalid_request', 'the body must be a JSON object.')
    return body


def integer(value: Any, name: str, *, low: int = 0, high: int | None = None) -> int:
    if isinstance(value, str) and value.strip().lstrip('-').isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f'between {low} and {high}' if high is not None else f'{low} or more'
        raise Refused(400, 'invalid_request', f'{name} must be a whole number {bound}.')
    return value


def flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise Refused(400, 'invalid_request', f'{name} must be true or false.')
    return value


def optional_text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise Refused(400, 'invalid_request', f'{name} must be text.')
    return value.strip() if value else None


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (`port` 0: a free one); bound before the URL is printed, so a client
    that reads the URL can connect at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise OSError(f'cannot listen on {HOST}:{port}: {exc.strerror}') from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(app: Starlette, sock: socket.socket) -> None:
    """Serve until Ctrl-C (or SIGTERM), within the app's `Limits`; streams still open get a few seconds to finish."""
    import uvicorn

    settings = server_config(app, app.state.limits, timeout_graceful_shutdown=5, lifespan='on')
    uvicorn.Server(settings).run(sockets=[sock])
