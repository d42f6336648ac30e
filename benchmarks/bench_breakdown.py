"""Where one call's time goes, in the default configuration (tracing on, file store), and the goals of #15.

    python benchmarks/bench_breakdown.py [--quick] [--gather N]

Two worker subprocesses, because tracing is process-wide and one-way (see `bench_tracing.py`): `on` builds
`Harness(tracing=True)` three times (a store file in a temporary directory, the default; `store=':memory:'`;
`store=None`), `off` builds `Harness(tracing=False)` on a store file. Each Harness has an instant async host
tool `f` and a sub-agent `echo`, a pydantic-ai `Agent(TestModel())` registered with `add_agent`. The driver
runs them alternately, one run at a time, over stdin, in rounds whose order flips, so load falls on all.

- Per call: every run is new script text (a salt), so the type check is paid every time; a call's cost is
  the slope `(T(N) - T(1)) / (N - 1)` of a pair of runs made back to back (N = 100 host tool calls, 20
  sub-agent calls in sequence), which cancels the check and the run's own fixed cost. Medians over rounds.
- Attribution by difference, side by side: file − `:memory:` (the fsyncs), `:memory:` − `None` (the rest of
  the journal and snapshots), tracing on − off, and, for a sub-agent call, a bare `Agent.run` in the `on`
  worker with pydantic-ai's instrumentation (what `configure_tracing` installs) and without it
  (`agent.instrument = False`): pydantic-ai's share and its instrumentation's share. What is left is the
  engine (sandbox round trips, dispatch, the event loop).
- A cProfile of 200 host tool calls and of 50 sub-agent calls on the default Harness, with every function's
  self time put in a bucket by its file path (sandbox, store, tracing, pydantic-ai, the rest of the harness);
  the standard library, built-ins and shared libraries (pydantic, anyio) are charged to their callers, up to
  the first frame that has a bucket. cProfile roughly doubles a call's time, so read shares. It sees the main
  thread only: the sandbox runs in worker processes, so the time the event loop waits for it shows as
  `waiting` (`select`/`epoll`); journal writes run on the event loop when the store is free, their fsyncs
  included (a write sent to a thread would show as `waiting` too).
- Goals: the ones measurable here are measured (a host tool call end to end; tracing's share of a sub-agent
  call; a gather of 500 sub-agent calls against 500 bare `Agent.run`s, a stand-in for the 10,000 row); the
  ones that need the reference (engine overhead, memory) and the 10,000 gather are read from `run.py`'s
  `results/latest.json` when it exists, else the table says to see the engine table.

About 30–60 s on 2 cores (load average about 1); `--quick` about 20 s. Prints one Markdown section;
`extra.py` collects it.
"""

from __future__ import annotations

import cProfile
import gc
import json
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import HERE, MARK, ROOT, LineWorker, fmt_time, fmt_us, log, med, table

N_TOOLS, N_AGENTS, N_GATHER = 100, 20, 500
PROFILE_TOOLS, PROFILE_AGENTS = 200, 50


def tool_script(n: int, salt: str) -> str:
    return f"salt = '{salt}'\nacc = 0\nfor i in range({n}):\n    acc += await f(i=i)\nacc\n"


def agent_script(n: int, salt: str) -> str:
    return f"out = []\nfor i in range({n}):\n    out.append(await echo(task='{salt} step ' + str(i)))\nlen(out)\n"


def gather_script(n: int, salt: str) -> str:
    return f"import asyncio\nrs = await asyncio.gather(*[echo(task='{salt} ' + str(i)) for i in range({n})])\nlen(rs)\n"


SCRIPTS = {'tools': tool_script, 'agents': agent_script, 'gather': gather_script}


def expected(shape: str, n: int) -> int:
    return n * (n - 1) // 2 if shape == 'tools' else n


# -- profile buckets ---------------------------------------------------------------------------------

