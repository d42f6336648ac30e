"""The Temporal engine's host side: the activities a worker runs, the worker, and `run_on_temporal`.

`advance` is the local engine's start or resume with `Activities` as its starter (`Harness.start_run`,
`Harness.advance`): every rule, budget, approval and join is decided there exactly as on the embedded
engine, and a live call is journaled `running` and left to a `call` activity instead of started. `call`
runs one journaled call once (`Harness.run_call`): a call whose row already holds a result is never run
again, whichever worker retries it. The Temporal side reaches the engine through public methods only. The
run store is shared by the client and the workers (it carries the snapshots and the journal), so
`runs`, `show`, `trace` and `replay` read Temporal runs as they read local ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Protocol

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from .._catalog._callees import Callee
from .._catalog._rules import Access
from .._check._plan import PLAN_SEQ
from .._dispatch._context import RunScope
from .._dispatch._starters import DispatcherView, Staged, Starter
from .._errors import RunBusy, SandboxCrashed, WorkflowError, raised_as
from .._records import CallRecord, WorkflowResult, new_run_id
from .._store import RunStore, StoreError
from .._store._journal import Journal
from .._tracing._setup import RECORDER, attach_traceparent
from ._chat import ORCHESTRATORS, ConversationStart, ConversationWorkflow, conversation_workflow_id
from ._flow import ADVANCE, CALL, Advanced, CallTask, Decided, ScriptStart, ScriptWorkflow, workflow_id


class TemporalHost(Protocol):
    """What the Temporal side needs of a `Harness` (a protocol, so this module never imports the engine)."""

    @property
    def temporal(self) -> str | None: ...

    @property
    def task_queue(self) -> str: ...

    @property
    def task_queues(self) -> Mapping[str, str]: ...

    @property
    def store(self) -> RunStore | None: ...

    @property
    def callees(self) -> Mapping[str, Callee]: ...

    def new_scope(self, **kwargs: Any) -> RunScope: ...

    async def start_run(
        self,
        run_id: str,
        code: str,
        inputs: dict[str, Any] | None,
        scope: RunScope,
        access: Access,
        *,
        starter: Starter | None = None,
        spent: Iterable[CallRecord] = (),
    ) -> WorkflowResult: ...

    async def advance(self, run_id: str, *, starter: Starter) -> WorkflowResult: ...

    async def run_call(self, run_id: str, record: CallRecord, *, access: Access) -> None: ...


class Activities:
    """The starter of a step on Temporal (`_dispatch._starters.Starter`): a journaled call is left to a `call`
    activity and held, so the run stops at this pause until a later advance finds its result in the journal;
    a stopped script's calls are not waited for (`Dispatcher.wind_down` cancels those still running)."""

    def start(self, dispatcher: DispatcherView, item: Staged) -> None:
        dispatcher.held[item.record.seq] = item.future

    async def drain(self, dispatcher: DispatcherView) -> None:
        return None


HEARTBEAT_EVERY = 1.0


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncGenerator[None]:
    """Tell Temporal this worker is alive while the block runs, so a killed worker's step is retried soon."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY)

    if activity.info().is_local:  # a local activity is watched through its workflow task instead
        yield
        return
    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()


class Steps:
    """The activities, bound to the worker's Harness (its catalog, store and sandbox pool)."""

    def __init__(self, harness: TemporalHost) -> None:
        self.harness = harness

    @activity.defn(name=ADVANCE)
    async def advance(self, start: ScriptStart) -> Advanced:
        h = self.harness
        store = shared_store(h)
        async with heartbeating():
            try:
                if store.get_run(start.run_id) is None:
                    scope = h.new_scope(
                        budget_key=start.budget_key,
                        prompt=start.prompt,
                        orchestrator_run_id=start.orchestrator_run_id,
                        conversation_id=start.conversation_id,
                        seen=frozenset(start.seen),
                    )
                    result = await h.start_run(
                        start.run_id,
                        start.code,
                        start.inputs,
                        scope,
                        Access.from_json(start.access),
                        starter=Activities(),
                        spent=spent_elsewhere(store, start.orchestrator_run_id),
                    )
                else:
                    result = await h.advance(start.run_id, starter=Activities())
            except (SandboxCrashed, RunBusy):
                raise  # the worker's trouble, not the script's: Temporal retries the step
            except StoreError as exc:
                raise unusable_store(exc) from None
            except WorkflowError as exc:
                completed = [
                    {'seq': c.seq, 'callee': c.callee, 'arguments': c.arguments, 'result': c.result}
                    for c in exc.completed
                ]
                return Advanced(
                    'failed', error=exc.message, error_type=type(exc).__name__, printed=exc.printed, completed=completed
                )
        if result.status != 'waiting':
            return Advanced(result.status, value=result.value, printed=result.printed)
        if result.plan is not None:  # held for a person's review before its first call: the `decide` signal wakes it
            return Advanced('waiting', approvals=[PLAN_SEQ], printed=result.printed)
        held = [p.seq for p in result.waiting or []]
        rows = {c.seq: c for c in result.calls}
        calls = [rows[seq] for seq in held if rows[seq].status == 'running']
        return Advanced(
            'waiting',
            calls=[CallTask(start.run_id, c.seq) for c in calls],
            callees=[c.callee for c in calls],
            approvals=[seq for seq in held if rows[seq].status == 'waiting'],
            printed=result.printed,
            wake_at=next_deadline(result.calls),
        )

    @activity.defn(name=CALL)
    async def call(self, task: CallTask) -> str:
        """Run call `task.seq` and journal its result; returns the call's status."""
        h = self.harness
        store = shared_store(h)
        run = store.get_run(task.run_id)
        record = store.call(task.run_id, task.seq) if run else None
        if run is None or record is None:
            raise ApplicationError(
                f"run {task.run_id} has no call #{task.seq} in this worker's store: the workers "
                'and the client need the same run store (--store)',
                type='StoreMismatch',
                non_retryable=True,
            )
        if record.status != 'running':
            return record.status  # already run (a retry after its result was journaled) or cancelled
        callee = h.callees.get(record.callee)
        if callee is None:
            raise ApplicationError(
                f'this worker has no callee {record.callee!r}: every worker needs the same catalog (--agents)',
                type='CatalogMismatch',
                non_retryable=True,
            )
        journal = Journal(store, task.run_id)
        try:
            async with heartbeating():
                try:
                    with attach_traceparent(run.trace_context):
                        await h.run_call(task.run_id, record, access=Access.from_json(run.access))
                finally:
                    spans = RECORDER.drain(task.run_id)
                    if spans:
                        await asyncio.to_thread(store.add_spans, task.run_id, spans)
            journal.add([record])
            await journal.write(only_running=True)  # unless a join dropped it meanwhile (`within`, a lost race)
        except StoreError as exc:
            raise unusable_store(exc) from None
        return record.status


