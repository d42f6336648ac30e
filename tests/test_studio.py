"""The studio's server (`harness ui`): its JSON API, its actions and its chat stream, over real HTTP.

Each test starts the real Starlette app under uvicorn on a free port of 127.0.0.1 (in a thread of this process,
so the orchestrator can be a pydantic-ai `FunctionModel`) and talks to it with urllib, as the page does with
fetch. The runs it shows are made first by another Harness on the same store file and catalog, as a `harness
exec` would have made them. The page itself, in a real browser, is `test_studio_browser.py`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from harness import CallRecord, Harness
from harness._records import RunRow
from subagents import register_builtins
from subagents.planner import demo_model

HOLD: dict[str, Any] = {}
"""`slow_step` waits on `HOLD['go']` while it is set (the interrupted-run test), and says so on `HOLD['started']`."""
HELD: dict[str, threading.Event] = {}
"""The same across threads, for a call the studio's own loop runs: `HELD['gate']`, `HELD['entered']`."""


async def send_email(*, to: str, body: str) -> str:
    """Send an email; a person approves each one."""
    return f'sent to {to}'


async def lookup(*, key: str) -> dict[str, int]:
    """The ledger's counts for `key`."""
    if key == 'missing':
        raise KeyError(f'no entry {key!r} in the ledger')
    return {'count': len(key)}


async def slow_step(*, n: int) -> int:
    """A step that can be held until the run is interrupted."""
    if 'go' in HOLD:
        HOLD['started'].set()
        await HOLD['go'].wait()
    if 'gate' in HELD:
        HELD['entered'].set()
        await asyncio.to_thread(HELD['gate'].wait, 60)
    return n * 2


def catalog(h: Harness) -> Harness:
    """The one catalog of these tests: a run is resumed, replayed and forked only under the catalog it ran on."""
    register_builtins(h, model=None)
    h.tool(side_effect=True, approval=True)(send_email)
    h.tool(lookup)
    h.tool(slow_step)
    return h


