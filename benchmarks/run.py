"""Benchmark this project against the reference `DynamicWorkflow` (pydantic-ai-harness 0.62.0), side by side.

    python benchmarks/run.py [--quick] [--rounds N] [--only SCENARIO ...] [--ours-mode auto|orchestrator|run]
        [--ours-tracing default|off] [--ours-store file|memory]

Each side runs in its own subprocess and its own environment: ours with this interpreter (the project's
environment), the reference with `benchmarks/.venv-reference` (created on first use). For every scenario
the sides alternate, round after round (ours, reference, ours, reference, ...), so background load on the
machine falls on both. Prints a Markdown table of medians and ratios and writes it to
`benchmarks/results/latest.md` (raw numbers next to it in `latest.json`). Exits 0 when the reference fails
a scenario (that is a reported result) or a side is stopped at its deadline (reported too); exits 1 only
when our side returns a wrong value, fails or crashes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import SCENARIOS, Scenario  # noqa: E402

REFERENCE_VENV = HERE / '.venv-reference'
REFERENCE_PACKAGES = ['pydantic-ai-harness==0.62.0', 'pydantic-ai-slim==2.62.0', 'pydantic-monty==1.4.0']
RESULTS = HERE / 'results'
SUBPROCESS_TIMEOUT = 600  # seconds per subprocess; `--timeout` changes it


def reference_python() -> Path:
    """The reference environment's interpreter; creates the environment when it is missing or broken."""
    python = REFERENCE_VENV / 'bin' / 'python'
    probe = 'import pydantic_ai_harness.dynamic_workflow, pydantic_monty'
    if python.exists() and subprocess.run([python, '-c', probe], capture_output=True).returncode == 0:
        return python
    print(
        f'Creating the reference environment in {REFERENCE_VENV.relative_to(ROOT)} '
        f'({", ".join(REFERENCE_PACKAGES)}) ...',
        file=sys.stderr,
        flush=True,
    )
    subprocess.run([sys.executable, '-m', 'venv', '--clear', REFERENCE_VENV], check=True)
    pip = subprocess.run(
        [python, '-m', 'pip', 'install', '-q', '--disable-pip-version-check', *REFERENCE_PACKAGES],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        sys.stderr.write(pip.stdout + pip.stderr)
        raise SystemExit(f'pip could not install the reference packages (exit {pip.returncode}).')
    subprocess.run([python, '-c', probe], check=True)
    return python


def run_side(side: str, python: Path | str, scenario: Scenario, args: argparse.Namespace) -> dict[str, Any]:
    script = HERE / ('bench_ours.py' if side == 'ours' else 'bench_reference.py')
    cmd = [str(python), str(script), scenario.name]
    if args.quick:
        cmd.append('--quick')
    if args.iterations is not None:
        cmd += ['--iterations', str(args.iterations)]
    if side == 'ours':
        cmd += ['--mode', args.ours_mode, '--store', args.ours_store]
    if args.deadline is not None:
        cmd += ['--deadline', str(args.deadline)]
    deadline = (
        args.deadline if args.deadline is not None else scenario.quick_deadline if args.quick else scenario.deadline
    )
    timeout = max(args.timeout, (deadline or 0) + 180)  # a backstop: the deadline stops a run inside
    env = {**os.environ, 'PYTHONPATH': str(HERE), 'PYTHONDONTWRITEBYTECODE': '1'}
    env.pop('LOGFIRE_TOKEN', None)  # nothing leaves the machine while measuring
    if side == 'ours' and args.ours_tracing == 'off':
        env['HARNESS_TRACING'] = 'off'
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {'side': side, 'scenario': scenario.name, 'crash': f'did not finish in {timeout:.0f} s'}
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{')]
    if proc.returncode != 0 or not lines:
        lines = (proc.stderr or proc.stdout or '(no output)').strip().splitlines()
        crash = f'exit {proc.returncode}: {lines[-1].strip()}'
        (RESULTS / f'crash-{side}-{scenario.name}.log').parent.mkdir(parents=True, exist_ok=True)
        (RESULTS / f'crash-{side}-{scenario.name}.log').write_text(proc.stdout + proc.stderr)
        return {'side': side, 'scenario': scenario.name, 'crash': crash}
    result = json.loads(lines[-1])
    result['process_wall'] = wall
    return result


# -- summarising ----------------------------------------------------------------------------------


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over every round of one side of one scenario."""
    ok = [r for r in runs if 'crash' not in r]
    failures = [r for r in ok if r.get('failure')]
    warm = [t for r in ok if not r.get('failure') for t in r.get('warm') or []]
    cold = [r['cold'] for r in ok if r.get('cold') is not None]
    cpu_warm = [t for r in ok if not r.get('failure') for t in r.get('cpu_warm') or []]
    cpu_cold = [r['cpu_cold'] for r in ok if r.get('cpu_cold') is not None]

    def peak(key: str) -> float | None:
        values = [r[key] for r in ok if r.get(key) is not None]
        return max(values) if values else None

    return {
        'rounds': len(runs),
        'mode': ok[0]['mode'] if ok else None,
        'crash': next((r['crash'] for r in runs if 'crash' in r), None),
        'failure': failures[0]['failure'] if failures else None,
        'stopped': next((r['stopped'] for r in ok if r.get('stopped')), None),
        'failed_after': med([r['failed_after'] for r in failures if r.get('failed_after') is not None]),
        'warm': med(warm),
        'warm_n': len(warm),
        'warm_spread': (min(warm), max(warm)) if warm else None,
        'cold': med(cold),
        'cold_n': len(cold),
        'cpu_warm': med(cpu_warm),
        'cpu_cold': med(cpu_cold),
        'setup': med([r['setup'] for r in ok if r.get('setup') is not None]),
        'host_peak_mb': peak('host_peak_mb'),
        'workers_sum_mb': peak('workers_sum_mb'),
        'worker_peak_mb': peak('worker_peak_mb'),
        'peak_workers': peak('peak_workers'),
    }


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return '–'
    if seconds < 1:
        return f'{seconds * 1000:.1f} ms'
    return f'{seconds:.2f} s'


def fmt_ratio(ours: float | None, ref: float | None) -> str:
    if ours is None or ref is None or ref == 0:
        return '–'
    return f'{ours / ref:.2f}×'


def fmt_mb(mb: float | None) -> str:
    return '–' if mb is None else f'{mb:.0f}'


def failure_text(summary: dict[str, Any]) -> str | None:
    """A one-line account of a failure (or of a run stopped at its deadline), or None."""
    if summary['stopped']:
        return summary['stopped']
    if summary['crash']:
        return 'crashed: ' + ' '.join(summary['crash'].split())[:200]
    failure = summary['failure']
    if not failure:
        return None
    flat = ' '.join(failure.split())
    if 'suspension limit' in flat:
        limit = flat.split('suspension limit', 1)[1].split()[0]
        return f'stops at {int(limit):,} (Monty suspension limit: "suspension limit {limit} exceeded")'
    return 'failed: ' + flat[:200]


def failure_cell(summary: dict[str, Any]) -> str:
    text = failure_text(summary) or ''
    if summary['stopped']:
        return 'stopped'
    return text.split(' (')[0] if text.startswith('stops at') else 'FAILED'


def time_cell(summary: dict[str, Any], column: str) -> str:
    if summary['stopped'] and column == 'cold' and summary['cold'] is None:
        return '> ' + summary['stopped'].split(' deadline')[0].split('the ')[-1]
    if failure_text(summary):
        if column == 'warm':
            return failure_cell(summary)
        after = summary['failed_after']
        return f'fails after {fmt_time(after)}' if after is not None else '–'
    if summary[column] is None:
        return 'one run only' if column == 'warm' and summary['cold'] is not None else '–'
    return fmt_time(summary[column])


def table(summaries: dict[str, dict[str, dict[str, Any]]], order: list[str]) -> str:
    rows = [
        '| scenario | ours warm | ref warm | ours/ref | ours cold | ref cold | ours/ref | ours MB | ref MB |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]
    for name in order:
        ours, ref = summaries[name]['ours'], summaries[name]['reference']
        cells = [SCENARIOS[name].label]
        both = not failure_text(ours) and not failure_text(ref)
        for column in ('warm', 'cold'):
            cells += [time_cell(ours, column), time_cell(ref, column)]
            cells.append(fmt_ratio(ours[column], ref[column]) if both else '–')
        for s in (ours, ref):
            host, workers = s['host_peak_mb'], s['workers_sum_mb'] or 0
            cells.append('–' if host is None else f'{host:.0f} + {workers:.0f}')
        rows.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(rows) + '\n'


def details(summaries: dict[str, dict[str, dict[str, Any]]], order: list[str]) -> str:
    rows = [
        '| scenario | side | how | warm samples (min–max) | cold samples | host CPU warm / cold '
        '| imports + setup | workers at once × largest MB | result |',
        '|---|---|---|---|---:|---:|---:|---:|---|',
    ]
    for name in order:
        for side in ('ours', 'reference'):
            s = summaries[name][side]
            spread = (
                f'{s["warm_n"]} ({fmt_time(s["warm_spread"][0])}–{fmt_time(s["warm_spread"][1])})'
                if s['warm_spread']
                else '0'
            )
            workers = f'{s["peak_workers"] or 0} × {fmt_mb(s["worker_peak_mb"])}'
            rows.append(
                f'| {name} | {side} | {s["mode"] or "–"} | {spread} | {s["cold_n"]} '
                f'| {fmt_time(s["cpu_warm"])} / {fmt_time(s["cpu_cold"])} | {fmt_time(s["setup"])} '
                f'| {workers} | {failure_text(s) or "ok"} |'
            )
    return '\n'.join(rows) + '\n'


LEGEND = """\
**Rows.** *baseline*: 50 sequential `worker.run(...)` calls with no workflow at all; it measures the
pydantic-ai each side runs on (both 2.62, the version pydantic-evals pins), which every other row pays
per sub-agent call. *one run_workflow, N calls*: one orchestrator run whose script awaits the sub-agent N
times in a `for` loop. *gather*: one script doing `await asyncio.gather(*[worker(task=...) for i in
range(N)])`. *32 workflows at once*: 32 orchestrator runs started together, each running a script that
awaits a sub-agent which answers after `asyncio.sleep(0.2)`; "identical" means the 32 scripts of one
iteration are the same text (our side checks it once and shares the result), "distinct" that they
differ (32 type checks).

**Columns.** An iteration is one full pydantic-ai orchestrator run (or 32 at once): a `FunctionModel`
calls `run_workflow` with the script, then answers with the tool's return, which is checked. Ours:
`Harness(store=FILE).orchestrator(model=...)` with a store file in a temporary directory (the default
configuration; `--ours-store memory`: `:memory:`); reference: `Agent(model,
capabilities=[DynamicWorkflow(...)])`. *cold*: the first iteration in a fresh process (imports and
agents built; no sandbox worker started yet); it is also the warm-up. *warm*: median of the iterations
after it in the same process. *ours/ref*: ratio of the medians, below 1 means ours is faster. *MB*:
peak RSS of the benchmark process (`ru_maxrss`) + the sampled peak of its sandbox workers' summed RSS
(every 20 ms). *host CPU* (details): CPU time of the benchmark process per iteration, steadier than wall
time on a busy machine (the sandbox workers' CPU is not in it). A side that runs past its deadline
(gather10k: 120 s, 60 s with `--quick`) is stopped and shown as `> N s`, with how many sub-agent calls
had answered. Every iteration runs new script text, so no type-check result is reused from an earlier
iteration; type checking is on on both sides. Sub-agents are pydantic-ai `Agent`s (output `str`) on a
`FunctionModel` that answers `'done'`. Both sides get `max_agent_calls=20000` and no request limit on the
orchestrator run; the reference also gets `sub_agent_usage_limits=UsageLimits(request_limit=None)`,
because its sub-agents count against the orchestrator's shared counter. Medians are over all rounds;
each round runs ours and the reference in fresh subprocesses, one after the other, alternating which
goes first.
"""


def notes(summaries: dict[str, dict[str, dict[str, Any]]], order: list[str]) -> str:
    setup = {
        side: med([summaries[n][side]['setup'] for n in order if summaries[n][side]['setup']])
        for side in ('ours', 'reference')
    }
    return (
        f'Imports and setup in a fresh process, before the first iteration (median of all subprocesses): '
        f'ours {fmt_time(setup["ours"])}, reference {fmt_time(setup["reference"])}.\n'
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer rounds and iterations; gather10k stops at 60 s')
    parser.add_argument(
        '--rounds', type=int, default=None, help="subprocess pairs per scenario (default: the scenario's, 1-2)"
    )
    parser.add_argument('--iterations', type=int, default=None, help='warm iterations per subprocess (override)')
    parser.add_argument(
        '--only',
        nargs='+',
        choices=sorted(SCENARIOS),
        metavar='SCENARIO',
        help=f'run only these scenarios ({", ".join(SCENARIOS)})',
    )
    parser.add_argument(
        '--skip',
        nargs='+',
        choices=sorted(SCENARIOS),
        default=[],
        metavar='SCENARIO',
        help='leave these scenarios out (gather10k is most of the run time)',
    )
    parser.add_argument(
        '--timeout',
        type=float,
        default=SUBPROCESS_TIMEOUT,
        help='seconds one side may take on one scenario before it counts as a crash',
    )
    parser.add_argument(
        '--deadline',
        type=float,
        default=None,
        help='seconds a side may spend measuring one scenario before its running iteration is '
        'stopped and reported as such (default: gather10k 120, --quick 60; 0: none)',
    )
    parser.add_argument(
        '--ours-mode',
        choices=['auto', 'orchestrator', 'run'],
        default='auto',
        help='auto: the orchestrator agent if Harness.orchestrator exists, else Harness.run',
    )
    parser.add_argument(
        '--ours-tracing',
        choices=['default', 'off'],
        default='default',
        help='off: our side runs with HARNESS_TRACING=off (no spans recorded)',
    )
    parser.add_argument(
        '--ours-store',
        choices=['file', 'memory'],
        default='file',
        help='file: our side journals to a store file, fsynced (the default configuration)',
    )
    parser.add_argument('--output', type=Path, default=RESULTS / 'latest.md')
    args = parser.parse_args()
    order = [name for name in SCENARIOS if (not args.only or name in args.only) and name not in args.skip]

    ref_python = reference_python()
    for stale in RESULTS.glob('crash-*.log'):
        stale.unlink()
    started = time.perf_counter()
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in order:
        scenario = SCENARIOS[name]
        raw[name] = {'ours': [], 'reference': []}
        rounds = args.rounds or (scenario.quick_rounds if args.quick else scenario.rounds)
        for r in range(rounds):
            # Alternate which side goes first, so neither always runs right after the other.
            sides = ['ours', 'reference'] if r % 2 == 0 else ['reference', 'ours']
            for side in sides:
                python = sys.executable if side == 'ours' else ref_python
                result = run_side(side, python, scenario, args)
                raw[name][side].append(result)
                status = result.get('crash') or result.get('failure') or 'ok'
                took = result.get('process_wall')
                print(
                    f'  {name:<15} round {r + 1}/{rounds} {side:<9} '
                    f'{f"{took:6.1f} s" if took else "       "}  {" ".join(str(status).split())[:90]}',
                    file=sys.stderr,
                    flush=True,
                )
    elapsed = time.perf_counter() - started

    summaries = {name: {side: summarise(raw[name][side]) for side in raw[name]} for name in order}
    modes = [m for m in (summaries[n]['ours']['mode'] for n in order) if m not in (None, 'agent.run')]
    ours_mode = modes[0] if modes else args.ours_mode
    load = ' / '.join(f'{x:.1f}' for x in os.getloadavg())
    header = (
        f'## Benchmark: harness vs. pydantic-ai-harness 0.62.0 `DynamicWorkflow`\n\n'
        f'{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, '
        f'Python {platform.python_version()}, load average {load}; '
        f'{sum(len(raw[n]["ours"]) for n in order)} interleaved subprocess pairs'
        f'{" (--quick)" if args.quick else ""}; ours mode: `{ours_mode}`'
        f'{", HARNESS_TRACING=off" if args.ours_tracing == "off" else ""}; ours store: {args.ours_store}; '
        f'total {elapsed:.0f} s.\n\n'
    )
    text = (
        header
        + table(summaries, order)
        + '\n'
        + LEGEND
        + '\n### Details\n\n'
        + details(summaries, order)
        + '\n'
        + notes(summaries, order)
    )
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    args.output.with_suffix('.json').write_text(json.dumps({'summaries': summaries, 'raw': raw}, indent=1))
    print(f'Written to {args.output}', file=sys.stderr)

    ours_broken = [n for n in order if summaries[n]['ours']['crash'] or summaries[n]['ours']['failure']]
    return 1 if ours_broken else 0


if __name__ == '__main__':
    sys.exit(main())