def spent_elsewhere(store: RunStore, orchestrator_run_id: str | None) -> list[CallRecord]:
    """The calls an orchestrator run's other scripts made: its budget is shared, and they ran in other processes,
    so a script's first step counts them from the store."""
    if not orchestrator_run_id:
        return []
    return [c for other in store.runs_of_orchestrator(orchestrator_run_id) for c in store.calls(other)]


def shared_store(harness: TemporalHost) -> RunStore:
    """The run store this worker shares with the client; a worker without one cannot take any step."""
    if harness.store is None:
        raise ApplicationError(
            "this worker's Harness has no run store (store=None): the workers and the client need the same store",
            type='StoreMismatch',
            non_retryable=True,
        )
    return harness.store


def next_deadline(calls: list[CallRecord]) -> float | None:
    """The earliest `within` deadline (journaled, absolute) of a call still running: the run must advance
    then even if no call finishes, so the script gets its `TimeoutError`."""
    dues = [
        float(c.result)
        for c in calls
        if c.callee == 'join:deadline'
        and isinstance(c.result, int | float)
        and isinstance(member := c.arguments.get('member'), int)
        and calls[member - 1].status == 'running'
    ]
    return min(dues, default=None)


def unusable_store(exc: StoreError) -> ApplicationError:
    """A store this worker cannot write (another key, another schema) will not heal by retrying."""
    return ApplicationError(str(exc), type='StoreError', non_retryable=True)


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Client]] = weakref.WeakKeyDictionary()


