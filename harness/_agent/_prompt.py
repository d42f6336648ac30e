"""What the model reads before it writes a script: the orchestrator's instructions and the description
of `run_workflow`, with the catalog's stubs and examples written from the catalog itself.

Every statement here was measured against the sandbox (pydantic-monty 1.4.0): what can be
imported, what the checker refuses that Python allows, how results and failures look.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._catalog._callees import Callee
from .._catalog._rules import Access, counted
from .._check._hints import IMPORTABLE

ORCHESTRATOR_INSTRUCTIONS = """\
You coordinate sub-agents and tools by writing Python workflow scripts for the `run_workflow` tool.
Plan the whole job as one script when you can: fan out independent calls with asyncio.gather, join
the results in plain Python, and end the script with the value you need. Then answer the user from
that value. If a script fails, fix it using the error message; calls that already succeeded are
answered from their stored results when you make them again, at no cost.\
"""

RULES = """\
Write and run a Python workflow script that calls the functions below (sub-agents and host tools) as
async functions: fan work out in parallel, chain results, vote or loop, in one step.

How scripts work (Monty, a sandboxed subset of Python):
- Call with keyword arguments and await: {example}
- Fan out with `await asyncio.gather(...)` (`import asyncio` first). gather takes no keyword
  arguments (no `return_exceptions`): to keep going past failures, use `settle_all(...)`, or
  `settled(...)` around one call, which give {{"ok": True, "value": ...}} or {{"ok": False, "error": "..."}}.
- Results are plain data (str, int, float, bool, None, lists, dicts). A TypedDict in the stubs is a
  dict: read `r["field"]`, never `r.field`. You may pass and return dicts, lists and scalars.
- A failed call raises RuntimeError ("<name> failed with <ErrorType>"); catch it or let the script fail.
- A call a rule does not allow (see "Requires" in a stub, or a function not allowed in this run)
  raises PermissionError naming the rule, and does not run.
- The script's last expression is its result (a final statement gives None); print() output is
  returned too. `phase("name")` and `log("text")` (not awaited) show the person watching how a long
  script is going; they cost nothing. Async helper functions, loops, comprehensions, try/except and f-strings work.
- Importable: {importable}.
- No filesystem, network, environment, clock or OS randomness: get data from the functions below.
  No classes with methods, no generators (`yield`), no `async with`, no eval/exec/locals(), no getattr
  by a computed name, and never reuse a function's name below for something else: call it directly.
- The script is type-checked against the stubs before it runs (nothing runs if it fails), and the
  checker is stricter than Python: `d.get(k)` may be None (write `d.get(k, 0)` or `d[k]`); a sort or
  max key must return one type (`key=lambda k: d[k]`, not `key=d.get`); a dict literal mixing value
  types is `dict[str, A | B]` (annotate it `dict[str, Any]`); `", ".join(...)` takes strings only.
