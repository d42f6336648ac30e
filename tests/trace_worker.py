"""A workflow process for the tracing tests: each mode runs in a fresh interpreter, so the harness's own
`configure_tracing` sets logfire up from the environment it was started with.

Usage: trace_worker.py fanout STORE     three reviewers in parallel, then a summarizer; prints the run id
       trace_worker.py slow STORE       a slow workflow; prints `run ID` at its first call (to be killed)
       trace_worker.py resume STORE RUN_ID
       trace_worker.py offline STORE    the fan-out with every outbound connection recorded; prints a report
Every mode flushes the tracer provider before it exits, so an OTLP exporter has sent what it holds.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

FANOUT = '''\
import asyncio
reviews = await asyncio.gather(
    reviewer(task="review a.py"), reviewer(task="review b.py"), reviewer(task="review c.py")
)
await summarizer(task="summarize: " + " | ".join(reviews))
'''

SLOW = '''\
import asyncio
total = 0
for r in range(8):
    a, b, c = await asyncio.gather(slow(i=3 * r), slow(i=3 * r + 1), slow(i=3 * r + 2))
    total += a + b + c
total
'''
SLOW_VALUE = sum(i * i for i in range(24))


def fanout_harness(store: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from harness import Harness

    h = Harness(store=store)
    h.add_agent(Agent(TestModel(custom_output_text='looks fine'), name='reviewer'))
    h.add_agent(Agent(TestModel(custom_output_text='all three look fine'), name='summarizer'))
    return h


def slow_harness(store: str) -> Any:
    from harness import Harness

    h = Harness(store=store)

    @h.subagent
    async def slow(*, i: int) -> int:
        """A slow sub-agent."""
        await asyncio.sleep(0.25)
        return i * i

    return h


def flush() -> None:
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    force_flush = getattr(provider, 'force_flush', None)
    if callable(force_flush):
        force_flush()


def span_exporters() -> list[str]:
    """Every span exporter reachable from the global tracer provider's processors (nested ones included)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter

    found: list[object] = []
    seen: set[int] = set()

    def walk(obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, list | tuple):
            for item in obj:
                walk(item)
        elif isinstance(obj, SpanProcessor | SpanExporter) or type(obj).__name__.endswith(('Processor', 'Exporter')):
            found.append(obj)
            for value in vars(obj).values():
                walk(value)

    provider = trace.get_tracer_provider()
    walk(getattr(getattr(provider, 'provider', provider), '_active_span_processor', None))
    return [
        f'{type(p).__module__}.{type(p).__name__}'
        for p in found
        if isinstance(p, SpanExporter) or type(p).__name__.endswith('Exporter')
    ]


def main() -> None:
    mode, store = sys.argv[1], sys.argv[2]
    if mode == 'offline':
        attempts: list[str] = []
        connect = socket.socket.connect

        def recording_connect(self: socket.socket, address: Any) -> Any:
            attempts.append(f'{self.family.name} {address!r}')
            return connect(self, address)

        socket.socket.connect = recording_connect  # type: ignore[method-assign]
        h = fanout_harness(store)
        result = h.run_sync(FANOUT)
        flush()
        h.close()
        from harness._tracing import tracing_mode

        report = {
            'run_id': result.run_id,
            'mode': tracing_mode(),
            'exporters': span_exporters(),
            'connections': [a for a in attempts if not a.startswith('AF_UNIX')],
        }
        print(json.dumps(report), flush=True)
        return
    if mode == 'fanout':
        h = fanout_harness(store)
        result = h.run_sync(FANOUT)
        print(json.dumps({'run_id': result.run_id, 'value': result.value}), flush=True)
    elif mode == 'slow':
        h = slow_harness(store)

        def announce(event: Any) -> None:
            if event.seq == 1 and event.kind == 'started':
                print(f'run {event.run_id}', flush=True)

        h.run_sync(SLOW, on_event=announce)
    elif mode == 'resume':
        h = slow_harness(store)
        result = h.resume_sync(sys.argv[3])
        print(json.dumps({'run_id': result.run_id, 'value': result.value}), flush=True)
    else:
        raise SystemExit(f'unknown mode {mode!r}')
    h.close()
    flush()


if __name__ == '__main__':
    main()
