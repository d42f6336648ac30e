"""What the studio's server takes from a client, and for how long: a request's body (its size, its JSON nesting,
the time it takes to arrive) and a connection's time to send a request's headers.

`BodyLimits` is an ASGI middleware: it reads each request's body before the app does, counting the bytes as they
stream in (a `Content-Length` is believed only when it is too large already; a chunked body or one that lies is
cut at the limit all the same), and answers 413 past `Limits.body_bytes`, 408 past `Limits.body_seconds`, and
400 when brackets nest deeper than `Limits.json_depth` (counted outside strings, in linear time, before any
parser recurses into them). The app then gets the body it read, whole.

`config` is the uvicorn configuration the studio serves with: its HTTP protocol is h11's with a deadline for a
request's head (`HeaderDeadline`): from the moment a connection is made, or its last response ended, the client
has `Limits.header_seconds` to finish sending the next request's headers, however it trickles them (uvicorn's
keep-alive timeout starts again at every byte, so a client sending one byte at a time would hold a connection
forever); idle connections are closed after `Limits.keep_alive_seconds`.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import h11
from starlette.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import uvicorn


@dataclass(frozen=True)
class Limits:
    """The studio's limits on what a client sends; the defaults are for a person's browser on this machine."""

    body_bytes: int = 1_000_000
    """The largest request body (413 past it): a chat message or an action's JSON is a few KB."""
    json_depth: int = 64
    """The deepest nesting of brackets in a body (400 past it)."""
    body_seconds: float = 30.0
    """The time a request's body has to arrive whole, once its headers did (408 past it)."""
    header_seconds: float = 10.0
    """The time a connection has to send a request's headers: from when it was made, or its last response ended."""
    keep_alive_seconds: int = 5
    """An idle connection, between requests, is closed after this long (uvicorn's `timeout_keep_alive`)."""


_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)  # possessive: linear, no backtracking
_NOT_BRACKET = re.compile(rb'[^\[\]{}]++')
_STEP = [1 if byte in b'[{' else -1 if byte in b']}' else 0 for byte in range(256)]


def nesting(body: bytes) -> int:
    """How deep the brackets of `body` nest, outside its JSON strings (0 for a scalar or none)."""
    brackets = _NOT_BRACKET.sub(b'', _STRING.sub(b'', body))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def refusal(status: int, error: str, message: str) -> JSONResponse:
    """A refusal that also ends the connection: what the client sent next is not read."""
    return JSONResponse({'error': error, 'message': message}, status_code=status, headers={'connection': 'close'})


class BodyLimits:
    """Reads every HTTP request's body within `Limits` before the app does, and hands the app that body."""

    def __init__(self, app: Any, *, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        limits = self.limits
        too_large = refusal(
            413, 'too_large', f'the request body is larger than {limits.body_bytes:,} bytes: send less at a time.'
        )
        declared = dict(scope.get('headers') or []).get(b'content-length', b'')
        if declared.isdigit() and int(declared) > limits.body_bytes:
            await too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(limits.body_seconds):
                while True:
                    message = await receive()
                    if message['type'] != 'http.request':  # the client went away: nobody to answer
                        return
                    chunk = message.get('body', b'')
                    size += len(chunk)
                    if size > limits.body_bytes:
                        await too_large(scope, receive, send)
                        return
                    chunks.append(chunk)
                    if not message.get('more_body', False):
                        break
        except TimeoutError:
            message = f'the request body did not arrive within {limits.body_seconds:g} seconds.'
            await refusal(408, 'timeout', message)(scope, receive, send)
            return
        body = b''.join(chunks)
        depth = nesting(body)
        if depth > limits.json_depth:
            message = f'the JSON body nests {depth:,} levels deep; at most {limits.json_depth} are taken.'
            await refusal(400, 'too_deep', message)(scope, receive, send)
            return
        given = False

        async def replay() -> Any:
            nonlocal given
            if not given:
                given = True
                return {'type': 'http.request', 'body': body, 'more_body': False}
            return await receive()  # after the body: the disconnect a streamed response listens for

        await self.app(scope, replay, send)


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for each request's head (`Limits.header_seconds`)."""

    header_seconds: float = Limits.header_seconds
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request's head is in: the body has its own limit
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # the next request's head has its time from now

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def config(app: Any, limits: Limits, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration serving `app` within `limits` (`options`: more of uvicorn's)."""
    import uvicorn

    protocol = type('StudioProtocol', (HeaderDeadline,), {'header_seconds': limits.header_seconds})
    return uvicorn.Config(
        app,
        http=protocol,
        timeout_keep_alive=limits.keep_alive_seconds,
        log_level='warning',
        access_log=False,
        **options,
    )