async def connect(address: str) -> Client:
    """A client of the Temporal server at `address` (one per event loop), with pydantic-ai's plugin (its
    data converter) and Temporal's OpenTelemetry interceptor, so workflow and activity spans join the
    trace of the run that started them."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    if address not in clients:
        try:
            clients[address] = await Client.connect(
                address, interceptors=[TracingInterceptor()], plugins=[PydanticAIPlugin()]
            )
        except RuntimeError:
            raise WorkflowError(
                f'Cannot reach a Temporal server at {address}. Start one with `harness temporal-dev`, or point '
                'HARNESS_TEMPORAL at yours.'
            ) from None
    return clients[address]


def worker(
    harness: TemporalHost,
    client: Client,
    task_queue: str,
    *,
    orchestrator: Agent[Any, Any] | None = None,
    **options: Any,
) -> Worker:
    """A worker that runs scripts' workflows and the catalog's calls from `task_queue`; with `orchestrator`
    (an agent from `Harness.orchestrator`), durable conversations with it too (`Harness.conversation`)."""
    steps = Steps(harness)
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules('harness', 'subagents', 'tools')
    )
    workflows: list[type] = [ScriptWorkflow]
    plugins = []
    if orchestrator is not None:
        ORCHESTRATORS[orchestrator.name or 'orchestrator'] = orchestrator
        workflows.append(ConversationWorkflow)
        plugins.append(AgentPlugin(orchestrator))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=[steps.advance, steps.call],
        workflow_runner=runner,
        plugins=plugins,
        **options,
    )


class Conversation:
    """A conversation with the orchestrator that lives on Temporal (`Harness.conversation`): its history is
    the workflow's, so it survives any worker, and any process can continue it by its id."""

    def __init__(self, address: str, task_queue: str, conversation_id: str) -> None:
        self.address = address
        self.task_queue = task_queue
        self.conversation_id = conversation_id

    async def ask(self, prompt: str) -> str:
        """One turn: the orchestrator's answer to `prompt`, given the conversation so far."""
        client = await connect(self.address)
        handle = await client.start_workflow(
            ConversationWorkflow.run,
            ConversationStart(self.conversation_id),
            id=conversation_workflow_id(self.conversation_id),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        return await handle.execute_update('ask', prompt, result_type=str)

    async def messages(self) -> list[ModelMessage]:
        """The conversation so far, as pydantic-ai messages."""
        client = await connect(self.address)
        handle = client.get_workflow_handle(conversation_workflow_id(self.conversation_id))
        return list(ModelMessagesTypeAdapter.validate_json(await handle.query(ConversationWorkflow.messages)))

    async def close(self) -> None:
        """End the conversation's workflow (its history stays in Temporal's)."""
        client = await connect(self.address)
        await client.get_workflow_handle(conversation_workflow_id(self.conversation_id)).signal(
            ConversationWorkflow.close
        )


async def serve(
    harness: TemporalHost,
    address: str,
    task_queue: str,
    *,
    orchestrator: Agent[Any, Any] | None = None,
    ready: Callable[[], None] | None = None,
) -> None:
    """Run a worker until SIGINT or SIGTERM; then it stops taking work and finishes what it holds."""
    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with worker(
        harness, client, task_queue, orchestrator=orchestrator, graceful_shutdown_timeout=timedelta(seconds=10)
    ):
        if ready is not None:
            ready()
        await stop.wait()


async def run_on_temporal(
    harness: TemporalHost, code: str, inputs: dict[str, Any] | None, scope: RunScope, access: Access
) -> WorkflowResult:
    """Run a script as a Temporal workflow and wait for its result (what `Harness.run` does with `temporal=`).

    Called from workflow code (the `run_workflow` tool of an orchestrator made durable by pydantic-ai's
    `TemporalDurability`), the script is a child workflow of the orchestrator's, and nothing here
    touches the store: workflow code must stay deterministic.
    """
    start = ScriptStart(
        run_id='',
        code=code,
        inputs=inputs,
        access=access.to_json(),
        prompt=scope.prompt,
        orchestrator_run_id=scope.orchestrator_run_id,
        conversation_id=scope.conversation_id,
        budget_key=scope.cost.daily.key if scope.cost.daily is not None else None,
        seen=sorted(scope.seen),
        queues=dict(harness.task_queues),
    )
    if workflow.in_workflow():
        start.run_id = workflow.uuid4().hex[:24]
        out = await workflow.execute_child_workflow(
            ScriptWorkflow.run, start, id=workflow_id(start.run_id), task_queue=harness.task_queue
        )
        return ended(out, start.run_id, [])
    store = harness.store
    if store is None:
        raise WorkflowError('The Temporal engine needs a run store the workers share: give the Harness store=PATH.')
    assert harness.temporal is not None
    client = await connect(harness.temporal)
    start.run_id = new_run_id()
    try:
        out = await client.execute_workflow(
            ScriptWorkflow.run, start, id=workflow_id(start.run_id), task_queue=harness.task_queue
        )
    except WorkflowFailureError as exc:
        raise failed_on_temporal(exc, start.run_id) from None
    return ended(out, start.run_id, store.calls(start.run_id))


def failed_on_temporal(exc: WorkflowFailureError, run_id: str) -> WorkflowError:
    """A script workflow that failed outside the script (a worker that cannot use the store, a catalog that
    differs): the kind of failure, not its message, which holds the workers' paths."""
    cause: BaseException | None = exc.cause
    while cause is not None and cause.__cause__ is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    kind = cause.type if isinstance(cause, ApplicationError) and cause.type else type(cause).__name__
    return WorkflowError(
        f"The run failed on the Temporal workers ({kind}), not in the script; the workers' "
        'log says why. Nothing more will run.',
        run_id=run_id,
    )


def ended(out: Advanced, run_id: str, calls: list[CallRecord]) -> WorkflowResult:
    """A finished script workflow as `Harness.run` reports it: its result, or its error raised."""
    if out.status == 'completed':
        return WorkflowResult(value=out.value, run_id=run_id, status='completed', calls=calls, printed=out.printed)
    error = raised_as(out.error_type)(out.error or 'the script failed')
    error.run_id, error.printed = run_id, out.printed
    error.completed = [
        CallRecord(
            seq=c['seq'], callee=c['callee'], arguments=c['arguments'], line=None, status='ok', result=c['result']
        )
        for c in out.completed
    ]
    raise error


async def signal_decision(address: str, run_id: str, decision: Decided) -> None:
    """Wake a run on Temporal that waits for this decision (the store already holds it)."""
    client = await connect(address)
    await client.get_workflow_handle(workflow_id(run_id)).signal(ScriptWorkflow.decide, decision)
