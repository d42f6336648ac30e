"""`Harness`: the public face, made of the parts the stages own (`Review`, itself a `Registry`: the catalog,
check, analyze, estimate; `DurableRuns`: resume, replay, fork; `Approvals`; `Orchestration`). What is left here
is a run's wiring, written once (`start_run`, `_execute_plan`, `_dispatcher`), the steps another engine drives
through public methods (`advance`, `run_call`), and the lifetime (the sandbox pool, the store, `close`).

A run reads top to bottom through the modules it uses: catalog -> stubs -> check ->
sandbox loop (runner, loop) -> dispatch -> journal -> result (run); see ARCHITECTURE.md.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, cast

from pydantic_ai.exceptions import UserError
from pydantic_ai.usage import UsageLimits

from ._agent._orchestrator import Orchestration
from ._catalog._callees import WrongReturn, validate_arguments
from ._catalog._manifest import Admission, admit, changes
from ._catalog._prices import call_ceiling
from ._catalog._rules import Access, Policy
from ._catalog._stubs import render_inputs
from ._check._checker import MAX_CHECKERS, Checker
from ._check._plan import ReviewPolicy
from ._check._review import Review, script_text
from ._dispatch._budget import Budget
from ._dispatch._context import RunScope
from ._dispatch._cost import dollar_budgets, settler
from ._dispatch._dispatcher import Dispatcher
from ._dispatch._effects import resumed_effects, stored_effects
from ._dispatch._history import History
from ._dispatch._sources import Grant
from ._dispatch._starters import Starter
from ._errors import CatalogChange, CatalogChanged, WorkflowError, WorkflowTypeError
from ._records import CallRecord, Decision, EventHandler, Owner, RunRow, WorkflowResult, new_run_id, this_process
from ._run import execute
from ._sandbox._grants import HostGrants
from ._sandbox._pool import SandboxLimits, SandboxPool, default_workers
from ._sandbox._runner import ScriptRun, type_check, type_error
from ._sandbox._values import NotPlainData, jsonable, plain
from ._settings import (
    DEFAULT_SUB_AGENT_USAGE_LIMITS,
    FROM_ENVIRONMENT,
    Settings,
    _FromEnvironment,
    frozen,
    names,
    temporal_address,
)
from ._store import RunStore
from ._store._approvals import Approvals
from ._store._durable import Plan, check_replay, plan_replay, plan_resume, require_run, require_store, take
from ._store._durable_runs import DurableRuns
from ._store._journal import Journal
from ._tracing._setup import configure_tracing

if TYPE_CHECKING:  # pydantic-evals is imported by the first eval, not by every Harness
    from ._evals._run import EvalOptions, EvalResult
    from ._temporal._host import Conversation

F = TypeVar('F', bound=Callable[..., Any])
T = TypeVar('T')

if TYPE_CHECKING:  # the settings read as attributes of the Harness (read-only properties, made below the class)
    _SettingsAttributes = Settings
else:
    _SettingsAttributes = object


class Harness(Review, DurableRuns, Approvals, Orchestration, _SettingsAttributes):
    """A catalog of sub-agents and tools, and the engine that runs scripts against it.

    Args:
        store: the run store (SQLite file); `":memory:"` for none on disk, `None` for no journal at all.
        max_agent_calls: sub-agent calls per orchestrator run (exact, shared by all its scripts).
        max_tool_calls: host tool calls per orchestrator run (default 1,000); `None`: no limit.
        max_concurrency: calls in flight at once within a run; `None`: no limit.
        call_caps: `{callee name: n}`, exact per run.
        call_concurrency: `{callee name: n}`, calls of that callee in flight at once within a run.
        max_repeats: the same call (callee and arguments) more often than this in one script stops
            it as stuck (default 10), and so does a call of a callee whose last this many results
            were the same failure, whatever its arguments; `None`: no limit. Counted across resumes.
        strict: a script that *can* break a `requires=` rule, that can call a side-effecting
            callee without bound, or whose analysis is incomplete, fails the check (nothing runs);
            otherwise these are `CheckReport.warnings` and the rules are still enforced at every call. Strict
            also refuses a script that can reach an unguarded irreversible callee (`side_effect=True` with no
            `requires=` and no `approval=`), unless `allow_unguarded` names it.
        allow_unguarded: names of unguarded irreversible callees that strict mode lets scripts call.
        limits: sandbox limits: `max_duration_secs` (sandbox CPU time; waiting on calls does not
            count), `max_memory` (bytes), `max_suspensions`. Unknown keys raise.
        max_workers: size of the sandbox worker pool (a paused workflow holds one worker).
        type_check: check scripts against the stubs before running them.
        sub_agent_usage_limits: limits for each sub-agent run (its own requests, not the orchestrator's).
        inherit_model: run Agent sub-agents on the orchestrator's model.
        max_retries: failed `run_workflow` attempts allowed per orchestrator run.
        reuse_results: within one orchestrator run, answer a call of an idempotent callee identical to one that
            completed from its result (no budget spent), unless an `After(..., once=True)` counts its calls (each
            runs). Side effects are as written whatever this says: every call of a `side_effect=True` callee in a
            script runs; only a later script of the same orchestrator run or conversation repeating one that
            succeeded gets its result instead (and is told so).
        tracing: configure tracing on first run (logfire; nothing is sent without a token or an
            OTLP endpoint) and keep each run's spans with it.
        trace_values: put call arguments and result previews on spans.
        grant_clock / grant_randomness: let scripts read the clock / OS entropy; each value is
            journaled, so replay and resume see the same world.
        on_event: called with a `CallEvent` as each call starts, finishes, fails, is refused or is skipped,
            and (kind `progress`) as the script calls `log(text)` or `phase(name)`.
        temporal: a Temporal server's address (`host:port`; not given: `HARNESS_TEMPORAL`): every script
            runs as a Temporal workflow on the workers (`harness worker`) polling `task_queue`, which
            need the same catalog and store. `None`: the embedded engine, in this process, even when
            `HARNESS_TEMPORAL` is set.
        task_queue: the Temporal task queue workflows and calls go to.
        task_queues: `{callee name: task queue}`, to give a heavy callee workers of its own.
        review: which scripts wait for a person's approval of their plan before their first call: 'side_effects'
            (any reachable side-effecting or approval callee), 'always', or a callable(plan) -> bool; then
            `approve(run_id)` and `resume(run_id)`, and the approved plan's bounds are enforced.
        max_cost: USD per orchestrator run (or `run`): each call's ceiling is reserved before it runs and settled to
            what it cost after; a call that does not fit, or whose ceiling is not known, is refused (`_cost`).
        daily_cost: `{budget key: USD}` per UTC day, kept in the store and shared by every process using it; a run
            spends a key's with `run(budget_key=...)` (`orchestrator(budget_key=...)`).
        conversation_cost: USD over every turn of one conversation (pydantic-ai's `conversation_id`), kept in the
            store and shared by every process using it, reserved and settled as `daily_cost` is.
    """

    def __init__(
        self,
        *,
        store: str | None = '.harness/runs.db',
        max_agent_calls: int = 50,
        max_tool_calls: int | None = 1_000,
        max_concurrency: int | None = None,
        call_caps: Mapping[str, int] | None = None,
        call_concurrency: Mapping[str, int] | None = None,
        max_repeats: int | None = 10,
        strict: bool = False,
        allow_unguarded: Iterable[str] = (),
        limits: Mapping[str, Any] | None = None,
        max_workers: int | None = None,
        type_check: bool = True,
        sub_agent_usage_limits: UsageLimits | None = DEFAULT_SUB_AGENT_USAGE_LIMITS,
        inherit_model: bool = False,
        max_retries: int = 3,
        reuse_results: bool = True,
        tracing: bool = True,
        trace_values: bool = True,
        grant_clock: bool = False,
        grant_randomness: bool = False,
        on_event: EventHandler | None = None,
        temporal: str | Literal[_FromEnvironment.TOKEN] | None = FROM_ENVIRONMENT,
        task_queue: str = 'harness',
        task_queues: Mapping[str, str] | None = None,
        review: ReviewPolicy | None = None,
        max_cost: float | None = None,
        daily_cost: Mapping[str, float] | None = None,
        conversation_cost: float | None = None,
    ) -> None:
        self._settings = Settings(
            store_path=store,
            max_agent_calls=max_agent_calls,
            max_tool_calls=max_tool_calls,
            max_concurrency=max_concurrency,
            call_caps=frozen(call_caps),
            call_concurrency=frozen(call_concurrency),
            max_repeats=max_repeats,
            strict=strict,
            allow_unguarded=names(allow_unguarded, option='allow_unguarded'),
            limits=SandboxLimits.from_mapping(limits),
            max_workers=max_workers,
            type_check=type_check,
            sub_agent_usage_limits=copy.copy(sub_agent_usage_limits),
            inherit_model=inherit_model,
            max_retries=max_retries,
            reuse_results=reuse_results,
            tracing=tracing,
            trace_values=trace_values,
            grant_clock=grant_clock,
            grant_randomness=grant_randomness,
            on_event=on_event,
            temporal=temporal_address(temporal),
            task_queue=task_queue,
            task_queues=frozen(task_queues),
            review=review,
            max_cost=max_cost,
            daily_cost=frozen(daily_cost),
            conversation_cost=conversation_cost,
        )
        self._store: RunStore | None = None
        super().__init__()  # the catalog (Registry)
        self._pool = SandboxPool(
            max_workers=self.max_workers or default_workers(), limits=self.limits, reserved=MAX_CHECKERS
        )
        self._checker = Checker(self._pool)
        self._runner: asyncio.Runner | None = None
        self._runner_lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        """What this Harness was made with (frozen)."""
        return self._settings

    @property
    def store(self) -> RunStore | None:
        """The run store, opened on first use; None when the Harness was made with `store=None`."""
        if self._store is None and self.store_path is not None:
            self._store = RunStore(self.store_path)
        return self._store

    def runs(self, limit: int = 50) -> list[RunRow]:
        """Stored runs, newest first."""
        return self.store.list_runs(limit) if self.store is not None else []

    # -- checking and running -------------------------------------------------------------------

    def diff(self, run_id: str) -> list[CatalogChange]:
        """How the current catalog differs from the one the stored run ran against."""
        return changes(require_run(require_store(self.store), run_id).catalog, self.manifest())

    def new_scope(self, *, budget_key: str | None = None, **kwargs: Any) -> RunScope:
        """The state one orchestrator run shares across its scripts: one budget, its dollar budgets, deps, usage."""
        budget = Budget(self.max_agent_calls, self.max_tool_calls, dict(self.call_caps))
        price = functools.partial(call_ceiling, limits=self.sub_agent_usage_limits)
        cost = dollar_budgets(self.settings, self.store, budget_key, price, kwargs.get('conversation_id'))
        return RunScope(sub_agent_usage_limits=self.sub_agent_usage_limits, budget=budget, cost=cost, **kwargs)

    async def run(
        self,
        code: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
        scope: RunScope | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        budget_key: str | None = None,
    ) -> WorkflowResult:
        """Check and run a script; return its final value, calls and output.

        `budget_key`: whose `daily_cost` the run spends (a tenant, a user); with a `scope`, the scope's.

        `allow` / `deny` restrict which callees this run may call (on top of the scope's): a call
        outside them is refused, never run. Raises a `WorkflowError` subclass on failure, carrying
        the completed calls and the output. With a store, every call is journaled and every pause
        snapshotted, so the run can be resumed, replayed or forked later. On Temporal (`temporal=`) the
        script runs on the workers; `on_event` is not called (the calls happen in other processes).
        """
        script_text(code)
        inputs = plain_inputs(inputs)
        scope = scope or self.new_scope(budget_key=budget_key)
        access = scope.access.merged(Access.of(allow, deny))
        if self.temporal:
            from ._temporal._host import run_on_temporal

            return await run_on_temporal(self, code, inputs, scope, access)
        return await self.start_run(new_run_id(), code, inputs, scope, access, on_event=on_event)

    async def start_run(
        self,
        run_id: str,
        code: str,
        inputs: dict[str, Any] | None,
        scope: RunScope,
        access: Access,
        *,
        on_event: EventHandler | None = None,
        starter: Starter | None = None,
        spent: Iterable[CallRecord] = (),
    ) -> WorkflowResult:
        """A new run from the script's first line until it completes, fails, or waits (what `run` does once the
        script and inputs are admitted): its calls started by `starter` (default: tasks here), with the calls
        `spent` by the orchestrator run elsewhere (its other scripts, in other processes) counted in its budget."""
        journal = Journal(self.store, run_id, this_process())
        row = RunRow(
            run_id=run_id,
            script=code,
            inputs=dict(inputs) if inputs else None,
            prompt=scope.prompt,
            orchestrator_run_id=scope.orchestrator_run_id,
            conversation_id=scope.conversation_id,
            access=access.to_json(),
            catalog=self.manifest(),
            budget_key=scope.cost.daily.key if scope.cost.daily is not None else None,
        )
        if (plan := await self.plan_for_review(code, inputs, access)) is not None:  # a person approves it first
            return await self.hold_plan(row, plan, access)
        if self.store is not None and (scope.orchestrator_run_id or scope.conversation_id):  # the journal knows best
            scope.effects = stored_effects(self.store, scope.orchestrator_run_id, scope.conversation_id, scope.seen)
        dispatcher = self._dispatcher(
            run_id, scope, access, on_event, journal, reuse=self.reuse_results, starter=starter
        )
        dispatcher.spend(list(spent))
        job = ScriptRun(
            code=code,
            stubs=self.stubs() + render_inputs(inputs or {}),
            dispatcher=dispatcher,
            inputs=row.inputs,
            type_check=self.type_check,
            rule_errors=self._rule_errors(code, access),
        )
        return await self._execute(job, journal, mode='run', begin=row)

    def run_sync(self, code: str, **kwargs: Any) -> WorkflowResult:
        """Blocking twin of `run`."""
        return self._sync(self.run(code, **kwargs))

    def _signal_decided(self, run_id: str, seqs: list[int], decision: Decision) -> None:
        """A run on Temporal waits for the `decide` signal, which carries the decision too."""
        if not self.temporal or not seqs:
            return
        from ._temporal._flow import Decided
        from ._temporal._host import signal_decision

        for each in seqs:
            self._sync(
                signal_decision(
                    self.temporal, run_id, Decided(each, decision.approved, decision.reason, decision.decided_by)
                )
            )

    # -- steps of a run another engine drives (Temporal's activities call these and `start_run`) -----------

    async def advance(self, run_id: str, *, starter: Starter) -> WorkflowResult:
        """A run's next step: continue it from its newest snapshot until it completes, fails, or waits (for
        approvals, or for calls left to `starter`'s workers, which are waited for, never run here)."""
        store = require_store(self.store)
        plan = plan_resume(store, run_id)
        if (held := self.plan_held(plan)) is not None:  # its plan still waits for a person (a rejection raises)
            return held
        if plan.done is not None:
            # The run ended in an advance whose workflow task was then retried (Temporal re-runs a local
            # activity it has no record of): give the same ending again, output included, by replaying
            # from the newest snapshot with every call answered from the journal. Nothing is written.
            plan = plan_replay(store, run_id, from_seq=plan.run.calls_count)
            result = await self._execute_plan(plan, None, False, False)
            check_replay(plan, result)
            return result
        plan.history.deferred = True
        return await self._execute_plan(plan, None, False, False, starter=starter)

    async def run_call(self, run_id: str, record: CallRecord, *, access: Access) -> None:
        """Run one journaled call of a run another engine drives, its arguments validated again, its span and
        outcome (in `record`) as the embedded engine makes them; the caller journals the outcome."""
        callee = self._callees[record.callee]
        ceiling = call_ceiling(callee, self.sub_agent_usage_limits).usd  # what its advance reserved, if anything
        cost = settler(self.settings, self.store, ceiling)  # its dollar cost settles here, from its usage
        scope = RunScope(sub_agent_usage_limits=self.sub_agent_usage_limits, cost=cost)
        dispatcher = self._dispatcher(run_id, scope, access, None, Journal(self.store, run_id))
        await dispatcher.run_one(callee, validate_arguments(callee, record.arguments), record)

    async def _execute_plan(
        self,
        plan: Plan,
        on_event: EventHandler | None,
        recheck: bool,
        accept_changes: bool,
        *,
        starter: Starter | None = None,
        owner: Owner | None = None,
    ) -> WorkflowResult:
        """Admit the plan, take the run (a resume) for `owner` (default: this process), and run it."""
        stubs = self.stubs() + render_inputs(plan.run.inputs or {})
        admission = await self._admit(plan, stubs, recheck=recheck, accept_changes=accept_changes)
        owner = owner or this_process()
        if plan.mode == 'resume' and (held := self.plan_held(plan)) is not None:  # its plan is not approved yet
            return held
        # (before the run is taken: its key may be refused)
        scope = self.new_scope(budget_key=plan.run.budget_key, conversation_id=plan.run.conversation_id)
        if plan.mode == 'resume':  # admitted: only now is the run taken (a refused resume leaves it as it was)
            take(require_store(self.store), plan, owner)
        if plan.begin is not None:
            plan.begin.catalog = self.manifest()
        scope.effects = resumed_effects(self.store, plan.run) if plan.mode == 'resume' and self.store else []
        journal = Journal(self.store if plan.journaled else None, plan.run_id, owner)
        access = Access.from_json(plan.run.access)
        dispatcher = self._dispatcher(
            plan.run_id,
            scope,
            access,
            on_event,
            journal,
            history=plan.history,
            decisions=plan.decisions,
            grants=self.grants_of(plan.run_id),
            starter=starter,
        )
        dispatcher.spend(plan.spent)
        dispatcher.preload(plan.prefill, plan.prefill_source)
        job = ScriptRun(
            code=plan.run.script,
            stubs=stubs,
            dispatcher=dispatcher,
            inputs=plan.run.inputs,
            type_check=self.type_check and admission != 'accepted',
            restore=plan.restore,
        )
        return await self._execute(
            job,
            journal,
            mode=plan.mode,
            begin=plan.begin,
            traceparent=plan.run.trace_context if plan.begin is None else None,
        )

    async def _admit(self, plan: Plan, stubs: str, *, recheck: bool, accept_changes: bool) -> Admission:
        """Whether the plan may run under today's catalog, decided before anything is written: `CatalogChanged`
        for changes not accepted, `WorkflowTypeError` when the stored script fails the recheck against `stubs`,
        a `WorkflowError` for an answer of the wrong type."""
        found = changes(plan.run.catalog, self.manifest())
        admission = admit(plan.run.run_id, found, recheck=recheck, accept_changes=accept_changes)
        if admission == 'recheck':
            report = await type_check(self._checker, stubs, plan.run.script)
            if not report.ok and not recheck:  # checked on its own for added callees: still the catalog's refusal
                raise CatalogChanged(plan.run.run_id, found, errors=report.errors)
            if not report.ok:
                raise type_error(report.errors, report.diagnostics, run_id=plan.run.run_id)
        self._check_answers(plan)
        return admission

    def _check_answers(self, plan: Plan) -> None:
        """Answers given for calls (a fork's result, resume's `answers`) have the callee's return type."""
        for seq, value in plan.history.answers.items():
            name = plan.calls[seq - 1].callee if 0 < seq <= len(plan.calls) else None
            callee = self._callees.get(name) if name else None
            if callee is None:
                continue
            try:
                plan.history.answers[seq] = jsonable(callee.returns.dump(callee.returns.check(value)))
            except WrongReturn as exc:
                raise WorkflowError(
                    f'The answer given for call #{seq} is refused: {callee.wrong_return(exc)}. Nothing ran.',
                    run_id=plan.run.run_id,
                ) from None

    def _dispatcher(
        self,
        run_id: str,
        scope: RunScope,
        access: Access,
        on_event: EventHandler | None,
        journal: Journal,
        *,
        history: History | None = None,
        reuse: bool = False,
        decisions: Mapping[int, Decision] | None = None,
        grants: Sequence[Grant] = (),
        starter: Starter | None = None,
    ) -> Dispatcher:
        policy = Policy(
            access=access,
            max_repeats=self.max_repeats,
            max_concurrency=self.max_concurrency,
            call_concurrency=self.call_concurrency,
        )
        return Dispatcher(
            run_id=run_id,
            callees=dict(self._callees),
            scope=scope,
            policy=policy,
            on_event=on_event or self.on_event,
            journal=journal,
            history=history,
            reuse=reuse,
            trace_values=self.trace_values,
            decisions=decisions,
            grants=grants,
            starter=starter,
        )

    async def _execute(self, job: ScriptRun, journal: Journal, **how: Any) -> WorkflowResult:
        """`_run.execute` (`how`: its `mode`, `begin`, `traceparent`) with this Harness's tracing and OS grants."""
        if self.tracing:
            configure_tracing()
        if self.grant_clock or self.grant_randomness:
            job.os_handler = HostGrants(job.dispatcher, clock=self.grant_clock, randomness=self.grant_randomness)
        return await execute(self._pool, self._checker, job, journal, **how)

    # -- the orchestrator ------------------------------------------------------------------------

    def conversation(self, conversation_id: str | None = None) -> Conversation:
        """A conversation with the orchestrator that lives on Temporal (needs `temporal=`): each
        `await conversation.ask(prompt)` is one turn, run by a worker serving an orchestrator
        (`harness worker`); the history is the workflow's, so no worker crash loses it. Pass the id of
        an earlier conversation to continue it."""
        if not self.temporal:
            raise UserError('conversation() runs on Temporal: make the Harness with temporal="host:port".')
        from ._temporal._host import Conversation

        return Conversation(self.temporal, self.task_queue, conversation_id or new_run_id())

    # -- evals ------------------------------------------------------------------------------------

    async def evaluate(self, dataset: Any, **options: Unpack[EvalOptions]) -> EvalResult:
        """Score the orchestrator on a pydantic-evals `Dataset` (or a dataset file): each case's inputs are
        the prompt (a string, or a mapping with `prompt`); its answer is the output the evaluators score.
        The options are `EvalOptions` (all keyword-only; an unknown one is a `TypeError`).

        Cases run at most `max_concurrency` (default 4) at once; every case's scripts are stored runs, and the
        eval is stored with pydantic-evals' report (`EvalResult.eval_id`). `baseline`: a stored eval whose report
        this one is compared with (`EvalResult.render()` gives pydantic-evals' diff). `reuse_calls`: a
        stored eval whose journal answers a call of the same case with the same callee and arguments (its
        signature and `version=` unchanged) instead of running it; side-effecting callees and those that
        need approval run live unless named in `reuse_side_effects`. It is also the baseline unless
        another is given. `model` (default: `HARNESS_MODEL`, `HARNESS_BASE_URL` or a provider key, as the
        command line chooses) and `instructions` are as for `orchestrator`, `agent_options` its other keyword
        arguments; `model_label` names the model in the report when its repr does not, `name` the eval,
        `progress` shows pydantic-evals' progress bar.
        """
        from ._evals._run import evaluate

        return await evaluate(self, dataset, **options)

    def evaluate_sync(self, dataset: Any, **options: Unpack[EvalOptions]) -> EvalResult:
        """Blocking twin of `evaluate`."""
        return self._sync(self.evaluate(dataset, **options))

    # -- lifetime ---------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Shut the sandbox workers down and close the store. Both reopen if the Harness is used again."""
        await self._checker.aclose()
        await self._pool.aclose()
        if self._store is not None:
            self._store.close()
            self._store = None

    def close(self) -> None:
        self._sync(self.aclose())
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            with self._runner_lock:
                if self._runner is None:
                    self._runner = asyncio.Runner()
            return self._runner.run(coro)
        # Called from async code: run on a private thread rather than fail (the caller's loop waits).
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box['value'] = asyncio.run(coro)
            except BaseException as exc:
                box['error'] = exc

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if 'error' in box:
            raise box['error']
        return box['value']


# `h.max_agent_calls` and every other setting read as before, from `h.settings`; a property without a setter, so
# `h.strict = True` raises AttributeError: a Harness is what it was made with (make another for other settings).
for _field in dataclasses.fields(Settings):
    setattr(Harness, _field.name, property(attrgetter(f'_settings.{_field.name}'), doc=f'`settings.{_field.name}`.'))
del _field

__all__ = ['Harness']


def plain_inputs(inputs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`inputs=` as plain data: they are bound as globals in the sandbox and stored with the run."""
    if not inputs:
        return None
    try:
        return cast(dict[str, Any], plain(dict(inputs)))
    except NotPlainData as exc:
        raise WorkflowTypeError(f'inputs= holds {exc.type_name}, which cannot cross into the sandbox.') from None
