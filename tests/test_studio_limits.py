"""The studio's server against clients that send too much, too deep or too slowly, over real sockets.

The real app under uvicorn, configured as `harness ui` serves it (`_studio._limits.config`), on a free port of
127.0.0.1 in a thread of this process, with small limits so the tests are quick: a body past the size limit is
413 whether its `Content-Length` says so or it streams in chunks (read up to the limit, not to its end), JSON
nested deeper than the limit is 400 with a message (not 500), a body that trickles is 408, and a connection
that trickles its request's headers one byte per 0.2 s, or sends nothing, is closed once its time is up;
requests sent in time are served as before, on the same connection.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import Harness
from harness._studio._limits import Limits, nesting
from subagents.planner import demo_model

TRICKLE = 0.2
"""Seconds between the bytes of a trickling client."""


@dataclass
class Server:
    port: int
    limits: Limits

    def connect(self) -> socket.socket:
        return socket.create_connection(('127.0.0.1', self.port), timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    import uvicorn

    from harness._studio._app import create_app, listen
    from harness._studio._limits import config

    started: list[tuple[uvicorn.Server, threading.Thread, Harness]] = []

    def start(**limits: Any) -> Server:
        chosen = Limits(**limits)
        h = Harness(store=str(tmp_path / 'runs.db'))
        app = create_app(h, model=demo_model(), model_label='test model', limits=chosen)
        sock = listen(0)
        server = uvicorn.Server(config(app, chosen, lifespan='on'))
        thread = threading.Thread(target=server.run, kwargs={'sockets': [sock]}, daemon=True)
        thread.start()
        started.append((server, thread, h))
        return Server(sock.getsockname()[1], chosen)

    yield start
    for server, thread, h in started:
        server.should_exit = True
        thread.join(30)
        h.close()


def head(method: str, path: str, **headers: str) -> bytes:
    lines = [
        f'{method} {path} HTTP/1.1',
        'Host: 127.0.0.1',
        *(f'{k.replace("_", "-")}: {v}' for k, v in headers.items()),
    ]
    return ('\r\n'.join(lines) + '\r\n\r\n').encode()


def response(sock: socket.socket, timeout: float = 20) -> tuple[int, dict[str, str], bytes]:
    """One HTTP response (status, headers, body) read from `sock`."""
    sock.settimeout(timeout)
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f'closed before a response: {data!r}')
        data += chunk
    top, _, rest = data.partition(b'\r\n\r\n')
    status_line, *header_lines = top.decode().split('\r\n')
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(':') for line in header_lines)}
    length = int(headers.get('content-length', '0'))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(status_line.split()[1]), headers, rest[:length]


def post(server: Server, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    with server.connect() as sock:
        sock.sendall(head('POST', path, Content_Type='application/json', Content_Length=str(len(body))) + body)
        status, _, data = response(sock)
    return status, json.loads(data)


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b'') -> float:
    """Send `trickle` one byte per `TRICKLE` seconds (nothing, if empty) and wait for the server to close the
    connection: the seconds that took. Fails if it is still open after `seconds`."""
    start = time.monotonic()
    sent = 0
    sock.setblocking(False)
    while time.monotonic() - start < seconds:
        if sent < len(trickle):
            try:
                sock.send(trickle[sent : sent + 1])
            except OSError:  # reset: closed
                return time.monotonic() - start
            sent += 1
        readable, _, _ = select.select([sock], [], [], TRICKLE)
        if readable:
            try:
                if sock.recv(65536) == b'':
                    return time.monotonic() - start
            except OSError:
                return time.monotonic() - start
    raise AssertionError(f'the connection was still open after {seconds}s ({sent} of {len(trickle)} bytes sent)')


def test_nesting_counts_brackets_outside_strings() -> None:
    assert nesting(b'{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert nesting(b'"just a string with \\" and ["') == 0
    assert nesting(b'[' * 100_000 + b']' * 100_000) == 100_000
    assert nesting(b'') == 0
    start = time.monotonic()
    nesting(b'["' + b'x\\"' * 300_000 + b'", [[[]]]]')
    assert time.monotonic() - start < 2  # linear


def test_a_body_past_the_limit_is_413_whether_declared_or_streamed(serve: Callable[..., Server]) -> None:
    server = serve(body_bytes=100_000)
    # Declared: refused from the headers alone (the 300 MB never has to be sent).
    with server.connect() as sock:
        sock.sendall(head('POST', '/api/chat', Content_Type='application/json', Content_Length=str(300_000_000)))
        status, headers, data = response(sock)
    assert status == 413 and json.loads(data)['error'] == 'too_large', data
    assert headers.get('connection') == 'close'
    # Streamed in chunks with no length: read up to the limit, then refused; the rest is never read.
    chunk = b'[' + b'0,' * 8_000  # 16 KB
    sent = 0
    with server.connect() as sock:
        sock.sendall(head('POST', '/api/chat', Content_Type='application/json', Transfer_Encoding='chunked'))
        while sent < 50_000_000:
            try:
                sock.sendall(f'{len(chunk):x}\r\n'.encode() + chunk + b'\r\n')
            except OSError:
                break
            sent += len(chunk)
            if select.select([sock], [], [], 0)[0]:
                break
        status, _, data = response(sock)
    assert status == 413 and json.loads(data)['error'] == 'too_large', data
    assert sent < 20_000_000, f'the server read {sent:,} bytes before refusing'
    # A body within the limit is served as before.
    status, body = post(server, '/api/runs/nope/fork', json.dumps({'at': 1, 'result': 'x' * 50_000}).encode())
    assert status == 404 and body['error'] == 'not_found', body


def test_json_nested_too_deep_is_400_with_a_message(serve: Callable[..., Server]) -> None:
    server = serve()
    deep = b'{"at": 1, "result": ' + b'[' * 50_000 + b']' * 50_000 + b'}'
    for path in ('/api/runs/nope/fork', '/api/chat', '/api/runs/nope/approve'):
        status, body = post(server, path, deep)
        assert status == 400 and body['error'] == 'too_deep', (path, body)
        assert '50,002 levels' in body['message'] or '50,001 levels' in body['message'], body
    at_the_limit = b'{"at": 1, "result": ' + b'[' * 60 + b']' * 60 + b'}'
    status, body = post(server, '/api/runs/nope/fork', at_the_limit)
    assert status == 404, body  # taken: refused only for the run it names


def test_a_client_trickling_its_headers_is_cut_off(serve: Callable[..., Server]) -> None:
    server = serve(header_seconds=1.0, keep_alive_seconds=30)
    request = head('GET', '/api/info', User_Agent='x' * 40)  # ~90 bytes: 18 s at one byte per 0.2 s
    with server.connect() as sock:
        took = closed_within(sock, 6.0, trickle=request)
    assert 1.0 <= took < 4.0, took
    # Idle: a connection that sends nothing is closed as well.
    with server.connect() as sock:
        took = closed_within(sock, 6.0)
    assert 1.0 <= took < 4.0, took
    # After a response on a kept-alive connection, the next request's head has its time again, from then on.
    with server.connect() as sock:
        sock.sendall(head('GET', '/api/info'))
        status, _, _ = response(sock)
        assert status == 200
        sock.sendall(head('GET', '/api/info'))  # in time: served on the same connection
        status, _, _ = response(sock)
        assert status == 200
        took = closed_within(sock, 6.0, trickle=request)
    assert 0.5 <= took < 4.0, took  # its time ran from the response, a moment before the trickle began


def test_a_body_that_trickles_is_408(serve: Callable[..., Server]) -> None:
    server = serve(body_seconds=1.0)
    with server.connect() as sock:
        sock.sendall(head('POST', '/api/chat', Content_Type='application/json', Content_Length='200'))
        start = time.monotonic()
        sock.setblocking(False)
        while not select.select([sock], [], [], TRICKLE)[0]:
            sock.send(b' ')
            assert time.monotonic() - start < 6, 'no answer to a body trickling for 6 s'
        status, headers, data = response(sock)
    assert status == 408 and json.loads(data)['error'] == 'timeout', data
    assert 1.0 <= time.monotonic() - start < 4.0
    assert headers.get('connection') == 'close'
