"""Tracing and the offline trace views: the recorder, the rich tree, the Mermaid path, configuration.

Spans are made with an explicit OpenTelemetry SDK `TracerProvider` (never the global one) and fixed
timestamps, so durations and overlaps are exact. `configure_tracing` changes process-wide state that
cannot be undone (OpenTelemetry's global provider is set once), so it is tested in subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode
from rich.console import Console

from harness._tracing._setup import RunSpanRecorder, attach_traceparent, current_traceparent
from harness._tracing._tree import build_tree, error_count, render_tree

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000 * 10**9
"""A fixed start (ns since the epoch); offsets below are in milliseconds from it."""


def at(ms: float) -> int:
    return T0 + int(ms * 1_000_000)


@pytest.fixture
def recorder() -> RunSpanRecorder:
    return RunSpanRecorder()


@pytest.fixture
def provider(recorder: RunSpanRecorder) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    yield provider
    provider.shutdown()


def record_run(provider: TracerProvider) -> dict[str, Any]:
    """One run: check, a gather of three reviewers (each with an agent span), then a summarizer.

    Returns the hex span ids by role, so tests can check the parent links.
    """
    tracer = provider.get_tracer('test')
    ids: dict[str, Any] = {'reviewers': [], 'agents': []}

    def start(name: str, parent: trace.Span, ms: float, **attributes: Any) -> trace.Span:
        return tracer.start_span(
            name, context=trace.set_span_in_context(parent), attributes=attributes, start_time=at(ms)
        )

    run = tracer.start_span(
        'run_workflow r1',
        attributes={'harness.run_id': 'r1', 'harness.script': 'print(1)', 'harness.status': 'completed'},
        start_time=at(0),
    )
    ids['run'] = _hex(run)
    check = start('check', run, 10, **{'harness.errors': 0})
    check.end(end_time=at(50))
    ids['check'] = _hex(check)

    windows = [(100, 1100), (100, 1300), (120, 1600)]
    reviewers = []
    for seq, (begin, _) in enumerate(windows, start=1):
        reviewer = start(
            'call reviewer',
            run,
            begin,
            **{
                'harness.callee': 'reviewer',
                'harness.seq': seq,
                'harness.arguments': json.dumps({'task': f'review part {seq}'}),
                'harness.result_preview': 'x' * 2000 if seq == 1 else f'verdict {seq}',
                'harness.line': 3,
                'harness.attempt': 1,
                'harness.source': 'reused' if seq == 2 else 'live',
                'logfire.span_type': 'span',
            },
        )
        agent = start(
            'invoke_agent reviewer',
            reviewer,
            begin + 5,
            **{'gen_ai.agent.name': 'reviewer', 'gen_ai.usage.input_tokens': 51, 'secret.thing': 'dropped'},
        )
        reviewers.append((reviewer, agent))
        ids['reviewers'].append(_hex(reviewer))
        ids['agents'].append(_hex(agent))
    for (reviewer, agent), (_, end) in zip(reviewers, windows, strict=True):
        agent.end(end_time=at(end - 5))
        reviewer.end(end_time=at(end))

    summarizer = start('call summarizer', run, 1700, **{'harness.callee': 'summarizer', 'harness.seq': 4})
    summarizer.set_status(Status(StatusCode.ERROR, 'RuntimeError: model refused'))
    summarizer.end(end_time=at(2900))
    ids['summarizer'] = _hex(summarizer)
    run.end(end_time=at(3000))

    other = tracer.start_span('unrelated', start_time=at(0))
    tracer.start_span('unrelated child', context=trace.set_span_in_context(other), start_time=at(1)).end()
    other.end()
    return ids


def _hex(span: trace.Span) -> str:
    return format(span.get_span_context().span_id, '016x')


def by_name(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s['name'] == name]


# --- the recorder -------------------------------------------------------------------------------


def test_recorder_collects_the_run_and_its_descendants(provider: TracerProvider, recorder: RunSpanRecorder) -> None:
    ids = record_run(provider)
    spans = recorder.drain('r1')

    assert [s['name'] for s in spans] == [
        'run_workflow r1',
        'check',
        'call reviewer',
        'call reviewer',
        'invoke_agent reviewer',
        'invoke_agent reviewer',
        'call reviewer',
        'invoke_agent reviewer',
        'call summarizer',
    ]
    assert len({s['trace_id'] for s in spans}) == 1
    run = by_name(spans, 'run_workflow r1')[0]
    assert run['parent_span_id'] is None
    assert run['attributes']['harness.run_id'] == 'r1'
    assert (run['start'], run['end']) == (T0 / 1e9, T0 / 1e9 + 3.0)
    assert by_name(spans, 'check')[0]['parent_span_id'] == ids['run']
    reviewers = {s['span_id']: s for s in by_name(spans, 'call reviewer')}
    assert set(reviewers) == set(ids['reviewers'])
    assert all(s['parent_span_id'] == ids['run'] for s in reviewers.values())
    agents = {s['span_id']: s for s in by_name(spans, 'invoke_agent reviewer')}
    for reviewer_id, agent_id in zip(ids['reviewers'], ids['agents'], strict=True):
        assert agents[agent_id]['parent_span_id'] == reviewer_id
        kept = agents[agent_id]['attributes']
        assert kept == {'gen_ai.agent.name': 'reviewer', 'gen_ai.usage.input_tokens': 51}

    first = reviewers[ids['reviewers'][0]]['attributes']
    assert json.loads(first['harness.arguments']) == {'task': 'review part 1'}
    assert len(first['harness.result_preview']) == 500
    assert 'logfire.span_type' not in first
    summarizer = by_name(spans, 'call summarizer')[0]
    assert (summarizer['status'], summarizer['error']) == ('error', 'RuntimeError: model refused')
    assert all(s['status'] == 'ok' for s in spans if s is not summarizer)

    assert recorder.drain('r1') == []  # drain takes the spans
    assert recorder.drain('unrelated') == []


def test_recorder_keeps_runs_apart_and_records_pydantic_ai_spans(
    provider: TracerProvider, recorder: RunSpanRecorder
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    agent = Agent(TestModel(), name='reviewer')
    agent.instrument = InstrumentationSettings(tracer_provider=provider)  # this agent only, not global
    tracer = provider.get_tracer('test')
    for run_id in ('a', 'b'):
        with (
            tracer.start_as_current_span(f'run_workflow {run_id}', attributes={'harness.run_id': run_id}),
            tracer.start_as_current_span('call reviewer', attributes={'harness.callee': 'reviewer'}),
        ):
            agent.run_sync('hello')

    spans = recorder.drain('a')
    names = [s['name'] for s in spans]
    assert names[:3] == ['run_workflow a', 'call reviewer', 'invoke_agent reviewer']
    assert 'run_workflow b' not in names
    model_span = next(s for s in spans if 'gen_ai.request.model' in s['attributes'])
    assert model_span['attributes']['gen_ai.request.model'] == 'test'
    assert model_span['attributes']['gen_ai.usage.output_tokens'] > 0
    roots = build_tree(spans)
    assert len(roots) == 1 and roots[0].children[0].children[0].span['name'] == 'invoke_agent reviewer'
    assert [s['name'] for s in recorder.drain('b')][:2] == ['run_workflow b', 'call reviewer']


def test_traceparent_carries_a_resumed_run_into_the_original_trace(
    provider: TracerProvider, recorder: RunSpanRecorder
) -> None:
    tracer = provider.get_tracer('test')
    assert current_traceparent() is None
    with tracer.start_as_current_span('run_workflow r1', attributes={'harness.run_id': 'r1'}) as first:
        traceparent = current_traceparent()
    assert traceparent is not None and traceparent.startswith('00-')

    with (
        attach_traceparent(traceparent),
        tracer.start_as_current_span('run_workflow r1', attributes={'harness.run_id': 'r1'}),
        tracer.start_as_current_span('call summarizer'),
    ):
        pass
    with attach_traceparent(None), tracer.start_as_current_span('fresh') as fresh:
        pass

    original, resumed, call = recorder.drain('r1')
    assert original['trace_id'] == resumed['trace_id'] == call['trace_id']
    assert resumed['parent_span_id'] == format(first.get_span_context().span_id, '016x')
    assert call['parent_span_id'] == resumed['span_id']
    assert fresh.get_span_context().trace_id != first.get_span_context().trace_id
    assert [n.span['name'] for n in build_tree([resumed, call])] == ['run_workflow r1']  # remote parent


def test_recorder_bounds_memory() -> None:
    recorder = RunSpanRecorder(max_runs=2, max_spans_per_run=2)
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    tracer = provider.get_tracer('test')
    for run_id in ('a', 'b', 'c'):
        with tracer.start_as_current_span('run_workflow', attributes={'harness.run_id': run_id}):
            for _ in range(3):
                tracer.start_span('call x').end()
    assert recorder.drain('a') == []  # the oldest run was dropped
    assert recorder.dropped == {'b': 2, 'c': 2}
    assert len(recorder.drain('c')) == 2
    provider.shutdown()


# --- the views ----------------------------------------------------------------------------------


def test_render_tree_shows_names_durations_and_details(provider: TracerProvider, recorder: RunSpanRecorder) -> None:
    record_run(provider)
    console = Console(record=True, width=120)
    console.print(render_tree(recorder.drain('r1')))
    text = console.export_text()

    lines = text.splitlines()
    assert lines[0].startswith('run_workflow r1  3.00 s  ok  status=completed')
    assert 'check  40 ms  ok  no errors' in text
    assert text.count('call reviewer') == 3
    assert 'call reviewer  1.00 s  ok  #1  args={"task": "review part 1"}  -> ' in text
    assert 'x' * 59 + '…' in text  # the result preview is cut short (rich wraps the long line)
    assert 'call reviewer  1.20 s  ok  #2  args={"task": "review part 2"}  -> verdict 2  [reused]' in text
    assert '1.48 s' in text  # the third reviewer
    assert 'invoke_agent reviewer  990 ms  ok  tokens in=51 out=?' in text
    assert 'call summarizer  1.20 s  error: RuntimeError: model refused  #4' in text
    assert '[live]' not in text
    assert max(len(line) for line in lines) <= 120
    # agent spans are drawn under their call, one level deeper
    second = next(i for i, line in enumerate(lines) if '#2' in line)
    assert lines[second + 1].index('invoke_agent reviewer') > lines[second].index('call reviewer')


def span(name: str, start: float, end: float, span_id: str, parent: str | None = 'run', **attrs: Any) -> dict:
    return {
        'name': name,
        'span_id': span_id,
        'parent_span_id': parent,
        'trace_id': 't',
        'start': start,
        'end': end,
        'status': 'ok',
        'error': None,
        'attributes': attrs,
    }


def test_build_tree_orders_children_and_promotes_orphans_and_loops() -> None:
    spans = [
        span('late', 5, 6, 'c2', 'p'),
        span('parent', 0, 10, 'p', None),
        span('early', 1, 2, 'c1', 'p'),
        span('orphan', 3, 4, 'o', 'missing'),
        span('loop a', 7, 8, 'la', 'lb'),
        span('loop b', 7, 8, 'lb', 'la'),
        span('into loop', 9, 9.5, 'il', 'la'),
    ]
    roots = build_tree(spans)
    assert [r.span['name'] for r in roots] == ['parent', 'orphan', 'loop a', 'loop b']
    assert [c.span['name'] for c in roots[0].children] == ['early', 'late']
    assert [c.span['name'] for c in roots[2].children] == ['into loop']
    console = Console(record=True, width=120)
    console.print(render_tree(spans))
    assert console.export_text().splitlines()[0] == '4 root spans'


def test_error_count_reads_the_shapes_harness_errors_may_take() -> None:
    assert error_count(None) == 0
    assert error_count(3) == 3
    assert error_count(['x', 'y']) == 2
    assert error_count('["x"]') == 1
    assert error_count('') == 0
    text = 'main.py:1:1: error[unresolved-reference] x\nmain.py:2:1: error[invalid-argument-type] y\n  detail'
    assert error_count(text) == 2


# --- configure_tracing, in fresh processes ------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    import logfire
    from harness._tracing import _setup as tracing

    scenario = sys.argv[1]
    if scenario == 'user-otel':
        trace.set_tracer_provider(TracerProvider())
    mode = tracing.configure_tracing()
    assert tracing.configure_tracing() == mode  # a second call does nothing more

    def parts(obj, seen):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            for item in obj:
                yield from parts(item, seen)
        elif isinstance(obj, (SpanProcessor, SpanExporter)) or type(obj).__name__.endswith('Processor'):
            yield obj
            for value in vars(obj).values():
                yield from parts(value, seen)

    provider = trace.get_tracer_provider()
    sdk = getattr(provider, 'provider', provider)
    found = list(parts(getattr(sdk, '_active_span_processor', None), set()))
    exporters = [p for p in found if isinstance(p, SpanExporter)]
    config = logfire.DEFAULT_LOGFIRE_INSTANCE.config
    meter_sdk = config.get_meter_provider().provider
    spans = []
    if scenario != 'endpoint':  # nothing is created there, so nothing is sent to the dead endpoint
        tracer = trace.get_tracer('probe')
        with tracer.start_as_current_span('run_workflow r1', attributes={'harness.run_id': 'r1'}):
            tracer.start_span('call x').end()
        spans = [s['name'] for s in tracing.RECORDER.drain('r1')]
    print(json.dumps({
        'mode': mode,
        'logfire_configured': config._initialized,
        'token': config.token,
        'recorder_installed': any(p is tracing.RECORDER for p in found),
        'exporters': [type(e).__name__ for e in exporters],
        'network_exporters': [type(e).__name__ for e in exporters if isinstance(e, OTLPSpanExporter)],
        'metric_readers': len(getattr(meter_sdk, '_logfire_metric_readers', [])),
        'pydantic_ai_instrumented': (
            'pydantic_ai' in sys.modules and sys.modules['pydantic_ai'].Agent._instrument_default is not False
        ),
        'spans': spans,
    }))
    """
)


