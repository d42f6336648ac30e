"""The `run_workflow` tool: how an orchestrator model reaches the engine.

One tool, whose description carries the sandbox rules and the catalog (`Harness.stubs()`, byte for
byte what the checker uses). A failed check or a script error returns to the model as a retry
with ty's or the traceback's message and the results already completed; only the script's final
value (and its printed output, if any) returns on success. Either way a note names the side effects
answered from an earlier script instead of run again (`_dispatch._effects`). One budget is shared by
every script of one orchestrator run.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Protocol, cast

from pydantic import Field, TypeAdapter
from pydantic_ai import RunContext, ToolDefinition
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
from pydantic_ai.toolsets.abstract import AbstractToolset, SchemaValidatorProt, ToolsetTool
from typing_extensions import TypedDict

from .._catalog._callees import Callee
from .._catalog._rules import Access
from .._check._estimate import Estimate
from .._check._plan import estimate_section
from .._dispatch._context import RunScope
from .._dispatch._effects import resumed_by_turn
from .._errors import BudgetExceeded, PlanRejected, WorkflowError
from .._records import CallRecord, EventHandler, WorkflowResult, preview
from .._sandbox._pool import SandboxLimits
from .._store import RunStore
from ._prompt import tool_description

TOOL_NAME = 'run_workflow'
MAX_COMPLETED_SHOWN = 20
PREVIEW_CHARS = 300
PRINTED_CHARS = 2_000

# Set while a script runs, so a sub-agent that carries this capability is not offered the tool:
# workflows do not nest, which keeps one budget per orchestrator run.
_in_workflow: contextvars.ContextVar[bool] = contextvars.ContextVar('harness_in_workflow', default=False)


class _Arguments(TypedDict):
    code: Annotated[str, Field(description='The Python workflow script to run in the sandbox.')]


_ARGS = TypeAdapter(_Arguments)
_ARGS_SCHEMA = _ARGS.json_schema()
_ARGS_VALIDATOR = cast(SchemaValidatorProt, _ARGS.validator)


def completed_section(completed: list[CallRecord]) -> str:
    """A bounded list of results a retry can reuse instead of paying for them again."""
    if not completed:
        return ''
    shown = completed[-MAX_COMPLETED_SHOWN:]
    lines = [
        f'\n\nCompleted before the failure ({len(completed)} call(s); reuse these values instead of calling again):'
    ]
    if len(shown) < len(completed):
        lines.append(f'(only the last {len(shown)} shown)')
    for call in shown:
        args = preview(call.arguments, 120)
        lines.append(f'- #{call.seq} {call.callee}({args}) -> {preview(call.result, PREVIEW_CHARS)}')
    return '\n'.join(lines)


def printed_section(printed: str) -> str:
    if not printed:
        return ''
    text = printed if len(printed) <= PRINTED_CHARS else printed[:PRINTED_CHARS] + ' ...[truncated]'
    return f'\n\nPrinted before the failure:\n{text}'


def dollars(max_cost: float | None, daily: bool, conversation: float | None = None) -> str | None:
    """The dollar budgets a conversation's scripts spend, as the tool description names them."""
    named = [
        *([f'max_cost=${max_cost:g} in all'] if max_cost is not None else []),
        *(['a daily budget'] * daily),
        *([f'conversation_cost=${conversation:g} over this conversation'] if conversation is not None else []),
    ]
    return ' and '.join(named) or None


