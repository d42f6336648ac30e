"""The command line's cold start: a fresh `harness` process for each command that runs no model.

    python benchmarks/bench_cold.py [--quick]

Each row is the wall time of one whole process (what the `harness` console script runs, interpreter
start to exit), the median of several, run in an empty directory against a store holding one run. Bytecode is
cached (a private `PYTHONPYCACHEPREFIX`, warmed by one untimed run of each command) so the numbers are
what a user sees from the second command on, not the one-time compilation.

*before* is the same commands on the CLI as it was before issue 13 (commit `BASELINE`, extracted with
`git archive` into a temporary directory, with its own store), where every command imported the whole
engine with pydantic-ai and logfire; the goal for `--help` and `runs` is under 0.5 s. `agents` builds the
catalog, which imports pydantic-ai for the built-in sub-agents, so it cannot be as fast; pydantic-ai itself
imports logfire (its graph module imports `logfire_api`, which loads logfire when it is installed), so
what `agents` must avoid is setting tracing up, which the last column checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import ROOT, clean_env, fmt_ratio, fmt_time, log, med, table

BASELINE = '80479be'
"""The last commit before issue 13's lazy imports."""
SCRIPT = 'files = await list_files(pattern="*.txt")\nlen(files)\n'
COMMANDS: list[tuple[str, list[str]]] = [
    ('`harness --help`', ['--help']),
    ('`harness runs`', ['runs']),
    ('`harness show RUN`', ['show', '{run}']),
    ('`harness trace RUN`', ['trace', '{run}']),
    ('`harness agents`', ['agents', '--plain']),
]
HEAVY = ('pydantic_ai', 'logfire')
ENTRY = 'import sys; sys.argv[0] = "harness"; from harness._cli._app import app; app()'
"""What the `harness` console script runs, for a source tree given by PYTHONPATH."""


def cli(source: Path, args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', ENTRY, *args],
        cwd=cwd,
        env={**env, 'PYTHONPATH': str(source)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def timed(source: Path, args: list[str], cwd: Path, env: dict[str, str], reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        done = cli(source, args, cwd, env)
        samples.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f'harness {args} failed: {done.stderr.strip()[-500:]}')
    return samples


def heavy_imports(source: Path, args: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """Which of pydantic-ai and logfire the command imported, and whether it set tracing up."""
    code = (
        'import sys\nfrom harness._cli._app import app\n'
        f'try:\n    app({args!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n'
        'tracing = sys.modules.get("harness._tracing._setup")\n'
        'configured = ["tracing set up"] if getattr(tracing, "_mode", None) not in (None, "off") else []\n'
        f'print("IMPORTED", [m for m in {HEAVY!r} if m in sys.modules] + configured)'
    )
    done = subprocess.run(
        [sys.executable, '-c', code],
        cwd=cwd,
        env={**env, 'PYTHONPATH': str(source)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith('IMPORTED')), 'IMPORTED ?')
    return eval(line.removeprefix('IMPORTED '))  # a list literal this script printed


def prepare(source: Path, work: Path, env: dict[str, str]) -> str:
    """A store with one run in `work`; the run's id."""
    work.mkdir(parents=True, exist_ok=True)
    (work / 'flow.py').write_text(SCRIPT)
    (work / 'a.txt').write_text('a\n')
    done = cli(source, ['exec', 'flow.py', '--json'], work, env)
    if done.returncode != 0:
        raise RuntimeError(f'harness exec failed: {done.stderr.strip()[-500:]}')
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])['run_id']


def baseline_source(tmp: Path) -> Path | None:
    """The CLI as of `BASELINE`, extracted from git; None outside a git checkout that has it."""
    target = tmp / 'baseline'
    target.mkdir()
    archive = subprocess.run(
        ['git', 'archive', BASELINE, 'harness', 'subagents', 'tools'], cwd=ROOT, capture_output=True, timeout=60
    )
    if archive.returncode != 0:
        return None
    subprocess.run(['tar', '-x', '-C', str(target)], input=archive.stdout, check=True, timeout=60)
    return target


def run(*, quick: bool = False) -> str:
    reps = 3 if quick else 7
    tmp = Path(tempfile.mkdtemp(prefix='harness-cold-'))
    try:
        env = {**clean_env(), 'PYTHONPYCACHEPREFIX': str(tmp / 'pycache'), 'COLUMNS': '100'}
        env.pop('PYTHONDONTWRITEBYTECODE', None)
        for key in ('HARNESS_STORE', 'HARNESS_MODEL', 'HARNESS_BASE_URL', 'OPENAI_API_KEY'):
            env.pop(key, None)
        sides: dict[str, tuple[Path, Path, str]] = {}
        for name, source in (('now', ROOT), ('before', baseline_source(tmp))):
            if source is None:
                log(f'bench_cold: no commit {BASELINE} here; the before column stays empty')
                continue
            work = tmp / f'work-{name}'
            sides[name] = (source, work, prepare(source, work, env))
        results: dict[str, dict[str, float | None]] = {label: {} for label, _ in COMMANDS}
        imported: dict[str, list[str]] = {}
        for label, args in COMMANDS:
            for source, work, run_id in sides.values():
                cli(source, [a.format(run=run_id) for a in args], work, env)  # warm: bytecode, disk cache
            samples: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(reps):  # interleaved, so load on the machine falls on both
                for name, (source, work, run_id) in sides.items():
                    argv = [a.format(run=run_id) for a in args]
                    samples[name] += timed(source, argv, work, env, 1)
            for name in sides:
                results[label][name] = med(samples[name])
            source, work, run_id = sides['now']
            imported[label] = heavy_imports(source, [a.format(run=run_id) for a in args], work, env)
            log(f'bench_cold: {label}: {results[label]}')
        rows = [
            [
                label,
                fmt_time(results[label].get('now')),
                fmt_time(results[label].get('before')),
                fmt_ratio(results[label].get('now'), results[label].get('before')),
                ', '.join(imported[label]) or 'neither',
            ]
            for label, _ in COMMANDS
        ]
        return (
            f'### CLI cold start (`bench_cold.py`; a fresh process per command, median of {reps}; '
            f'before = commit {BASELINE})\n\n'
            + table(['command', 'now', 'before', 'now / before', 'loads (now)'], rows, align='lrrrl')
            + '\nGoal: `--help` and `runs` under 0.5 s.\n'
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    os.chdir(ROOT)
    print(run(quick='--quick' in sys.argv))