BUCKETS = (
    'sandbox / Monty',
    'store / journal',
    'tracing / spans',
    'pydantic-ai',
    'dispatch / other',
    'waiting (event loop idle)',
)


def bucket(filename: str, name: str) -> str | None:
    """The bucket of one function's self time, from its file path (or a built-in's name); None for code that
    belongs to no one in particular (the standard library, built-ins, pydantic, anyio...), whose time is
    charged to whoever called it (`charge`)."""
    where = (filename + ':' + name).replace('\\', '/')
    if filename == '~':  # a built-in: decide by its name
        if 'poll' in name or 'select' in name:
            return 'waiting (event loop idle)'
        if 'sqlite3' in name:
            return 'store / journal'
        if 'pydantic_monty' in name or 'Monty' in name:
            return 'sandbox / Monty'
        return None
    for key, label in (
        (
            (
                'pydantic_monty',
                'harness/_sandbox',
                'harness/_runner',
                'harness/_loop',
                'harness/_check',
                'harness/_grants',
            ),
            'sandbox / Monty',
        ),
        (('harness/_store', 'harness/_journal', 'harness/_seal', 'sqlite3/'), 'store / journal'),
        (('opentelemetry', 'logfire', 'harness/_tracing', 'harness/_observe', 'harness/_usage'), 'tracing / spans'),
        (('pydantic_ai/', 'pydantic_graph/', 'genai_prices'), 'pydantic-ai'),
        (('harness/',), 'dispatch / other'),
    ):
        if any(k in where for k in key):
            return label
    return None


def charge(raw: dict[Any, Any]) -> dict[str, float]:
    """Self time per bucket; a function without a bucket of its own is charged to its callers, in proportion to
    the time each caller spent in it, up the stack to the first that has one (the event loop's own time ends
    with the Harness that runs the loop: dispatch / other)."""
    memo: dict[Any, dict[str, float]] = {}

    def shares(key: Any) -> dict[str, float]:
        own = bucket(key[0], key[2])
        if own is not None:
            return {own: 1.0}
        if key in memo:
            return memo[key]
        memo[key] = {'dispatch / other': 1.0}  # a cycle (or no caller) ends here
        callers = raw[key][4]
        weights = {c: v[2] or v[3] for c, v in callers.items() if c in raw}
        total = sum(weights.values())
        if total > 0:
            out: dict[str, float] = {}
            for caller, weight in weights.items():
                for b, fraction in shares(caller).items():
                    out[b] = out.get(b, 0.0) + fraction * weight / total
            memo[key] = out
        return memo[key]

    sums = dict.fromkeys(BUCKETS, 0.0)
    for key, (_cc, _nc, tt, _ct, _callers) in raw.items():
        for b, fraction in shares(key).items():
            sums[b] += tt * fraction
    return sums


def profile_run(h: Any, shape: str, n: int) -> dict[str, float]:
    """Seconds of self time per bucket for one run of `n` calls of `shape` on `h` (fresh text, checked first)."""
    code = SCRIPTS[shape](n, uuid.uuid4().hex[:8])
    h.check(code)  # memoised: the run below does not pay the type check, which is not what this is about
    prof = cProfile.Profile()
    gc.collect()
    start = time.perf_counter()
    prof.enable()
    result = h.run_sync(code)
    prof.disable()
    wall = time.perf_counter() - start
    assert result.value == expected(shape, n), result.value
    stats = pstats.Stats(prof)
    raw: dict[Any, Any] = vars(stats)['stats']  # {(file, line, name): (cc, nc, tt, ct, callers)}
    out = charge(raw)
    out['wall'] = wall
    return out


# -- the worker (one subprocess per tracing mode) ------------------------------------------------------


