"""The workflow processes for the tracing tests: each runs in a fresh interpreter, so the harness's own
`configure_tracing` sets logfire up from the environment it was started with.

Usage: trace_worker.py otlp DIR      (started with OTEL_EXPORTER_OTLP_ENDPOINT) the fan-out (DIR/otlp.db),
                                     flushed, then `{"fanout": {run_id, value}}`; then the slow workflow
                                     (DIR/crash.db), which prints `run ID` at its first call and `frozen`
                                     once call #HANG_SEQ is executing, which never returns: kill it then
       trace_worker.py offline DIR   (started with no tracing setup) every outbound connection recorded:
                                     the fan-out (DIR/offline.db), then `{"fanout": {run_id}}`; then reads
                                     one line on stdin, `{"store", "run_id"}`, and resumes that slow run, printing
                                     `{"resumed": {run_id, value}}` (an empty line or EOF resumes nothing);
                                     then `{"report": {mode, exporters, connections}}`
The fan-out is three reviewers in parallel, then a summarizer.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

FANOUT = """\
import asyncio
reviews = await asyncio.gather(
    reviewer(task="review a.py"), reviewer(task="review b.py"), reviewer(task="review c.py")
)
await summarizer(task="summarize: " + " | ".join(reviews))
"""

SLOW = """\
import asyncio
total = 0
for r in range(8):
    a, b, c = await asyncio.gather(slow(i=3 * r), slow(i=3 * r + 1), slow(i=3 * r + 2))
    total += a + b + c
total
"""
SLOW_VALUE = sum(i * i for i in range(24))


def fanout_harness(store: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from harness import Harness

    h = Harness(store=store)
    h.add_agent(Agent(TestModel(custom_output_text='looks fine'), name='reviewer'))
    h.add_agent(Agent(TestModel(custom_output_text='all three look fine'), name='summarizer'))
    return h


HANG_SEQ = 7
"""The call the killed slow workflow is executing when it dies: the first of the third gather."""


def slow_harness(store: str, *, hang: bool = False) -> Any:
    from harness import Harness

    h = Harness(store=store)

    @h.subagent
    async def slow(*, i: int) -> int:
        """A sub-agent; in the process that is killed, call #HANG_SEQ never returns."""
        if hang and i + 1 == HANG_SEQ:
            print('frozen', flush=True)
            await asyncio.Event().wait()
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


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


def main() -> None:
    mode, directory = sys.argv[1], Path(sys.argv[2])
    if mode == 'otlp':
        h = fanout_harness(str(directory / 'otlp.db'))
        result = h.run_sync(FANOUT)
        h.close()
        flush()  # the fan-out's spans have reached the receiver before the line says so
        say(fanout={'run_id': result.run_id, 'value': result.value})

        def announce(event: Any) -> None:
            if event.seq == 1 and event.kind == 'started':
                print(f'run {event.run_id}', flush=True)

        slow_harness(str(directory / 'crash.db'), hang=True).run_sync(SLOW, on_event=announce)
        raise SystemExit('the slow workflow was meant to be killed, not to finish')
    if mode != 'offline':
        raise SystemExit(f'unknown mode {mode!r}')
    attempts: list[str] = []
    connect = socket.socket.connect

    def recording_connect(self: socket.socket, address: Any) -> Any:
        attempts.append(f'{self.family.name} {address!r}')
        return connect(self, address)

    socket.socket.connect = recording_connect  # type: ignore[method-assign]
    h = fanout_harness(str(directory / 'offline.db'))
    result = h.run_sync(FANOUT)
    h.close()
    say(fanout={'run_id': result.run_id})
    if line := sys.stdin.readline().strip():
        request = json.loads(line)
        h = slow_harness(request['store'])
        resumed = h.resume_sync(request['run_id'])
        h.close()
        say(resumed={'run_id': resumed.run_id, 'value': resumed.value})
    flush()
    from harness._tracing._setup import configure_tracing

    say(
        report={
            'mode': configure_tracing(),  # done already, by the first Harness: this returns what it decided
            'exporters': span_exporters(),
            'connections': [a for a in attempts if not a.startswith('AF_UNIX')],
        }
    )


if __name__ == '__main__':
    main()
