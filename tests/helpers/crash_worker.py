"""A workflow process for the crash tests: `run` starts workflows and freezes each at a chosen moment
(the test then SIGKILLs the process), `sweep` starts staggered workflows and SIGKILLs itself, `serve`
resumes crashed runs on request. Each sub-agent call writes a marker file when it executes, so the
test can count executions.

Usage:
  crash_worker.py run DIR MOMENT [MOMENT ...]
      One workflow per moment, each on its own thread with its own store DIR/runs{i}.db and marker
      folder DIR/markers{i}/. A workflow prints `frozen {i} {run_id}` when it reaches its moment and
      stays there; once all have, the process prints `all frozen` and waits to be killed.
      A moment is `started:SEQ` or `finished:SEQ` (the engine's event for call SEQ: the workflow's
      thread stops inside the event, so nothing after it happens) or `callee:SEQ` (call SEQ's callee
      is executing and never returns; the rest of the run goes on until the script waits for it).
  crash_worker.py sweep DIR COUNT STEP KILL_AFTER
      COUNT workflows whose callees take real time, the i-th starting i*STEP s after the first; the
      process SIGKILLs itself KILL_AFTER s after the first started, cutting each at another instant
      (inside journal writes and snapshot writes too). Prints `run {i} {run_id}` as each starts.
  crash_worker.py serve
      Reads commands on stdin, one JSON object a line: {"mode": "resume" | "resume-retry",
      "runs": [[STORE, MARKERS, RUN_ID], ...]}; answers one JSON line per run, then `done`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from harness import CallEvent, Harness, WorkflowError

SCRIPT = """\
import asyncio
total = 0
for r in range(10):
    a, b, c = await asyncio.gather(slow(i=3 * r), slow(i=3 * r + 1), slow(i=3 * r + 2))
    total += a + b + c
receipt = await charge(amount=total)
[total, receipt]
"""
EXPECTED = [sum(i * i for i in range(30)), 'charged 8555']
CALLS = 31
"""Calls per run: seq 1..30 are `slow(i=seq - 1)`, seq 31 is `charge`."""


def build(
    store: str,
    markers: Path,
    *,
    hang_seq: int | None = None,
    on_hang: Callable[[], None] | None = None,
    timed: bool = False,
) -> Harness:
    """The crash tests' catalog. `hang_seq`: that call's callee, once it has left its marker, calls
    `on_hang` and never returns; `timed`: callees take real time (40 ms, the side-effecting one 400 ms),
    as in a run that can be cut at any instant."""
    h = Harness(store=store)

    async def hang(seq: int) -> None:
        if seq == hang_seq:
            if on_hang is not None:
                on_hang()
            await asyncio.Event().wait()

    @h.subagent
    async def slow(*, i: int) -> int:
        """A slow sub-agent that leaves a marker each time it really executes."""
        (markers / f'slow-{i}-{uuid.uuid4().hex[:8]}').touch()
        await hang(i + 1)
        await asyncio.sleep(0.04 if timed else 0)
        return i * i

    @h.tool(side_effect=True)
    async def charge(*, amount: int) -> str:
        """Side-effecting: must never run twice silently."""
        (markers / f'charge-{uuid.uuid4().hex[:8]}').touch()
        await hang(CALLS)
        await asyncio.sleep(0.4 if timed else 0)
        return f'charged {amount}'

    return h


_print_lock = threading.Lock()


def say(line: str) -> None:
    with _print_lock:
        print(line, flush=True)


def freeze_at(index: int, moment: str, store: str, markers: Path, frozen: threading.Semaphore) -> None:
    """Run the workflow on this thread until `moment`, announce it, and stay there."""
    kind, _, seq_text = moment.partition(':')
    seq = int(seq_text)
    if kind not in ('started', 'finished', 'callee'):
        raise SystemExit(f'unknown moment {moment!r}')
    run_id: list[str] = []

    def announce() -> None:
        say(f'frozen {index} {run_id[0]}')
        frozen.release()

    def on_event(event: CallEvent) -> None:
        if not run_id:
            run_id.append(event.run_id)
        if event.seq == seq and event.kind == kind:
            announce()
            threading.Event().wait()  # this workflow stops here, inside the engine, until the kill

    h = build(store, markers, hang_seq=seq if kind == 'callee' else None, on_hang=announce)
    try:
        h.run_sync(SCRIPT, on_event=on_event)
    except BaseException as exc:  # pragma: no cover - reported to the test, which fails on it
        say(f'error {index} {type(exc).__name__}: {exc}')
    else:
        say(f'error {index} the run completed before reaching {moment}')
    os._exit(3)


def run(directory: Path, moments: list[str]) -> None:
    frozen = threading.Semaphore(0)
    for index, moment in enumerate(moments):
        markers = directory / f'markers{index}'
        markers.mkdir(parents=True, exist_ok=True)
        args = (index, moment, str(directory / f'runs{index}.db'), markers, frozen)
        threading.Thread(target=freeze_at, args=args, daemon=True).start()
    for _ in moments:
        frozen.acquire()
    say('all frozen')
    threading.Event().wait()


def sweep(directory: Path, count: int, step: float, kill_after: float) -> None:
    first = threading.Event()

    def one(index: int) -> None:
        markers = directory / f'markers{index}'
        markers.mkdir(parents=True, exist_ok=True)
        time.sleep(index * step)  # staggered starts, so one kill cuts each run at another point
        h = build(str(directory / f'runs{index}.db'), markers, timed=True)

        def on_event(event: CallEvent) -> None:
            if event.seq == 1 and event.kind == 'started':
                say(f'run {index} {event.run_id}')
                first.set()

        h.run_sync(SCRIPT, on_event=on_event)

    for index in range(count):
        threading.Thread(target=one, args=(index,), daemon=True).start()
    first.wait()
    time.sleep(kill_after)  # the kill instant is the point of this mode: any instant must be safe
    os.kill(os.getpid(), signal.SIGKILL)


def serve() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        for store, markers, run_id in command['runs']:
            h = build(store, Path(markers))
            try:
                result = h.resume_sync(run_id, retry_unknown=command['mode'] == 'resume-retry')
                say(json.dumps({'value': result.value, 'run_id': result.run_id}))
            except WorkflowError as exc:
                say(json.dumps({'error': type(exc).__name__, 'message': exc.message, 'run_id': run_id}))
            finally:
                h.close()
        say('done')


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == 'run':
        run(Path(rest[0]), rest[1:])
    elif mode == 'sweep':
        sweep(Path(rest[0]), int(rest[1]), float(rest[2]), float(rest[3]))
    elif mode == 'serve':
        serve()
    else:
        raise SystemExit(f'unknown mode {mode!r}')


if __name__ == '__main__':
    main()