def worker(mode: str, workdir: str) -> None:
    started = time.perf_counter()
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from harness import Harness

    stores: dict[str, str | None] = {'file': str(Path(workdir) / f'runs-{mode}.db')}
    if mode == 'on':
        stores |= {'memory': ':memory:', 'none': None}
    harnesses: dict[str, Any] = {}
    for variant, store in stores.items():
        h = Harness(store=store, tracing=mode == 'on', max_agent_calls=100_000)

        @h.tool
        async def f(*, i: int) -> int:
            return i

        h.add_agent(Agent(TestModel(), name='echo', description='Answers a task.', output_type=str))
        harnesses[variant] = h
    # Bare agents: the one built after configure_tracing (first run) is instrumented as sub-agents are.
    bare: dict[str, Any] = {}

    def say(payload: dict[str, Any]) -> None:
        sys.stdout.write(MARK + json.dumps(payload) + '\n')
        sys.stdout.flush()

    async def bare_runs(agent: Any, n: int, concurrent: bool) -> None:
        import asyncio

        if concurrent:
            await asyncio.gather(*[agent.run(f'task {i}') for i in range(n)])
        else:
            for i in range(n):
                await agent.run(f'step {i}')

    say({'ready': True, 'setup': time.perf_counter() - started})
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == 'quit':
            break
        gc.collect()
        if words[0] == 'run':  # run VARIANT SHAPE N
            variant, shape, n = words[1], words[2], int(words[3])
            code = SCRIPTS[shape](n, uuid.uuid4().hex[:8])
            cpu, start = time.process_time(), time.perf_counter()
            result = harnesses[variant].run_sync(code)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            say({'wall': wall, 'cpu': cpu, 'ok': result.value == expected(shape, n)})
        elif words[0] == 'bare':  # bare instr|plain N seq|gather
            kind, n, concurrent = words[1], int(words[2]), words[3] == 'gather'
            if kind not in bare:
                bare[kind] = Agent(TestModel(), name='echo', output_type=str)
                if kind == 'plain':
                    bare[kind].instrument = False  # overrides `Agent.instrument_all` for this agent
            runner = harnesses['file']._sync  # the Harness's own event loop (a benchmark may look inside)
            start = time.perf_counter()
            runner(bare_runs(bare[kind], n, concurrent))
            say({'wall': time.perf_counter() - start, 'ok': True})
        elif words[0] == 'profile':  # profile SHAPE N
            say({'buckets': profile_run(harnesses['file'], words[1], int(words[2])), 'ok': True})
    for h in harnesses.values():
        h.close()


def start_worker(mode: str, workdir: str) -> LineWorker:
    return LineWorker(f'breakdown worker ({mode})', [str(Path(__file__).resolve()), '--worker', mode, workdir], workdir)


# -- the driver ---------------------------------------------------------------------------------------


def slope(w: LineWorker, variant: str, shape: str, n: int) -> float:
    """Seconds per call: a run of n calls and a run of 1, back to back, both fresh text."""
    one = w.ask(f'run {variant} {shape} 1')['wall']
    many = w.ask(f'run {variant} {shape} {n}')['wall']
    return (many - one) / (n - 1)


