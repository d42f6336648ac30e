"""Tracing: the one place that configures logfire, and the recorder that keeps each run's spans.

Every run is recorded as OpenTelemetry spans (`run_workflow {run_id}`, `check`, `call {callee}`,
and pydantic-ai's agent spans below each call). Where they go:

- **Offline, always**: `RECORDER`, a span processor, keeps the finished spans of every run as
  compact dicts until the engine takes them with `RECORDER.drain(run_id)` and stores them with the
  run, so `harness trace RUN` works with no account and no network.
- **Logfire**, only when a token is present: the `LOGFIRE_TOKEN` variable, `token=` through a
  user's own `logfire.configure`, or a credentials file written by `logfire auth`/`logfire projects
  use` in `.logfire/` under the working directory.
- **Any other OpenTelemetry backend**, only when `OTEL_EXPORTER_OTLP_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (logfire then adds a standard OTLP exporter).

With none of these, nothing leaves the machine: no exporter to the network is installed.

`configure_tracing` never overrides a user's own setup. It decides once per process, in order:

1. `HARNESS_TRACING=off` (or `0`, `false`, `no`): do nothing at all; runs record no spans.
2. logfire already configured (the user called `logfire.configure`): keep it; only add `RECORDER`
   to its tracer provider. pydantic-ai's instrumentation is left as the user set it.
3. another global OpenTelemetry tracer provider is set (anything but OpenTelemetry's initial
   proxy): keep it; only add `RECORDER` when the provider accepts span processors (an SDK
   `TracerProvider` does). pydantic-ai is left as the user set it (its spans carry prompts).
4. nothing to export (no token, no credentials file, no OTLP endpoint, no console): a plain
   OpenTelemetry SDK `TracerProvider` holding only `RECORDER` becomes the global provider, and
   pydantic-ai is instrumented on it (`Agent.instrument_all`). logfire is not configured: its
   pipeline (scrubbing, span tweaks) exists to export, and it costs a sub-agent call about 0.25 ms
   when nothing is exported. The offline view records the same spans either way.
5. otherwise: `logfire.configure(send_to_logfire='if-token-present', console=False, ...)`, then
   `RECORDER` is added to its tracer provider, then `logfire.instrument_pydantic_ai()`.

Wherever it is installed, `RECORDER` sits beside logfire's pipeline, not inside it: what is exported is
scrubbed by logfire (a value mentioning "password", "session", "api key"... is replaced), what is
recorded for the offline view is not, as the run store already holds the same data in full.
A later `logfire.configure` call by the user replaces the provider and so drops `RECORDER` (and, after
step 4, cannot take over the global provider): configure logfire before the harness's first run.

Invariants: a span belongs to a run if it carries `harness.run_id` when it starts (or ends), or if
its parent span in the same trace belonged to that run when the child started. An orchestrator's agent
run is recorded the same way under its pydantic-ai run id when `ask`/`chat` or the studio expect it
(`RunSpanRecorder.expect`): its model requests and tool executions, not the workflow runs below them.
Attributes kept by the recorder are the `harness.*` ones and a few `gen_ai.*` ones, each value at most
`RunSpanRecorder.value_limit` characters.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .._records import SpanDict, preview
from ._names import ATTR_PREFIX, ATTR_RUN_ID

KEPT_PREFIXES: tuple[str, ...] = (ATTR_PREFIX,)
KEPT_ATTRIBUTES: frozenset[str] = frozenset(
    {
        'gen_ai.agent.name',
        'gen_ai.operation.name',
        'gen_ai.request.model',
        'gen_ai.response.model',
        'gen_ai.tool.name',
        'gen_ai.usage.input_tokens',
        'gen_ai.usage.output_tokens',
        'operation.cost',
    }
)
OFF_VALUES = frozenset({'off', '0', 'false', 'no'})


TracingMode = Literal['logfire', 'offline', 'user-logfire', 'user-opentelemetry', 'off']

_PROPAGATOR = TraceContextTextMapPropagator()


class RunSpanRecorder(SpanProcessor):
    """Keeps the finished spans of each run, keyed by run id, until `drain(run_id)` takes them.

    Membership is decided when a span starts (its own `harness.run_id`, else its parent's run when
    the parent is a span of the same trace that this recorder saw start and that is still open), and
    again when it ends (its own `harness.run_id`, for an attribute set after the start). So set
    `harness.run_id` on the run's span at its start, and start child spans before their parent ends.

    Memory is bounded: at most `max_runs` undrained runs (the oldest is dropped first) and
    `max_spans_per_run` spans per run (later ones are counted in `dropped`). Thread-safe.
    """

    def __init__(self, *, max_runs: int = 256, max_spans_per_run: int = 10_000, value_limit: int = 500) -> None:
        self.max_runs = max_runs
        self.max_spans_per_run = max_spans_per_run
        self.value_limit = value_limit
        self.dropped: dict[str, int] = {}
        self._lock = threading.Lock()
        self._open: dict[tuple[int, int], str] = {}
        """(trace_id, span_id) of each started, not yet ended span of a run -> its run id."""
        self._runs: OrderedDict[str, list[SpanDict]] = OrderedDict()
        self._expected: set[str] = set()
        """Agent run ids `expect` was told about, until `drain` takes their spans."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        ctx = span.get_span_context()
        run_id = _run_id_of(span.attributes)
        with self._lock:
            if run_id is None and span.parent is not None and span.parent.trace_id == ctx.trace_id:
                run_id = self._open.get((span.parent.trace_id, span.parent.span_id))
            if run_id is None and self._expected:
                agent_run = (span.attributes or {}).get('gen_ai.agent.call.id')
                run_id = agent_run if isinstance(agent_run, str) and agent_run in self._expected else None
            if run_id is not None:
                self._open[(ctx.trace_id, ctx.span_id)] = run_id

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        if ctx is None:
            return
        with self._lock:
            owner = self._open.pop((ctx.trace_id, ctx.span_id), None)
        run_id = _run_id_of(span.attributes) or owner
        if run_id is None:
            return
        record = span_to_dict(span, value_limit=self.value_limit)
        with self._lock:
            spans = self._runs.get(run_id)
            if spans is None:
                spans = self._runs[run_id] = []
                while len(self._runs) > self.max_runs:
                    self._runs.popitem(last=False)
            if len(spans) >= self.max_spans_per_run:
                self.dropped[run_id] = self.dropped.get(run_id, 0) + 1
            else:
                spans.append(record)

    def expect(self, agent_run_id: str) -> None:
        """Record the agent run pydantic-ai will run with this run id (its span carries `gen_ai.agent.call.id`)
        and the spans below it under `agent_run_id`, as if it carried `harness.run_id`: an orchestrator, whose
        model requests belong to no workflow run (a run's own spans below it keep their run's). `drain` ends it."""
        with self._lock:
            self._expected.add(agent_run_id)

    def drain(self, run_id: str) -> list[SpanDict]:
        """Take (and forget) the finished spans recorded for `run_id`, ordered by start time.

        Spans of the run that are still open are not included; they are recorded when they end and
        a later `drain` returns them.
        """
        with self._lock:
            spans = self._runs.pop(run_id, [])
            self.dropped.pop(run_id, None)
            self._expected.discard(run_id)
        return sorted(spans, key=lambda s: (s['start'], s['end']))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def span_to_dict(span: ReadableSpan, *, value_limit: int = 500) -> SpanDict:
    """The compact, JSON-ready record of one finished span (see `SpanDict`).

    A logfire span's name is its message template (`'call {callee}'`); the formatted message
    (`logfire.msg`) is used as the name instead whenever the name holds a `{`.
    """
    ctx = span.get_span_context()
    assert ctx is not None
    attributes = dict(span.attributes or {})
    name = span.name
    message = attributes.get('logfire.msg')
    if '{' in name and isinstance(message, str) and message:
        name = message
    failed = span.status.status_code is StatusCode.ERROR
    start = (span.start_time or 0) / 1e9
    end = span.end_time / 1e9 if span.end_time is not None else start
    return {
        'name': preview(name, value_limit, as_text=True),
        'span_id': format(ctx.span_id, '016x'),
        'parent_span_id': format(span.parent.span_id, '016x') if span.parent is not None else None,
        'trace_id': format(ctx.trace_id, '032x'),
        'start': start,
        'end': end,
        'status': 'error' if failed else 'ok',
        'error': preview(_error_message(span), value_limit, as_text=True) if failed else None,
        'exceptions': _exceptions(span),
        'attributes': {
            key: _compact(value, value_limit)
            for key, value in attributes.items()
            if key.startswith(KEPT_PREFIXES) or key in KEPT_ATTRIBUTES
        },
    }