- Each call is independent: pass all the context a sub-agent needs in its arguments.\
"""


def tool_description(
    callees: Mapping[str, Callee],
    stubs: str,
    *,
    max_agent_calls: int,
    max_tool_calls: int | None,
    max_repeats: int | None,
    access: Access,
    dollars: str | None = None,
) -> str:
    """The `run_workflow` description: how scripts work, the budgets (`dollars`: the dollar budgets, described),
    and the stubs."""
    rules = RULES.format(example=examples(callees), importable=IMPORTABLE)
    limits = budgets(callees, max_agent_calls, max_tool_calls, max_repeats, access)
    if dollars:  # the call budgets raise RuntimeError; a dollar budget's refusal is a PermissionError
        limits += (
            f'\n- Dollars ({dollars}): before a call runs, the most it can cost is reserved; a call that does not '
            'fit raises PermissionError saying what is left.'
        )
    sections = [rules, limits, approvals(callees)]
    return '\n\n'.join(s for s in sections if s) + f'\n\nThe functions (stubs):\n\n```python\n{stubs}```'


def budgets(
    callees: Mapping[str, Callee],
    max_agent_calls: int,
    max_tool_calls: int | None,
    max_repeats: int | None,
    access: Access,
) -> str:
    agents = sorted(name for name, c in callees.items() if c.kind == 'agent')
    tools = sorted(name for name, c in callees.items() if c.kind == 'tool')
    lines = ['Budgets, shared by every script of this conversation:']
    if agents:
        lines.append(f'- sub-agent calls ({", ".join(agents)}): at most {max_agent_calls} in all.')
    if tools:
        limit = f'at most {max_tool_calls} in all' if max_tool_calls is not None else 'no limit'
        lines.append(f'- host tool calls ({", ".join(tools)}): {limit}.')
    lines.append(
        '- A call identical to one that already succeeded (same function, same arguments) is answered '
        'from its stored result and costs nothing; when the budget runs out, calls raise RuntimeError.'
    )
    if counts := sorted(counted(c.requires for c in callees.values())):  # each authorises one call (`_sources`)
        lines.append(
            f'- Except {", ".join(counts)}: each call runs (and is charged), since each success authorises '
            'one guarded call.'
        )
    effects = sorted(name for name, c in callees.items() if c.side_effect)
    if effects:  # a side effect happens as often as the script asks for it (`_dispatch._effects`)
        lines.append(
            f'- Except side effects ({", ".join(effects)}): each call a script makes runs; only a later '
            'script repeating one that already succeeded (a retry, or a turn after one that was cut off) '
            'gets its stored result instead of doing it again, and is told so.'
        )
    if max_repeats is not None:
        lines.append(
            f'- The same call more than {max_repeats} times in one script stops it as stuck: keep a '
            f'result in a variable. So does calling a function again after it failed the same way '
            f'{max_repeats} times in a row, whatever the arguments.'
        )
    if access.allow is not None:
        lines.append(f'- This run may call only: {", ".join(sorted(access.allow))}.')
    if access.deny:
        lines.append(f'- This run may not call: {", ".join(sorted(access.deny))}.')
    return '\n'.join(lines)


def approvals(callees: Mapping[str, Callee]) -> str:
    """What a call that needs a person's approval does to the turn (nothing when no callee needs one).

    Under an orchestrator a waiting run is pydantic-ai's deferred approval of this tool call: the agent run
    ends with `DeferredToolRequests`, and once the app answers, the same tool call continues the run from its
    snapshot and returns the script's result (`_toolset.WorkflowToolset.defer`)."""
    gated = sorted(name for name, c in callees.items() if c.approval)
    if not gated:
        return ''
    names = ', '.join(gated)
    verb = 'needs' if len(gated) == 1 else 'need'
    return (
        'Calls that wait for a person:\n'
        f'- {names} {verb} a person\'s approval before each call ("Needs approval" in the stub). When a script '
        'reaches such a call, this turn ends there: the calls before it are kept, nothing after it runs yet, and '
        'you get no result until the person decides.\n'
        '- Then the same script continues from where it stopped (earlier calls are not made again) and its result '
        'comes back to you as usual; a rejected call raises PermissionError with their reason, which the script '
        'may catch to go on without it.'
    )


def examples(callees: Mapping[str, Callee]) -> str:
    """Two calls written from the catalog's own signatures (required parameters only)."""
    chosen = sorted(callees.values(), key=lambda c: (c.kind != 'agent', c.name))[:2]
    if not chosen:
        return '`r = await some_function(name=value)`.'
    first = f'`r = await {call(chosen[0])}`'
    if len(chosen) == 1:
        return first + '.'
    return f'{first}; `a, b = await asyncio.gather({call(chosen[0])}, {call(chosen[1])})`.'


def call(callee: Callee) -> str:
    schema = callee.params.model_json_schema()
    required = schema.get('required', [])
    properties: dict[str, Any] = schema.get('properties', {})
    arguments = ', '.join(f'{name}={placeholder(properties.get(name, {}))}' for name in required)
    return f'{callee.name}({arguments})'


def placeholder(schema: Mapping[str, Any]) -> str:
    """A value of the parameter's type, to show the call's shape."""
    if 'enum' in schema:
        return repr(schema['enum'][0]).replace("'", '"')
    if 'const' in schema:
        return repr(schema['const']).replace("'", '"')
    kind = schema.get('type')
    return {'integer': '1', 'number': '1.0', 'boolean': 'True', 'array': '[]', 'object': '{}'}.get(str(kind), '"..."')
