"""What tracing costs per call: the same workflows with `Harness(tracing=False)` and `tracing=True`.

    python benchmarks/bench_tracing.py [--quick]

`tracing=True` calls `harness._tracing._setup.configure_tracing()` on the first run: logfire configured with no
token (nothing is sent; the benchmark also removes LOGFIRE_TOKEN and OTEL_EXPORTER_OTLP_* from the
environment and runs in an empty directory, so no `.logfire/` credentials are found), pydantic-ai
instrumentation, and the offline span recorder whose spans are stored with each run. That is
process-wide and one-way, so each variant lives in its own worker subprocess. Both workers are started
together and then driven alternately, one run at a time, over stdin (`off, on, on, off, ...`), so load
on the machine falls on both; `--quick` uses one pair of workers, the full run two pairs.

Workflows (each on `Harness(store=':memory:')`, script text fixed so the type check is memoised after
the warm-up): 200 sequential calls of an instant async host tool, and 20 sequential calls of a
sub-agent that is a pydantic-ai `Agent(TestModel())` registered with `add_agent`.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import MARK, LineWorker, fmt_int, fmt_ratio, fmt_time, fmt_us, log, med, table

SHAPES: dict[str, tuple[str, int, str]] = {
    'tools': ('200 host tool calls in sequence', 200, 'acc = 0\nfor i in range(200):\n    acc += await f(i=i)\nacc\n'),
    'agents': (
        '20 sub-agent calls (`Agent(TestModel())`) in sequence',
        20,
        "out = []\nfor i in range(20):\n    out.append(await echo(task='step ' + str(i)))\nlen(out)\n",
    ),
}
EXPECTED = {'tools': 200 * 199 // 2, 'agents': 20}


# -- the worker (one subprocess per variant) ---------------------------------------------------------


def worker(mode: str) -> None:
    started = time.perf_counter()
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from harness import Harness
    from harness._tracing._setup import configure_tracing

    h = Harness(store=':memory:', tracing=mode == 'on', max_agent_calls=10_000)
    tracing = configure_tracing() if mode == 'on' else None  # decided once per process; the Harness asks the same

    @h.tool
    async def f(*, i: int) -> int:
        return i

    h.add_agent(Agent(TestModel(), name='echo', description='Answers a task.', output_type=str))

    def say(payload: dict[str, Any]) -> None:
        sys.stdout.write(MARK + json.dumps(payload) + '\n')
        sys.stdout.flush()

    say({'ready': True, 'setup': time.perf_counter() - started})
    for line in sys.stdin:
        shape = line.strip()
        if shape == 'quit' or not shape:
            break
        code = SHAPES[shape][2]
        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        result = h.run_sync(code)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        spans = h.store.spans(result.run_id) if h.store is not None else []
        say(
            {
                'shape': shape,
                'wall': wall,
                'cpu': cpu,
                'ok': result.value == EXPECTED[shape],
                'spans': len(spans),
                'tracing_mode': tracing,
            }
        )
    h.close()


# -- the driver ---------------------------------------------------------------------------------------


def start_worker(mode: str, cwd: str) -> LineWorker:
    return LineWorker(f'tracing worker ({mode})', [str(Path(__file__).resolve()), '--worker', mode], cwd)


def run(quick: bool = False) -> str:
    pairs, rounds, warmup = (1, 6, 1) if quick else (2, 12, 2)
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {(m, s): [] for m in ('off', 'on') for s in SHAPES}
    setups: dict[str, list[float]] = {'off': [], 'on': []}
    with tempfile.TemporaryDirectory(prefix='bench-tracing-') as cwd:
        for p in range(pairs):
            log(f'  tracing: worker pair {p + 1}/{pairs}, {rounds} rounds')
            workers = {mode: start_worker(mode, cwd) for mode in ('off', 'on')}
            try:
                for mode, w in workers.items():
                    setups[mode].append(w.ask()['setup'])
                for _ in range(warmup):
                    for shape in SHAPES:
                        for w in workers.values():
                            w.ask(shape)
                for r in range(rounds):
                    order = ['off', 'on'] if (r + p) % 2 == 0 else ['on', 'off']
                    for shape in SHAPES:
                        for mode in order:
                            samples[(mode, shape)].append(workers[mode].ask(shape))
            finally:
                for w in workers.values():
                    w.close()
    return report(samples, setups, pairs, rounds)


def report(
    samples: dict[tuple[str, str], list[dict[str, Any]]], setups: dict[str, list[float]], pairs: int, rounds: int
) -> str:
    rows = []
    for shape, (label, calls, _) in SHAPES.items():
        off, on = samples[('off', shape)], samples[('on', shape)]
        wall_off, wall_on = med(s['wall'] for s in off), med(s['wall'] for s in on)
        per_call = med((b['wall'] - a['wall']) / calls for a, b in zip(off, on, strict=True))
        cpu_per_call = med((b['cpu'] - a['cpu']) / calls for a, b in zip(off, on, strict=True))
        rows.append(
            [
                label,
                fmt_time(wall_off),
                fmt_time(wall_on),
                fmt_ratio(wall_on, wall_off),
                fmt_us(per_call),
                fmt_us(cpu_per_call),
                fmt_us(wall_off / calls if wall_off else None),
                fmt_int(med(s['spans'] for s in on)),
                fmt_int(med(s['spans'] for s in off)),
            ]
        )
    modes = sorted({s['tracing_mode'] or 'none' for (m, _), ss in samples.items() if m == 'on' for s in ss})
    blocks = [
        '### Tracing overhead (`bench_tracing.py`)',
        f"`Harness(store=':memory:', tracing=False)` against `tracing=True` (`configure_tracing()`: logfire "
        f'with no token, so nothing is sent; pydantic-ai instrumentation; the offline span recorder, whose spans '
        f'are stored with each run). One worker subprocess per variant, {pairs} pair(s), driven alternately one run '
        f'at a time; {rounds} rounds after a warm-up, medians. *overhead / call* = median over rounds of (on − off) '
        f"/ calls; *CPU* is the worker's own CPU time (the sandbox runs in another process). Tracing mode the "
        f'`on` workers reported: {", ".join(modes)}.',
        table(
            [
                'workflow',
                'off',
                'on',
                'on / off',
                'overhead / call',
                'host CPU overhead / call',
                'whole call, off',
                'spans stored / run (on)',
                '(off)',
            ],
            rows,
        ),
        f'Worker start (imports + Harness), median: off {fmt_time(med(setups["off"]))}, on '
        f'{fmt_time(med(setups["on"]))} (`configure_tracing` itself runs on the first run, in the warm-up).',
    ]
    return '\n'.join(block.rstrip('\n') + '\n' for block in blocks)


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == '--worker':
        worker(sys.argv[2])
        return
    print(run(quick='--quick' in sys.argv))


if __name__ == '__main__':
    main()
