"""Issue 5, done when: one trace per orchestrator run, the same tree offline, over OTLP, across a crash.

1. In process, with logfire's `capfire`: orchestrator agent run -> run_workflow tool -> `run_workflow
   {run_id}` -> `check`, three overlapping `call reviewer` spans (each holding the reviewer agent's own
   pydantic-ai spans) and one `call summarizer`, all in one trace; the run store holds the same tree.
2. In a fresh process configured only by `OTEL_EXPORTER_OTLP_ENDPOINT`: the same tree arrives as
   OTLP/HTTP protobuf on a real socket.
3. A run SIGKILLed mid-way and resumed in another fresh process stays in its original trace.
4. With no token and no endpoint nothing leaves the machine, and `harness trace RUN` prints the tree.

Two worker processes do 2-4, because tracing is configured once per process from its environment:
`otlp` sends the fan-out to the receiver, then runs a workflow that freezes mid-way and is SIGKILLed;
`offline`, started alongside, runs the fan-out with no tracing setup, then resumes the killed run.
`harness trace` runs in this process.
"""

from __future__ import annotations

import gzip
import http.server
import io
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from logfire.testing import CaptureLogfire
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from rich.console import Console

from harness import Harness
from harness._store import RunStore
from harness._tracing._setup import install_recorder
from harness._tracing._tree import render_tree

WORKER = Path(__file__).parent / 'helpers' / 'trace_worker.py'
sys.path.insert(0, str(WORKER.parent))
from trace_worker import FANOUT, SLOW_VALUE  # noqa: E402

Tree = tuple[str, tuple['Tree', ...]]
"""A span as (name, children), children in start order: an exact, id-free picture of a trace."""


def agent_run(agent: str) -> Tree:
    return (f'invoke_agent {agent}', (('chat test', ()),))


def run_tree(run_id: str) -> Tree:
    """The tree of the fan-out workflow, from its `run_workflow` span down."""
    return (
        f'run_workflow {run_id}',
        (
            ('check', ()),
            ('call reviewer', (agent_run('reviewer'),)),
            ('call reviewer', (agent_run('reviewer'),)),
            ('call reviewer', (agent_run('reviewer'),)),
            ('call summarizer', (agent_run('summarizer'),)),
        ),
    )


@dataclass
class Span:
    """One span, from whichever source (SDK span, stored dict, OTLP protobuf), ids as hex."""

    name: str
    span_id: str
    parent_id: str | None
    trace_id: str
    start: float
    end: float
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def tree_of(spans: list[Span], root: Span) -> Tree:
    children = sorted((s for s in spans if s.parent_id == root.span_id), key=lambda s: (s.start, s.end))
    return (root.name, tuple(tree_of(spans, c) for c in children))


def only(spans: list[Span], name: str) -> Span:
    [found] = [s for s in spans if s.name == name]
    return found


def children(spans: list[Span], parent: Span, name: str) -> list[Span]:
    return [s for s in spans if s.parent_id == parent.span_id and s.name == name]


def assert_parallel_then_summary(spans: list[Span], run: Span) -> None:
    """The three reviewer calls overlap in time; the summarizer starts after all of them ended."""
    reviews = children(spans, run, 'call reviewer')
    [summary] = children(spans, run, 'call summarizer')
    assert len(reviews) == 3
    assert max(r.start for r in reviews) < min(r.end for r in reviews), 'the reviewer calls did not overlap'
    assert summary.start >= max(r.end for r in reviews)
    assert sorted(r.attributes['harness.seq'] for r in reviews) == [1, 2, 3]
    assert summary.attributes['harness.seq'] == 4


def from_stored(spans: list[dict[str, Any]]) -> list[Span]:
    return [
        Span(s['name'], s['span_id'], s['parent_span_id'], s['trace_id'], s['start'], s['end'], s['attributes'])
        for s in spans
    ]


# -- an OTLP/HTTP receiver on a real socket -------------------------------------------------------------------