def measure(quick: bool) -> dict[str, Any]:
    rounds = 6 if quick else 12
    cells = [('on', v) for v in ('file', 'memory', 'none')] + [('off', 'file')]
    per_call: dict[tuple[str, str, str], list[float]] = {}
    bare: dict[str, list[float]] = {'instr': [], 'plain': []}
    gathers: dict[str, list[float]] = {'harness': [], 'bare': []}
    with tempfile.TemporaryDirectory(prefix='bench-breakdown-') as workdir:
        workers = {mode: start_worker(mode, workdir) for mode in ('on', 'off')}
        try:
            setup = {mode: w.ask()['setup'] for mode, w in workers.items()}
            log(f'  breakdown: workers ready ({", ".join(f"{m} {s:.1f} s" for m, s in setup.items())})')
            for mode, variant in cells:  # warm-up: sandbox workers, checker, configure_tracing
                for shape, n in (('tools', 5), ('agents', 3)):
                    workers[mode].ask(f'run {variant} {shape} {n}')
            for kind in bare:
                workers['on'].ask(f'bare {kind} 20 seq')
            for r in range(rounds):
                log(f'  breakdown: round {r + 1}/{rounds}')
                order = cells if r % 2 == 0 else list(reversed(cells))
                for shape, n in (('tools', N_TOOLS), ('agents', N_AGENTS)):
                    for mode, variant in order:
                        per_call.setdefault((mode, variant, shape), []).append(slope(workers[mode], variant, shape, n))
                for kind in bare if r % 2 == 0 else reversed(list(bare)):
                    bare[kind].append(workers['on'].ask(f'bare {kind} {N_AGENTS * 5} seq')['wall'] / (N_AGENTS * 5))
            for r in range(1 if quick else 3):
                log(f'  breakdown: gather of {N_GATHER}, {r + 1}')
                pair = [('harness', f'run file gather {N_GATHER}'), ('bare', f'bare plain {N_GATHER} gather')]
                for key, command in pair if r % 2 == 0 else pair[::-1]:
                    gathers[key].append(workers['on'].ask(command)['wall'])
            log('  breakdown: profiles')
            profiles = {
                shape: workers['on'].ask(f'profile {shape} {n}')['buckets']
                for shape, n in (('tools', PROFILE_TOOLS), ('agents', PROFILE_AGENTS))
            }
        finally:
            for w in workers.values():
                w.close()
    return {
        'per_call': {'|'.join(k): v for k, v in per_call.items()},
        'bare': bare,
        'gathers': gathers,
        'profiles': profiles,
        'rounds': rounds,
    }


# -- the report ---------------------------------------------------------------------------------------