RECORDER = RunSpanRecorder()
"""The process-wide recorder `configure_tracing` installs; the engine calls `RECORDER.drain(run_id)`."""

_lock = threading.Lock()
_mode: TracingMode | None = None
_recorded: list[object] = []
"""Providers `RECORDER` was added to: added twice, it would store every span of a run twice."""


def configure_tracing(*, service_name: str = 'harness', console: bool = False) -> TracingMode:
    """Set up tracing once per process (later calls return what the first did); see the module docstring.

    Returns the branch taken: `'logfire'` (it configured logfire itself), `'offline'` (nothing to
    export: a plain OpenTelemetry provider for the recorder), `'user-logfire'` / `'user-opentelemetry'`
    (it found the user's setup and only added `RECORDER`), or `'off'`.
    `console=True` also prints spans to the terminal (logfire's console exporter, styled by the
    `LOGFIRE_CONSOLE_*` variables); it applies only when this call is the one configuring logfire.
    `LOGFIRE_SEND_TO_LOGFIRE=false` is honoured: then not even a token sends anything to Logfire.
    """
    global _mode
    with _lock:
        if _mode is None:
            _mode = _configure(service_name=service_name, console=console)
        return _mode


def _configure(*, service_name: str, console: bool) -> TracingMode:
    if os.environ.get('HARNESS_TRACING', '').strip().lower() in OFF_VALUES:
        return 'off'
    provider = trace.get_tracer_provider()
    if not isinstance(provider, trace.ProxyTracerProvider):
        # The user set tracing up (logfire.configure, or an OpenTelemetry SDK): keep it as it is,
        # pydantic-ai's instrumentation included.
        install_recorder(provider)
        return 'user-logfire' if type(provider).__module__.startswith('logfire') else 'user-opentelemetry'
    if not console and not _anything_to_export():
        return _configure_offline(service_name)
    import logfire

    quiet_signals_without_endpoint()
    send_to_logfire: bool | Literal['if-token-present'] = 'if-token-present'
    if os.environ.get('LOGFIRE_SEND_TO_LOGFIRE', '').strip().lower() in OFF_VALUES:
        send_to_logfire = False
    logfire.configure(
        send_to_logfire=send_to_logfire,
        service_name=service_name,
        console=None if console else False,
        inspect_arguments=False,
    )
    # Added to the provider rather than through `additional_span_processors`, which would wrap it in
    # logfire's scrubber: the offline view then shows what the run store already holds in full.
    install_recorder(trace.get_tracer_provider())
    logfire.instrument_pydantic_ai()
    return 'logfire'


