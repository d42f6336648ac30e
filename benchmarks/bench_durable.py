"""What durability costs: the journal and snapshots per call, snapshot sizes, resume, replay.

    python benchmarks/bench_durable.py [--quick]

1. Per-call cost: the same script (N sequential awaits, or one gather of N) calling an instant async host
   tool, on `Harness(store=None)`, `store=':memory:'` and a store file in a temporary directory (WAL,
   `synchronous=FULL`: an fsync per transaction). Tracing is off on all three. Durability per call is
   (run time with the store − run time without) / N, the median of differences taken within one round.
   The reference's per-call cost comes from `results/latest.json` (written by `run.py`), as the slope of
   its warm medians over the 1-, 10- and 50-call rows.
2. Snapshot sizes, read from the file store: a small script, and a script holding 1,000 strings when it
   pauses.
3. Resume in a fresh process: a subprocess runs a 40-call sequential workflow (the tool sleeps 0.05 s)
   on a store file and is SIGKILLed once 20 calls are journaled; then `python -c "<same Harness>;
   h.resume_sync(run_id)"` is timed end to end, and the subprocess reports its own phases.
4. Replay: a stored 1,000-call run is replayed from the journal (no callee runs).

Prints one Markdown section; `extra.py` collects it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import (
    HERE,
    ROOT,
    clean_env,
    fmt_bytes,
    fmt_int,
    fmt_ratio,
    fmt_time,
    fmt_us,
    kill_tree,
    log,
    med,
    spread,
    table,
)

N = 50
SEQ = 'acc = 0\nfor i in range({n}):\n    acc += await f(i=i)\nacc\n'
GATHER = 'import asyncio\nrs = await asyncio.gather(*[f(i=i) for i in range({n})])\nsum(rs)\n'
STRINGS = (
    "xs = ['string number ' + str(i) + ' of the thousand kept across the pause' for i in range(1000)]\n"
    'a = await f(i=1)\n'
    'b = await f(i=2)\n'
    'len(xs) + a + b\n'
)
SHAPES = {'seq': ('N sequential awaits', SEQ), 'gather': ('one gather of N', GATHER)}
VARIANTS = ('off', 'memory', 'file')
VARIANT_LABEL = {'off': 'store=None', 'memory': "store=':memory:'", 'file': 'store file (FULL)'}

RESUME_CALLS = 40
RESUME_SLEEP = 0.05
RESUME_KILL_AFTER = 20

# The child processes build the same Harness: `python -c CODE STORE [RUN_ID]`.
CHILD_PRELUDE = f"""\
import time
T0 = time.perf_counter()
import asyncio, json, sys
from harness import Harness
T1 = time.perf_counter()
h = Harness(store=sys.argv[1], tracing=False)
RAN = []

@h.tool
async def f(*, i: int) -> int:
    RAN.append(i)
    await asyncio.sleep({RESUME_SLEEP})
    return i

"""
CHILD_RUN = CHILD_PRELUDE + f'h.run_sync({SEQ.format(n=RESUME_CALLS)!r})\n'
CHILD_RESUME = (
    CHILD_PRELUDE
    + """\
T2 = time.perf_counter()
r = h.resume_sync(sys.argv[2])
T3 = time.perf_counter()
h.close()
T4 = time.perf_counter()
print(json.dumps({'imports': T1 - T0, 'build': T2 - T1, 'resume': T3 - T2, 'close': T4 - T3, 'value': r.value,
                  'status': r.status, 'live_calls': len(RAN), 'calls': len(r.calls)}), flush=True)
