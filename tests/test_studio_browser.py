"""The studio in a real browser: `harness ui` started as a user starts it, driven in headless Chromium.

Debian's `chromium` (installed by `.ci/run`; `HARNESS_CHROMIUM` names another) through Playwright; Playwright's
own browser download is not used. One `harness ui --port 0` process serves a store holding a completed, a
failed and a waiting run (made by `harness exec`, with `tests/helpers/studio_catalog.py` beside the built-ins) and the
offline demo planner as the orchestrator. Every wait is for something the page shows, never for time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Child

pytestmark = pytest.mark.slow

TESTS = Path(__file__).parent
SAMPLE = TESTS.parent / 'examples' / 'sample_project'
HARNESS = str(Path(sys.executable).with_name('harness'))
CHROMIUM_ARGS = [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--disable-dev-shm-usage',
]
SCRIPTS = {
    'ok': 'import asyncio\nfiles = await list_files(pattern="*.py")\n'
    'counts = await asyncio.gather(*[lookup(key=f) for f in files[:2]])\n'
    '{"files": len(files), "counts": counts}\n',
    'failed': 'found = await lookup(key="present")\nlog(f"found {found[\'count\']}")\n'
    'gone = await lookup(key="missing")\ngone\n',
    'waiting': 'summary = await lookup(key="weekly")\n'
    'sent = await send_email(to="team@example.com", body=f"weekly: {summary[\'count\']} items")\n'
    '{"summary": summary, "sent": sent}\n',
}


def chromium() -> str:
    found = os.environ.get('HARNESS_CHROMIUM') or shutil.which('chromium') or shutil.which('chromium-browser')
    if not found:
        pytest.fail("no chromium: install Debian's (apt-get install chromium; .ci/run does) or set HARNESS_CHROMIUM")
    return found


class Studio:
    def __init__(self, url: str, child: Child, runs: dict[str, str]) -> None:
        self.url, self.child, self.runs = url, child, runs

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.loads(response.read())


@pytest.fixture(scope='module')
def studio(
    tmp_path_factory: pytest.TempPathFactory,
    cli: Callable[..., Any],
    spawn: Callable[..., Child],
    offline_env: Callable[..., dict[str, str]],
) -> Iterator[Studio]:
    home = tmp_path_factory.mktemp('studio')
    store = str(home / 'runs.db')
    common = ['--store', store, '--agents', 'studio_catalog:catalog', '--root', str(SAMPLE)]
    runs = {}
    for name, code in SCRIPTS.items():
        (home / f'{name}.py').write_text(code)
        made = cli(['exec', f'{name}.py', '--json', *common], cwd=home)
        runs[name] = json.loads(made.stdout.strip().splitlines()[-1])['run_id']
    # The checkout under test first (not whichever copy of the project the console script was installed from).
    env = offline_env(PYTHONPATH=os.pathsep.join([str(TESTS / 'helpers'), str(TESTS.parent)]))
    child = spawn([HARNESS, 'ui', '--port', '0', *common], env=env, cwd=home)
    url = re.search(r'http://127\.0\.0\.1:\d+', child.expect('studio: ')).group(0)
    yield Studio(url, child, runs)
    child.proc.send_signal(signal.SIGINT)  # Ctrl-C: uvicorn shuts down, the command closes its Harness
    assert child.wait(30) == 0, child.describe()
    assert 'Traceback' not in ''.join(child.stderr), child.describe()


@pytest.fixture(scope='module')
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; a JavaScript error on it fails the test."""
    context = browser.new_context(viewport={'width': 1280, 'height': 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on('pageerror', lambda exc: errors.append(str(exc)))
    opened.set_default_timeout(30_000)
    yield opened
    context.close()
    assert not errors, errors


def test_the_runs_page_lists_the_runs(studio: Studio, page: Any) -> None:
    page.goto(studio.url + '/runs')
    rows = page.locator('#runs-table tbody tr')
    rows.first.wait_for()
    assert rows.count() == 3
    statuses = {
        r: page.locator(f'#runs-table tr[data-run-id="{run_id}"]').get_attribute('data-status')
        for r, run_id in studio.runs.items()
    }
    assert statuses == {'ok': 'completed', 'failed': 'failed', 'waiting': 'waiting'}
    assert page.locator('.chip[data-status=failed] .count').inner_text() == '1'
    # The badge comes from its own fetch, so it may arrive after the table.
    page.locator('#pending-badge:not(.hidden)').wait_for()
    assert page.locator('#pending-badge').inner_text() == '1'  # one call waits for a person
    page.click('.chip[data-status=failed]')
    page.wait_for_url('**/runs?status=failed')
    # The address changes at the click; the table once the filtered list has arrived.
    page.wait_for_function("document.querySelectorAll('#runs-table tbody tr').length === 1")
    assert page.locator('#runs-table tbody tr').get_attribute('data-run-id') == studio.runs['failed']


def test_a_run_page_shows_its_calls_progress_trace_and_graph(studio: Studio, page: Any) -> None:
    page.goto(studio.url + '/runs')
    page.click(f'#runs-table tr[data-run-id="{studio.runs["failed"]}"] a')
    page.wait_for_url(f'**/runs/{studio.runs["failed"]}')
    page.locator('.run-page[data-status=failed]').wait_for()
    assert page.locator('h1 .run-id').inner_text() == studio.runs['failed']
    rows = page.locator('tr.call-row')
    assert rows.count() == 2
    assert [rows.nth(i).get_attribute('data-status') for i in range(2)] == ['ok', 'error']
    # The script's log line is its progress, not a call: #2 in the journal, between the two calls.
    assert page.locator('#progress-list li.progress-entry[data-seq="2"]').inner_text() == '#2 │ found 7'
    assert page.locator('pre.python .line').count() == 4  # the script, highlighted line by line
    detail = page.locator('tr.call-detail[data-seq="3"]')
    assert not detail.is_visible()
    rows.nth(1).click()
    detail.wait_for()
    text = detail.inner_text()
    assert '"key": "missing"' in text  # the full arguments
    assert 'lookup failed with KeyError' in text  # what the script saw
    assert 'KeyError: "no entry \'missing\' in the ledger"' in text  # what the callee raised (operator side)
    assert page.locator('pre.python .line.focus').get_attribute('data-line') == '3'
    assert page.locator('svg.graph .node.taken').count() == 2  # both call sites, on the path taken
    assert page.locator('svg.graph path.edge.taken').count() == 3  # start -> #1 -> #2 -> end
    spans = page.locator('li.span .span-label').all_inner_texts()
    assert spans[0].startswith(f'run_workflow {studio.runs["failed"]}')
    assert sum(label.startswith('call lookup') for label in spans) == 2


def test_chat_streams_an_offline_demo_turn(studio: Studio, page: Any) -> None:
    page.goto(studio.url + '/chat')
    page.locator('.notice.info').filter(has_text='Offline demo mode').wait_for()
    page.fill('#prompt', 'what makes a test suite trustworthy?')
    page.press('#prompt', 'Enter')
    page.wait_for_url(re.compile(r'.*/chat/[0-9a-f]{24}$'))
    turn = page.locator('.turn[data-status=completed]')
    turn.wait_for()
    assert 'drafter(task=' in turn.locator('.script-code').inner_text()  # the script the planner wrote
    assert turn.locator('.script-code .tok-kw').count() > 0  # highlighted
    live = turn.locator('li.live-call')
    assert live.count() == 4 and turn.locator('li.live-call[data-kind=finished]').count() == 4
    answer = turn.locator('.answer').inner_text()
    conversation_id = page.url.rsplit('/', 1)[1]
    stored = studio.api(f'/api/conversations/{conversation_id}')['turns'][0]
    assert stored['status'] == 'completed' and ' '.join(stored['answer'].split()) == ' '.join(answer.split())
    assert int(turn.get_attribute('data-deltas')) > 1  # the answer arrived in pieces, as it was written
    footer = turn.locator('.turn-footer').inner_text()
    assert '4 call(s)' in footer and 'orchestrator: 2 request(s)' in footer
    page.locator(f'ul.conversations a[data-conversation="{conversation_id}"]').wait_for()  # listed, stored
    page.reload()  # the stored conversation reads as it did live
    page.locator('.turn .answer').wait_for()
    assert ' '.join(page.locator('.turn .answer').inner_text().split()) == ' '.join(answer.split())
    assert page.locator('.turn li.live-call').count() == 4


def test_approving_a_waiting_call_completes_the_run(studio: Studio, page: Any) -> None:
    run_id = studio.runs['waiting']
    page.goto(studio.url + '/runs?status=waiting')
    page.click(f'#runs-table tr[data-run-id="{run_id}"] a')
    pending = page.locator('.approvals .pending-call[data-seq="2"]')
    pending.wait_for()
    assert '"to": "team@example.com"' in pending.inner_text()
    pending.locator('button.approve').click()
    page.locator('.run-page[data-status=completed]').wait_for()  # approved, then resumed by the page
    assert page.locator('.notice.ok').inner_text() == f'resumed run {run_id[:7]}: it is completed'
    assert page.locator('tr.call-row[data-seq="2"]').get_attribute('data-status') == 'ok'
    assert 'approved' in page.locator('tr.call-row[data-seq="2"]').inner_text()
    assert 'sent to team@example.com' in page.locator('section[data-section=value]').inner_text()
    assert studio.api(f'/api/runs/{run_id}')['status'] == 'completed'
    page.locator('#pending-badge.hidden').wait_for(state='attached')  # nothing waits any more


def test_replay_and_a_validated_fork_from_the_run_page(studio: Studio, page: Any) -> None:
    run_id = studio.runs['ok']
    page.goto(f'{studio.url}/runs/{run_id}')
    page.locator('.run-page[data-status=completed]').wait_for()
    page.click('button.replay')
    report = page.locator('.replay-report')
    report.wait_for()
    assert 'Replayed from the journal: completed' in report.inner_text()
    assert report.locator('tr').count() == 3 and 'replayed' in report.inner_text()

    page.click('tr.call-row[data-seq="2"]')
    editor = page.locator('tr.call-detail[data-seq="2"] .fork-box')
    editor.wait_for()
    result = editor.locator('textarea.fork-result')
    assert json.loads(result.input_value()) == studio.api(f'/api/runs/{run_id}')['calls'][1]['result']
    result.fill('{"count": ')
    assert editor.locator('button.fork').is_disabled()  # not JSON: nothing is sent
    assert 'not JSON' in editor.locator('.fork-state').inner_text()
    before = studio.api('/api/runs')['total']
    result.fill('"ninety-nine"')
    editor.locator('button.fork').click()  # JSON, but not what lookup returns: the server refuses it
    editor.locator('.fork-error .notice.error').wait_for()
    assert 'refused' in editor.locator('.fork-error').inner_text()
    assert studio.api('/api/runs')['total'] == before  # nothing ran
    result.fill('{"count": 99, "open": 0}')
    editor.locator('button.fork').click()
    page.wait_for_url(re.compile(r'.*/runs/(?!' + run_id + r')\w+$'))
    forked = page.url.rsplit('/', 1)[1]
    page.locator(f'.run-page[data-run-id="{forked}"][data-status=completed]').wait_for()
    child = studio.api(f'/api/runs/{forked}')
    assert child['parent_run_id'] == run_id and child['fork_at'] == 2
    assert child['value']['counts'][0] == {'count': 99, 'open': 0}
    assert 'forked from' in page.locator('.lineage').inner_text()


def broken_model() -> Any:
    """An orchestrator model whose provider is down."""
    from pydantic_ai.models.function import FunctionModel

    def broken(*_args: Any) -> Any:
        raise RuntimeError('the provider is down')

    async def broken_stream(*_args: Any) -> Any:
        raise RuntimeError('the provider is down')
        yield ''

    return FunctionModel(broken, stream_function=broken_stream)


@contextlib.contextmanager
def studio_in_thread(h: Any, model: Any, label: str) -> Iterator[str]:
    """The studio over `h` on a free port, in a thread of this process (so its Harness is the test's); its URL."""
    import threading

    import uvicorn

    from harness._studio._app import create_app, listen

    sock = listen(0)
    server = uvicorn.Server(uvicorn.Config(create_app(h, model=model, model_label=label), log_level='warning'))
    thread = threading.Thread(target=server.run, kwargs={'sockets': [sock]}, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{sock.getsockname()[1]}'
    finally:
        server.should_exit = True
        thread.join(30)


@contextlib.contextmanager
def chat_over_catalog(tmp_path: Path, model: Any, label: str, review: Any = None) -> Iterator[str]:
    """The studio, in this process, over the test studio's catalog and a store of its own; its URL."""
    from test_studio import catalog

    from harness import Harness

    h = catalog(Harness(store=str(tmp_path / 'runs.db'), review=review))
    try:
        with studio_in_thread(h, model, label) as url:
            yield url
    finally:
        h.close()


def send_prompt(page: Any, url: str, prompt: str) -> None:
    """Open the chat and send one prompt, as a person types it."""
    page.goto(f'{url}/chat')
    page.fill('#prompt', prompt)
    page.press('#prompt', 'Enter')


@pytest.mark.parametrize('reload', [False, True], ids=['live', 'reloaded'])
def test_a_chat_turn_waits_for_approval_then_goes_on(page: Any, tmp_path: Path, reload: bool) -> None:
    """The page's side of a turn that needs a person: Approve in the chat (also once the waiting conversation was
    read again), and the same turn streams on; nothing still says it waits."""
    from test_studio import approval_model

    with chat_over_catalog(tmp_path, approval_model(), 'approvals') as url:
        send_prompt(page, url, 'tell ops the deploy is done')
        pending = page.locator('.chat-approvals .pending-call[data-seq="1"]')
        pending.wait_for()
        assert '"to": "ops@example.com"' in pending.inner_text()
        assert page.locator('#prompt').is_disabled()  # decide first
        assert page.locator('.turn li.live-call').count() == 0  # the email has not gone
        if reload:
            page.reload()
            pending.wait_for()
        pending.locator('button.approve').click()
        turn = page.locator('.turn[data-status=completed]')
        turn.wait_for()
        assert turn.locator('li.live-call[data-kind=finished]').inner_text().endswith("'sent to ops@example.com'")
        assert turn.locator('.answer strong').inner_text() == 'sent to ops@example.com'  # Markdown, not asterisks
        assert not page.locator('#prompt').is_disabled()
        assert turn.locator('.status-waiting').count() == 0  # no badge still says the run waits
        assert turn.locator('.turn-footer .status-completed').count() == 0  # its one run completed (no badge)
        page.locator('#pending-badge.hidden').wait_for(state='attached')


def test_a_chat_turn_held_for_its_plan_asks_for_the_plan_then_the_email(page: Any, tmp_path: Path) -> None:
    from test_studio import approval_model

    with chat_over_catalog(tmp_path, approval_model(), 'plans', review='always') as url:
        send_prompt(page, url, 'tell ops the deploy is done')
        plan = page.locator('.chat-approvals .plan-card')
        plan.wait_for()
        assert 'bounds: send_email 1 call' in plan.inner_text() and page.locator('#prompt').is_disabled()
        plan.locator('button.approve').click()  # the plan approved, the script runs to its gated email
        pending = page.locator('.chat-approvals .pending-call[data-seq="1"]')
        pending.wait_for()
        pending.locator('button.approve').click()
        page.locator('.turn[data-status=completed]').wait_for()


def test_a_chat_turn_shows_the_scripts_progress_among_its_calls(page: Any, tmp_path: Path) -> None:
    """`phase`/`log` lines stream into the turn as the script reports them, between its calls, and read the same
    once the conversation is read again."""
    from test_studio import approval_model

    script = 'phase("look up")\nfound = await lookup(key="ab")\nlog(f"count {found[\'count\']}")\nfound\n'
    with chat_over_catalog(tmp_path, approval_model(script=script), 'progress') as url:
        send_prompt(page, url, 'count ab')
        turn = page.locator('.turn[data-status=completed]')
        turn.wait_for()
        lines = [line.strip() for line in turn.locator('ul.live-calls li').all_inner_texts()]
        assert len(lines) == 3 and lines[0] == '▸ look up' and lines[2] == '│ count 2', lines
        assert lines[1].startswith('✓ #2 lookup') and lines[1].endswith("→ {'count': 2}"), lines  # the call between
        assert turn.locator('li.live-progress[data-kind=phase]').count() == 1
        page.reload()
        page.locator('.turn .answer').wait_for()
        again = page.locator('.turn ul.live-calls li').all_inner_texts()
        assert [again[0].strip(), again[2].strip()] == ['▸ look up', '│ count 2'] and len(again) == 3, again


def test_a_failed_chat_turn_says_why_once(page: Any, tmp_path: Path) -> None:
    """The error of a turn whose model failed is shown once: live, and when the conversation is read again."""
    with chat_over_catalog(tmp_path, broken_model(), 'broken') as url:
        send_prompt(page, url, 'hello')
        turn = page.locator('.turn[data-status=failed]')
        turn.wait_for()
        assert turn.inner_text().count('the provider is down') == 1
        page.reload()
        page.locator('.turn .turn-footer').wait_for()
        assert page.locator('.turn').inner_text().count('the provider is down') == 1


def test_a_killed_run_is_interrupted_with_resume_on_its_page(page: Any, tmp_path: Path) -> None:
    """A run whose process died while it was `running` (its holder is a pid that is gone) is shown
    interrupted, not followed for ever; its page offers Resume, which finishes it."""
    import subprocess

    from test_studio import catalog

    from harness import Harness, RunRow
    from harness._records import Owner, this_process

    h = catalog(Harness(store=str(tmp_path / 'runs.db')))
    assert h.store is not None
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
    h.store.create_run(
        RunRow('killedrun0001', script='a = await lookup(key="abc")\na["count"]\n', catalog=h.manifest())
    )
    h.store.claim('killedrun0001', Owner(this_process().host, int(dead.stdout), 'killed'))
    try:
        with studio_in_thread(h, None, 'none') as url:
            page.goto(f'{url}/runs/killedrun0001')
            page.locator('.run-page[data-status=interrupted]').wait_for()
            assert 'stopped before it ended' in page.locator('.notice.info').inner_text()
            page.locator('button.resume').click()
            page.locator('.run-page[data-status=completed]').wait_for()
            assert page.locator('section[data-section=value]').inner_text().strip().endswith('3')
    finally:
        h.close()


def test_a_plan_card_is_approved_and_the_run_goes_on_to_its_gated_call(page: Any, tmp_path: Path) -> None:
    from test_studio import catalog

    from harness import Harness

    h = catalog(Harness(store=str(tmp_path / 'runs.db'), review='side_effects'))
    code = 'a = await lookup(key="ab")\nawait send_email(to="a@example.com", body="one")\n'
    try:
        held = h.run_sync(code)
        with studio_in_thread(h, None, 'none') as url:
            page.goto(f'{url}/runs/{held.run_id}')
            card = page.locator('.plan-card')
            card.wait_for()
            assert 'bounds: lookup 1 call, send_email 1 call' in card.inner_text()
            assert 'irreversible: send_email' in card.inner_text()
            card.locator('button.approve').click()  # approved, then resumed by the page: it waits at the email
            page.locator('.approvals .pending-call[data-seq="2"]').wait_for()
            assert page.locator('.plan-card').count() == 0
            assert page.locator('tr.call-row[data-seq="1"]').get_attribute('data-status') == 'ok'
    finally:
        h.close()


HOSTILE_MARKDOWN = """# Findings <script>window.pwned = 1</script>

Some **bold**, *italic*, `code <b>`, ~~gone~~ and a [safe link](https://example.com/a?b=1) but
[a trap](javascript:window.pwned=2) and <img src=x onerror="window.pwned=3"> raw HTML.

- first <iframe src="https://example.com"></iframe>
- second with `x < y`
  - nested item

1. one
2. two

| file | line |
|---|---|
| a.py | 3 |

```python
import os  # <b>not bold</b>
```
"""


def test_markdown_is_rendered_as_text_never_as_html(studio: Studio, page: Any) -> None:
    """The answer renderer on hostile Markdown: formatting becomes elements, anything else stays text."""
    page.goto(studio.url + '/runs')
    rendered = page.evaluate(
        """async (text) => {
        const { renderMarkdown } = await import('/static/markdown.js');
        const root = renderMarkdown(text);
        document.body.append(root);
        return {
            tags: [...new Set([...root.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()))].sort(),
            links: [...root.querySelectorAll('a')].map((a) => [a.textContent, a.getAttribute('href')]),
            text: root.textContent,
            pwned: window.pwned ?? null,
        };
    }""",
        HOSTILE_MARKDOWN,
    )
    assert rendered['pwned'] is None
    assert set(rendered['tags']) <= {
        'div',
        'h3',
        'p',
        'strong',
        'em',
        'code',
        'del',
        'a',
        'ul',
        'ol',
        'li',
        'table',
        'thead',
        'tbody',
        'tr',
        'th',
        'td',
        'pre',
        'span',
    }
    assert {'h3', 'strong', 'em', 'del', 'ul', 'ol', 'table', 'pre'} <= set(rendered['tags'])
    assert ['safe link', 'https://example.com/a?b=1'] in rendered['links']
    assert all(href.startswith('https://') for _, href in rendered['links'])  # the javascript: one is text
    assert 'but a trap and' in rendered['text']  # its text kept, its target dropped
    for literal in (
        '<script>window.pwned = 1</script>',
        '<img src=x onerror="window.pwned=3">',
        '<iframe',
        'code <b>',
        '<b>not bold</b>',
    ):
        assert literal in rendered['text']


def test_a_chat_turn_and_its_run_page_show_the_dollars_and_the_estimate(page: Any, tmp_path: Path) -> None:
    """Under `max_cost`: each call's line says what it settled to, and while another call holds a reservation the
    turn's dollars with it; the turn's footer says what it spent; the run's page says what it spent and shows the
    script's estimate, per callee the most calls and USD, and the worst case."""
    from test_cost import PAID_TOOLS
    from test_studio import approval_model

    namespace: dict[str, Any] = {}
    exec(PAID_TOOLS.replace('store=None', f'store={str(tmp_path / "runs.db")!r}, max_cost=1.0'), namespace)
    h = namespace['h']
    script = "import asyncio\nawait asyncio.gather(fetch_after(key='b'), fetch(key='a'))\n"
    try:
        with studio_in_thread(h, approval_model(script=script), 'dollars') as url:
            send_prompt(page, url, 'fetch a and b')
            turn = page.locator('.turn[data-status=completed]')
            turn.wait_for()
            lines = [line.strip() for line in turn.locator('ul.live-calls li').all_inner_texts()]
            assert any(
                line.startswith('✓ #2 fetch ')
                and line.endswith("→ 'a' · $0.2000 · $0.2000 spent, $0.3000 reserved of max_cost=$1.00")
                for line in lines
            ), lines
            assert any(line.startswith('✓ #1 fetch_after ') and line.endswith("→ 'b' · $0.3000") for line in lines)
            assert turn.locator('.turn-footer .turn-dollars').inner_text() == 'dollars: $0.5000 spent of max_cost=$1.00'
            turn.locator('a.run-link').first.click()
            page.locator('.run-page[data-status=completed]').wait_for()
            assert page.locator('.facts .run-dollars').inner_text() == 'dollars: $0.5000 spent'
            estimate = page.locator('section[data-section=estimate]')
            assert 'worst case: $0.5000' in estimate.locator('.worst-case').inner_text()
            rows = {
                row.get_attribute('data-callee'): row.locator('td').all_inner_texts()
                for row in estimate.locator('#estimate-table tbody tr').all()
            }
            assert rows == {
                'fetch': ['fetch', '1', '$0.2000', '$0.2000', 'cost='],
                'fetch_after': ['fetch_after', '1', '$0.3000', '$0.3000', 'cost='],
            }
    finally:
        h.close()
