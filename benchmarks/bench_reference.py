"""The reference's side: `DynamicWorkflow` from pydantic-ai-harness 0.62.0, in its own environment.

Run by `run.py` with `benchmarks/.venv-reference/bin/python benchmarks/bench_reference.py SCENARIO ...`;
prints one JSON line. Every scenario is a full orchestrator agent run: the model calls `run_workflow`
with the script, then answers with what the tool returned.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

from typing import Any  # noqa: E402

import common  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from pydantic_ai_harness.dynamic_workflow import DynamicWorkflow  # noqa: E402


async def close() -> None:
    pass  # every run_workflow call opens and closes its own sandbox pool


async def setup(scenario: common.Scenario) -> tuple[str, common.RunOne, Any]:
    agents = common.make_sub_agents(scenario.delay)
    if scenario.kind == 'bare':
        return 'agent.run', common.bare_runner(scenario.calls, agents), close

    capability = DynamicWorkflow(
        agents=agents,
        max_agent_calls=common.MAX_AGENT_CALLS,
        # Its sub-agents share the orchestrator run's usage counter, so the default 50-request limit
        # would stop any scenario past 50 calls: lift it (the budget above is the real ceiling).
        sub_agent_usage_limits=common.unlimited_usage(),
    )
    orchestrator = Agent(FunctionModel(common.orchestrator_function), capabilities=[capability])
    limits = common.unlimited_usage()

    async def run_one(code: str) -> str:
        result = await orchestrator.run(code, usage_limits=limits)
        return result.output

    return 'orchestrator', run_one, close


if __name__ == '__main__':
    common.main('reference', setup, STARTED)