"""
)


def build(store: str | None) -> Any:
    from harness import Harness

    h = Harness(store=store, tracing=False)

    @h.tool
    async def f(*, i: int) -> int:
        return i

    return h


def timed(h: Any, code: str) -> tuple[float, float, Any]:
    cpu, start = time.process_time(), time.perf_counter()
    result = h.run_sync(code)
    return time.perf_counter() - start, time.process_time() - cpu, result


# -- 1. per-call cost --------------------------------------------------------------------------------


def per_call(harnesses: dict[str, Any], rounds: int) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Samples keyed (variant, shape): wall and CPU per run; and the run ids kept on the file store."""
    codes = {shape: code.format(n=N) for shape, (_, code) in SHAPES.items()}
    expected = N * (N - 1) // 2
    for h in harnesses.values():  # warm-up: start the worker, check each script once (memoised after)
        for code in codes.values():
            assert h.run_sync(code).value == expected
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    run_ids: dict[str, list[str]] = {shape: [] for shape in codes}
    for r in range(rounds):
        order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
        for shape, code in codes.items():
            for variant in order:
                w, c, result = timed(harnesses[variant], code)
                assert result.value == expected, result.value
                wall.setdefault((variant, shape), []).append(w)
                cpu.setdefault((variant, shape), []).append(c)
                if variant == 'file':
                    run_ids[shape].append(result.run_id)
    return {'wall': wall, 'cpu': cpu}, run_ids


def paired_per_call(samples: dict[tuple[str, str], list[float]], variant: str, shape: str) -> float | None:
    with_store, without = samples[(variant, shape)], samples[('off', shape)]
    diffs = [(a - b) / N for a, b in zip(with_store, without, strict=True)]
    return med(diffs)


def reference_per_call() -> dict[str, Any]:
    """The reference's cost per sub-agent call in `run.py`'s last results: the slope of warm time over N."""
    path = HERE / 'results' / 'latest.json'
    if not path.exists():
        return {'missing': f'{path.relative_to(ROOT)} not found (run `python benchmarks/run.py` first)'}
    summaries = json.loads(path.read_text()).get('summaries', {})
    out: dict[str, Any] = {
        'file': str(path.relative_to(ROOT)),
        'written': time.strftime('%Y-%m-%d %H:%M', time.localtime(path.stat().st_mtime)),
    }
    for side in ('reference', 'ours'):
        points = [(n, summaries.get(f'chain{n}', {}).get(side, {}).get('warm')) for n in (1, 10, 50)]
        points = [(n, t) for n, t in points if t is not None]
        if len(points) >= 2:
            out[side] = statistics.linear_regression([n for n, _ in points], [t for _, t in points]).slope
            out[f'{side}_points'] = points
        bare = summaries.get('bare50', {}).get(side, {}).get('warm')
        if bare is not None:
            out[f'{side}_bare'] = bare / 50
    if 'reference' not in out:
        out['missing'] = f'{out["file"]} has no chain1/chain10/chain50 rows for the reference'
    return out


def transactions(h: Any, code: str) -> int:
    """How many write transactions (COMMITs) one run makes on `h`'s store (traced on the store's connection)."""
    seen: list[str] = []
    conn = h.store._conn  # a benchmark may look inside: the count is not part of the public API
    conn.set_trace_callback(seen.append)
    try:
        h.run_sync(code)
    finally:
        conn.set_trace_callback(None)
    return sum(1 for sql in seen if sql.strip().upper().startswith('COMMIT'))


def raw_commit(workdir: Path, count: int = 50, size: int = 4600) -> float | None:
    """Median seconds of one bare SQLite commit (WAL, synchronous=FULL) of a `size`-byte row in `workdir`."""
    conn = sqlite3.connect(workdir / 'raw.db', isolation_level=None)
    try:
        conn.execute('PRAGMA journal_mode = WAL')
        conn.execute('PRAGMA synchronous = FULL')
        conn.execute('CREATE TABLE t (id INTEGER PRIMARY KEY, blob BLOB)')
        times = []
        payload = os.urandom(size)
        for _ in range(count):
            start = time.perf_counter()
            conn.execute('BEGIN IMMEDIATE')
            conn.execute('INSERT INTO t (blob) VALUES (?)', (payload,))
            conn.execute('COMMIT')
            times.append(time.perf_counter() - start)
        return med(times)
    finally:
        conn.close()


# -- 2. snapshot sizes ---------------------------------------------------------------------------------


def snapshot_sizes(path: str, run_ids: list[str]) -> dict[str, Any]:
    with sqlite3.connect(path) as conn:
        marks = ','.join('?' * len(run_ids))
        rows = conn.execute(f'SELECT run_id, size FROM snapshots WHERE run_id IN ({marks})', run_ids).fetchall()
    sizes = [size for _, size in rows]
    per_run: dict[str, int] = {}
    for run_id, _ in rows:
        per_run[run_id] = per_run.get(run_id, 0) + 1
    return {
        'median': med(sizes),
        'max': max(sizes) if sizes else None,
        'count': len(sizes),
        'per_run': med(per_run.values()),
        'total_per_run': med([sum(s for rid, s in rows if rid == run) for run in per_run]),
    }