@dataclass
class Studio:
    url: str
    harness: Harness
    server: Any = None
    thread: Any = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = {'content-type': 'application/json'} if data is not None else {}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={**sent, **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def get(self, path: str) -> Any:
        status, _, body = self.request('GET', path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def post(self, path: str, body: Any = None, *, expect: int = 200) -> Any:
        status, _, data = self.request('POST', path, body if body is not None else {})
        assert status == expect, (path, status, data)
        return json.loads(data)

    def chat(self, conversation_id: str, text: str | None, *, path: str = '/api/chat') -> list[dict[str, Any]]:
        """One chat request; the chunks of the stream it answers with (its `data:` lines, in order)."""
        parts = [{'type': 'text', 'text': text}]
        messages = [] if text is None else [{'id': f'm{len(text)}', 'role': 'user', 'parts': parts}]
        status, headers, body = self.request(
            'POST', path, {'trigger': 'submit-message', 'id': conversation_id, 'messages': messages}
        )
        assert status == 200, body
        assert headers['content-type'].startswith('text/event-stream')
        lines = [line[6:] for line in body.decode().splitlines() if line.startswith('data: ')]
        assert lines[-1] == '[DONE]'
        return [json.loads(line) for line in lines[:-1]]


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[Callable[..., Studio]]:
    """Start the studio on a store (`model`: the orchestrator's); stopped, and its Harness closed, after the test."""
    import uvicorn

    from harness._studio._app import create_app, listen

    started: list[tuple[uvicorn.Server, threading.Thread, Harness]] = []

    def start(model: Any = None, review: Any = None, **config: Any) -> Studio:
        h = catalog(Harness(store=str(tmp_path / 'runs.db'), review=review))
        app = create_app(h, model=model or demo_model(), model_label='test model')
        sock = listen(0)
        server = uvicorn.Server(uvicorn.Config(app, log_level='warning', lifespan='on', **config))
        thread = threading.Thread(target=server.run, kwargs={'sockets': [sock]}, daemon=True)
        thread.start()
        started.append((server, thread, h))
        return Studio(f'http://127.0.0.1:{sock.getsockname()[1]}', h, server, thread)

    yield start
    for server, thread, h in started:
        server.should_exit = True
        thread.join(30)
        h.close()


@pytest.fixture
def runs(tmp_path: Path) -> Callable[..., Any]:
    """Make runs in the store the studio will show, with a Harness of the same catalog (closed after each)."""

    def make(code: str, **kwargs: Any) -> Any:
        with catalog(Harness(store=str(tmp_path / 'runs.db'))) as h:
            try:
                return h.run_sync(code, **kwargs)
            except Exception as exc:
                return exc

    return make


def test_runs_and_one_run(studio: Callable[..., Studio], runs: Callable[..., Any]) -> None:
    ok = runs('import asyncio\ncounts = await asyncio.gather(lookup(key="ab"), lookup(key="abc"))\ncounts\n')
    failed = runs('found = await lookup(key="here")\ngone = await lookup(key="missing")\ngone\n')
    waiting = runs('sent = await send_email(to="a@example.com", body="hi")\nsent\n')
    s = studio()

    listing = s.get('/api/runs')
    assert [r['run_id'] for r in listing['runs']] == [waiting.run_id, failed.run_id, ok.run_id]  # newest first
    assert listing['counts']['completed'] == 1 and listing['counts']['failed'] == 1
    assert listing['counts']['waiting'] == 1 and listing['total'] == 3
    first = listing['runs'][2]
    assert first['status'] == 'completed' and first['calls'] == 2 and first['duration'] > 0
    assert first['short_id'] == ok.run_id[: len(first['short_id'])] and len(first['short_id']) >= 7
    only = s.get('/api/runs?status=failed&status=waiting')
    assert {r['run_id'] for r in only['runs']} == {failed.run_id, waiting.run_id}

    page = s.get(f'/api/runs/{failed.run_id[:9]}')  # a prefix names the run
    assert page['run_id'] == failed.run_id and page['status'] == 'failed' and page['calls_count'] == 2
    assert page['script'].startswith('found = await lookup')
    one, two = page['calls']
    assert one['arguments'] == {'key': 'here'} and one['result'] == {'count': 4} and one['status'] == 'ok'
    assert two['status'] == 'error' and two['error'] == 'lookup failed with KeyError'  # what the script saw
    assert two['exceptions'][0]['type'] == 'KeyError'  # and what the operator sees
    assert "no entry 'missing' in the ledger" in two['exceptions'][0]['message']
    assert 'Traceback' in two['exceptions'][0]['stacktrace']
    assert two['started'] >= one['started'] and two['duration'] is not None and two['attempt'] == 1
    assert 'lookup failed with KeyError' in page['error']
    [root] = page['spans']
    assert root['name'] == f'run_workflow {failed.run_id}' and root['status'] == 'error'
    names = [child['name'] for child in root['children']]
    assert names == ['check', 'call lookup', 'call lookup']
    assert root['children'][2]['exceptions'][0]['type'] == 'KeyError'
    graph = page['graph']
    assert [(n['callee'], n['line'], n['taken']) for n in graph['nodes']] == [('lookup', 1, True), ('lookup', 2, True)]
    taken = {(e['from'], e['to']) for e in graph['edges'] if e['taken']}
    assert taken == {('start', 'n0'), ('n0', 'n1'), ('n1', 'end')}
    assert 'flowchart TD' in graph['mermaid'] and 'class n0,n1 taken' in graph['mermaid']
    assert page['actions'] == {'replay': True, 'resume': False, 'fork': True, 'decide': False}

    held = s.get(f'/api/runs/{waiting.run_id}')
    assert held['pending'] == [{'seq': 1, 'callee': 'send_email', 'arguments': {'to': 'a@example.com', 'body': 'hi'}}]
    assert held['actions']['decide'] and not held['actions']['resume']  # decide first; the page resumes then
    assert s.get('/api/pending')['pending'] == [{'run_id': waiting.run_id, **held['pending'][0]}]


def test_the_graph_draws_a_gather_and_a_branch_not_taken(studio: Callable[..., Studio], tmp_path: Path) -> None:
    """Both calls of one callee on a gather's line are taken, so are both edges out of the gather; the branch
    not taken calls a callee only the run's own catalog names (the studio runs without it)."""
    with catalog(Harness(store=str(tmp_path / 'runs.db'))) as h:

        @h.tool
        async def escalate(*, n: int) -> int:
            return n

        run = h.run_sync(
            'import asyncio\na, b = await asyncio.gather(lookup(key="a"), lookup(key="bc"))\n'
            'if a["count"] < b["count"]:\n    done = await slow_step(n=1)\n'
            'else:\n    done = await escalate(n=2)\ndone\n'
        )
    graph = studio().get(f'/api/runs/{run.run_id}')['graph']
    assert [(n['callee'], n['line'], n['taken']) for n in graph['nodes']] == [
        ('lookup', 2, True),
        ('lookup', 2, True),
        ('slow_step', 4, True),
        ('escalate', 6, False),
    ]
    taken = {(e['from'], e['to']) for e in graph['edges'] if e['taken']}
    assert taken == {('start', 'n0'), ('start', 'n1'), ('n0', 'n2'), ('n1', 'n2'), ('n2', 'end')}
    assert {(e['from'], e['to']) for e in graph['edges'] if not e['taken']} == {
        ('n0', 'n3'),
        ('n1', 'n3'),
        ('n3', 'end'),
    }


def test_requests_the_api_refuses(studio: Callable[..., Studio], runs: Callable[..., Any]) -> None:
    done = runs('await lookup(key="a")\n')
    s = studio()
    status, _, body = s.request('GET', '/api/runs/nothere')
    assert status == 404 and json.loads(body)['error'] == 'not_found'
    status, _, body = s.request('GET', '/api/runs?status=done')
    assert status == 400 and 'status' in json.loads(body)['message']
    # Not JSON: refused before anything runs (a page elsewhere cannot post JSON without a CORS preflight).
    plain = {'content-type': 'text/plain'}
    status, _, _ = s.request('POST', f'/api/runs/{done.run_id}/replay', raw=b'{}', headers=plain)
    assert status == 415
    status, _, _ = s.request('POST', '/api/chat', raw=b'{}', headers=plain)
    assert status == 415
    # Another host name (DNS rebinding) is refused; the page's own host is served, with its content policy.
    status, _, _ = s.request('GET', '/api/runs', headers={'host': 'evil.example'})
    assert status == 400
    status, headers, body = s.request('GET', f'/runs/{done.run_id}')
    assert status == 200 and b'/static/studio.js' in body
    assert "script-src 'self'" in headers['content-security-policy']
    status, _, body = s.request('GET', '/static/studio.js')
    assert status == 200 and b'renderMarkdown' in body
    status, _, body = s.request('POST', f'/api/runs/{done.run_id}/explode', {})
    assert status == 404
    status, _, body = s.request('GET', '/api/conversations/nothing-here')
    assert status == 404 and json.loads(body)['error'] == 'not_found'
    status, _, body = s.request('POST', f'/api/runs/{done.run_id}/fork', {'at': 'first', 'result': 1})
    assert status == 400 and 'at must be a whole number' in json.loads(body)['message']


def test_approve_and_reject_then_resume(studio: Callable[..., Studio], runs: Callable[..., Any]) -> None:
    code = (
        'a = await send_email(to="a@example.com", body="one")\n'
        'try:\n    b = await send_email(to="b@example.com", body="two")\n'
        'except PermissionError as exc:\n    b = f"refused: {exc}"\n[a, b]\n'
    )
    waiting = runs(code)
    assert waiting.status == 'waiting'
    s = studio()
    decided = s.post(f'/api/runs/{waiting.run_id}/approve', {'seq': 1})
    assert decided['decided'] == [1] and decided['pending'] == []
    resumed = s.post(f'/api/runs/{waiting.run_id}/resume')
    assert resumed['status'] == 'waiting' and [p['seq'] for p in resumed['waiting']] == [2]  # the next one
    refused = s.post(f'/api/runs/{waiting.run_id}/reject', {'seq': 2}, expect=400)
    assert 'reason' in refused['message']
    s.post(f'/api/runs/{waiting.run_id}/reject', {'seq': 2, 'reason': 'not to b', 'by': 'ops lead'})
    resumed = s.post(f'/api/runs/{waiting.run_id}/resume')
    assert resumed['status'] == 'completed' and resumed['run_id'] == waiting.run_id
    assert resumed['value'] == ['sent to a@example.com', 'refused: send_email was rejected by ops lead: not to b']
    page = s.get(f'/api/runs/{waiting.run_id}')
    assert page['status'] == 'completed' and page['pending'] == []
    assert [(c['status'], c['decision']['approved']) for c in page['calls']] == [('ok', True), ('refused', False)]
    assert page['calls'][1]['decision']['reason'] == 'not to b'
    assert page['calls'][1]['decision']['decided_by'] == 'ops lead'


def test_a_plan_waits_on_the_run_page_and_is_approved_or_rejected(
    studio: Callable[..., Studio], tmp_path: Path
) -> None:
    code = 'a = await lookup(key="ab")\nawait send_email(to="a@example.com", body="one")\n'
    with catalog(Harness(store=str(tmp_path / 'runs.db'), review='side_effects')) as h:
        held, other = h.run_sync(code), h.run_sync(code)
    assert held.status == 'waiting' and held.plan is not None
    s = studio()
    page = s.get(f'/api/runs/{held.run_id}')
    assert page['plan']['bounds'] == {'lookup': 1, 'send_email': 1} and page['plan']['irreversible'] == ['send_email']
    assert 'bounds: lookup 1 call, send_email 1 call' in page['plan']['text'] and page['pending'] == []
    assert page['actions']['decide'] and not page['actions']['resume']
    assert [p['run_id'] for p in s.get('/api/pending')['plans']] == [held.run_id, other.run_id]
    assert s.post(f'/api/runs/{held.run_id}/approve', {})['decided'] == [0]
    resumed = s.post(f'/api/runs/{held.run_id}/resume')
    assert resumed['status'] == 'waiting' and [p['seq'] for p in resumed['waiting']] == [2]  # the gated call's own
    s.post(f'/api/runs/{other.run_id}/reject', {'reason': 'not today', 'by': 'ops lead'})
    rejected = s.get(f'/api/runs/{other.run_id}')
    assert rejected['status'] == 'failed' and rejected['plan'] is None and rejected['calls'] == []
    assert s.get('/api/pending')['plans'] == []


def test_replay_and_fork(studio: Callable[..., Studio], runs: Callable[..., Any]) -> None:
    done = runs('a = await lookup(key="ab")\nb = await lookup(key="abcd")\n[a["count"], b["count"]]\n')
    s = studio()
    replayed = s.post(f'/api/runs/{done.run_id}/replay')
    assert replayed['status'] == 'completed' and replayed['value'] == [2, 4] and replayed['stored'] is False
    assert [c['source'] for c in replayed['calls']] == ['replayed', 'replayed']
    assert s.get('/api/runs')['total'] == 1  # a replay stores nothing

    forked = s.post(f'/api/runs/{done.run_id}/fork', {'at': 1, 'result': {'count': 40}})
    assert forked['status'] == 'completed' and forked['value'] == [40, 4] and forked['run_id'] != done.run_id
    child = s.get(f'/api/runs/{forked["run_id"]}')
    assert child['parent_run_id'] == done.run_id and child['fork_at'] == 1
    assert [c['source'] for c in child['calls']] == ['answered', 'live']  # #1 the given answer, #2 ran
    assert [f['run_id'] for f in s.get(f'/api/runs/{done.run_id}')['forks']] == [forked['run_id']]

    # The result is validated against the callee's return type: refused, and nothing ran.
    wrong = s.post(f'/api/runs/{done.run_id}/fork', {'at': 1, 'result': 'forty'}, expect=409)
    assert 'refused' in wrong['message'] and 'lookup' in wrong['message']
    assert s.get('/api/runs')['total'] == 2
    past = s.post(f'/api/runs/{done.run_id}/fork', {'at': 9, 'result': {'count': 1}}, expect=409)
    assert 'between 1 and 2' in past['message']


async def test_resume_an_interrupted_run(studio: Callable[..., Studio], tmp_path: Path) -> None:
    HOLD.update(go=asyncio.Event(), started=asyncio.Event())
    try:
        async with catalog(Harness(store=str(tmp_path / 'runs.db'))) as h:
            task = asyncio.create_task(h.run('x = await lookup(key="k")\ny = await slow_step(n=21)\n[x, y]\n'))
            await HOLD['started'].wait()  # the second call is running: stop the run there
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    finally:
        HOLD.clear()
    s = await asyncio.to_thread(studio)
    [row] = (await asyncio.to_thread(s.get, '/api/runs'))['runs']
    assert row['status'] == 'interrupted'
    page = await asyncio.to_thread(s.get, f'/api/runs/{row["run_id"]}')
    assert page['actions']['resume']
    resumed = await asyncio.to_thread(s.post, f'/api/runs/{row["run_id"]}/resume')
    assert resumed['status'] == 'completed' and resumed['value'] == [{'count': 1}, 42]
    page = await asyncio.to_thread(s.get, f'/api/runs/{row["run_id"]}')
    assert [c['source'] for c in page['calls']] == ['live', 'live'] and page['calls'][1]['attempt'] == 2


async def test_a_call_is_decided_only_once_its_run_stopped(studio: Callable[..., Studio], tmp_path: Path) -> None:
    """While this process still runs the run (its gated call journaled waiting, another call in flight), the
    page offers no decision and an approval is refused: it cannot take the run's hold from under it. Once the
    run stopped to wait, Approve and Resume finish it."""
    HOLD.update(go=asyncio.Event(), started=asyncio.Event())
    s = await asyncio.to_thread(studio)
    try:
        async with catalog(Harness(store=str(tmp_path / 'runs.db'))) as h:
            code = 'import asyncio\nawait asyncio.gather(send_email(to="a@example.com", body="hi"), slow_step(n=2))\n'
            task = asyncio.ensure_future(h.run(code))
            await HOLD['started'].wait()
            [row] = (await asyncio.to_thread(s.get, '/api/runs'))['runs']
            page = await asyncio.to_thread(s.get, f'/api/runs/{row["run_id"]}')
            assert (page['status'], [p['seq'] for p in page['pending']]) == ('running', [1])
            assert page['actions']['decide'] is False
            refused = await asyncio.to_thread(s.post, f'/api/runs/{row["run_id"]}/approve', {'seq': 1}, expect=409)
            assert refused['error'] == 'RunBusy' and 'active in this process' in refused['message']
            HOLD['go'].set()
            assert (await task).status == 'waiting'
    finally:
        HOLD.clear()
    assert (await asyncio.to_thread(s.get, f'/api/runs/{row["run_id"]}'))['actions']['decide'] is True
    await asyncio.to_thread(s.post, f'/api/runs/{row["run_id"]}/approve', {'seq': 1})
    resumed = await asyncio.to_thread(s.post, f'/api/runs/{row["run_id"]}/resume')
    assert (resumed['status'], resumed['value']) == ('completed', ['sent to a@example.com', 4])


def test_a_resume_cut_by_the_shutdown_still_records_its_ending(
    studio: Callable[..., Studio], runs: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped (Ctrl-C) while an approved run resumes, the studio cancels that request and waits for it to
    record the run `interrupted` (and give its hold back) before it closes the Harness: it is not left `running`
    with its store closed under it. On a busy machine its writes go through threads: forced here."""
    from harness._store import _journal

    waiting = runs('a = await send_email(to="a@example.com", body="hi")\nb = await slow_step(n=2)\n[a, b]\n')
    s = studio(timeout_graceful_shutdown=0)  # the grace period is over at once: in-flight requests are cancelled
    s.post(f'/api/runs/{waiting.run_id}/approve', {'seq': 1})
    HELD.update(gate=threading.Event(), entered=threading.Event())
    seen: list[tuple[str, Any]] = []
    closed = threading.Event()
    close = s.harness.aclose

    async def closing() -> None:  # how the run stands when the Harness (and its store) closes
        with sqlite3.connect(s.harness.store.path) as conn:  # type: ignore[union-attr]
            seen.append(conn.execute('SELECT status, owner FROM runs WHERE run_id = ?', (waiting.run_id,)).fetchone())
        closed.set()
        await close()

    monkeypatch.setattr(s.harness, 'aclose', closing)
    monkeypatch.setitem(_journal._slow, s.harness.store, 10_000)
    resume = threading.Thread(target=s.request, args=('POST', f'/api/runs/{waiting.run_id}/resume', {}))
    resume.start()
    try:
        assert HELD['entered'].wait(60)  # #1 sent, #2 running: the run is held by the studio
        s.server.should_exit = True
        assert closed.wait(60)
    finally:
        HELD['gate'].set()  # the cancelled step's thread ends: the server's loop can close its executor
        s.thread.join(60)
        HELD.clear()
        resume.join(60)
    assert seen == [('interrupted', None)]


def test_chat_streams_a_turn_and_keeps_the_conversation(studio: Callable[..., Studio]) -> None:
    s = studio()
    chunks = s.chat('conversation-one', 'what makes a good test?')
    types = [c['type'] for c in chunks]
    script = next(c for c in chunks if c['type'] == 'tool-input-available')
    assert script['toolName'] == 'run_workflow' and 'drafter(' in script['input']['code']
    calls = [c['data'] for c in chunks if c['type'] == 'data-call']
    assert [c['kind'] for c in calls].count('started') == 4 and [c['kind'] for c in calls].count('finished') == 4
    assert calls[0]['text'].startswith("drafter(task='what makes a good test?")
    # The calls ran while the script did: after the script was sent, before its result came back.
    assert types.index('tool-input-available') < types.index('data-call') < types.index('tool-output-available')
    deltas = [c['delta'] for c in chunks if c['type'] == 'text-delta']
    assert len(deltas) > 1  # streamed a few words at a time
    [turn] = [c['data'] for c in chunks if c['type'] == 'data-turn']
    assert turn['status'] == 'completed' and turn['turn'] == 1 and len(turn['runs']) == 1
    assert turn['runs'][0]['calls'] == 4 and turn['usage']['orchestrator']['requests'] == 2
    assert types.index('data-turn') > types.index('text-delta')

    second = s.chat('conversation-one', 'and why is it good?')
    assert [c['data']['turn'] for c in second if c['type'] == 'data-turn'] == [2]
    listed = s.get('/api/conversations')['conversations']
    assert [(c['conversation_id'], c['title'], c['turns']) for c in listed] == [
        ('conversation-one', 'what makes a good test?', 2)
    ]
    stored = s.get('/api/conversations/conversation-one')
    assert [t['prompt'] for t in stored['turns']] == ['what makes a good test?', 'and why is it good?']
    assert stored['turns'][0]['answer'] == ''.join(deltas)
    assert stored['turns'][0]['runs'][0]['calls_made'][0]['callee'] == 'drafter'
    # The second turn's model saw the first: the history lives on the server.
    messages = s.harness.store.get_conversation('conversation-one')
    assert messages is not None and messages.messages_json.count('what makes a good test?') >= 1
    run = s.get(f'/api/runs/{turn["runs"][0]["run_id"]}')
    assert run['turn']['prompt'] == 'what makes a good test?' and run['turn']['conversation_id'] == 'conversation-one'
    # Its span tree has the orchestrator at its root: its two model requests, the script's run below its tool call.
    [root] = run['spans']
    assert root['name'] == 'invoke_agent orchestrator', root['name']
    children = [child['name'] for child in root['children']]
    assert children[0].startswith('chat ') and children[-1].startswith('chat ') and len(children) == 3, children
    assert root['children'][1]['children'][0]['name'] == f'run_workflow {turn["runs"][0]["run_id"]}'
    assert s.get('/api/runs')['runs'][-1]['title'] == 'what makes a good test?'  # named by its turn's prompt


APPROVAL_SCRIPT = 'sent = await send_email(to="ops@example.com", body="deploy done")\nsent\n'


def approval_model(told: list[str] | None = None, script: str = APPROVAL_SCRIPT) -> FunctionModel:
    """An orchestrator that sends one email through a script (or runs `script`), then answers with what the script
    returned (`told`: collects the instructions of each request)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if told is not None:
            told.append(info.instructions or '')
        last = messages[-1]
        for part in last.parts if isinstance(last, ModelRequest) else []:
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f'Done: **{part.content}**.')])
        return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': script}, tool_call_id='mail')])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for part in respond(messages, info).parts:
            if isinstance(part, TextPart):
                for word in part.content.split(' '):
                    yield word + ' '
            elif isinstance(part, ToolCallPart):
                yield {
                    0: DeltaToolCall(
                        name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id
                    )
                }

    return FunctionModel(respond, stream_function=stream)


