"""Take the README's screenshots of the studio: `.venv/bin/python docs/screenshots.py` (needs Debian's chromium).

It fills a fresh store the way a user would (`harness exec` of three scripts, then one offline-demo chat turn in
the page), starts `harness ui` on a free port and saves one PNG per page into docs/: the chat, the runs, a run
(calls, graph, trace) and a run waiting for approval.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

DOCS = Path(__file__).parent
ROOT = DOCS.parent
HARNESS = str(Path(sys.executable).with_name('harness'))
SAMPLE = ROOT / 'examples' / 'sample_project'
SCRIPTS = {
    'count.py': 'import asyncio\nfiles = await list_files(pattern="*.py")\n'
                'counts = await asyncio.gather(*[lookup(key=f) for f in files])\n'
                '{"files": len(files), "open": sum(c["open"] for c in counts)}\n',
    'email.py': 'summary = await lookup(key="weekly")\n'
                'sent = await send_email(to="team@example.com", body=f"weekly: {summary[\'count\']} items")\n'
                '{"summary": summary, "sent": sent}\n',
    'missing.py': 'found = await lookup(key="present")\ngone = await lookup(key="missing")\ngone\n',
}


def whole(page: Any, path: Path) -> None:
    """The whole page: a viewport as tall as the document (a full-page capture would repeat the sticky header
    and composer where the viewport ended), then back to the usual size."""
    page.set_viewport_size({'width': 1280, 'height': page.evaluate('document.documentElement.scrollHeight')})
    page.screenshot(path=str(path))
    page.set_viewport_size({'width': 1280, 'height': 900})


def main() -> None:
    chromium = os.environ.get('HARNESS_CHROMIUM') or shutil.which('chromium')
    if not chromium:
        sys.exit("no chromium: apt-get install chromium (or set HARNESS_CHROMIUM)")
    home = Path(tempfile.mkdtemp(prefix='studio-shots-'))
    env = {**os.environ, 'HARNESS_STORE': str(home / 'runs.db'), 'HARNESS_SECRET': 'screenshots',
           'PYTHONPATH': str(ROOT / 'tests' / 'helpers'), 'PYTHONUNBUFFERED': '1'}
    for key in ('HARNESS_MODEL', 'HARNESS_BASE_URL', 'OPENAI_API_KEY'):
        env.pop(key, None)
    common = ['--agents', 'studio_catalog:catalog', '--root', str(SAMPLE)]
    for name, code in SCRIPTS.items():
        (home / name).write_text(code)
        subprocess.run([HARNESS, 'exec', name, '--json', *common], cwd=home, env=env, capture_output=True, check=False)
    ui = subprocess.Popen([HARNESS, 'ui', '--port', '0', *common], cwd=home, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        assert ui.stdout is not None
        url = next(m.group(0) for line in ui.stdout if (m := re.search(r'http://127\.0\.0\.1:\d+', line)))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=['--no-sandbox', '--disable-gpu'])
            page = browser.new_page(viewport={'width': 1280, 'height': 900}, device_scale_factor=1)
            page.goto(url + '/chat')
            page.fill('#prompt', 'review the code in .')
            page.press('#prompt', 'Enter')
            page.locator('.turn[data-status=completed]').wait_for(timeout=60_000)
            page.locator('ul.conversations a').wait_for()
            whole(page, DOCS / 'studio-chat.png')
            page.goto(url + '/runs')
            page.locator('#runs-table').wait_for()
            page.screenshot(path=str(DOCS / 'studio-runs.png'))
            page.click('#runs-table tr[data-status=failed] a')
            page.locator('.run-page').wait_for()
            page.click('tr.call-row[data-seq="2"]')
            whole(page, DOCS / 'studio-run.png')
            page.goto(url + '/runs?status=waiting')
            page.click('#runs-table tr[data-status=waiting] a')
            page.locator('.approvals').wait_for()
            page.screenshot(path=str(DOCS / 'studio-approval.png'))
            browser.close()
    finally:
        ui.send_signal(signal.SIGINT)
        ui.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    print('saved', ', '.join(sorted(p.name for p in DOCS.glob('studio-*.png'))))


if __name__ == '__main__':
    main()
