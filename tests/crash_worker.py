"""A workflow process for the crash tests: `run` starts a workflow, `resume` continues one.

Each sub-agent call writes a marker file when it executes, so the test can count executions.
Usage: crash_worker.py run STORE MARKERS
       crash_worker.py resume|resume-retry STORE MARKERS RUN_ID [STORE MARKERS RUN_ID ...]
(one JSON line per resumed run)
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

from harness import CallEvent, Harness, WorkflowError

SCRIPT = '''\
import asyncio
total = 0
for r in range(10):
    a, b, c = await asyncio.gather(slow(i=3 * r), slow(i=3 * r + 1), slow(i=3 * r + 2))
    total += a + b + c
receipt = await charge(amount=total)
[total, receipt]
'''
EXPECTED = [sum(i * i for i in range(30)), 'charged 8555']


def build(store: str, markers: Path) -> Harness:
    h = Harness(store=store)

    @h.subagent
    async def slow(*, i: int) -> int:
        """A slow sub-agent that leaves a marker each time it really executes."""
        (markers / f'slow-{i}-{uuid.uuid4().hex[:8]}').touch()
        await asyncio.sleep(0.04)
        return i * i

    @h.tool(side_effect=True)
    async def charge(*, amount: int) -> str:
        """Side-effecting: must never run twice silently."""
        (markers / f'charge-{uuid.uuid4().hex[:8]}').touch()
        await asyncio.sleep(0.4)
        return f'charged {amount}'

    return h


def announce(event: CallEvent) -> None:
    if event.seq == 1 and event.kind == 'started':
        print(f'run {event.run_id}', flush=True)


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == 'run':
        h = build(rest[0], Path(rest[1]))
        h.run_sync(SCRIPT, on_event=announce)
        h.close()
        return
    for i in range(0, len(rest), 3):
        store, markers, run_id = rest[i], Path(rest[i + 1]), rest[i + 2]
        h = build(store, markers)
        try:
            result = h.resume_sync(run_id, retry_unknown=mode == 'resume-retry')
            print(json.dumps({'value': result.value, 'run_id': result.run_id}), flush=True)
        except WorkflowError as exc:
            print(json.dumps({'error': type(exc).__name__, 'message': exc.message, 'run_id': run_id}), flush=True)
        finally:
            h.close()


if __name__ == '__main__':
    main()