def test_a_scripts_progress_streams_in_the_chat_and_is_kept_for_the_run_page(studio: Callable[..., Studio]) -> None:
    script = 'phase("look up")\nfound = await lookup(key="ab")\nlog(f"count {found[\'count\']}")\nfound\n'
    s = studio(approval_model(script=script))
    chunks = s.chat('conversation-progress', 'count ab')
    live = [c['data'] for c in chunks if c['type'] == 'data-call']
    # As the script ran: the phase, the call, the log line, in that order; a log/phase is no call (no `started`).
    assert [d['progress']['text'] if d['kind'] == 'progress' else f'{d["kind"]} {d["callee"]}' for d in live] == [
        'look up',
        'started lookup',
        'finished lookup',
        'count 2',
    ]
    assert [d['progress'] for d in live if d['kind'] == 'progress'] == [
        {'kind': 'phase', 'text': 'look up'},
        {'kind': 'log', 'text': 'count 2'},
    ]
    [turn] = [c['data'] for c in chunks if c['type'] == 'data-turn']
    run_id = turn['runs'][0]['run_id']
    page = s.get(f'/api/runs/{run_id}')
    assert page['progress'] == [
        {'kind': 'phase', 'text': 'look up', 'seq': 1},
        {'kind': 'log', 'text': 'count 2', 'seq': 3},
    ]
    assert page['progress_dropped'] == 0
    stored = s.get('/api/conversations/conversation-progress')['turns'][0]['runs'][0]['calls_made']
    assert [c['progress'] for c in stored] == [
        {'kind': 'phase', 'text': 'look up'},
        None,
        {'kind': 'log', 'text': 'count 2'},
    ]  # the stored chat reads the same


