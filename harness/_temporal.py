"""The Temporal engine's host side: the activities a worker runs, the worker, and `run_on_temporal`.

`advance` is the local engine's resume with its calls deferred (`Harness._advance`): every rule,
budget, approval and join is decided there exactly as on the embedded engine, and a live call is
journaled `running` and left to a `call` activity instead of started. `call` runs one journaled call
once: a call whose row already holds a result is never run again, whichever worker retries it. The
run store is shared by the client and the workers (it carries the snapshots and the journal), so
`runs`, `show`, `trace` and `replay` read Temporal runs as they read local ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncGenerator, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ._context import RunScope
from ._dispatch import validate_arguments
from ._errors import (
    BudgetExceeded,
    PolicyViolation,
    RunBusy,
    SandboxCrashed,
    SnapshotError,
    WorkflowError,
    WorkflowRuntimeError,
    WorkflowTypeError,
)
from ._journal import Journal
from ._records import WorkflowResult, new_run_id
from ._rules import Access
from ._temporal_flow import ADVANCE, CALL, Advanced, CallTask, Decided, ScriptStart, ScriptWorkflow, workflow_id
from ._tracing import RECORDER, attach_traceparent

if TYPE_CHECKING:
    from ._engine import Harness

HEARTBEAT_EVERY = 1.0

RAISED: dict[str, type[WorkflowError]] = {
    cls.__name__: cls
    for cls in (WorkflowError, WorkflowTypeError, WorkflowRuntimeError, PolicyViolation, BudgetExceeded, SnapshotError)
}
"""The errors a failed workflow is raised as in the caller, by the name the advance reported."""


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncGenerator[None]:
    """Tell Temporal this worker is alive while the block runs, so a killed worker's step is retried soon."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY)

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()


class Steps:
    """The activities, bound to the worker's Harness (its catalog, store and sandbox pool)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    @activity.defn(name=ADVANCE)
    async def advance(self, start: ScriptStart) -> Advanced:
        h = self.harness
        store = h.store
        assert store is not None
        async with heartbeating():
            try:
                if store.get_run(start.run_id) is None:
                    scope = h.new_scope(prompt=start.prompt, orchestrator_run_id=start.orchestrator_run_id)
                    result = await h._start(start.run_id, start.code, start.inputs, scope,
                                            Access.from_json(start.access), defer=True)
                else:
                    result = await h._advance(start.run_id)
            except (SandboxCrashed, RunBusy):
                raise  # the worker's trouble, not the script's: Temporal retries the step
            except WorkflowError as exc:
                return Advanced('failed', error=exc.message, error_type=type(exc).__name__, printed=exc.printed)
        if result.status != 'waiting':
            return Advanced(result.status, value=result.value, printed=result.printed)
        held = [p.seq for p in result.waiting or []]
        rows = {c.seq: c for c in result.calls}
        calls = [rows[seq] for seq in held if rows[seq].status == 'running']
        return Advanced(
            'waiting', calls=[CallTask(start.run_id, c.seq) for c in calls], callees=[c.callee for c in calls],
            approvals=[seq for seq in held if rows[seq].status == 'waiting'], printed=result.printed,
        )

    @activity.defn(name=CALL)
    async def call(self, task: CallTask) -> str:
        """Run call `task.seq` and journal its result; returns the call's status."""
        h = self.harness
        store = h.store
        assert store is not None
        run = store.get_run(task.run_id)
        record = next((c for c in store.calls(task.run_id) if c.seq == task.seq), None) if run else None
        if run is None or record is None:
            raise WorkflowRuntimeError(f'run {task.run_id} has no call #{task.seq} in the store these workers share')
        if record.status != 'running':
            return record.status  # already run (a retry after its result was journaled) or cancelled
        callee = h.callees[record.callee]
        journal = Journal(store, task.run_id)
        dispatcher = h._dispatcher(task.run_id, RunScope(sub_agent_usage_limits=h.sub_agent_usage_limits),
                                   Access.from_json(run.access), None, journal)
        async with heartbeating():
            try:
                with attach_traceparent(run.trace_context):
                    await dispatcher.run_one(callee, validate_arguments(callee, record.arguments), record)
            finally:
                spans = RECORDER.drain(task.run_id)
                if spans:
                    await asyncio.to_thread(store.add_spans, task.run_id, spans)
        journal.add([record])
        await journal.write()
        return record.status


async def connect(address: str) -> Client:
    """A client of the Temporal server at `address`, with its OpenTelemetry interceptor, so workflow and
    activity spans join the trace of the run that started them."""
    try:
        return await Client.connect(address, interceptors=[TracingInterceptor()])
    except RuntimeError as exc:
        raise WorkflowError(
            f'Cannot reach a Temporal server at {address} ({exc}). Start one with `harness temporal-dev`, '
            'or point HARNESS_TEMPORAL at yours.'
        ) from None


def worker(harness: Harness, client: Client, task_queue: str, **options: Any) -> Worker:
    """A worker that runs scripts' workflows and the catalog's calls from `task_queue`."""
    steps = Steps(harness)
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules('harness'))
    return Worker(client, task_queue=task_queue, workflows=[ScriptWorkflow], activities=[steps.advance, steps.call],
                  workflow_runner=runner, **options)


async def serve(harness: Harness, address: str, task_queue: str, *, ready: Callable[[], None] | None = None) -> None:
    """Run a worker until SIGINT or SIGTERM; then it stops taking work and finishes what it holds."""
    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with worker(harness, client, task_queue, graceful_shutdown_timeout=timedelta(seconds=10)):
        if ready is not None:
            ready()
        await stop.wait()


async def run_on_temporal(
    harness: Harness, code: str, inputs: dict[str, Any] | None, scope: RunScope, access: Access
) -> WorkflowResult:
    """Run a script as a Temporal workflow and wait for its result (what `Harness.run` does with `temporal=`)."""
    store = harness.store
    if store is None:
        raise WorkflowError('The Temporal engine needs a run store the workers share: give the Harness store=PATH.')
    assert harness.temporal is not None
    client = await connect(harness.temporal)
    run_id = new_run_id()
    start = ScriptStart(run_id=run_id, code=code, inputs=inputs, access=access.to_json(), prompt=scope.prompt,
                        orchestrator_run_id=scope.orchestrator_run_id, queues=dict(harness.task_queues))
    out = await client.execute_workflow(ScriptWorkflow.run, start, id=workflow_id(run_id),
                                        task_queue=harness.task_queue)
    calls = store.calls(run_id)
    if out.status == 'completed':
        return WorkflowResult(value=out.value, run_id=run_id, status='completed', calls=calls, printed=out.printed)
    error = RAISED.get(out.error_type or '', WorkflowRuntimeError)(out.error or 'the script failed')
    error.run_id, error.printed = run_id, out.printed
    error.completed = [c for c in calls if c.status == 'ok']
    raise error


async def signal_decision(address: str, run_id: str, decision: Decided) -> None:
    """Wake a run on Temporal that waits for this decision (the store already holds it)."""
    client = await connect(address)
    await client.get_workflow_handle(workflow_id(run_id)).signal(ScriptWorkflow.decide, decision)
