"""Issue 13, done when: `harness ask` against a real OTLP/HTTP receiver sends the first turn's trace with
the orchestrator at its root, the nested tree below it, and the failing call's real exception on its span.

One real `harness ask` process (tracing is configured once per process, from its environment): its model
is pydantic-ai's OpenAI client talking to a fake OpenAI-compatible server over HTTP (`HARNESS_BASE_URL`,
streamed), its spans go to an OTLP/HTTP receiver (`OTEL_EXPORTER_OTLP_ENDPOINT`). The script the model
writes calls `flaky`, which raises `ValueError`, and `checker`, a pydantic-ai Agent whose responses carry
tokens of a priced model. Then, in this process, `show`, `runs` and `trace` read the same run back.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import MODEL, FakeOpenAI, Turn
from test_tracing import Receiver, clean_env, tree_of

HARNESS = str(Path(sys.executable).with_name('harness'))

AGENTS_MODULE = '''\
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage


async def flaky(*, item: str) -> str:
    """Check one item (it always fails)."""
    raise ValueError(f"cannot handle {item}")


def _priced(messages, info):
    return ModelResponse(parts=[TextPart("fine")], usage=RequestUsage(input_tokens=1000, output_tokens=100),
                         model_name="gpt-4o")


checker = Agent(FunctionModel(_priced, model_name="gpt-4o"), name="checker")
agents = [flaky, checker]
'''
SCRIPT = """\
outcome = await settled(flaky(item="a"))
verdict = await checker(task="is it fine?")
{"flaky_ok": outcome["ok"], "verdict": verdict}
"""
ANSWER = ['## Result\n\n', '- `flaky` **failed**\n', '- the checker says fine\n']
GPT_4O_COST = 1000 * 2.5e-6 + 100 * 10e-6  # genai-prices: $2.5 / $10 per million tokens


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def test_ask_sends_one_trace_from_the_orchestrator_down(
    tmp_path: Path, receiver: Receiver, spawn: Callable[..., Any], cli: Callable[..., Any]
) -> None:
    (tmp_path / 'checks.py').write_text(AGENTS_MODULE)
    fake = FakeOpenAI([Turn(script=SCRIPT, usage=(300, 40)), Turn(chunks=ANSWER, usage=(500, 20))])
    store = tmp_path / 'runs.db'
    env = clean_env(
        HARNESS_BASE_URL=fake.base_url,
        HARNESS_MODEL=MODEL,
        HARNESS_STORE=str(store),
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY='20',
        COLUMNS='200',
    )
    try:
        child = spawn([HARNESS, 'ask', 'check item a', '--agents', 'checks:agents'], cwd=tmp_path, env=env)
        out = child.finish()
    finally:
        fake.close()
    stderr = ''.join(child.stderr)
    assert 'Traceback' not in stderr and 'Failed to export' not in stderr, stderr
    assert all(r['stream'] is True for r in fake.requests) and len(fake.requests) == 2  # streamed requests

    # The turn's trace, as it arrived: one trace, the orchestrator's agent run at its root.
    spans = receiver.from_pid(child.pid)
    [root] = [s for s in spans if s.name == 'invoke_agent orchestrator']
    assert root.parent_id is None
    trace = [s for s in spans if s.trace_id == root.trace_id]
    [run] = [s for s in trace if s.name.startswith('run_workflow ')]
    run_id = run.attributes['harness.run_id']
    assert tree_of(trace, root) == (
        'invoke_agent orchestrator',
        (
            (f'chat {MODEL}', ()),
            (
                'execute_tool run_workflow',
                (
                    (
                        f'run_workflow {run_id}',
                        (
                            ('check', ()),
                            ('call flaky', ()),
                            ('call checker', (('invoke_agent checker', (('chat gpt-4o', ()),)),)),
                        ),
                    ),
                ),
            ),
            (f'chat {MODEL}', ()),
        ),
    )
    assert {s.trace_id for s in spans if s.attributes.get('harness.run_id') == run_id} == {root.trace_id}

    # The failing call: an error span, the script saw only the type, the operator gets the exception.
    [flaky] = [s for s in trace if s.name == 'call flaky']
    assert flaky.attributes['harness.status'] == 'error'
    [(name, exception)] = flaky.events
    assert name == 'exception'
    assert exception['exception.type'] == 'ValueError'
    assert exception['exception.message'] == 'cannot handle a'
    assert 'raise ValueError(f"cannot handle {item}")' in exception['exception.stacktrace']
    assert 'checks.py' in exception['exception.stacktrace']

    # Token and cost totals: the sub-agents' on the run span.
    assert run.attributes['harness.usage.input_tokens'] == 1000
    assert run.attributes['harness.usage.output_tokens'] == 100
    assert run.attributes['harness.usage.cost'] == pytest.approx(GPT_4O_COST)

    # Traces only: a traces-only backend is not sent metrics or logs (no 405s printed after the command).
    assert set(receiver.paths) == {'/v1/traces'}, receiver.paths

    # The terminal: the answer, the runs with their costs, and where the trace went.
    assert 'script · attempt 1' in out and 'outcome = await settled(flaky(item="a"))' in out
    assert '✗ #1 flaky: flaky failed with ValueError' in out
    assert 'Result' in [line.strip() for line in out.splitlines()] and '## Result' not in out  # a heading
    assert '• flaky failed' in out
    assert f'trace {root.trace_id} sent to {receiver.endpoint}' in out
    assert re.search(r'sub-agents 1,000 in / 100 out tokens · \$0\.0035', out), out
    assert re.search(r'orchestrator 2 request\(s\), 800 in / 60 out tokens', out), out
    footer = re.search(r'^run (?P<id>[0-9a-f]{7,}) · 2 call\(s\)$', out, re.M)
    assert footer and run_id.startswith(footer['id']), out

    # `show`, `runs` and `trace` read it back: the real exception, the answer, the totals.
    env = {'HARNESS_STORE': str(store)}
    shown = cli(['show', footer['id']], cwd=tmp_path, env=env, columns=200)
    assert shown.exit_code == 0, shown.describe()
    assert 'raised ValueError: cannot handle a' in shown.stdout
    assert 'you> check item a' in shown.stdout and 'the checker says fine' in shown.stdout
    assert 'sub-agents: 1,000 in / 100 out tokens · $0.0035' in shown.stdout
    assert 'orchestrator: 800 in / 60 out tokens' in shown.stdout
    call = cli(['show', footer['id'], '--call', '1'], cwd=tmp_path, env=env, columns=200)
    assert 'raise ValueError(f"cannot handle {item}")' in call.stdout, call.describe()
    as_json = json.loads(cli(['show', footer['id'], '--json'], cwd=tmp_path, env=env).stdout)
    assert as_json['usage']['cost'] == pytest.approx(GPT_4O_COST)
    assert as_json['calls'][0]['exceptions'][0]['type'] == 'ValueError'
    assert as_json['turn']['answer'] == ''.join(ANSWER)
    listing = cli(['runs'], cwd=tmp_path, env=env, columns=200).stdout
    assert re.search(rf'^\s*{footer["id"]}\s.*completed\s+2\s.*\$0\.0035', listing, re.M), listing
    tree = cli(['trace', footer['id']], cwd=tmp_path, env=env, columns=200).stdout
    assert 'exception ValueError: cannot handle a' in tree
    assert 'sub-agents: tokens in=1000 out=100 cost=$0.0035' in tree
    # ... under the orchestrator's own agent run, with its two model requests and their tokens, as OTLP has them.
    lines = tree.splitlines()
    assert lines[0].startswith('invoke_agent orchestrator'), tree
    requests = [line for line in lines if f'chat {MODEL}' in line]
    assert len(requests) == 2 and 'tokens in=300 out=40' in requests[0] and 'tokens in=500 out=20' in requests[1]
    assert tree.index(requests[0]) < tree.index(f'run_workflow {run_id}') < tree.index(requests[1])
    full = cli(['trace', footer['id'], '--full'], cwd=tmp_path, env=env, columns=200).stdout
    assert 'raise ValueError(f"cannot handle {item}")' in full