# -- 3. resume in a fresh process ------------------------------------------------------------------------


def interrupted_run(workdir: Path) -> tuple[Path, str, int]:
    """A store file holding one run SIGKILLed after RESUME_KILL_AFTER finished calls; (path, run id, ok calls)."""
    path = workdir / 'interrupted.db'
    proc = subprocess.Popen(
        [sys.executable, '-c', CHILD_RUN, str(path)],
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    done = 0
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f'the run to interrupt ended by itself (exit {proc.returncode}): '
                    f'{(proc.stderr.read() if proc.stderr else "")[-500:]}'
                )
            if path.exists():
                try:
                    with sqlite3.connect(f'file:{path}?mode=ro', uri=True, timeout=1) as conn:
                        done = conn.execute("SELECT count(*) FROM calls WHERE status = 'ok'").fetchone()[0]
                except sqlite3.Error:
                    done = 0
                if done >= RESUME_KILL_AFTER:
                    break
            time.sleep(0.005)
        else:
            raise RuntimeError('the run to interrupt did not journal enough calls in 120 s')
    finally:
        kill_tree(proc.pid)
        proc.wait()
    with sqlite3.connect(path) as conn:  # fold the WAL into the file, so that copies of it are complete
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        run_id, status = conn.execute('SELECT run_id, status FROM runs').fetchone()
        done = conn.execute("SELECT count(*) FROM calls WHERE run_id = ? AND status = 'ok'", (run_id,)).fetchone()[0]
    assert status == 'running', status
    return path, run_id, done