def test_chat_waits_for_approval_then_continues(studio: Callable[..., Studio]) -> None:
    s = studio(approval_model())
    chunks = s.chat('conversation-two', 'tell ops the deploy is done')
    [turn] = [c['data'] for c in chunks if c['type'] == 'data-turn']
    assert turn['status'] == 'waiting'
    [run] = turn['waiting']
    assert run['pending'] == [
        {'seq': 1, 'callee': 'send_email', 'arguments': {'to': 'ops@example.com', 'body': 'deploy done'}}
    ]
    assert not [c for c in chunks if c['type'] == 'text-delta']  # no answer yet

    busy = s.request(
        'POST',
        '/api/chat',
        {
            'trigger': 'submit-message',
            'id': 'conversation-two',
            'messages': [{'id': 'x', 'role': 'user', 'parts': [{'type': 'text', 'text': 'hello?'}]}],
        },
    )
    assert busy[0] == 409 and 'waits for approval' in json.loads(busy[2])['message']

    s.post(f'/api/runs/{run["run_id"]}/approve', {'seq': 1})
    more = s.chat('conversation-two', None, path='/api/chat?continue=1')
    calls = [c['data'] for c in more if c['type'] == 'data-call']
    assert [(c['kind'], c['callee']) for c in calls] == [('started', 'send_email'), ('finished', 'send_email')]
    output = next(c for c in more if c['type'] == 'tool-output-available')
    assert output['output'] == 'sent to ops@example.com'
    answer = ''.join(c['delta'] for c in more if c['type'] == 'text-delta')
    assert answer.strip() == 'Done: **sent to ops@example.com**.'
    [turn] = [c['data'] for c in more if c['type'] == 'data-turn']
    assert turn['status'] == 'completed' and turn['turn'] == 1 and turn['runs'][0]['status'] == 'completed'
    stored = s.get('/api/conversations/conversation-two')['turns']
    assert [(t['turn'], t['status']) for t in stored] == [(1, 'completed')]
    assert s.get(f'/api/runs/{run["run_id"]}')['calls'][0]['decision']['approved'] is True
    again = s.request(
        'POST', '/api/chat?continue=1', {'trigger': 'submit-message', 'id': 'conversation-two', 'messages': []}
    )
    assert again[0] == 409  # nothing waits any more