def _anything_to_export() -> bool:
    """Whether logfire, configured here, would send spans somewhere: a Logfire token (the variable or a
    credentials file where logfire looks for one) or an OTLP endpoint."""
    if os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT') or os.environ.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'):
        return True
    if os.environ.get('LOGFIRE_SEND_TO_LOGFIRE', '').strip().lower() in OFF_VALUES:
        return False
    credentials = Path(os.environ.get('LOGFIRE_CREDENTIALS_DIR') or '.logfire') / 'logfire_credentials.json'
    return bool(os.environ.get('LOGFIRE_TOKEN')) or credentials.exists()


def _configure_offline(service_name: str) -> TracingMode:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    trace.set_tracer_provider(provider)
    install_recorder(provider)
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    return 'offline'


def quiet_signals_without_endpoint() -> None:
    """Send metrics and logs to `OTEL_EXPORTER_OTLP_ENDPOINT` only when asked to.

    logfire exports all three signals to the generic endpoint; most OTLP backends people point it at
    (Jaeger, Tempo, Zipkin's collector) take traces only and answer the others with 405, which logfire
    prints after every command. The harness records traces; metrics and logs go to an OTLP backend when
    their own endpoint (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, `..._LOGS_ENDPOINT`) or exporter
    (`OTEL_METRICS_EXPORTER=otlp`, `OTEL_LOGS_EXPORTER=otlp`) is set, and to Logfire with a token as usual.
    """
    if not os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT'):
        return
    for signal in ('METRICS', 'LOGS'):
        if not os.environ.get(f'OTEL_EXPORTER_OTLP_{signal}_ENDPOINT'):
            os.environ.setdefault(f'OTEL_{signal}_EXPORTER', 'none')


