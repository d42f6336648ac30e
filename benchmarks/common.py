"""What both sides of the benchmark share: the scenarios, the scripts, the models, and the measuring.

Imported by `bench_ours.py` (the project's environment) and `bench_reference.py` (the reference's own
environment), so it may use only the standard library and the pydantic-ai API both versions have.
The scripts are the same text on both sides, and every sub-agent has the one shape both support:
`async def name(*, task: str) -> str`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

# Sub-agent budget on both sides: high enough that the budget is never what stops a scenario.
MAX_AGENT_CALLS = 20_000


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    kind: str  # 'bare' (no workflow) | 'chain' | 'gather' | 'concurrent'
    calls: int  # sub-agent calls per workflow
    workflows: int = 1  # workflows (orchestrator runs) started at once
    delay: float = 0.0  # seconds each sub-agent call waits before answering
    distinct: bool = True  # concurrent only: 32 different scripts, or 32 copies of one
    iterations: int = 5  # warm iterations per subprocess, after the cold one; 0: the cold run only
    quick_iterations: int = 2
    rounds: int = 2  # subprocess pairs (ours, reference) per scenario
    quick_rounds: int = 1
    deadline: float | None = None  # seconds a side may spend measuring before it is stopped (None: no limit)
    quick_deadline: float | None = None


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            'bare50',
            'baseline: 50 sub-agent runs, no workflow',
            'bare',
            50,
            iterations=4,
            quick_iterations=3,
            rounds=2,
            quick_rounds=1,
        ),
        Scenario(
            'chain1',
            'one run_workflow, 1 call',
            'chain',
            1,
            iterations=10,
            quick_iterations=5,
            rounds=2,
            quick_rounds=2,
        ),
        Scenario(
            'chain10',
            'one run_workflow, 10 calls in sequence',
            'chain',
            10,
            iterations=6,
            quick_iterations=4,
            rounds=2,
            quick_rounds=1,
        ),
        Scenario(
            'chain50',
            'one run_workflow, 50 calls in sequence',
            'chain',
            50,
            iterations=4,
            quick_iterations=3,
            rounds=2,
            quick_rounds=1,
        ),
        Scenario(
            'gather500',
            'one run_workflow, gather of 500 calls',
            'gather',
            500,
            iterations=1,
            quick_iterations=0,
            rounds=1,
            quick_rounds=1,
        ),
        Scenario(
            'gather10k',
            'one run_workflow, gather of 10,000 calls',
            'gather',
            10_000,
            iterations=0,
            quick_iterations=0,
            rounds=1,
            quick_rounds=1,
            deadline=120,
            quick_deadline=60,
        ),
        Scenario(
            'wait32same',
            '32 workflows at once, each waits 0.2 s (identical scripts)',
            'concurrent',
            1,
            workflows=32,
            delay=0.2,
            distinct=False,
            iterations=4,
            quick_iterations=2,
            rounds=1,
            quick_rounds=1,
        ),
        Scenario(
            'wait32distinct',
            '32 workflows at once, each waits 0.2 s (distinct scripts)',
            'concurrent',
            1,
            workflows=32,
            delay=0.2,
            distinct=True,
            iterations=4,
            quick_iterations=2,
            rounds=1,
            quick_rounds=1,
        ),
    ]
}


# -- the scripts (identical text on both sides) ---------------------------------------------------


def chain_script(calls: int, salt: str) -> str:
    return (
        'results = []\n'
        f'for i in range({calls}):\n'
        f"    results.append(await worker(task='step ' + str(i) + ' of {salt}'))\n"
        "{'n': len(results), 'last': results[-1]}\n"
    )


def gather_script(calls: int, salt: str) -> str:
    return (
        'import asyncio\n'
        'results = await asyncio.gather(\n'
        f"    *[worker(task='item ' + str(i) + ' of {salt}') for i in range({calls})]\n"
        ')\n'
        "{'n': len(results), 'last': results[-1]}\n"
    )


def wait_script(salt: str) -> str:
    return f"answer = await slow(task='wait for {salt}')\n{{'n': 1, 'last': answer}}\n"


def scripts_for(scenario: Scenario, iteration: int) -> list[str]:
    """The scripts one iteration runs. Every iteration gets new text, so a check cached from an earlier
    iteration never helps; only the identical-scripts scenario repeats a text (within one iteration)."""
    salt = f'iteration {iteration} pid {os.getpid()}'
    if scenario.kind == 'chain':
        return [chain_script(scenario.calls, salt)]
    if scenario.kind == 'gather':
        return [gather_script(scenario.calls, salt)]
    if scenario.kind == 'bare':
        return ['']  # no script: `bare_runner` calls the sub-agent directly
    if not scenario.distinct:
        return [wait_script(salt)] * scenario.workflows
    return [wait_script(f'{salt} workflow {k}') for k in range(scenario.workflows)]


# -- the models ---------------------------------------------------------------------------------


ANSWERED = [0]  # sub-agent model calls answered in this process, to report how far a stopped run got


def make_sub_agents(delay: float) -> list[Any]:
    """`worker` answers at once; `slow` answers after `delay` seconds. Both output `str`."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    def answer(messages: list[Any], info: Any) -> ModelResponse:
        ANSWERED[0] += 1
        return ModelResponse(parts=[TextPart('done')])

    async def answer_later(messages: list[Any], info: Any) -> ModelResponse:
        await asyncio.sleep(delay)
        ANSWERED[0] += 1
        return ModelResponse(parts=[TextPart('done')])

    worker = Agent(FunctionModel(answer), name='worker', description='Does one small task.', output_type=str)
    slow = Agent(
        FunctionModel(answer_later), name='slow', description='Does a task that takes a while.', output_type=str
    )
    return [worker, slow]