def test_a_chat_turn_held_for_its_plan_goes_on_only_once_the_plan_is_decided(studio: Callable[..., Studio]) -> None:
    s = studio(approval_model(), review='always')
    [turn] = [c['data'] for c in s.chat('conversation-plan', 'tell ops') if c['type'] == 'data-turn']
    [run] = turn['waiting']
    assert turn['status'] == 'waiting' and run['pending'] == [] and 'bounds: send_email 1 call' in run['plan']['text']
    unseen = s.request(
        'POST', '/api/chat?continue=1', {'trigger': 'submit-message', 'id': 'conversation-plan', 'messages': []}
    )
    assert unseen[0] == 409 and 'waits for approval of its plan' in json.loads(unseen[2])['message']
    assert s.get(f'/api/runs/{run["run_id"]}')['calls'] == []  # going on did not approve the plan unseen
    s.post(f'/api/runs/{run["run_id"]}/approve', {})
    more = s.chat('conversation-plan', None, path='/api/chat?continue=1')
    [turn] = [c['data'] for c in more if c['type'] == 'data-turn']
    [run] = turn['waiting']  # the plan approved, the script ran to its gated email
    assert run['plan'] is None and [p['seq'] for p in run['pending']] == [1]


def names(node: dict[str, Any]) -> list[str]:
    """A span tree's names, depth first."""
    return [node['name'], *(name for child in node['children'] for name in names(child))]


