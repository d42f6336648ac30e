"""The orchestrator: the `run_workflow` tool as a pydantic-ai capability for any agent, and an Agent whose only
tool it is. The capability also tells each turn, before its first script, what an interrupted earlier turn of its
conversation left (`_dispatch._effects`). The `Harness` facade is an `Orchestration`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, cast

from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.capabilities import AbstractCapability, Toolset

from .._catalog._callees import Callee
from .._catalog._rules import Access
from .._dispatch._effects import interrupted_notice, interrupted_runs
from .._records import EventHandler
from .._settings import Settings
from .._tracing._setup import configure_tracing
from ._prompt import ORCHESTRATOR_INSTRUCTIONS
from ._toolset import WorkflowHost, WorkflowToolset


@dataclasses.dataclass
class WorkflowCapability(Toolset[Any]):
    """The `run_workflow` tool, and what the model must know before its first script: the runs an earlier turn of
    its conversation left interrupted, with the calls that never finished and the side effects that did."""

    host: WorkflowHost | None = None
    notice: str | None = None
    """Read from the store once per agent run (`for_run`), so the model is told before any new script runs."""

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        store = self.host.store if self.host is not None else None
        if store is None or ctx.conversation_id is None:
            return self
        notice = interrupted_notice(interrupted_runs(store, ctx.conversation_id))
        return dataclasses.replace(self, notice=notice) if notice else self

    def get_instructions(self) -> str | None:
        return self.notice


class Orchestration:
    """`capability` and `orchestrator` of a Harness."""

    tracing: bool
    temporal: str | None
    _callees: dict[str, Callee]

    @property
    def settings(self) -> Settings:
        """Declared here, defined by the Harness this is part of."""
        raise TypeError('Orchestration is a part of a Harness, which defines its settings')

    def capability(
        self,
        *,
        on_event: EventHandler | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        budget_key: str | Callable[[Any], str | None] | None = None,
    ) -> Toolset[Any]:
        """The `run_workflow` tool as a pydantic-ai capability, to add to your own agent.

        `allow` / `deny`: the callees this agent's scripts may call (least privilege). `budget_key`: whose
        `Harness(daily_cost=...)` each agent run spends, a key or a function of the run's deps (`lambda deps:
        deps.tenant`); `max_cost` holds per agent run whatever it says.
        """
        if self.tracing:  # now, not at the first script: the agent's own first run is traced from its root
            configure_tracing()
        host = cast(WorkflowHost, self)  # the Harness this is part of
        # On Temporal the agent runs in workflow code, which reads no store; and a Temporal conversation's turn is
        # never lost with a process (its history is the workflow's), so there is no interrupted turn to tell of.
        return WorkflowCapability(
            toolset=WorkflowToolset(host, on_event=on_event, access=Access.of(allow, deny), budget_key=budget_key),
            host=None if self.temporal else host,
        )

    def orchestrator(
        self,
        model: Any = None,
        *,
        instructions: str | None = None,
        on_event: EventHandler | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        budget_key: str | Callable[[Any], str | None] | None = None,
        **agent_kwargs: Any,
    ) -> Agent[Any, str]:
        """A pydantic-ai Agent whose only tool is `run_workflow`; `allow` / `deny` / `budget_key` as for `capability`.

        With a callee that needs approval, or `review=`, its output may also be pydantic-ai's `DeferredToolRequests`
        (a run waiting for a person); continue with `deferred_tool_results=DeferredToolResults(...)`.
        """
        if self.settings.review is not None or any(c.approval for c in self._callees.values()):
            agent_kwargs.setdefault('output_type', [str, DeferredToolRequests])
        capabilities: list[Any] = [self.capability(on_event=on_event, allow=allow, deny=deny, budget_key=budget_key)]
        if self.temporal:  # durable in a `conversation` workflow: model requests become activities
            from pydantic_ai.durable_exec.temporal import TemporalDurability

            capabilities.append(TemporalDurability())
        return Agent(
            model,
            name='orchestrator',
            instructions=instructions or ORCHESTRATOR_INSTRUCTIONS,
            capabilities=capabilities,
            **agent_kwargs,
        )
