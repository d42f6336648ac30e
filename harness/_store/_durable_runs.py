"""Resume, replay and fork of a stored run, as the `Harness` facade offers them: each reads a plan of the run
from the store (`_durable`), which the facade then executes (`_execute_plan`: admitted against the catalog,
claimed, run). Nothing here writes the store: a refused plan leaves the run as it was.

The facade is a `DurableRuns` (as it is a `Review` and `Approvals`).
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from .._errors import WorkflowError
from .._records import EventHandler, WorkflowResult, one_execution
from .._settings import Settings
from ._durable import Plan, check_replay, plan_fork, plan_replay, plan_resume, require_store
from ._sqlite import RunStore

T = TypeVar('T')


class DurableRuns:
    """`resume`, `replay` and `fork` (and their blocking twins) of a Harness."""

    @property
    def settings(self) -> Settings:
        """Declared here, defined by the Harness this is part of."""
        raise TypeError('DurableRuns is a part of a Harness, which defines its settings')

    @property
    def store(self) -> RunStore | None:
        """The run store: declared here, defined by the Harness this is part of."""
        raise TypeError('DurableRuns is a part of a Harness, which defines its store')

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Declared here, defined by the Harness this is part of."""
        raise TypeError('DurableRuns is a part of a Harness, which defines _sync')

    async def _execute_plan(self, plan: Plan, *args: Any, **kwargs: Any) -> WorkflowResult:
        """`(plan, on_event, recheck, accept_changes, *, starter=None, owner=None)`: admit the plan, take the run (a
        resume) and run it. Declared here, defined by the Harness this is part of."""
        raise TypeError('DurableRuns is a part of a Harness, which defines _execute_plan')

    async def resume(
        self,
        run_id: str,
        *,
        retry_unknown: bool = False,
        answers: Mapping[int, Any] | None = None,
        on_event: EventHandler | None = None,
        recheck: bool = False,
        accept_changes: bool = False,
    ) -> WorkflowResult:
        """Continue an interrupted run from its newest snapshot; journaled calls are not repeated.

        A side-effecting call that was in flight when the run stopped is re-run only with
        `retry_unknown=True`, or answered with `answers={seq: result}`. Raises `CatalogChanged` if the
        catalog differs from the run's, unless the only differences are added callees or `recheck=True`
        (either way the stored script must still type-check against the new stubs), or
        `accept_changes=True`: the script then runs without the type check (you accepted the changes; every
        call's arguments and result are still validated as it is made). A refused resume writes nothing.
        """
        if self.settings.temporal:  # a second driver beside Temporal's would run calls its activities own
            raise WorkflowError(
                f'Run {run_id} is driven by Temporal, which resumes it by itself (its workers retry '
                'every step); approve or reject its waiting calls instead. resume() is for the '
                'embedded engine (temporal=None).'
            )
        plan = plan_resume(require_store(self.store), run_id, retry_unknown=retry_unknown, answers=dict(answers or {}))
        return plan.done or await self._execute_plan(plan, on_event, recheck, accept_changes, owner=one_execution())

    async def replay(
        self,
        run_id: str,
        *,
        from_seq: int | None = None,
        on_event: EventHandler | None = None,
        recheck: bool = False,
        accept_changes: bool = False,
    ) -> WorkflowResult:
        """Run a stored script again, answering every call from its journal; no callee runs.
        `recheck` / `accept_changes` as for `resume`."""
        plan = plan_replay(require_store(self.store), run_id, from_seq=from_seq)
        result = await self._execute_plan(plan, on_event, recheck, accept_changes)
        check_replay(plan, result)
        return result

    async def fork(
        self,
        run_id: str,
        *,
        at: int,
        result: Any,
        on_event: EventHandler | None = None,
        recheck: bool = False,
        accept_changes: bool = False,
    ) -> WorkflowResult:
        """A new run: calls before `at` answered from the journal, call `at` with `result` (checked
        against the callee's return type), later calls live. `recheck` / `accept_changes` as for
        `resume`."""
        plan = plan_fork(require_store(self.store), run_id, at=at, result=result)
        return await self._execute_plan(plan, on_event, recheck, accept_changes)

    def resume_sync(self, run_id: str, **kwargs: Any) -> WorkflowResult:
        return self._sync(self.resume(run_id, **kwargs))

    def replay_sync(self, run_id: str, **kwargs: Any) -> WorkflowResult:
        return self._sync(self.replay(run_id, **kwargs))

    def fork_sync(self, run_id: str, **kwargs: Any) -> WorkflowResult:
        return self._sync(self.fork(run_id, **kwargs))