def stored_spans(store: Any) -> list[tuple[str]]:
    """Every key the store's spans are kept under (a run's id, or an orchestrator agent run's)."""
    with sqlite3.connect(store.path) as conn:
        return conn.execute('SELECT DISTINCT run_id FROM spans').fetchall()


def test_a_continued_turns_trace_has_each_agent_run_and_goes_with_its_run(
    studio: Callable[..., Studio], cli: Callable[..., Any]
) -> None:
    """A turn that waited for approval and went on is two orchestrator agent runs: the run's span tree has
    both (the second calls the tool that resumes the run, then answers), and deleting the turn's run deletes
    their spans too."""
    s = studio(approval_model())
    [turn] = [c['data'] for c in s.chat('conversation-five', 'tell ops the deploy is done') if c['type'] == 'data-turn']
    [run] = turn['waiting']
    s.post(f'/api/runs/{run["run_id"]}/approve', {'seq': 1})
    s.chat('conversation-five', None, path='/api/chat?continue=1')
    first, second = s.get(f'/api/runs/{run["run_id"]}')['spans']
    assert first['name'] == second['name'] == 'invoke_agent orchestrator'
    assert names(first).count(f'run_workflow {run["run_id"]}') == 2  # it ran, and resumed in its trace
    assert names(second)[1:] == ['execute_tool run_workflow', 'chat function:respond:stream'], names(second)

    store = s.harness.store
    deleted = cli(['rm', run['run_id'], '--store', str(store.path)], cwd=Path(store.path).parent)
    assert deleted.exit_code == 0, deleted.describe()
    assert stored_spans(store) == []