def exporting() -> str | None:
    """Where spans leave this process, for the line the CLI prints: `Logfire`, the OTLP endpoint, or None."""
    if _mode in (None, 'off'):
        return None
    endpoint = os.environ.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') or os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT')
    if os.environ.get('LOGFIRE_TOKEN') and os.environ.get('LOGFIRE_SEND_TO_LOGFIRE', '').lower() not in OFF_VALUES:
        return 'Logfire' + (f' and {endpoint}' if endpoint else '')
    return endpoint


def install_recorder(provider: object | None = None) -> None:
    """Add `RECORDER` to `provider` (default: the global one) unless it is there already.

    For when logfire or OpenTelemetry was (re)configured after `configure_tracing` ran.
    """
    target = provider or trace.get_tracer_provider()
    # logfire's global provider is a wrapper whose SDK provider a later `logfire.configure` replaces:
    # what holds the processors is the provider inside it.
    holder = getattr(target, 'provider', target)
    add = getattr(target, 'add_span_processor', None)
    if callable(add) and not any(p is holder for p in _recorded):
        add(RECORDER)
        _recorded.append(holder)


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, to store with a snapshot; None outside a span."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get('traceparent')


@contextmanager
def attach_traceparent(traceparent: str | None) -> Generator[None]:
    """Make `traceparent` the current parent inside the block, so new spans join that trace.

    `None` or an unparsable value leaves the current context as it is.
    """
    if not traceparent:
        yield
        return
    token = otel_context.attach(_PROPAGATOR.extract({'traceparent': traceparent}))
    try:
        yield
    finally:
        otel_context.detach(token)


def _run_id_of(attributes: Mapping[str, Any] | None) -> str | None:
    if not attributes:
        return None
    value = attributes.get(ATTR_RUN_ID)
    return str(value) if value is not None and value != '' else None


STACKTRACE_CHARS = 8_000
"""The stored stack trace of one exception is cut to its last this many characters (the frames nearest the raise)."""


def _exceptions(span: ReadableSpan) -> list[dict[str, str]]:
    """The exception events of `span` (type, message, stack trace): what the operator sees of a callee's failure."""
    found = []
    for event in span.events:
        if event.name != 'exception' or not event.attributes:
            continue
        stacktrace = str(event.attributes.get('exception.stacktrace', ''))
        if len(stacktrace) > STACKTRACE_CHARS:
            stacktrace = '…' + stacktrace[-STACKTRACE_CHARS:]
        found.append(
            {
                'type': str(event.attributes.get('exception.type', '')),
                'message': str(event.attributes.get('exception.message', '')),
                'stacktrace': stacktrace,
            }
        )
    return found


def record_exception(exc: BaseException) -> None:
    """Record `exc` with its stack trace on the current span (a call span: for the operator, never the script)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.record_exception(exc)


def _error_message(span: ReadableSpan) -> str:
    if span.status.description:
        return span.status.description
    for event in span.events:
        if event.name == 'exception' and event.attributes:
            kind = event.attributes.get('exception.type', '')
            message = event.attributes.get('exception.message', '')
            return f'{kind}: {message}' if kind else str(message)
    return 'error'


def _compact(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return preview(value, limit, as_text=True)
    if isinstance(value, bool | int | float) or value is None:
        return value
    items = list(value) if isinstance(value, list | tuple) else value
    text = json.dumps(items, ensure_ascii=False, default=str)
    return items if len(text) <= limit else preview(text, limit, as_text=True)


# -- the engine's spans ---------------------------------------------------------------------------

TRACER = trace.get_tracer('harness')
