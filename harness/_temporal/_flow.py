"""The Temporal workflow of one script run: deterministic code that only sequences activities.

Monty cannot run inside workflow code, so the interpreter advances in an activity (`harness.advance`:
restore the newest snapshot, deliver the journaled results, run to the next pause, store the new
snapshot) and every external call runs in an activity of its own (`harness.call`, on the callee's
task queue). The run's journal and snapshots live in the run store the workers share, so any worker
can take the next step; the workflow holds only which calls are in flight.

The loop: advance; start an activity for each call the script now waits on; wait until one of them
(or, for a call that needs approval, a `decide` signal) arrives; advance again. Budgets, rules,
approvals and join policies are the local engine's, applied inside `advance`. This module imports
only the standard library and temporalio: it runs in Temporal's workflow sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

ADVANCE = 'harness.advance'
CALL = 'harness.call'

# A worker that dies is noticed by its missing heartbeat, and the step retried on another worker.
HEARTBEAT_TIMEOUT = timedelta(seconds=5)
STEP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2))
ADVANCE_TIMEOUT = timedelta(minutes=10)
CALL_TIMEOUT = timedelta(hours=2)


@dataclass
class ScriptStart:
    """What the workflow is started with (and continued-as-new with)."""

    run_id: str
    code: str
    inputs: dict[str, Any] | None = None
    access: dict[str, Any] | None = None
    prompt: str | None = None
    orchestrator_run_id: str | None = None
    conversation_id: str | None = None
    budget_key: str | None = None
    """Whose `daily_cost` the run spends (`run(budget_key=...)`)."""
    seen: list[str] = field(default_factory=list)
    """The agent runs whose messages the orchestrator run has (`RunScope.seen`)."""
    queues: dict[str, str] = field(default_factory=dict)
    """Callee name -> task queue, for callees with workers of their own."""
    printed: list[str] = field(default_factory=list)
    """What the script printed in earlier advances (carried across continue-as-new)."""
    advances_per_history: int = 1_000
    """Continue as new after this many advances, or sooner when Temporal suggests it: a long script's
    history stays bounded (its state is in the store, so nothing but `printed` needs carrying)."""


@dataclass
class Decided:
    """A person's decision on a call that needs approval, sent as the `decide` signal."""

    seq: int
    approved: bool
    reason: str | None = None
    by: str | None = None


@dataclass
class CallTask:
    run_id: str
    seq: int


@dataclass
class Advanced:
    """Where one advance left the script."""

    status: str
    """`completed`, `failed`, or `waiting` (on `calls` and/or `approvals`)."""
    value: Any = None
    error: str | None = None
    error_type: str | None = None
    calls: list[CallTask] = field(default_factory=list)
    """Calls the script waits on that an activity must run (journaled `running`)."""
    callees: list[str] = field(default_factory=list)
    """The callee of each of `calls`, to route it to its task queue."""
    approvals: list[int] = field(default_factory=list)
    """Calls waiting for a person's decision."""
    printed: str = ''
    completed: list[dict[str, Any]] = field(default_factory=list)
    """A failed script's completed calls (`seq`, `callee`, `arguments`, `result`), for the model to reuse."""
    wake_at: float | None = None
    """Unix time of the earliest `within` deadline of a call in flight: advance then, whatever arrives."""


def workflow_id(run_id: str) -> str:
    return f'harness-run-{run_id}'


@workflow.defn(name='HarnessScript')
class ScriptWorkflow:
    def __init__(self) -> None:
        self.decisions: list[Decided] = []

    @workflow.signal
    def decide(self, decision: Decided) -> None:
        """A person approved or rejected a call (the store holds the decision; this wakes the run)."""
        self.decisions.append(decision)

    @workflow.run
    async def run(self, start: ScriptStart) -> Advanced:
        in_flight: dict[int, asyncio.Task[Any]] = {}
        finished: set[int] = set()
        advances = 0
        while True:
            advances += 1
            # A local activity: the advance runs on the worker that runs this workflow task, with no round
            # trip through the server (a worker that dies mid-advance fails the task; another replays it).
            step: Advanced = await workflow.execute_local_activity(
                ADVANCE, start, result_type=Advanced, start_to_close_timeout=ADVANCE_TIMEOUT, retry_policy=STEP_RETRY
            )
            if step.printed:
                start.printed.append(step.printed)
            if step.status != 'waiting':
                for task in in_flight.values():  # the script no longer waits for them
                    task.cancel()
                await asyncio.gather(*in_flight.values(), return_exceptions=True)
                step.printed = ''.join(start.printed)
                return step
            fresh = False
            for call, callee in zip(step.calls, step.callees, strict=True):
                if call.seq in finished:
                    fresh = True  # its result was journaled after the advance read the journal
                elif call.seq not in in_flight:
                    in_flight[call.seq] = asyncio.ensure_future(
                        workflow.execute_activity(
                            CALL,
                            call,
                            task_queue=start.queues.get(callee),
                            start_to_close_timeout=CALL_TIMEOUT,
                            heartbeat_timeout=HEARTBEAT_TIMEOUT,
                            retry_policy=STEP_RETRY,
                        )
                    )
            seen = len(self.decisions)
            if not fresh:
                if not in_flight and not step.approvals:
                    raise ApplicationError('the script waits on nothing the workflow can run')
                timeout = None
                if step.wake_at is not None:
                    timeout = timedelta(seconds=max(0.0, step.wake_at - workflow.now().timestamp()))
                with contextlib.suppress(TimeoutError):  # a deadline passed: the advance times the call out
                    await workflow.wait_condition(
                        lambda seen=seen: len(self.decisions) > seen or any(t.done() for t in in_flight.values()),
                        timeout=timeout,
                    )
            for seq, task in list(in_flight.items()):
                if task.done():
                    task.result()  # an activity that failed for good fails the workflow
                    finished.add(seq)
                    del in_flight[seq]
            long = advances >= start.advances_per_history or workflow.info().is_continue_as_new_suggested()
            if long and not in_flight:
                workflow.continue_as_new(start)