def test_a_turn_that_ran_no_script_keeps_no_spans(studio: Callable[..., Studio]) -> None:
    """Only a run shows (and deletes) an orchestrator's spans: a turn that wrote no script stores none."""

    def answer(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart('Nothing to run.')])

    async def stream(_messages: list[ModelMessage], _info: AgentInfo) -> AsyncIterator[str]:
        yield 'Nothing to run.'

    s = studio(FunctionModel(answer, stream_function=stream))
    [turn] = [c['data'] for c in s.chat('conversation-six', 'hello') if c['type'] == 'data-turn']
    assert turn['status'] == 'completed' and turn['runs'] == []
    assert stored_spans(s.harness.store) == []


async def test_a_chat_response_whose_body_never_starts_leaves_nothing_expected(tmp_path: Path) -> None:
    """A client that leaves before the response's body begins: the turn never starts, and the recorder is
    left expecting no agent run for it (it would hold the id for the life of the server)."""
    from starlette.requests import Request

    from harness._studio._chat import Chat
    from harness._tracing._setup import RECORDER

    body = json.dumps(
        {
            'trigger': 'submit-message',
            'id': 'conversation-seven',
            'messages': [{'id': 'm', 'role': 'user', 'parts': [{'type': 'text', 'text': 'hello'}]}],
        }
    ).encode()

    async def receive() -> dict[str, Any]:
        return {'type': 'http.request', 'body': body, 'more_body': False}

    scope = {
        'type': 'http',
        'method': 'POST',
        'path': '/api/chat',
        'query_string': b'',
        'headers': [(b'content-type', b'application/json')],
    }
    async with catalog(Harness(store=str(tmp_path / 'runs.db'))) as h:
        before = set(RECORDER._expected)
        response = await Chat(h, demo_model(), 'test model').respond(Request(scope, receive))
        assert response.status_code == 200
        del response  # never sent: the client went away
        assert RECORDER._expected == before