def resume_once(source: Path, run_id: str, workdir: Path, k: int) -> dict[str, Any]:
    copy = workdir / f'resume-{k}.db'
    shutil.copyfile(source, copy)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, '-c', CHILD_RESUME, str(copy), run_id],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{')]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f'resume failed (exit {proc.returncode}): {proc.stderr[-800:]}')
    out = json.loads(lines[-1])
    if out['value'] != RESUME_CALLS * (RESUME_CALLS - 1) // 2 or out['status'] != 'completed':
        raise RuntimeError(f'resume gave the wrong result: {out}')
    out['wall'] = wall
    return out


# -- 4. replay ----------------------------------------------------------------------------------------


def replay_throughput(h: Any, calls: int, shape: str, runs: int, rounds: int) -> dict[str, Any]:
    code = SHAPES[shape][1].format(n=calls)
    originals, replays, run_id = [], [], None
    for _ in range(runs):
        w, _, result = timed(h, code)
        assert result.value == calls * (calls - 1) // 2 and len(result.calls) == calls
        originals.append(w)
        run_id = result.run_id
    for _ in range(rounds):
        start = time.perf_counter()
        result = h.replay_sync(run_id)
        replays.append(time.perf_counter() - start)
        assert len(result.calls) == calls and all(c.source == 'replayed' for c in result.calls), {
            c.source for c in result.calls
        }
    return {'original': originals, 'replay': replays, 'calls': calls}


# -- the report ------------------------------------------------------------------------------------


def run(quick: bool = False) -> str:
    rounds = 7 if quick else 15
    workdir = Path(tempfile.mkdtemp(prefix='bench-durable-'))
    store_file = str(workdir / 'runs.db')
    harnesses = {'off': build(None), 'memory': build(':memory:'), 'file': build(store_file)}
    try:
        log(f'  durable: per-call cost, {rounds} rounds')
        samples, run_ids = per_call(harnesses, rounds)

        codes = {shape: code.format(n=N) for shape, (_, code) in SHAPES.items()}
        samples['transactions'] = {shape: transactions(harnesses['file'], code) for shape, code in codes.items()}
        samples['raw_commit'] = raw_commit(workdir)

        log('  durable: snapshot sizes')
        strings_ids = [harnesses['file'].run_sync(STRINGS).run_id for _ in range(3)]
        sizes = {
            'seq': snapshot_sizes(store_file, run_ids['seq']),
            'gather': snapshot_sizes(store_file, run_ids['gather']),
            'strings': snapshot_sizes(store_file, strings_ids),
        }

        log('  durable: replay of a stored 1,000-call run')
        replays = {'gather': replay_throughput(harnesses['file'], 1000, 'gather', 3, 3 if quick else 5)}
        if not quick:
            replays['seq'] = replay_throughput(harnesses['file'], 1000, 'seq', 1, 3)
    finally:
        for h in harnesses.values():
            h.close()

    log('  durable: resume in a fresh process')
    resume_rounds = 1 if quick else 3
    try:
        source, run_id, done = interrupted_run(workdir)
        resumes = [resume_once(source, run_id, workdir, k) for k in range(resume_rounds)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return report(samples, sizes, replays, resumes, done, rounds)


def report(
    samples: dict[str, Any],
    sizes: dict[str, Any],
    replays: dict[str, Any],
    resumes: list[dict[str, Any]],
    done: int,
    rounds: int,
) -> str:
    ref = reference_per_call()
    wall, cpu = samples['wall'], samples['cpu']
    blocks = ['### Durability: journal + snapshots (`bench_durable.py`)']
    blocks.append(
        f'Per-call cost: one script of {N} calls to an instant async host tool `f(*, i: int) -> int`, '
        f'`Harness.run_sync` (no orchestrator model), `tracing=False`, type check memoised after a warm-up run; '
        f'{rounds} interleaved rounds, medians. *durability / call* = median over rounds of '
        f'(run with the store − run with `store=None`) / {N}. The store file is in the temporary directory '
        f'(ext4, the same disk as the repository), WAL with `synchronous=FULL`.'
    )
    ref_slope = ref.get('reference')
    rows = []
    for shape, (label, _) in SHAPES.items():
        base = med(wall[('off', shape)])
        file_per_call = paired_per_call(wall, 'file', shape)
        rows.append(
            [
                label.replace('N', str(N)),
                *(fmt_time(med(wall[(v, shape)])) for v in VARIANTS),
                fmt_us(paired_per_call(wall, 'memory', shape)),
                fmt_us(file_per_call),
                fmt_us(paired_per_call(cpu, 'file', shape)),
                fmt_ratio(file_per_call, ref_slope) if ref_slope else 'no latest.json',
                fmt_us(base / N if base else None),
                f'{samples["transactions"][shape]} ({samples["transactions"][shape] / N:.1f} / call)',
            ]
        )
    blocks.append(
        table(
            [
                'workflow',
                'store=None',
                "':memory:'",
                'file (FULL)',
                'durability / call: memory',
                'durability / call: file',
                'host CPU / call: file',
                'file durability / ref call',
                'whole call, store=None',
                'file commits / run',
            ],
            rows,
        )
    )
    commit = samples.get('raw_commit')
    seq_txn = samples['transactions']['seq']
    blocks.append(
        f"Where the file store's time goes: a bare SQLite commit (WAL, `synchronous=FULL`, one 4.5 KB row) in "
        f'the same directory takes {fmt_time(commit)} (median of 50), and the {N}-await script commits {seq_txn} '
        f'times, so fsyncs alone account for about {fmt_us(commit * seq_txn / N if commit else None)} of each '
        f'sequential call; a gather pays per pause, not per call. *host CPU / call* includes the kernel time of '
        f'those fsyncs.'
    )
    if 'missing' in ref:
        blocks.append(f'Reference: {ref["missing"]}; the ratio column is empty.')
    else:
        pts = ', '.join(f'N={n}: {fmt_time(t)}' for n, t in ref['reference_points'])
        ours_pts = ', '.join(f'N={n}: {fmt_time(t)}' for n, t in ref.get('ours_points', []))
        bare = ref.get('reference_bare')
        engine = ref_slope - bare if bare is not None else None
        engine_text = (
            f'about {fmt_us(engine)}'
            if engine is not None and engine > 0
            else 'not measurable from these rows (the slope is below the bare cost: noise)'
        )
        blocks.append(
            f'Reference per call, from `{ref["file"]}` ({ref["written"]}): the least-squares slope of its warm '
            f'medians ({pts}) is **{fmt_us(ref_slope)} per sub-agent call**. That includes one pydantic-ai '
            f"`Agent.run` of the instant sub-agent ({fmt_us(bare)} per call in its bare row), so its engine's "
            f'own overhead per call is {engine_text}. *file durability / ref call* divides our file-store '
            f'durability cost per call by that whole per-call slope. (Our side in the same file, with tracing and '
            f'an in-memory store: slope {fmt_us(ref.get("ours"))} per call; {ours_pts}.) Three noisy medians make '
            f'a rough slope.'
        )

    blocks.append('Snapshots (file store; sizes of the sealed blobs as stored):')
    srows = []
    for key, label in (
        ('seq', f'{N} sequential awaits'),
        ('gather', f'gather of {N}'),
        ('strings', '1,000 strings (~60 chars each) live at each of 2 pauses'),
    ):
        z = sizes[key]
        srows.append(
            [
                label,
                fmt_int(z['per_run']),
                fmt_bytes(z['median']),
                fmt_bytes(z['max']),
                fmt_bytes(z['total_per_run']),
                fmt_int(z['count']),
            ]
        )
    blocks.append(table(['script', 'snapshots / run', 'median', 'max', 'total / run', 'snapshots measured'], srows))

    imports, build_, resume, close, wall_ = (
        med(r[k] for r in resumes) for k in ('imports', 'build', 'resume', 'close', 'wall')
    )
    live = resumes[0]['live_calls']
    floor = live * RESUME_SLEEP
    rest = wall_ - imports - build_ - resume - close if None not in (wall_, imports, build_, resume, close) else None
    blocks.append(
        f'Resume in a fresh process: a {RESUME_CALLS}-call sequential run (the tool sleeps {RESUME_SLEEP} s) on a '
        f'store file, SIGKILLed with {done} calls finished; then `python -c "<same Harness>; '
        f'h.resume_sync(run_id)"`, {len(resumes)} time(s), each on a copy of that file; medians. The resumed run '
        f'executed {live} call(s) (the others were answered from the journal), so {fmt_time(floor)} of '
        f'`resume_sync` is the tool sleeping.'
    )
    blocks.append(
        table(
            ['phase', 'time', 'detail'],
            [
                ['end to end (spawn to exit)', fmt_time(wall_), spread([r['wall'] for r in resumes])],
                [
                    '· `from harness import Harness` in the child',
                    fmt_time(imports),
                    'pydantic-ai, logfire, pydantic-monty',
                ],
                ['· build the Harness', fmt_time(build_), ''],
                [
                    '· `resume_sync`',
                    fmt_time(resume),
                    f'{spread([r["resume"] for r in resumes])}; '
                    f'{live} tool call(s) × {RESUME_SLEEP} s = {fmt_time(floor)}',
                ],
                [
                    '· · resume overhead (`resume_sync` − tool sleeps)',
                    fmt_time(resume - floor if resume else None),
                    'open the store, verify and load the snapshot, start a sandbox worker, journal, finish',
                ],
                ['· `h.close()`', fmt_time(close), 'stop the sandbox worker, close the store'],
                ['· interpreter start and exit', fmt_time(rest), 'end to end − the phases above'],
            ],
            'lrl',
        )
    )

    blocks.append(
        'Replay of a stored 1,000-call run (file store; `replay_sync` answers every call from the '
        'journal: no callee runs, nothing is written):'
    )
    rrows = []
    for shape, r in replays.items():
        orig, rep = med(r['original']), med(r['replay'])
        label = 'gather of 1,000' if shape == 'gather' else '1,000 sequential awaits'
        rrows.append(
            [
                label,
                fmt_time(orig),
                f'{r["calls"] / orig:,.0f}',
                fmt_time(rep),
                f'{r["calls"] / rep:,.0f}',
                fmt_ratio(orig, rep),
                f'{len(r["original"])} + {len(r["replay"])}',
            ]
        )
    blocks.append(
        table(
            [
                'stored run',
                'original run',
                'calls/s',
                'replay',
                'calls/s',
                'original / replay',
                'samples (runs + replays)',
            ],
            rrows,
        )
    )
    return '\n'.join(block.rstrip('\n') + '\n' for block in blocks)


def main() -> None:
    quick = '--quick' in sys.argv
    print(run(quick=quick))


if __name__ == '__main__':
    main()
