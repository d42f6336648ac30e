"""This project's side of the benchmark: one scenario, in the project's environment; prints one JSON line.

Run by `run.py` as `python benchmarks/bench_ours.py SCENARIO [--iterations N] [--quick] [--deadline S]
[--mode M] [--store file|memory]`.
`--mode orchestrator` (the default when `Harness.orchestrator` exists) runs a full orchestrator agent run
(the model calls `run_workflow`, then answers); `--mode run` calls `Harness.run(code)` directly, with no
orchestrator model around it. `--store file` (the default, as a user gets it) journals to a store file in a
temporary directory, fsynced; `--store memory` to `:memory:`.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import atexit  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import common  # noqa: E402

from harness import Harness  # noqa: E402


def pick_mode() -> str:
    mode = 'auto'
    if '--mode' in sys.argv:
        at = sys.argv.index('--mode')
        mode = sys.argv[at + 1]
        del sys.argv[at : at + 2]
    if mode == 'auto':
        mode = 'orchestrator' if hasattr(Harness, 'orchestrator') else 'run'
    if mode not in ('orchestrator', 'run'):
        raise SystemExit(f'--mode must be auto, orchestrator or run, not {mode!r}')
    return mode


MODE = pick_mode()


def pick_store() -> str:
    kind = 'file'
    if '--store' in sys.argv:
        at = sys.argv.index('--store')
        kind = sys.argv[at + 1]
        del sys.argv[at : at + 2]
    if kind == 'memory':
        return ':memory:'
    if kind != 'file':
        raise SystemExit(f'--store must be file or memory, not {kind!r}')
    directory = tempfile.mkdtemp(prefix='bench-ours-')
    atexit.register(shutil.rmtree, directory, True)
    return str(Path(directory) / 'runs.db')


STORE = pick_store()


async def nothing_to_close() -> None:
    pass


async def setup(scenario: common.Scenario) -> tuple[str, common.RunOne, Any]:
    from pydantic_ai.models.function import FunctionModel

    agents = common.make_sub_agents(scenario.delay)
    if scenario.kind == 'bare':
        return 'agent.run', common.bare_runner(scenario.calls, agents), nothing_to_close

    h = Harness(store=STORE, max_agent_calls=common.MAX_AGENT_CALLS)
    for agent in agents:
        h.add_agent(agent)

    if MODE == 'orchestrator':
        orchestrator = h.orchestrator(model=FunctionModel(common.orchestrator_function))
        limits = common.unlimited_usage()

        async def run_one(code: str) -> str:
            result = await orchestrator.run(code, usage_limits=limits)
            return result.output

    else:

        async def run_one(code: str) -> str:
            try:
                result = await h.run(code)
            except Exception as exc:  # the reference's model would see this as a retry prompt
                return common.FAILED + f'{type(exc).__name__}: {exc}'
            return json.dumps(result.value, default=str)

    return MODE, run_one, h.aclose


if __name__ == '__main__':
    common.main('ours', setup, STARTED)