def test_a_failing_model_ends_the_turn_failed(studio: Callable[..., Studio]) -> None:
    def broken(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        raise RuntimeError('the provider is down')

    async def broken_stream(_messages: list[ModelMessage], _info: AgentInfo) -> AsyncIterator[str]:
        raise RuntimeError('the provider is down')
        yield ''

    s = studio(FunctionModel(broken, stream_function=broken_stream))
    chunks = s.chat('conversation-three', 'hello')
    assert [c['errorText'] for c in chunks if c['type'] == 'error'] == ['the provider is down']
    [turn] = [c['data'] for c in chunks if c['type'] == 'data-turn']
    assert turn['status'] == 'failed' and turn['error'] == 'the provider is down'
    [stored] = s.get('/api/conversations/conversation-three')['turns']
    assert (stored['status'], stored['error'], stored['answer']) == ('failed', 'the provider is down', None)


def test_ui_on_a_port_in_use_is_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    from harness._studio._app import listen

    with listen(0) as taken:
        port = taken.getsockname()[1]
        result = cli(['ui', '--port', str(port), '--store', str(tmp_path / 'runs.db')], cwd=tmp_path)
    assert result.exit_code == 1, result.describe()
    assert f'cannot listen on 127.0.0.1:{port}' in result.stderr and 'Traceback' not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_unexpected_error_is_one_line(
    studio: Callable[..., Studio],
    runs: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A bug in a view (here: the run page's JSON cannot be built) answers one line, and logs one: no traceback."""
    import harness._studio._app

    done = runs('await lookup(key="a")\n')

    def broken(*_args: Any) -> Any:
        raise ValueError('cannot build the page\nsecond line')

    monkeypatch.setattr(harness._studio._app, 'run_page', broken)
    s = studio()
    status, _, body = s.request('GET', f'/api/runs/{done.run_id}')
    assert status == 500
    assert json.loads(body) == {'error': 'internal', 'message': 'ValueError: cannot build the page second line'}
    assert s.get('/api/runs')['total'] == 1  # the server goes on
    err = capfd.readouterr().err
    assert f'studio: GET /api/runs/{done.run_id} failed: ValueError: cannot build the page second line' in err
    assert 'Traceback' not in err


def test_one_turn_at_a_time_per_conversation(studio: Callable[..., Studio]) -> None:
    entered, release = threading.Event(), threading.Event()

    def answer(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart('done')])

    async def held(messages: list[ModelMessage], _info: AgentInfo) -> AsyncIterator[str]:
        if 'hold' in str(messages[-1]):  # the first turn waits until the second request was answered
            entered.set()
            await asyncio.to_thread(release.wait, 60)
        yield 'done'

    s = studio(FunctionModel(answer, stream_function=held))
    first: list[list[dict[str, Any]]] = []
    thread = threading.Thread(target=lambda: first.append(s.chat('conversation-four', 'hold on')))
    thread.start()
    try:
        assert entered.wait(60)
        status, _, body = s.request(
            'POST',
            '/api/chat',
            {
                'trigger': 'submit-message',
                'id': 'conversation-four',
                'messages': [{'id': 'b', 'role': 'user', 'parts': [{'type': 'text', 'text': 'two'}]}],
            },
        )
        assert status == 409 and json.loads(body)['error'] == 'busy'
        other = s.chat('conversation-five', 'elsewhere')  # another conversation is not held up
        assert [c['data']['status'] for c in other if c['type'] == 'data-turn'] == ['completed']
    finally:
        release.set()
        thread.join(60)
    assert [c['data']['status'] for c in first[0] if c['type'] == 'data-turn'] == ['completed']
    assert s.chat('conversation-four', 'two')[-1]['type'] == 'finish'  # free again once the turn ended


def test_a_turn_after_an_interrupted_one_is_told_of_it_and_does_not_send_again(studio: Callable[..., Studio]) -> None:
    """Issue 23.4: a studio turn whose conversation has a run nobody runs any more (its process died: stored `running`,
    no lease) is told, before its first script, what finished and what never did; the email that was sent is not
    sent again (nor asked for approval again): the script gets its result."""
    told: list[str] = []
    s = studio(model=approval_model(told))
    store = s.harness.store
    store.create_run(
        RunRow(
            run_id='deadbeef0001',
            script=APPROVAL_SCRIPT,
            conversation_id='conversation-six',
            orchestrator_run_id='dead-agent-run',
            catalog=s.harness.manifest(),
        )
    )
    sent = CallRecord(
        seq=1,
        callee='send_email',
        arguments={'to': 'ops@example.com', 'body': 'deploy done'},
        line=1,
        status='ok',
        result='sent to ops@example.com',
        duration=0.1,
        side_effect=True,
    )
    looking = CallRecord(seq=2, callee='lookup', arguments={'key': 'deploys'}, line=2)
    store.put_calls('deadbeef0001', [sent, looking])
    assert store.get_run('deadbeef0001').status == 'interrupted'

    chunks = s.chat('conversation-six', 'tell ops the deploy is done')
    [output] = [c['output'] for c in chunks if c['type'] == 'tool-output-available']
    assert output['result'] == 'sent to ops@example.com'
    assert 'it already succeeded in an earlier script of this conversation (run deadbeef0001, #1)' in output['note']
    [new] = [r for r in store.list_runs() if r.run_id != 'deadbeef0001']
    assert [(c.callee, c.source, c.status) for c in store.calls(new.run_id)] == [('send_email', 'reused', 'ok')]
    assert new.conversation_id == 'conversation-six' and store.waiting_runs() == []  # no approval asked again
    assert '- run deadbeef0001: 1 side effect(s) finished: #1 send_email(' in told[0], told[0]
    assert 'started but never finished, outcome unknown: #2 lookup({"key":"deploys"})' in told[0]
    told.clear()  # the turn after that one was told; the next is not, its scripts still answered from the ledger
    s.chat('conversation-six', 'and once more')
    assert told and not any('interrupted' in text for text in told)