class Receiver:
    """Accepts OTLP/HTTP POSTs on 127.0.0.1; keeps the decoded spans of every `/v1/traces` request."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.paths: list[str] = []
        self.lock = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                if self.headers.get('Content-Encoding') == 'gzip':
                    body = gzip.decompress(body)
                receiver.accept(self.path, body)
                self.send_response(200)
                self.send_header('Content-Type', 'application/x-protobuf')
                self.send_header('Content-Length', '0')
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.endpoint = f'http://127.0.0.1:{self.server.server_port}'
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def accept(self, path: str, body: bytes) -> None:
        spans = []
        if path == '/v1/traces':
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: plain(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for s in scope_spans.spans:
                        attributes = {a.key: plain(a.value) for a in s.attributes}
                        if attributes.get('logfire.span_type') == 'pending_span':
                            continue
                        spans.append(
                            Span(
                                name=s.name,
                                span_id=s.span_id.hex(),
                                parent_id=s.parent_span_id.hex() or None,
                                trace_id=s.trace_id.hex(),
                                start=s.start_time_unix_nano / 1e9,
                                end=s.end_time_unix_nano / 1e9,
                                attributes=attributes,
                                resource=resource,
                                events=[(e.name, {a.key: plain(a.value) for a in e.attributes}) for e in s.events],
                            )
                        )
        with self.lock:
            self.paths.append(path)
            self.spans.extend(spans)
            self.lock.notify_all()

    def wait_for(self, arrived: Callable[[], bool], timeout: float = 60) -> None:
        """Block until `arrived()` holds, checked as each export request comes in."""
        with self.lock:
            assert self.lock.wait_for(arrived, timeout), f'not received within {timeout}s: {self.paths}'

    def from_pid(self, pid: int) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.resource.get('process.pid') == pid]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof('value')
    if kind == 'array_value':
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


# -- the subprocesses --------------------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any tracing setup, token or model key."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(('LOGFIRE_', 'OTEL_', 'HARNESS_')) and not k.endswith('_API_KEY')
    }
    return {**env, 'PYTHONUNBUFFERED': '1', **extra}


def said(child: Any, key: str) -> Any:
    """The worker's next line, a JSON object about `key`; its value."""
    line = child.line()
    assert line.startswith('{'), f'{line}\n{child.describe()}'
    message = json.loads(line)
    assert key in message, f'{message}\n{child.describe()}'
    return message[key]


@dataclass
class Traced:
    """What the two worker processes did and said."""

    otlp_pid: int
    otlp_store: Path
    fanout_run_id: str
    fanout_trace_id: str
    offline_store: Path
    offline_run_id: str
    crash_store: Path
    crash_run_id: str
    status_after_kill: str
    resumed: dict[str, Any]
    report: dict[str, Any]


@pytest.fixture(scope='module')
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope='module')
def traced(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver, spawn: Callable[..., Any]) -> Traced:
    """Both workers start at once; the offline one resumes the run the OTLP one was killed in."""
    tmp = tmp_path_factory.mktemp('tracing')  # no .logfire credentials file in here
    worker = [sys.executable, str(WORKER)]
    otlp = spawn(
        [*worker, 'otlp', str(tmp)],
        cwd=tmp,
        env=clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY='20'),
    )
    offline = spawn([*worker, 'offline', str(tmp)], cwd=tmp, env=clean_env())

    fanout_run_id = said(otlp, 'fanout')['run_id']  # flushed before it said so: its spans are at the receiver
    [fanout_run] = [s for s in receiver.from_pid(otlp.pid) if s.name == f'run_workflow {fanout_run_id}']
    line = otlp.line()
    assert line.startswith('run '), f'{line}\n{otlp.describe()}'
    crash_run_id = line.split()[1]
    assert otlp.line() == 'frozen', otlp.describe()  # call #HANG_SEQ is executing and never returns
    # Kill it once spans of calls it finished have reached the receiver (its exporter sends every 20 ms).
    receiver.wait_for(lambda: any(s.name == 'call slow' for s in receiver.from_pid(otlp.pid)))
    otlp.kill()
    with RunStore(str(tmp / 'crash.db')) as db:
        row = db.get_run(crash_run_id)
        assert row is not None
        status_after_kill = row.status

    offline_run_id = said(offline, 'fanout')['run_id']
    offline.send(json.dumps({'store': str(tmp / 'crash.db'), 'run_id': crash_run_id}))
    resumed = said(offline, 'resumed')
    report = said(offline, 'report')
    offline.finish()
    return Traced(
        otlp_pid=otlp.pid,
        otlp_store=tmp / 'otlp.db',
        fanout_run_id=fanout_run_id,
        fanout_trace_id=fanout_run.trace_id,
        offline_store=tmp / 'offline.db',
        offline_run_id=offline_run_id,
        crash_store=tmp / 'crash.db',
        crash_run_id=crash_run_id,
        status_after_kill=status_after_kill,
        resumed=resumed,
        report=report,
    )


