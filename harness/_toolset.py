"""The `run_workflow` tool: how an orchestrator model reaches the engine.

One tool, whose description carries the sandbox rules and the catalog (`Harness.stubs()`, byte for
byte what the checker uses). A failed check or a script error returns to the model as a retry
with ty's or the traceback's message and the results already completed; only the script's final
value (and its printed output, if any) returns on success. One budget is shared by every script of
one orchestrator run.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, cast

from pydantic import Field, TypeAdapter
from pydantic_ai import RunContext, ToolDefinition
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.toolsets.abstract import AbstractToolset, SchemaValidatorProt, ToolsetTool
from typing_extensions import TypedDict

from ._context import RunScope
from ._errors import BudgetExceeded, WorkflowError
from ._records import CallRecord, EventHandler, WorkflowResult, preview
from ._rules import Access

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

RULES = """\
Write and run a Python workflow script that calls the sub-agents and tools below as async functions.
Use it to fan work out in parallel, chain results, vote, or loop, in one step instead of one call per turn.

Rules of the sandbox (Monty, a subset of Python):
- Call functions with keyword arguments and await them: `r = await reviewer(task="...")`.
- Fan out with `asyncio.gather(...)` (write `import asyncio` first). It has no `return_exceptions`,
  so wrap calls in `settled(...)` (or use `settle_all(...)`) to keep the results that succeeded.
- Structured results are dicts typed as TypedDicts: read fields with `r["field"]`, not `r.field`.
- A failed call raises `RuntimeError` in the script: catch it with try/except, or let the script fail.
- No filesystem, network, environment, clock or OS randomness; no third-party imports; no classes
  with inheritance. Importable: asyncio, json, math, re, typing, datetime, random (seeded).
- Each call is independent: pass all the context a sub-agent needs in its arguments.
- The value of the script's last expression is the result; `print()` output is returned too.
- The script is type-checked against these stubs before it runs; nothing runs if the check fails.
- Rules are enforced at every call, before it runs: a call a rule does not allow (a required
  predecessor has not succeeded yet, or the callee is not allowed in this run) raises
  PermissionError naming the rule and never runs. Make the required call first, or catch it.
- The same call (same function, same arguments) many times in one script stops it as stuck:
  keep a result in a variable instead of calling again.\
"""


ORCHESTRATOR_INSTRUCTIONS = """\
You coordinate sub-agents and tools by writing Python workflow scripts for the `run_workflow` tool.
Plan the whole job as one script when you can: fan out independent calls with asyncio.gather, join
the results in plain Python, and end the script with the value you need. Then answer the user from
that value. If a script fails, fix it using the error message and reuse the completed results.\
"""


def tool_description(stubs: str, *, max_agent_calls: int, max_tool_calls: int | None, access: Access) -> str:
    budget = (
        f'This orchestrator run can make at most {max_agent_calls} sub-agent calls in total, shared by every script.'
    )
    if max_tool_calls is not None:
        budget += f' Host tools: at most {max_tool_calls} calls.'
    if access.allow is not None:
        budget += f' This run may call only: {", ".join(sorted(access.allow))}.'
    if access.deny:
        budget += f' This run may not call: {", ".join(sorted(access.deny))}.'
    return f'{RULES}\n\n{budget}\n\nAvailable functions:\n\n```python\n{stubs}```'


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


class WorkflowHost(Protocol):
    """What the tool needs of a `Harness`: its catalog, its budgets, and a way to run a script."""

    max_agent_calls: int
    max_tool_calls: int | None
    max_retries: int

    def stubs(self) -> str: ...

    def new_scope(self, **kwargs: Any) -> RunScope: ...

    async def run(self, code: str, *, scope: RunScope | None = None,
                  on_event: EventHandler | None = None) -> WorkflowResult: ...


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

    @property
    def id(self) -> str | None:
        return 'harness-run-workflow'

    def description(self) -> str:
        h = self.harness
        return tool_description(
            h.stubs(), max_agent_calls=h.max_agent_calls, max_tool_calls=h.max_tool_calls, access=self.access
        )

    async def for_run(self, ctx: RunContext[Any]) -> WorkflowToolset:
        prompt = ctx.prompt.strip() if isinstance(ctx.prompt, str) else ''
        scope = self.harness.new_scope(
            deps=ctx.deps,
            usage=ctx.usage,
            model=ctx.model,
            orchestrator_run_id=ctx.run_id,
            prompt=prompt.splitlines()[0][:200] if prompt else None,
            access=self.access,
        )
        return WorkflowToolset(self.harness, on_event=self.on_event, access=self.access, scope=scope)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if _in_workflow.get():
            return {}
        tool_def = ToolDefinition(
            name=TOOL_NAME,
            description=self.description(),
            parameters_json_schema=_ARGS_SCHEMA,
            sequential=True,
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
            result = await self.harness.run(tool_args['code'], scope=self.scope, on_event=self.on_event)
        except BudgetExceeded as exc:
            # Not a retry: a retry cannot succeed once the budget is spent.
            return f'{exc.message}{completed_section(exc.completed)}{printed_section(exc.printed)}'
        except WorkflowError as exc:
            raise ModelRetry(f'{exc.message}{completed_section(exc.completed)}{printed_section(exc.printed)}') from None
        finally:
            _in_workflow.reset(token)
        # Only the final value returns to the model, with what the script printed, if anything.
        value: Any = result.value
        if result.printed:
            value = {'output': result.printed}
            if result.value is not None:
                value['result'] = result.value
        if result.note:
            return {'result': value, 'note': result.note}
        return value
