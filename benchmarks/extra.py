"""Extra benchmarks of this project alone: durability, tracing, and the idea itself.

    python benchmarks/extra.py [--quick] [--only durable tracing idea] [--output PATH]

Runs `bench_durable.py` (what the journal and snapshots cost, snapshot sizes, resume in a fresh process,
replay throughput), `bench_tracing.py` (what tracing costs per call), `bench_breakdown.py` (where one call's
time goes in the default configuration, and the goals of #15), `bench_idea.py` (one
`run_workflow` script against a conventional one-tool-call-per-turn agent on the same review),
`bench_control.py`, `bench_cold.py` and `bench_temporal.py` (the Temporal engine against the embedded
one: per-call overhead, and throughput with one and two worker processes), prints their Markdown tables
and writes them to `benchmarks/results/extra.md`. Meant to run after `run.py` (as `make bench` does),
whose `results/latest.json` the durability table compares against; without that file the table says so.
About 6–8 minutes on 2 busy cores; `--quick` about 3.

The helpers below (medians, formatting, Markdown tables, process trees) are shared by the three
benchmark files, so this module imports nothing heavy at the top.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import descendants

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / 'results'

# -- numbers ---------------------------------------------------------------------------------------


def med(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None


def spread(values: Sequence[float]) -> str:
    """`n=7, 12.1–15.3 ms`: how many samples and their range, for a table's detail column."""
    if not values:
        return 'n=0'
    return f'n={len(values)}, {fmt_time(min(values))}–{fmt_time(max(values))}'


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return '–'
    magnitude = abs(seconds)
    if magnitude < 1e-3:
        return f'{seconds * 1e6:.0f} µs'
    if magnitude < 1:
        return f'{seconds * 1e3:.1f} ms'
    return f'{seconds:.2f} s'


def fmt_us(seconds: float | None) -> str:
    return '–' if seconds is None else f'{seconds * 1e6:,.0f} µs'


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return '–'
    return f'{a / b:.2f}×'


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return '–'
    if n < 1024:
        return f'{n:.0f} B'
    if n < 1024 * 1024:
        return f'{n / 1024:.1f} KB'
    return f'{n / 1024 / 1024:.1f} MB'


def fmt_int(n: float | None) -> str:
    return '–' if n is None else f'{n:,.0f}'


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> str:
    """A Markdown table; `align` is one character per column, `l` or `r` (default: first left, rest right)."""
    align = align or 'l' + 'r' * (len(header) - 1)
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '|'.join('---' if a == 'l' else '---:' for a in align) + '|']
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines) + '\n'


def machine_line() -> str:
    load = ' / '.join(f'{x:.1f}' for x in os.getloadavg())
    return (
        f'{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, '
        f'Python {platform.python_version()}, load average {load}'
    )


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- processes -------------------------------------------------------------------------------------


def clean_env() -> dict[str, str]:
    """The environment for benchmark subprocesses: the project importable, nothing sent anywhere."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(ROOT), str(HERE)]), 'PYTHONUNBUFFERED': '1'}
    for key in (
        'LOGFIRE_TOKEN',
        'HARNESS_TRACING',
        'OTEL_EXPORTER_OTLP_ENDPOINT',
        'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    ):
        env.pop(key, None)
    return env


MARK = 'BENCH '
"""The prefix of a worker's result line (anything else it prints is ignored)."""


class LineWorker:
    """A benchmark worker process driven over its stdin: one command per line, one `MARK` JSON line back."""

    def __init__(self, name: str, argv: list[str], cwd: str) -> None:
        import subprocess

        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=clean_env(),
        )

    def ask(self, command: str | None = None) -> dict[str, Any]:
        """Send `command` (none: just read the next result, e.g. the worker's setup line) and return its result."""
        import json

        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(command + '\n')
            self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(MARK):
                out = json.loads(line[len(MARK) :])
                if not out.get('ok', True):
                    raise RuntimeError(f'{self.name}: wrong value for {command}')
                return out
        err = self.proc.stderr.read() if self.proc.stderr else ''
        raise RuntimeError(f'{self.name} ended: exit {self.proc.wait()}: {err[-800:]}')

    def close(self) -> None:
        import subprocess

        try:
            if self.proc.stdin is not None:
                self.proc.stdin.write('quit\n')
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` (a process this benchmark started) and then the processes it had started, by id."""
    kids = descendants(pid)
    for target in [pid, *kids]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


# -- the driver ------------------------------------------------------------------------------------

BENCHES = ('durable', 'tracing', 'breakdown', 'idea', 'control', 'cold', 'temporal')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer repetitions (about 90 s instead of about 4 min)')
    parser.add_argument('--only', nargs='+', choices=BENCHES, default=list(BENCHES))
    parser.add_argument('--output', type=Path, default=RESULTS / 'extra.md')
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))

    started = time.perf_counter()
    sections: list[str] = []
    failed: list[str] = []
    for name in BENCHES:
        if name not in args.only:
            continue
        log(f'extra: {name} ...')
        t0 = time.perf_counter()
        try:
            module = __import__(f'bench_{name}')
            sections.append(module.run(quick=args.quick))
        except Exception as exc:  # one broken benchmark must not hide the others' tables
            import traceback

            traceback.print_exc()
            failed.append(name)
            sections.append(f'### bench_{name}\n\nFAILED: {type(exc).__name__}: {exc}\n')
        log(f'extra: {name} took {time.perf_counter() - t0:.0f} s')
    header = (
        f'## Extra benchmarks: durability, tracing, and the idea\n\n{machine_line()}'
        f'{" (--quick)" if args.quick else ""}; total {time.perf_counter() - started:.0f} s.\n\n'
    )
    text = header + '\n'.join(sections)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    log(f'Written to {args.output}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
