"""Sub-agents for the Temporal tests' worker processes (`harness worker --agents temporal_agents:work`).

Each execution of `work` leaves marker files in $HARNESS_TEST_MARKS, so a test can count how often a
call ran: `started-JOB-I-*` when it begins, `done-JOB-I-*` when it returns. A call with `i` at or above
$HARNESS_TEST_GATE_FROM waits for the file `gate` there first, so a test can kill a worker while such
calls are certainly unfinished.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path


async def work(*, job: str, i: int) -> int:
    """Square i, slowly."""
    marks = Path(os.environ['HARNESS_TEST_MARKS'])
    token = uuid.uuid4().hex[:8]
    (marks / f'started-{job}-{i}-{token}').touch()
    if i >= int(os.environ.get('HARNESS_TEST_GATE_FROM', '1000000')):
        while not (marks / 'gate').exists():
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.05)
    (marks / f'done-{job}-{i}-{token}').touch()
    return i * i
