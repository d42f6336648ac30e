"""A process for the control crash test: `run` a refund workflow until it waits (then it is SIGKILLed),
or `resume` it in a fresh process and print its value as JSON.

    python control_worker.py run STORE MARKERS
    python control_worker.py resume STORE MARKERS RUN_ID
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from harness import After, Harness

SCRIPT = """\
e = await check_entitlement(ticket_id="T-1")
await wait_here()
try:
    other = await issue_refund(ticket_id="T-2", cents=5)
except PermissionError as exc:
    other = "refused: " + str(exc)
mine = await issue_refund(ticket_id="T-1", cents=5)
[mine, other]
"""

REFUND_RULE = After('check_entitlement', same=('ticket_id',), when=lambda result: result['eligible'])


def build(store: str, markers: Path, *, block: bool) -> Harness:
    h = Harness(store=store)

    @h.tool
    async def check_entitlement(*, ticket_id: str) -> dict[str, bool]:
        with (markers / 'checks').open('a') as f:
            f.write(ticket_id + '\n')
        return {'eligible': True}

    @h.tool
    async def wait_here() -> str:
        if block:  # the first process stops here until it is killed
            (markers / 'waiting').write_text('1')
            await asyncio.Event().wait()
        return 'go'

    @h.tool(side_effect=True, requires=REFUND_RULE)
    async def issue_refund(*, ticket_id: str, cents: int) -> str:
        with (markers / 'refunds').open('a') as f:
            f.write(f'{ticket_id}:{cents}\n')
        return f'refunded {ticket_id}'

    return h


if __name__ == '__main__':
    mode, store, markers = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if mode == 'run':
        build(store, markers, block=True).run_sync(SCRIPT)
    else:
        with build(store, markers, block=False) as h:
            print(json.dumps(h.resume_sync(sys.argv[4]).value))