class WorkflowHost(Protocol):
    """What the tool needs of a `Harness`: its catalog, its budgets, and a way to run a script."""

    @property
    def max_agent_calls(self) -> int: ...

    @property
    def max_tool_calls(self) -> int | None: ...

    @property
    def max_retries(self) -> int: ...

    @property
    def max_cost(self) -> float | None: ...

    @property
    def conversation_cost(self) -> float | None: ...

    @property
    def max_repeats(self) -> int | None: ...

    @property
    def limits(self) -> SandboxLimits: ...

    @property
    def callees(self) -> Mapping[str, Callee]: ...

    def stubs(self) -> str: ...

    def estimate(
        self, code: str, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Estimate: ...

    def new_scope(self, **kwargs: Any) -> RunScope: ...

    async def run(
        self, code: str, *, scope: RunScope | None = None, on_event: EventHandler | None = None
    ) -> WorkflowResult: ...

    async def resume(self, run_id: str, *, on_event: EventHandler | None = None) -> WorkflowResult: ...

    def approve(self, run_id: str, seq: int | None = None, *, by: str | None = None) -> list[int]: ...

    @property
    def store(self) -> RunStore | None: ...


@dataclass
class WorkflowToolset(AbstractToolset[Any]):
    """A toolset with the single tool `run_workflow`, backed by a `Harness`.

    pydantic-ai asks for a fresh copy per agent run (`for_run`); the copy holds that run's
    `RunScope`, so every script of one orchestrator run shares one budget.
    """

    harness: WorkflowHost
    on_event: EventHandler | None = None
    access: Access = field(default_factory=Access)
    """Which callees this agent's scripts may call."""
    scope: RunScope | None = None
    budget_key: str | Callable[[Any], str | None] | None = None
    """Whose `daily_cost` each orchestrator run spends: a key, or a function of the run's deps that says (a tenant)."""

    @property
    def id(self) -> str | None:
        return 'harness-run-workflow'

    def description(self) -> str:
        h = self.harness
        return tool_description(
            h.callees,
            h.stubs(),
            max_agent_calls=h.max_agent_calls,
            max_tool_calls=h.max_tool_calls,
            max_repeats=h.max_repeats,
            access=self.access,
            dollars=dollars(h.max_cost, self.budget_key is not None, h.conversation_cost),
        )

    async def for_run(self, ctx: RunContext[Any]) -> WorkflowToolset:
        prompt = ctx.prompt.strip() if isinstance(ctx.prompt, str) else ''
        key = self.budget_key(ctx.deps) if callable(self.budget_key) else self.budget_key
        scope = self.harness.new_scope(
            budget_key=key,
            deps=ctx.deps,
            usage=ctx.usage,
            model=ctx.model,
            orchestrator_run_id=ctx.run_id,
            conversation_id=ctx.conversation_id,
            seen=frozenset(m.run_id for m in ctx.messages if m.run_id and m.run_id != ctx.run_id),
            prompt=prompt.splitlines()[0][:200] if prompt else None,
            access=self.access,
        )
        return replace(self, scope=scope)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if _in_workflow.get():
            return {}
        tool_def = ToolDefinition(
            name=TOOL_NAME, description=self.description(), parameters_json_schema=_ARGS_SCHEMA, sequential=True
        )
        return {
            TOOL_NAME: ToolsetTool(
                toolset=self, tool_def=tool_def, max_retries=self.harness.max_retries, args_validator=_ARGS_VALIDATOR
            )
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self.scope is None:  # called without an agent run (for_run): one scope for this call
            self.scope = (await self.for_run(ctx)).scope
        token = _in_workflow.set(True)
        try:
            waiting_run = self.approved_run(ctx)
            if waiting_run is not None:  # the person approved the deferred call: continue from the snapshot
                self.harness.approve(waiting_run)
                with resumed_by_turn(self.scope.seen if self.scope is not None else frozenset()):
                    result = await self.harness.resume(waiting_run, on_event=self.on_event)
            else:
                result = await self.harness.run(tool_args['code'], scope=self.scope, on_event=self.on_event)
        except BudgetExceeded as exc:
            # Not a retry: a retry cannot succeed once the budget is spent. The script's worst case helps write less.
            return self.failure(exc) + self.worst_case(tool_args.get('code'), ran=True)
        except PlanRejected as exc:
            raise ModelRetry(self.failure(exc) + self.worst_case(tool_args.get('code'), ran=False)) from None
        except WorkflowError as exc:
            raise ModelRetry(self.failure(exc)) from None
        finally:
            _in_workflow.reset(token)
        if result.status == 'waiting':
            raise self.defer(result, ctx)
        # Only the final value returns to the model, with what the script printed, if anything.
        value: Any = self.bounded_value(result)
        if result.printed:
            value = {'output': result.printed}
            if result.value is not None:
                value['result'] = result.value
        extra = {'note': result.note} if result.note else {}
        if self.scope is not None and self.scope.cost.active:  # what the turn's dollars stand at, for its next script
            extra['dollars'] = self.scope.cost.summary()
        return {'result': value, **extra} if extra else value

    def approved_run(self, ctx: RunContext[Any]) -> str | None:
        """The waiting run this tool call started, when pydantic-ai calls it again approved."""
        store = self.harness.store
        if not ctx.tool_call_approved or not ctx.tool_call_id or store is None:
            return None
        return store.run_of_tool_call(ctx.tool_call_id)

    def defer(self, result: WorkflowResult, ctx: RunContext[Any]) -> ApprovalRequired:
        """A run waiting for approvals, or for its plan's, as pydantic-ai's own deferred approval of this tool call
        (the plan in its metadata): the app answers it with `DeferredToolResults`, and an approved call continues
        the run."""
        store = self.harness.store
        if store is not None and ctx.tool_call_id:
            store.link_tool_call(ctx.tool_call_id, result.run_id)
        waiting = [{'seq': p.seq, 'callee': p.callee, 'arguments': p.arguments} for p in result.waiting]
        metadata: dict[str, Any] = {'run_id': result.run_id, 'waiting': waiting}
        if result.plan is not None:  # held for review (`Harness(review=...)`): approving the call approves the plan
            metadata['plan'] = {'code': result.plan.code, **result.plan.stored()}
        return ApprovalRequired(metadata=metadata)

    def worst_case(self, code: object, *, ran: bool) -> str:
        """The script's estimate (`Harness.estimate`) as the model reads it after a budget or a person refused it:
        per callee the most calls and the most they cost, unbounded and unpriced said so ('' if it cannot say)."""
        if not isinstance(code, str):
            return ''
        try:
            found = self.harness.estimate(code, allow=self.access.allow, deny=self.access.deny)
        except Exception:  # (a script that does not parse has no estimate; its error says why)
            return ''
        return estimate_section(found.text(), ran=ran)

    def failure(self, exc: WorkflowError) -> str:
        """What the model reads of a failed script: the message, the completed results, what it printed."""
        note = f'\n\n{exc.note}' if exc.note else ''
        return f'{self.bounded(exc)}{completed_section(exc.completed)}{printed_section(exc.printed)}{note}'

    def bounded(self, exc: WorkflowError) -> str:
        """An error message as the model reads it: cut at `limits['max_error_chars']` (the run keeps it whole)."""
        limit = self.harness.limits.max_error_chars
        if len(exc.message) <= limit:
            return exc.message
        where = f' (the whole message is stored with run {exc.run_id})' if exc.run_id else ''
        return f'{exc.message[:limit]}\n... [{len(exc.message) - limit} more characters cut{where}]'

    def bounded_value(self, result: WorkflowResult) -> Any:
        """The script's value as the model reads it: a preview past `limits['max_value_chars']` of JSON."""
        limit = self.harness.limits.max_value_chars
        text = preview(result.value, limit + 1)
        if len(text) <= limit:
            return result.value
        return {
            'preview': text[:limit],
            'note': f'The value is longer than {limit} characters as JSON; this is its '
            f'start. The whole value is stored with run {result.run_id}: return less (a summary, or a slice).',
        }
