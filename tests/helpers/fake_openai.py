"""A small OpenAI-compatible chat completions server on 127.0.0.1, for tests of the real `harness` process
with `HARNESS_BASE_URL`: the model the CLI talks to is pydantic-ai's own OpenAI client, over HTTP.

It answers `POST /v1/chat/completions` as OpenAI does, streamed (server-sent events, `stream: true`) or
not. What it says comes from a script of turns: a `Turn` is either a `run_workflow` tool call with a
workflow script, or a text answer sent in chunks. A chunk may be preceded by a gate, a
`threading.Event` the server waits on before sending it, so a test can see the first part of an answer
on the terminal before the rest exists (streaming shown by events, not by timing).

Every request's JSON body is kept (`requests`), to check what the CLI sent (`stream`, the messages).

`GET /v1/models` lists `models` (by default the one `MODEL`), as OpenAI and Ollama's OpenAI API do, for a
client that asks the server which model to use.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

MODEL = 'fake-model'


@dataclass
class Turn:
    """One response: a script for `run_workflow`, or text sent as `chunks` (each after its gate, if any)."""

    script: str | None = None
    chunks: list[str] = field(default_factory=list)
    gates: dict[int, threading.Event] = field(default_factory=dict)
    """Before sending chunk i, wait for `gates[i]`."""
    usage: tuple[int, int] = (120, 30)


class FakeOpenAI:
    """Serves `turns` in order, one per request (a request past the last gets the last turn again)."""

    def __init__(self, turns: list[Turn], models: list[str] | None = None) -> None:
        self.turns = turns
        self.models = [MODEL] if models is None else models
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def do_GET(self) -> None:
                if self.path.rstrip('/') != '/v1/models':
                    self.send_error(404)
                    return
                listing = [{'id': name, 'object': 'model', 'created': 0, 'owned_by': 'fake'} for name in server.models]
                payload = json.dumps({'object': 'list', 'data': listing}).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get('Content-Length') or 0)) or b'{}')
                with server.lock:
                    server.requests.append(body)
                    turn = server.turns[min(len(server.requests), len(server.turns)) - 1]
                if body.get('stream'):
                    self.stream(turn)
                else:
                    self.whole(turn)

            def whole(self, turn: Turn) -> None:
                for gate in turn.gates.values():
                    gate.wait(60)
                message: dict[str, Any] = {'role': 'assistant', 'content': ''.join(turn.chunks) or None}
                if turn.script is not None:
                    message['tool_calls'] = [tool_call(turn.script)]
                payload = json.dumps(
                    {
                        'id': 'chatcmpl-1',
                        'object': 'chat.completion',
                        'created': int(time.time()),
                        'model': MODEL,
                        'choices': [
                            {
                                'index': 0,
                                'message': message,
                                'finish_reason': 'tool_calls' if turn.script is not None else 'stop',
                            }
                        ],
                        'usage': usage(turn),
                    }
                ).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def stream(self, turn: Turn) -> None:
                self.send_response(200)
                self.send_header('Content-Type', 'text/event-stream')
                self.send_header('Transfer-Encoding', 'chunked')
                self.end_headers()
                if turn.script is not None:
                    gate = turn.gates.get(0)
                    if gate is not None:
                        gate.wait(60)
                    call = tool_call(turn.script)
                    call['index'] = 0
                    self.event({'role': 'assistant', 'content': None, 'tool_calls': [call]})
                    self.event({}, finish='tool_calls')
                else:
                    for i, chunk in enumerate(turn.chunks):
                        gate = turn.gates.get(i)
                        if gate is not None:
                            gate.wait(60)
                        self.event({'role': 'assistant', 'content': chunk} if i == 0 else {'content': chunk})
                    self.event({}, finish='stop')
                self.send(
                    {
                        'id': 'chatcmpl-1',
                        'object': 'chat.completion.chunk',
                        'created': int(time.time()),
                        'model': MODEL,
                        'choices': [],
                        'usage': usage(turn),
                    }
                )
                self.write(b'data: [DONE]\n\n')
                self.write(b'')

            def event(self, delta: dict[str, Any], finish: str | None = None) -> None:
                self.send(
                    {
                        'id': 'chatcmpl-1',
                        'object': 'chat.completion.chunk',
                        'created': int(time.time()),
                        'model': MODEL,
                        'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}],
                    }
                )

            def send(self, data: dict[str, Any]) -> None:
                self.write(b'data: ' + json.dumps(data).encode() + b'\n\n')

            def write(self, data: bytes) -> None:
                self.wfile.write(f'{len(data):x}\r\n'.encode() + data + b'\r\n')
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.base_url = f'http://127.0.0.1:{self.server.server_port}/v1'
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        for turn in self.turns:  # nothing may stay blocked on a gate
            for gate in turn.gates.values():
                gate.set()
        self.server.shutdown()
        self.server.server_close()


def tool_call(script: str) -> dict[str, Any]:
    return {
        'id': 'call_1',
        'type': 'function',
        'function': {'name': 'run_workflow', 'arguments': json.dumps({'code': script})},
    }


def usage(turn: Turn) -> dict[str, int]:
    prompt, completion = turn.usage
    return {'prompt_tokens': prompt, 'completion_tokens': completion, 'total_tokens': prompt + completion}
