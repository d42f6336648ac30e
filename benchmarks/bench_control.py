"""What control costs: the rule check at every call, and the static analysis before a script runs.

    python benchmarks/bench_control.py [--quick]

1. Rule checking per call. The same script (N sequential awaits of an instant async host tool) on two
   catalogs that differ only in the rule: `requires=After('begin', same=('k',), when=...)` or none.
   Tracing off, no store, type check on; rounds interleaved; the cost per call is the median of
   (with rules - without) / N within a round, set against a whole host tool call (the run without
   rules / N). The rule check itself is also timed directly (`refusal` against a run's ledger), which
   the end-to-end difference is too noisy to resolve on a busy machine.
2. `Harness.analyze` on a 200-line script with helpers (defs called in loops, gathers over a helper),
   against the type check of the same script (`Harness.check`,
   which runs the analysis too, so the ratio is if anything flattering to the check). Every iteration
   gets fresh text (the check caches by text).

Prints one Markdown section; `extra.py` collects it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import fmt_ratio, fmt_time, fmt_us, log, med, table

N = 200


def catalog(*, rules: bool):
    from harness import After, Harness

    h = Harness(store=None, tracing=False, max_repeats=None, max_tool_calls=None)

    @h.tool
    async def begin(*, k: str) -> dict[str, bool]:
        return {'ok': True}

    rule = After('begin', same=('k',), when=lambda r: r['ok']) if rules else None

    @h.tool(requires=rule)
    async def step(*, k: str, i: int) -> int:
        return i

    return h


def per_call(quick: bool) -> tuple[list[float], list[float]]:
    with_rules, without = catalog(rules=True), catalog(rules=False)
    diffs, base = [], []
    rounds = 5 if quick else 11
    for r in range(rounds):
        script = f'# round {r}\nx = await begin(k="a")\nfor i in range({N}):\n    await step(k="a", i=i)\n'
        t0 = time.perf_counter()
        without.run_sync(script)
        t1 = time.perf_counter()
        with_rules.run_sync(script)
        t2 = time.perf_counter()
        base.append((t1 - t0) / N)
        diffs.append(((t2 - t1) - (t1 - t0)) / N)
    with_rules.close()
    without.close()
    return diffs, base


def direct_check(quick: bool) -> float:
    from harness._catalog._rules import Access, After, Ledger, refusal
    from harness._records import CallRecord

    ledger = Ledger()
    ledger.add(CallRecord(1, 'begin', {'k': 'a'}, 1, status='ok', result={'ok': True}))
    for i in range(N):  # a run that has made N calls already
        ledger.add(CallRecord(i + 2, 'step', {'k': 'a', 'i': i}, 3, status='ok', result=i))
    rules = (After('begin', same=('k',), when=lambda r: r['ok']),)
    access, arguments = Access(), {'k': 'a', 'i': 0}
    n = 20_000 if quick else 100_000
    t0 = time.perf_counter()
    for _ in range(n):
        refusal('step', arguments, rules, access, ledger)
    return (time.perf_counter() - t0) / n


def long_script() -> str:
    """200 lines of helpers as a model writes them: a shared helper called in loops and from other helpers,
    and per block a helper gathered over a comprehension (the analysis follows each call where it is made)."""
    head = '''import asyncio
total = 0

async def score(path: str, i: int) -> int:
    r = await step(k=path, i=i)
    return r if r > 0 else 0
'''
    block = '''
async def review_{n}(path: str) -> int:
    try:
        r = await score(path, {n})
    except Exception:
        r = 0
    return r

x{n} = await begin(k="p{n}")
if x{n}["ok"]:
    vals{n} = await asyncio.gather(*[review_{n}("f" + str(i)) for i in range(3)])
    for i in range(2):
        total += await score("g{n}", i)
    for v in vals{n}:
        total += v
else:
    total -= 1
'''
    text = head + ''.join(block.format(n=n) for n in range(12))
    lines = text.splitlines()
    assert len(lines) >= 200, len(lines)
    return '\n'.join(lines[:200]) + '\n' if lines[199].strip() == '' else text


def analysis(quick: bool) -> tuple[list[float], list[float]]:
    h = catalog(rules=True)
    code = long_script()
    analyses, checks = [], []
    for r in range(5 if quick else 15):
        fresh = f'# {r}\n' + code
        t0 = time.perf_counter()
        h.analyze(fresh)
        t1 = time.perf_counter()
        report = h.check(fresh)
        t2 = time.perf_counter()
        assert report.ok, report.errors
        analyses.append(t1 - t0)
        checks.append(t2 - t1)
    h.close()
    return analyses, checks


def run(*, quick: bool = False) -> str:
    os.environ['HARNESS_TRACING'] = 'off'
    log('bench_control: rule checking per call ...')
    diffs, base = per_call(quick)
    direct = direct_check(quick)
    log('bench_control: analysis of a 200-line script ...')
    analyses, checks = analysis(quick)
    call = med(base)
    rows = [
        ['a host tool call, end to end (no rules)', fmt_us(call), '–'],
        ['rule check, timed directly (`refusal` on a 200-call ledger)', fmt_us(direct), fmt_ratio(direct, call)],
        ['rules on − rules off, end to end per call', fmt_us(med(diffs)), fmt_ratio(med(diffs), call)],
    ]
    static = [
        ['`Harness.analyze`', fmt_time(med(analyses)), fmt_ratio(med(analyses), med(checks))],
        ['type check (`Harness.check`)', fmt_time(med(checks)), '1.00×'],
    ]
    return (
        '### Control (`bench_control.py`; tracing off, no store)\n\n'
        f'Rule checking, {N} sequential calls of a guarded instant host tool (goal: under 5% of a host tool call):\n\n'
        + table(['', 'per call', 'share of a call'], rows)
        + '\nStatic analysis of a 200-line script (goal: under the type check):\n\n'
        + table(['', 'median', 'ratio to the check'], static)
    )


if __name__ == '__main__':
    print(run(quick='--quick' in sys.argv))
