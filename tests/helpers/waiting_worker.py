"""A process for the waiting tests: runs a workflow until it waits (for an approval, or inside `within`),
prints `ready RUN_ID`, and stays alive until it is SIGKILLed.

    python waiting_worker.py approval STORE MARKERS
    python waiting_worker.py deadline STORE MARKERS
    python waiting_worker.py progress STORE MARKERS
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from harness import Harness

APPROVAL_SCRIPT = """\
body = await draft(to="ann")
try:
    sent = await send_email(to="ann", body=body)
except PermissionError as e:
    sent = "not sent: " + str(e)
sent
"""

DEADLINE_SCRIPT = """\
try:
    v = await within(1.0, slow(q="x"))
except TimeoutError as e:
    v = "timed out: " + str(e)
v
"""


def build(store: str, markers: Path, *, hang: bool) -> Harness:
    h = Harness(store=store)

    @h.tool
    async def draft(*, to: str) -> str:
        with (markers / 'drafts').open('a') as f:
            f.write(to + '\n')
        return f'hello {to}'

    @h.tool(side_effect=True, approval=True)
    async def send_email(*, to: str, body: str) -> str:
        with (markers / 'sent').open('a') as f:
            f.write(f'{to}:{body}\n')
        return f'sent to {to}'

    @h.subagent
    async def slow(*, q: str) -> str:
        with (markers / 'slow').open('a') as f:
            f.write(q + '\n')
        if hang:
            (markers / 'slow-started').write_text('1')
            await asyncio.Event().wait()
        return f'slow {q}'

    return h


PROGRESS_SCRIPT = """\
import asyncio
import time
for i in range(1_100):
    log(str(i))
async def spam():
    x = await fast(n=1)
    for i in range(300):
        log("more")
    t = time.time()
    try:
        await fast(n=2)
    except RuntimeError:
        pass
    return x
(await asyncio.gather(hang(), spam()))[1]
"""
"""1,000 entries kept and 100 counted before the snapshot of the gather's pause; 300 more counted after it,
journaled by the granted clock's write (no snapshot), then the run is killed once its second `fast` is refused
by the budget (no write, no snapshot either): a resume restarts from that snapshot and counts the 300 again."""


def build_progress(store: str, *, hang: bool, on_event: Any = None) -> Harness:
    h = Harness(store=store, grant_clock=True, max_tool_calls=2, on_event=on_event)

    @h.tool
    async def fast(*, n: int) -> int:
        return n

    @h.tool(name='hang')
    async def hang_() -> int:
        if hang:
            await asyncio.Event().wait()
        return 2

    return h


if __name__ == '__main__':
    kind, store, markers = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    h = build(store, markers, hang=True)
    if kind == 'progress':

        def refused(event: Any) -> None:
            if event.kind == 'refused':
                print(f'ready {event.run_id} running', flush=True)

        with contextlib.suppress(BaseException):
            build_progress(store, hang=True, on_event=refused).run_sync(PROGRESS_SCRIPT)
    elif kind == 'approval':
        result = h.run_sync(APPROVAL_SCRIPT)
        print(f'ready {result.run_id} {result.status}', flush=True)
    else:

        async def stop_inside() -> None:
            task = asyncio.ensure_future(h.run(DEADLINE_SCRIPT))
            while not (markers / 'slow-started').exists():
                await asyncio.sleep(0.01)
            run_id = h.runs()[0].run_id
            print(f'ready {run_id} running', flush=True)
            await task

        asyncio.run(stop_inside())
    while True:  # alive and idle until killed
        time.sleep(60)
