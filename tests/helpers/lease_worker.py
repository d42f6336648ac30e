"""The lease test's catalog, and its second process: `lease_worker.py STORE MARKERS RUN_ID` tries to resume
the run another process holds and prints one JSON line: the value, or the error's type and message.

Each `block` call leaves a marker file when it executes; in the owner's process it then waits on `release`.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from pathlib import Path

from harness import Harness, WorkflowError

CALLS = 12
SCRIPT = f"""\
import asyncio
values = await asyncio.gather(*[block(i=i) for i in range({CALLS})])
sum(values)
"""


def build(store: str, markers: Path, release: threading.Event | None = None, entered=None) -> Harness:
    h = Harness(store=store)

    @h.tool
    def block(*, i: int) -> int:
        """A blocking sync tool that leaves a marker each time it executes."""
        (markers / f'block-{i}-{uuid.uuid4().hex[:8]}').touch()
        if entered is not None:
            entered()
        if release is not None:
            release.wait(120)
        return i

    return h


if __name__ == '__main__':
    store, markers, run_id = sys.argv[1:4]
    h = build(store, Path(markers))
    try:
        print(json.dumps({'value': h.resume_sync(run_id).value}), flush=True)
    except WorkflowError as exc:
        print(json.dumps({'error': type(exc).__name__, 'message': exc.message}), flush=True)
    finally:
        h.close()