def bare_runner(calls: int, agents: list[Any]) -> Callable[[str], Awaitable[str]]:
    """The baseline: `calls` sequential `worker.run(...)` in this environment, no workflow around them."""
    worker = agents[0]

    async def run_one(code: str) -> str:
        last = None
        for i in range(calls):
            last = (await worker.run(f'step {i}')).output
        return json.dumps({'n': calls, 'last': last})

    return run_one


FAILED = 'FAILED: '


def orchestrator_function(messages: list[Any], info: Any) -> Any:
    """The orchestrator's model: the user prompt is the script. It calls `run_workflow` with it once,
    then answers with the tool's return as text (or `FAILED: ...` on a retry prompt, without retrying)."""
    from pydantic_ai.messages import (
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    last = messages[-1]
    for part in last.parts:
        # A failed attempt is a `RetryPromptPart`, or (pydantic-ai >= 2.6x) a return with outcome 'retried'.
        retried = isinstance(part, RetryPromptPart) or getattr(part, 'outcome', 'success') != 'success'
        if isinstance(part, ToolReturnPart | RetryPromptPart) and retried:
            content = part.content if isinstance(part.content, str) else json.dumps(part.content, default=str)
            return ModelResponse(parts=[TextPart(FAILED + content)])
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(json.dumps(part.content, default=str))])
    for part in last.parts:
        if isinstance(part, UserPromptPart):
            return ModelResponse(parts=[ToolCallPart('run_workflow', {'code': part.content})])
    raise AssertionError(f'unexpected message: {last!r}')


def unlimited_usage() -> Any:
    """The orchestrator run counts the sub-agents' requests too: lift the 50-request default on both sides."""
    from pydantic_ai.usage import UsageLimits

    return UsageLimits(request_limit=None)


def check_output(text: str, scenario: Scenario) -> str | None:
    """None when the workflow's value is right; else the failure, as text."""
    if text.startswith(FAILED):
        return text[len(FAILED) :]
    try:
        value = json.loads(text)
    except ValueError:
        return f'unexpected answer: {text[:300]}'
    if isinstance(value, dict) and 'result' in value:  # a script that printed: {'output': ..., 'result': ...}
        value = value['result']
    if not isinstance(value, dict) or value.get('n') != scenario.calls or value.get('last') != 'done':
        return f'unexpected value: {text[:300]}'
    return None


# -- measuring ----------------------------------------------------------------------------------


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f'/proc/{pid}/exe')
    except OSError:
        return None