def share(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return '–'
    return f'{part / whole:.0%}'


def components(m: dict[str, Any], shape: str) -> tuple[float, list[tuple[str, float]]]:
    """The whole per-call cost of `shape` in the default configuration and its parts, by difference."""
    pc = {tuple(k.split('|')): statistics.median(v) for k, v in m['per_call'].items()}
    total = pc[('on', 'file', shape)]
    fsync = total - pc[('on', 'memory', shape)]
    journal = pc[('on', 'memory', shape)] - pc[('on', 'none', shape)]
    tracing = total - pc[('off', 'file', shape)]
    parts: list[tuple[str, float]] = [
        ('store file on disk: `synchronous=FULL` commits (file − `:memory:`)', fsync),
        ('journal + snapshots in memory (`:memory:` − `store=None`)', journal),
    ]
    if shape == 'agents':
        instr, plain = statistics.median(m['bare']['instr']), statistics.median(m['bare']['plain'])
        parts += [
            (
                "pydantic-ai's instrumentation of the sub-agent's `Agent.run` (bare run, instrumented − not)",
                instr - plain,
            ),
            (
                "the harness's own spans (tracing on − off, less pydantic-ai's instrumentation)",
                tracing - (instr - plain),
            ),
            ('pydantic-ai `Agent.run` itself (bare, not instrumented, `TestModel`)', plain),
        ]
    else:
        parts.append(("the harness's spans (tracing on − off)", tracing))
    parts.append(('engine: sandbox round trips, dispatch, event loop (the rest)', total - sum(p for _, p in parts)))
    return total, parts


def profile_table(m: dict[str, Any]) -> str:
    rows = []
    for b in BUCKETS:
        row = [b]
        for shape, n in (('tools', PROFILE_TOOLS), ('agents', PROFILE_AGENTS)):
            p = m['profiles'][shape]
            total = sum(p[x] for x in BUCKETS)
            row += [fmt_us(p[b] / n), share(p[b], total)]
        rows.append(row)
    rows.append(
        ['wall per call (profiled)']
        + [
            x
            for shape, n in (('tools', PROFILE_TOOLS), ('agents', PROFILE_AGENTS))
            for x in (fmt_us(m['profiles'][shape]['wall'] / n), '')
        ]
    )
    return table(
        [
            'bucket (self time, by file path)',
            f'host tool, µs / call ({PROFILE_TOOLS} calls)',
            'share',
            f'sub-agent, µs / call ({PROFILE_AGENTS} calls)',
            'share',
        ],
        rows,
    )


def reference_goals() -> dict[str, Any] | None:
    """Engine-overhead ratios, gather10k and memory from `run.py`'s last results, if any."""
    path = HERE / 'results' / 'latest.json'
    if not path.exists():
        return None
    s = json.loads(path.read_text()).get('summaries', {})

    def get(name: str, side: str, key: str = 'warm') -> float | None:
        return s.get(name, {}).get(side, {}).get(key)

    out: dict[str, Any] = {
        'file': str(path.relative_to(ROOT)),
        'written': time.strftime('%Y-%m-%d %H:%M', time.localtime(path.stat().st_mtime)),
    }
    for name, n in (('chain10', 10), ('chain50', 50), ('gather500', 500)):
        sides = {}
        for side in ('ours', 'reference'):
            t, bare = get(name, side) or get(name, side, 'cold'), get('bare50', side)
            sides[side] = None if t is None or bare is None else t - bare / 50 * n
        if sides['ours'] is not None and sides['reference']:
            out[name] = sides['ours'] / sides['reference']
    g, bare = get('gather10k', 'ours', 'cold'), get('bare50', 'ours')
    if g is not None and bare:
        out['gather10k'] = g / (bare / 50 * 10_000)
    mem = {}
    for side in ('ours', 'reference'):
        vals = [
            (get(n, side, 'host_peak_mb') or 0) + (get(n, side, 'workers_sum_mb') or 0)
            for n in ('wait32same', 'wait32distinct')
        ]
        mem[side] = max(vals) if any(vals) else None
    if mem['ours'] and mem['reference']:
        out['memory'] = (mem['ours'], mem['reference'])
    return out


def verdict(value: float | None, goal: float, unit: str = '×') -> str:
    if value is None:
        return '–'
    if value <= goal:
        return 'met'
    if unit == '×':
        return f'missed by {value / goal:.1f}× ({value:.2f}× against ≤ {goal:g}×)'
    return f'missed by {value / goal:.1f}× ({value * 100:.0f}% against ≤ {goal * 100:.0f}%)'


def report(m: dict[str, Any]) -> str:
    tool_total, tool_parts = components(m, 'tools')
    agent_total, agent_parts = components(m, 'agents')
    rows = [[label, fmt_us(v), share(v, tool_total)] for label, v in tool_parts]
    rows.append(['**a host tool call, end to end**', f'**{fmt_us(tool_total)}**', '100%'])
    tool_table = table(['host tool call: component', 'µs / call', 'share'], rows)
    rows = [[label, fmt_us(v), share(v, agent_total)] for label, v in agent_parts]
    rows.append(['**a sub-agent call, end to end**', f'**{fmt_us(agent_total)}**', '100%'])
    agent_table = table(['sub-agent call: component', 'µs / call', 'share'], rows)

    pc = {tuple(k.split('|')): statistics.median(v) for k, v in m['per_call'].items()}
    agent_off = pc[('off', 'file', 'agents')]
    tracing_share = (agent_total - agent_off) / agent_off if agent_off else None
    g_h, g_b = med(m['gathers']['harness']), med(m['gathers']['bare'])
    g_ratio = g_h / g_b if g_h and g_b else None
    ref = reference_goals()
    see = 'see the engine table'
    goal_rows = []
    for name, label in (
        ('chain10', '10 sequential calls'),
        ('chain50', '50 sequential calls'),
        ('gather500', 'gather of 500'),
    ):
        value = ref.get(name) if ref else None
        goal_rows.append(
            [
                f"engine overhead per call ≤ 0.4× the reference's, {label}",
                f'{value:.2f}×' if value is not None else see,
                verdict(value, 0.4) if value is not None else see,
            ]
        )
    goal_rows.append(
        [
            'a host tool call ≤ 0.3 ms end to end',
            fmt_us(tool_total),
            'met'
            if tool_total <= 0.3e-3
            else f'missed by {tool_total / 0.3e-3:.1f}× ({fmt_us(tool_total - 0.3e-3)} over)',
        ]
    )
    goal_rows.append(
        [
            'tracing adds ≤ 25% to a sub-agent call',
            f'+{tracing_share:.0%} ({fmt_us(agent_off)} → {fmt_us(agent_total)})' if tracing_share is not None else '–',
            verdict(tracing_share, 0.25, '%'),
        ]
    )
    gather10k = ref.get('gather10k') if ref else None
    goal_rows.append(
        [
            f'gather of 10,000 ≤ 1.5× 10,000 bare Agent runs (here: gather of {N_GATHER} against '
            f'{N_GATHER} bare `Agent.run`s gathered)',
            (f'{g_ratio:.2f}× ({fmt_time(g_h)} / {fmt_time(g_b)})' if g_ratio else '–')
            + (f"; run.py's 10,000 against 10,000 × one sequential bare run: {gather10k:.2f}×" if gather10k else ''),
            verdict(g_ratio, 1.5),
        ]
    )
    memory = ref.get('memory') if ref else None
    goal_rows.append(
        [
            "peak memory of 32 concurrent workflows ≤ the reference's",
            f'{memory[0]:.0f} MB / {memory[1]:.0f} MB' if memory else see,
            verdict(memory[0] / memory[1], 1.0) if memory else see,
        ]
    )
    goals = table(['goal (default configuration)', 'measured', 'verdict'], goal_rows, 'lll')
    source = (
        f'The engine-overhead, 10,000-gather and memory rows come from `{ref["file"]}` (written '
        f"{ref['written']}; engine overhead = a side's warm time less its own bare `Agent.run` cost × N)."
        if ref
        else 'No `results/latest.json` (run `python benchmarks/run.py` first): the rows that need '
        'the reference are in the engine table.'
    )

    blocks = [
        "### Where a call's time goes (`bench_breakdown.py`)",
        f'Default configuration (`Harness()` with a store file, `synchronous=FULL`; tracing on, nothing exported) '
        f'against variants, side by side in two worker processes; per-call cost is the slope of fresh-text runs of '
        f'{N_TOOLS} (host tool) and {N_AGENTS} (sub-agent) calls against 1 call, median of {m["rounds"]} interleaved '
        "rounds; parts are differences of medians, so they carry this machine's noise (a negative part is noise).",
        tool_table,
        agent_table,
        'cProfile of one run on the default Harness (script checked first): self time per function, bucketed by '
        'file path; the standard library, built-ins, pydantic and anyio are charged to their callers. The main '
        'thread only: the sandbox worker process shows as *waiting*; journal writes, fsyncs included, are made on '
        'the event loop (*store / journal*). cProfile '
        'slows the run down (*wall per call*), so read the shares.',
        profile_table(m),
        '#### Goals',
        goals,
        source,
    ]
    return '\n'.join(block.rstrip('\n') + '\n' for block in blocks)


def run(quick: bool = False) -> str:
    return report(measure(quick))


def main() -> None:
    if len(sys.argv) >= 4 and sys.argv[1] == '--worker':
        worker(sys.argv[2], sys.argv[3])
        return
    quick = '--quick' in sys.argv
    if '--gather' in sys.argv:  # the gather row's size (default 500; 10,000 is the goal's, about 100 s a pair)
        global N_GATHER
        N_GATHER = int(sys.argv[sys.argv.index('--gather') + 1])
    if '--json' in sys.argv:  # raw numbers too, for a later look
        m = measure(quick)
        print(json.dumps(m), file=sys.stderr)
        print(report(m))
        return
    print(run(quick=quick))


if __name__ == '__main__':
    main()