SCENARIOS: dict[str, tuple[str, dict[str, str]]] = {
    'default': ('default', {}),
    'endpoint': ('endpoint', {'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT': 'http://127.0.0.1:9/v1/traces'}),
    'user-otel': ('user-otel', {}),
    'off': ('default', {'HARNESS_TRACING': 'off'}),
}


@pytest.fixture(scope='module')
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run every scenario in its own fresh interpreter, all at once (each pays for importing logfire)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(('LOGFIRE_', 'OTEL_', 'HARNESS_'))}
    running = {}
    for name, (scenario, env) in SCENARIOS.items():
        running[name] = subprocess.Popen(
            [sys.executable, '-c', PROBE, scenario],
            cwd=tmp_path_factory.mktemp(name),  # no .logfire credentials file here
            env={**clean, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    reports = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=90)
        assert process.returncode == 0, f'{name}: {err}'
        reports[name] = json.loads(out.strip().splitlines()[-1])
    return reports


def test_configure_tracing_without_token_or_endpoint_sends_nothing(probes: dict[str, dict[str, Any]]) -> None:
    report = probes['default']
    assert report['mode'] == 'offline'  # a plain OpenTelemetry provider: logfire's pipeline exists to export
    assert report['logfire_configured'] is False
    assert report['token'] is None
    assert report['exporters'] == []  # no console, no Logfire, no OTLP exporter at all
    assert report['network_exporters'] == []
    assert report['metric_readers'] == 0
    assert report['recorder_installed'] is True
    assert report['pydantic_ai_instrumented'] is True
    assert report['spans'] == ['run_workflow r1', 'call x']


def test_configure_tracing_honours_an_otlp_endpoint(probes: dict[str, dict[str, Any]]) -> None:
    report = probes['endpoint']
    assert report['mode'] == 'logfire'
    assert report['network_exporters'] == ['OTLPSpanExporter']
    assert report['recorder_installed'] is True


def test_configure_tracing_keeps_a_users_own_opentelemetry_setup(probes: dict[str, dict[str, Any]]) -> None:
    report = probes['user-otel']
    assert report['mode'] == 'user-opentelemetry'
    assert report['logfire_configured'] is False
    assert report['recorder_installed'] is True
    assert report['pydantic_ai_instrumented'] is False
    assert report['spans'] == ['run_workflow r1', 'call x']


def test_configure_tracing_can_be_switched_off(probes: dict[str, dict[str, Any]]) -> None:
    report = probes['off']
    assert report['mode'] == 'off'
    assert report['logfire_configured'] is False
    assert report['recorder_installed'] is False
    assert report['spans'] == []