def _descendants(pid: int) -> list[int]:
    """All processes below `pid`, except forks of this interpreter caught before their exec."""
    me = _exe(pid)
    return [k for k in descendants(pid) if _exe(k) != me]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), deepest last."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f'/proc/{current}/task')
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f'/proc/{current}/task/{tid}/children') as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def _hwm_kb(pid: int) -> int:
    """A process's own peak RSS since its last exec (`ru_maxrss` of a forked child would count the parent)."""
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _rss_kb(pid: int) -> int:
    try:
        with open(f'/proc/{pid}/statm') as f:
            return int(f.read().split()[1]) * (os.sysconf('SC_PAGE_SIZE') // 1024)
    except (OSError, ValueError, IndexError):
        return 0


class MemorySampler:
    """Samples the RSS of this process's descendants (the sandbox workers) every `interval` seconds."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_sum_kb = 0  # the largest sum of the workers' RSS seen at one time
        self.peak_count = 0
        self.largest_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        kids = _descendants(os.getpid())
        self.peak_sum_kb = max(self.peak_sum_kb, sum(_rss_kb(k) for k in kids))
        self.peak_count = max(self.peak_count, len(kids))
        self.largest_kb = max([self.largest_kb, *(_hwm_kb(k) for k in kids)])

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


@dataclass
class Result:
    side: str
    scenario: str
    mode: str  # how the workflow was started on this side
    cold: float | None = None  # seconds, the first iteration in a fresh process (after imports and setup)
    warm: list[float] | None = None  # seconds per warm iteration
    cpu_cold: float | None = None  # CPU seconds of this process (all threads) in the cold iteration
    cpu_warm: list[float] | None = None  # the same per warm iteration: less sensitive to a busy machine
    setup: float | None = None  # seconds: imports + building the agents, in this process
    failure: str | None = None
    failed_after: float | None = None  # seconds until the failure
    stopped: str | None = None  # the deadline ran out: how far the run got
    host_peak_mb: float | None = None  # ru_maxrss of this process
    workers_sum_mb: float | None = None  # sampled peak of the sandbox workers' summed RSS
    worker_peak_mb: float | None = None  # largest single worker's peak RSS (sampled VmHWM)
    peak_workers: int | None = None


RunOne = Callable[[str], Awaitable[str]]


async def measure(
    side: str,
    scenario: Scenario,
    mode: str,
    run_one: RunOne,
    close: Callable[[], Awaitable[None]],
    iterations: int,
    setup_secs: float,
    deadline: float | None = None,
) -> Result:
    """The cold iteration (which is also the warm-up), then, unless it failed, `iterations` warm ones.

    With a `deadline` (seconds from the start of the cold iteration), a watchdog thread reports the result
    so far, saying how far the running iteration got, and ends the process at once: a thread, because
    the event loop may be too busy to notice a cancellation in time.
    """
    result = Result(side=side, scenario=scenario.name, mode=mode, setup=setup_secs, warm=[], cpu_warm=[])
    current = {'start': time.perf_counter(), 'answered': 0}

    async def one(iteration: int) -> tuple[float, float, str | None]:
        scripts = scripts_for(scenario, iteration)
        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        current.update(start=start, answered=ANSWERED[0])
        answers = await asyncio.gather(*(run_one(code) for code in scripts))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        failures = [f for f in (check_output(a, scenario) for a in answers) if f]
        return elapsed, cpu, (failures[0] if failures else None)

    with MemorySampler() as memory:

        def stop() -> None:
            memory.sample()
            result.stopped = (
                f'stopped at the {deadline:.0f} s deadline, {time.perf_counter() - current["start"]:.0f} s into '
                f'iteration {len(result.warm or []) + (result.cold is not None) + 1}; '
                f'{ANSWERED[0] - current["answered"]:,} sub-agent calls had answered'
            )
            report(result, memory)
            os._exit(0)

        watchdog = threading.Timer(deadline, stop) if deadline else None
        if watchdog is not None:
            watchdog.daemon = True
            watchdog.start()
        try:
            elapsed, cpu, failure = await one(0)
            if failure:
                result.failure, result.failed_after = failure, elapsed
            else:
                result.cold, result.cpu_cold = elapsed, cpu
                for i in range(iterations):
                    elapsed, cpu, failure = await one(1 + i)
                    if failure:
                        result.failure, result.failed_after = failure, elapsed
                        break
                    result.warm.append(elapsed)
                    result.cpu_warm.append(cpu)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            await close()
    return fill_memory(result, memory)


def fill_memory(result: Result, memory: MemorySampler) -> Result:
    result.host_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result.worker_peak_mb = memory.largest_kb / 1024 or None
    result.workers_sum_mb = memory.peak_sum_kb / 1024
    result.peak_workers = memory.peak_count
    return result


def report(result: Result, memory: MemorySampler | None = None) -> None:
    """The one JSON line a side's subprocess prints."""
    if memory is not None:
        fill_memory(result, memory)
    sys.stdout.write(json.dumps(asdict(result)) + '\n')
    sys.stdout.flush()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument('scenario', choices=sorted(SCENARIOS))
    parser.add_argument('--iterations', type=int, default=None, help="warm iterations (default: scenario's)")
    parser.add_argument('--quick', action='store_true')
    parser.add_argument(
        '--deadline',
        type=float,
        default=None,
        help="seconds before a running iteration is stopped (default: scenario's; 0: none)",
    )
    return parser.parse_args()


def main(
    side: str, setup: Callable[[Scenario], Awaitable[tuple[str, RunOne, Callable[[], Awaitable[None]]]]], started: float
) -> None:
    """Entry point of one side's subprocess: set up, measure, print one JSON line."""
    args = parse_args()
    scenario = SCENARIOS[args.scenario]
    iterations = args.iterations
    if iterations is None:
        iterations = scenario.quick_iterations if args.quick else scenario.iterations
    deadline = args.deadline
    if deadline is None:
        deadline = scenario.quick_deadline if args.quick else scenario.deadline

    async def go() -> Result:
        mode, run_one, close = await setup(scenario)
        return await measure(
            side, scenario, mode, run_one, close, iterations, time.perf_counter() - started, deadline or None
        )

    report(asyncio.run(go()))
