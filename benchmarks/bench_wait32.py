"""32 workflows at once, each waiting 0.2 s on a sub-agent, at the engine level (`Harness.run`).

The side-by-side rows in run.py drive full orchestrator runs with pydantic-ai Agent sub-agents,
so most of their time is pydantic-ai's own per-run cost. This isolates what the issue's goal is
about: whether paused workflows queue for sandbox workers. The sub-agent is a plain async function
(`@h.subagent`) that sleeps 0.2 s; the reference has no equivalent (it only runs Agents).

Run: python benchmarks/bench_wait32.py  (prints a Markdown table; about 20 s)
"""

from __future__ import annotations

import asyncio
import statistics
import time

from harness import Harness

ROUNDS = 7


async def measure(h: Harness, *, identical: bool, rounds: int) -> list[float]:
    times = []
    for r in range(rounds):
        codes = [f'await waiter(task="{r}-{0 if identical else i}")' for i in range(32)]
        started = time.perf_counter()
        await asyncio.gather(*[h.run(code) for code in codes])
        times.append(time.perf_counter() - started)
    return times


async def main() -> None:
    print('| 32 workflows at once, each waits 0.2 s (`Harness.run`, async sub-agent) | median | min | max |')
    print('|---|---:|---:|---:|')
    for tracing in (False, True):
        h = Harness(store=':memory:', tracing=tracing)

        @h.subagent
        async def waiter(*, task: str) -> str:
            await asyncio.sleep(0.2)
            return task

        await measure(h, identical=True, rounds=1)  # warm: workers spawned, checker warm
        for identical in (True, False):
            times = await measure(h, identical=identical, rounds=ROUNDS)
            label = f'{"identical" if identical else "distinct"} scripts, tracing {"on" if tracing else "off"}'
            print(f'| {label} | {statistics.median(times):.3f} s | {min(times):.3f} s | {max(times):.3f} s |')
        await h.aclose()


if __name__ == '__main__':
    asyncio.run(main())