# -- 1. in process, with capfire ------------------------------------------------------------------------------


def orchestrator_model(script: str) -> FunctionModel:
    """Sends one run_workflow script, then answers with what the tool returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script})])
        return ModelResponse(parts=[TextPart(f'done: {messages[-1].parts[-1].content}')])  # type: ignore[union-attr]

    return FunctionModel(respond)


def test_one_trace_from_orchestrator_to_sub_agents_with_capfire(capfire: CaptureLogfire, tmp_path: Path) -> None:
    install_recorder()  # capfire replaced logfire's provider: put the offline recorder on the new one
    Agent.instrument_all()
    h = Harness(store=str(tmp_path / 'runs.db'))
    try:
        h.add_agent(Agent(TestModel(custom_output_text='looks fine'), name='reviewer'))
        h.add_agent(Agent(TestModel(custom_output_text='all three look fine'), name='summarizer'))
        result = h.orchestrator(orchestrator_model(FANOUT)).run_sync('review a.py, b.py and c.py')
        assert result.output == 'done: all three look fine'
        [run] = h.runs()
        stored = h.store.spans(run.run_id)  # type: ignore[union-attr]
    finally:
        h.close()

    spans = [
        Span(
            name=s.name,
            span_id=format(s.context.span_id, '016x'),
            parent_id=format(s.parent.span_id, '016x') if s.parent else None,
            trace_id=format(s.context.trace_id, '032x'),
            start=(s.start_time or 0) / 1e9,
            end=(s.end_time or 0) / 1e9,
            attributes=dict(s.attributes or {}),
        )
        for s in capfire.exporter.exported_spans
        if (s.attributes or {}).get('logfire.span_type') != 'pending_span'
    ]
    [root] = [s for s in spans if s.parent_id is None]
    assert tree_of(spans, root) == (
        'invoke_agent orchestrator',
        (
            ('chat function:respond:', ()),
            ('execute_tool run_workflow', (run_tree(run.run_id),)),
            ('chat function:respond:', ()),
        ),
    )
    assert {s.trace_id for s in spans} == {root.trace_id}, 'not one trace'
    workflow = only(spans, f'run_workflow {run.run_id}')
    assert workflow.attributes['harness.mode'] == 'run'
    assert workflow.attributes['harness.status'] == 'completed'
    assert_parallel_then_summary(spans, workflow)
    for call in children(spans, workflow, 'call reviewer'):
        assert call.attributes['harness.callee'] == 'reviewer'
        assert call.attributes['harness.run_id'] == run.run_id
        assert call.attributes['harness.status'] == 'ok'
        [agent_span] = children(spans, call, 'invoke_agent reviewer')
        assert agent_span.attributes['gen_ai.agent.name'] == 'reviewer'

    # The run store holds the same spans (ids, parents, trace), from `run_workflow` down, each once.
    offline = from_stored(stored)
    assert len(offline) == len({s.span_id for s in offline}) == 14
    assert tree_of(offline, only(offline, workflow.name)) == run_tree(run.run_id)
    subtree_ids = set()
    pending = [workflow.span_id]
    while pending:
        current = pending.pop()
        subtree_ids.add(current)
        pending.extend(s.span_id for s in spans if s.parent_id == current)
    assert {(s.span_id, s.parent_id, s.trace_id, s.name) for s in offline} == {
        (s.span_id, s.parent_id, s.trace_id, s.name) for s in spans if s.span_id in subtree_ids
    }
    assert run.trace_context is not None and root.trace_id in run.trace_context
    text = rendered(stored)
    for name in (
        f'run_workflow {run.run_id}',
        'check',
        'call reviewer',
        'invoke_agent reviewer',
        'chat test',
        'call summarizer',
        'invoke_agent summarizer',
    ):
        assert name in text


@pytest.mark.parametrize('trace_values', [True, False])
def test_log_and_phase_are_events_of_the_run_span(capfire: CaptureLogfire, trace_values: bool) -> None:
    """Each `log`/`phase` is a `progress` event on the `run_workflow` span, with its kind and seq (and its text
    unless `trace_values=False` keeps values out of the spans)."""
    install_recorder()  # capfire replaced logfire's provider: put the offline recorder on the new one
    h = Harness(store=':memory:', trace_values=trace_values)
    try:

        @h.tool
        async def double(*, x: int) -> int:
            return 2 * x

        result = h.run_sync('phase("start")\ny = await double(x=1)\nlog(f"y is {y}")\ny')
    finally:
        h.close()
    [workflow] = [
        s
        for s in capfire.exporter.exported_spans
        if s.name == f'run_workflow {result.run_id}' and (s.attributes or {}).get('logfire.span_type') != 'pending_span'
    ]
    events = [(e.name, dict(e.attributes or {})) for e in workflow.events if e.name == 'progress']
    text = (lambda t: {'harness.progress.text': t}) if trace_values else (lambda t: {})
    assert events == [
        ('progress', {'harness.progress.kind': 'phase', 'harness.seq': 1, **text('start')}),
        ('progress', {'harness.progress.kind': 'log', 'harness.seq': 3, **text('y is 2')}),
    ]


def rendered(stored: list[dict[str, Any]], width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(render_tree(stored))
    return console.file.getvalue()  # type: ignore[attr-defined]


# -- 2. over a real socket, as OTLP/HTTP protobuf ---------------------------------------------------------------


def test_otlp_endpoint_receives_the_same_tree(traced: Traced, receiver: Receiver) -> None:
    run_id = traced.fanout_run_id
    spans = receiver.from_pid(traced.otlp_pid)
    assert '/v1/traces' in receiver.paths
    workflow = only(spans, f'run_workflow {run_id}')
    assert workflow.parent_id is None
    trace = [s for s in spans if s.trace_id == workflow.trace_id]
    assert tree_of(trace, workflow) == run_tree(run_id)
    assert workflow.attributes['harness.run_id'] == run_id
    assert_parallel_then_summary(trace, workflow)
    for call in children(trace, workflow, 'call reviewer') + children(trace, workflow, 'call summarizer'):
        assert call.attributes['harness.run_id'] == run_id
        assert call.attributes['harness.status'] == 'ok'
    # What arrived is what the worker stored for the offline view: same ids, parents and trace.
    with RunStore(str(traced.otlp_store)) as db:
        stored = from_stored(db.spans(run_id))
    assert {(s.name, s.span_id, s.parent_id, s.trace_id) for s in stored} == {
        (s.name, s.span_id, s.parent_id, s.trace_id) for s in trace
    }


# -- 3. resumed after SIGKILL, in the same trace -----------------------------------------------------------


def test_resumed_run_continues_the_original_trace(traced: Traced, receiver: Receiver) -> None:
    run_id = traced.crash_run_id
    assert traced.status_after_kill != 'completed', 'the kill came after the run ended'
    assert traced.resumed == {'run_id': run_id, 'value': SLOW_VALUE}
    with RunStore(str(traced.crash_store)) as db:
        row = db.get_run(run_id)
        stored = from_stored(db.spans(run_id))
    assert row is not None and row.status == 'completed'
    assert row.trace_context is not None
    match = re.fullmatch(r'00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}', row.trace_context)
    assert match, row.trace_context
    trace_id, original_run_span = match.groups()

    # The original part, as the killed process exported it before it died: the check and some calls
    # (that process's fan-out, an earlier and separate trace, left aside).
    original = [
        s
        for s in receiver.from_pid(traced.otlp_pid)
        if s.trace_id != traced.fanout_trace_id and (s.attributes.get('harness.run_id') == run_id or s.name == 'check')
    ]
    assert any(s.name == 'call slow' for s in original)
    assert any(s.name == 'check' for s in original)
    assert {s.trace_id for s in original} == {trace_id}
    assert {s.parent_id for s in original} == {original_run_span}
    assert not any(s.name.startswith('run_workflow') for s in original), 'the original run span never ended'

    # The resumed part, as the resuming process stored it: the same trace, under the original run span.
    assert stored, 'the resumed run stored no spans'
    assert {s.trace_id for s in stored} == {trace_id}
    resumed = only(stored, f'run_workflow {run_id}')
    assert resumed.attributes['harness.mode'] == 'resume'
    assert resumed.parent_id == original_run_span
    assert resumed.span_id != original_run_span
    calls = [s for s in stored if s.name == 'call slow']
    assert calls and all(c.parent_id == resumed.span_id for c in calls)
    assert any(c.attributes['harness.source'] == 'live' for c in calls)
    assert max(c.attributes['harness.seq'] for c in calls) == 24

    # Every span of this run that went over OTLP is in that one trace too.
    exported = [s for s in receiver.spans if s.attributes.get('harness.run_id') == run_id]
    assert {s.resource.get('process.pid') for s in exported} >= {traced.otlp_pid}
    assert {s.trace_id for s in exported} == {trace_id}


# -- 4. offline: nothing sent, and `harness trace` shows the tree -----------------------------------------


def test_without_token_or_endpoint_nothing_is_sent(traced: Traced) -> None:
    report = traced.report  # covers the offline fan-out and the resume of the killed run
    assert report['mode'] == 'offline'
    assert report['exporters'] == []
    assert report['connections'] == []
    with RunStore(str(traced.offline_store)) as db:
        stored = from_stored(db.spans(traced.offline_run_id))
    assert tree_of(stored, only(stored, f'run_workflow {traced.offline_run_id}')) == run_tree(traced.offline_run_id)


CLI_SCRIPT = """\
import asyncio
source = await read_file(path="a.py")
reviews = await asyncio.gather(
    reviewer(path="a.py", source=source), reviewer(path="a.py", source=source, focus="bugs")
)
await summarizer(task=str(reviews))
"""


def test_harness_trace_prints_the_run_tree(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`harness exec`, then `harness trace RUN` (in this process: the tree is the point, not the process)."""
    workspace = tmp_path / 'ws'
    workspace.mkdir()
    (workspace / 'a.py').write_text('def double(x):\n    return x * 2\n')
    (tmp_path / 'flow.py').write_text(CLI_SCRIPT)
    store = tmp_path / 'cli.db'
    ran = cli(
        ['exec', str(tmp_path / 'flow.py'), '--json', '--store', str(store), '--root', str(workspace)],
        cwd=tmp_path,
        columns=200,
    )
    assert ran.exit_code == 0, ran.describe()
    run_id = json.loads(ran.stdout.strip().splitlines()[-1])['run_id']
    shown = cli(['trace', run_id, '--store', str(store)], cwd=tmp_path, columns=200)
    assert shown.exit_code == 0, shown.describe()
    out = shown.stdout
    with RunStore(str(store)) as db:
        stored = db.spans(run_id)
    spans = from_stored(stored)
    workflow = only(spans, f'run_workflow {run_id}')
    assert [s.name for s in spans if s.parent_id == workflow.span_id] == [
        'check',
        'call read_file',
        'call reviewer',
        'call reviewer',
        'call summarizer',
    ]
    lines = out.rstrip('\n').splitlines()
    assert len(lines) == len(spans)
    assert lines[0].startswith(f'run_workflow {run_id}')
    assert out == rendered(stored)
    for span in spans:
        assert span.name in out
