"""The benchmark of the idea: one `run_workflow` script against one tool call per model turn.

    python benchmarks/bench_idea.py [--quick]

The same job on both sides: review 10 Python files (examples/sample_project/*.py copied twice into a
temporary directory as a_*.py and b_*.py) and summarise the findings, with the same offline sub-agents
from `subagents` (`reviewer` runs ruff, `summarizer` is canned) and the same workspace (`tools.workspace`).

- **run_workflow**: `Harness(store=':memory:', tracing=False)` with `reviewer`, `summarizer`, `list_files` and
  `read_file`; `h.orchestrator(model=FunctionModel(...))` whose function is the offline demo planner
  (`subagents.planner.plan`): it writes one script (list the files, read them all in a gather, review them all
  in a gather, join the findings, summarise) and then answers from the script's value. Each iteration
  adds a comment with the iteration number to the script, so the type check is never memoised from an
  earlier iteration.
- **one tool call per turn**: a plain pydantic-ai `Agent` whose function tools are `list_files(pattern)`,
  `read_file(path)`, `reviewer(path, source)` and `summarizer(task)` (the same descriptions; the sub-agent
  tools run the same sub-agent `Agent`s with the same prompts). Its `FunctionModel` makes one tool call per
  turn, as a conventional agent does: list, then read and review each file in turn, then summarise, then
  answer with the same text (it builds the same value and answers with the same `planner.answer`).

Measured per orchestrator run: the orchestrator's model requests; what each request carries into the
model (the text of the message history as the model sees it: prompts, tool calls with their arguments,
tool returns, plus the instructions and tool definitions sent with every request), counted in characters
by the `FunctionModel` as it receives them and shown as tokens at 4 characters per token; what the model
writes; and wall time, with instant models and with every model request (orchestrator and sub-agents)
delayed by `LATENCY` seconds as a stand-in for a real model's latency.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extra import ROOT, fmt_int, fmt_ratio, fmt_time, log, med, spread, table

PROMPT = 'review the code in .'
LATENCY = 0.1
CHARS_PER_TOKEN = 4
CONVENTIONAL_INSTRUCTIONS = """\
You review code with your tools. List the files, read each one and pass its source to the reviewer, then
summarise all the findings with the summarizer and answer the user with the findings and the summary.\
"""


# -- measuring what the orchestrator's model sees ---------------------------------------------------


@dataclass
class Ledger:
    """One orchestrator run as its model saw it: one entry per request."""

    inputs: list[int] = field(default_factory=list)  # characters in, per request
    fixed: list[int] = field(default_factory=list)  # of which instructions + tool definitions
    outputs: list[int] = field(default_factory=list)  # characters out, per response
    tool_calls: int = 0
    reported: int = 0  # `result.usage().input_tokens` as pydantic-ai reports it for the orchestrator run


def message_chars(messages: list[Any]) -> int:
    """The characters of the history a model would be sent: prompts, tool calls, tool returns, text."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        ToolReturnPart,
        UserPromptPart,
    )

    total = 0
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart | UserPromptPart):
                    total += len(part.content if isinstance(part.content, str) else str(part.content))
                elif isinstance(part, ToolReturnPart):
                    total += len(part.tool_name) + len(part.model_response_str())
                elif isinstance(part, RetryPromptPart):
                    total += len(part.model_response())
        elif isinstance(message, ModelResponse):
            total += response_chars(message)
    return total


def response_chars(response: Any) -> int:
    from pydantic_ai.messages import TextPart, ToolCallPart

    total = 0
    for part in response.parts:
        if isinstance(part, TextPart):
            total += len(part.content)
        elif isinstance(part, ToolCallPart):
            total += len(part.tool_name) + len(part.args_as_json_str())
    return total


def fixed_chars(info: Any) -> int:
    """Instructions and tool definitions: sent with every request."""
    tools = [
        {'name': t.name, 'description': t.description, 'parameters': t.parameters_json_schema}
        for t in [*info.function_tools, *info.output_tools]
    ]
    return len(info.instructions or '') + len(json.dumps(tools))


def recording(plan: Callable[[list[Any], Any], Any], ledger: Ledger, latency: float) -> Callable[..., Any]:
    async def model(messages: list[Any], info: Any) -> Any:
        fixed = fixed_chars(info)
        ledger.fixed.append(fixed)
        ledger.inputs.append(fixed + message_chars(messages))
        if latency:
            await asyncio.sleep(latency)
        response = plan(messages, info)
        ledger.outputs.append(response_chars(response))
        ledger.tool_calls += sum(1 for p in response.parts if getattr(p, 'part_kind', '') == 'tool-call')
        return response

    return model


# -- the shared pieces: files, sub-agents ----------------------------------------------------------


def make_project(root: Path) -> list[str]:
    sources = sorted((ROOT / 'examples' / 'sample_project').glob('*.py'))
    for prefix in ('a', 'b'):
        for src in sources:
            shutil.copyfile(src, root / f'{prefix}_{src.name}')
    return sorted(p.name for p in root.glob('*.py'))


def sub_agents(latency: float) -> dict[str, Any]:
    """`reviewer` and `summarizer` on their offline models, each request delayed by `latency` seconds."""
    from pydantic_ai.models.function import FunctionModel

    from subagents import make_reviewer, make_summarizer, offline_model

    def model(name: str) -> Any:
        offline = offline_model(name)
        if not latency:
            return offline
        respond = offline.function
        assert respond is not None

        async def slow(messages: list[Any], info: Any) -> Any:
            await asyncio.sleep(latency)
            return await respond(messages, info)

        return FunctionModel(slow, model_name=offline.model_name)

    return {'reviewer': make_reviewer(model('reviewer')), 'summarizer': make_summarizer(model('summarizer'))}


# -- side 1: run_workflow ---------------------------------------------------------------------------


def workflow_side(root: Path, latency: float) -> Callable[[int], Any]:
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from harness import Harness
    from subagents import ReviewRequest
    from subagents.agents import REVIEWER_DESCRIPTION, SUMMARIZER_DESCRIPTION
    from subagents.planner import plan
    from tools.workspace import register_workspace_tools

    agents = sub_agents(latency)
    h = Harness(store=':memory:', tracing=False)
    h.add_agent(agents['reviewer'], params=ReviewRequest, description=REVIEWER_DESCRIPTION)
    h.add_agent(agents['summarizer'], description=SUMMARIZER_DESCRIPTION)
    register_workspace_tools(h, root)
    h.remove('search_text')  # the same four capabilities as the other side

    async def run_once(iteration: int) -> tuple[str, Ledger, float]:
        ledger = Ledger()

        def salted(messages: list[Any], info: Any) -> Any:
            response = plan(messages, info)
            for part in response.parts:  # a new script text every iteration: no memoised type check
                if isinstance(part, ToolCallPart) and isinstance(part.args, dict) and 'code' in part.args:
                    part.args = {'code': part.args['code'] + f'# iteration {iteration}\n'}
            return response

        agent = h.orchestrator(model=FunctionModel(recording(salted, ledger, latency), model_name='workflow-planner'))
        start = time.perf_counter()
        result = await agent.run(PROMPT)
        ledger.reported = result.usage.input_tokens
        return result.output, ledger, time.perf_counter() - start

    run_once.close = h.aclose  # type: ignore[attr-defined]
    return run_once


# -- side 2: one tool call per turn -----------------------------------------------------------------


def conventional_plan(messages: list[Any], info: Any) -> Any:
    """A conventional agent's turns: list, then read and review each file, then summarise, then answer."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart

    from subagents.planner import answer

    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    done: list[tuple[str, dict[str, Any], Any]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls[part.tool_call_id] = (part.tool_name, part.args_as_dict())
            elif isinstance(message, ModelRequest) and isinstance(part, ToolReturnPart):
                name, args = calls[part.tool_call_id]
                done.append((name, args, part.content))

    def call(name: str, **args: Any) -> Any:
        return ModelResponse(parts=[ToolCallPart(name, args)])

    listed = [content for name, _, content in done if name == 'list_files']
    if not listed:
        return call('list_files', pattern='**/*.py')
    files = listed[0]
    sources = {args['path']: content for name, args, content in done if name == 'read_file'}
    reviews = {args['path']: content for name, args, content in done if name == 'reviewer'}
    for path in files:
        if path not in sources:
            return call('read_file', path=path)
        if path not in reviews:
            return call('reviewer', path=path, source=sources[path])
    plain = [r.model_dump() if hasattr(r, 'model_dump') else r for r in (reviews[p] for p in files)]
    findings = sorted(
        ((f['severity'], r['path'], f['line'], f['message']) for r in plain for f in r['findings']),
        key=lambda f: ({'error': 0, 'warning': 1, 'info': 2}[f[0]], f[1], f[2]),
    )
    summaries = [content for name, _, content in done if name == 'summarizer']
    if not summaries:
        digest = '\n'.join(f'{r["path"]}: {r["summary"]}' for r in plain)
        return call('summarizer', task='Summarise this code review of . for the developer:\n' + digest)
    value = {
        'files': len(files),
        'needs_work': [r['path'] for r in plain if r['verdict'] == 'needs_work'],
        'findings': [{'path': p, 'line': n, 'severity': s, 'message': m} for s, p, n, m in findings],
        'failed': [],
        'summary': summaries[0],
    }
    return ModelResponse(parts=[TextPart(answer(value))])


def conventional_side(root: Path, latency: float) -> Callable[[int], Any]:
    from pydantic_ai import Agent, Tool, format_as_xml
    from pydantic_ai.models.function import FunctionModel

    from harness import Harness
    from subagents import Review, ReviewRequest
    from subagents.agents import REVIEWER_DESCRIPTION, SUMMARIZER_DESCRIPTION
    from tools.workspace import Workspace, register_workspace_tools

    agents = sub_agents(latency)
    ws = Workspace(root)

    # The workspace tools' own descriptions, exactly as the harness registers them.
    catalog = Harness(store=None, tracing=False)
    register_workspace_tools(catalog, root)
    docs = {name: callee.description or '' for name, callee in catalog.callees.items()}

    def list_files(pattern: str = '**/*') -> list[str]:
        return ws.list_files(pattern)

    def read_file(path: str) -> str:
        return ws.read_file(path)

    async def reviewer(path: str, source: str) -> Review:
        prompt = format_as_xml(ReviewRequest(path=path, source=source), root_tag='input')
        return (await agents['reviewer'].run(prompt)).output

    async def summarizer(task: str) -> str:
        return (await agents['summarizer'].run(task)).output

    # Annotations are strings here (`from __future__ import annotations`) and `Review` is a local name.
    reviewer.__annotations__ = {'path': str, 'source': str, 'return': Review}

    tools = [
        Tool(list_files, description=docs['list_files']),
        Tool(read_file, description=docs['read_file']),
        Tool(reviewer, description=REVIEWER_DESCRIPTION),
        Tool(summarizer, description=SUMMARIZER_DESCRIPTION),
    ]

    async def run_once(iteration: int) -> tuple[str, Ledger, float]:
        ledger = Ledger()
        agent = Agent(
            FunctionModel(recording(conventional_plan, ledger, latency), model_name='turn-by-turn'),
            instructions=CONVENTIONAL_INSTRUCTIONS,
            tools=tools,
            name='orchestrator',
        )
        start = time.perf_counter()
        result = await agent.run(PROMPT)
        ledger.reported = result.usage.input_tokens
        return result.output, ledger, time.perf_counter() - start

    async def nothing() -> None:
        pass

    run_once.close = nothing  # type: ignore[attr-defined]
    return run_once


# -- the driver -------------------------------------------------------------------------------------

SIDES = ('workflow', 'conventional')


async def measure(root: Path, latency: float, iterations: int) -> dict[str, Any]:
    runners = {'workflow': workflow_side(root, latency), 'conventional': conventional_side(root, latency)}
    out: dict[str, Any] = {side: {'walls': [], 'ledgers': [], 'cold': None} for side in SIDES}
    outputs: dict[str, str] = {}
    try:
        for side, run_once in runners.items():  # the cold run: sandbox worker start, first imports
            text, ledger, wall = await run_once(0)
            out[side]['cold'] = wall
            out[side]['ledgers'].append(ledger)
            outputs[side] = text
        if outputs['workflow'] != outputs['conventional']:
            raise AssertionError(
                'the two sides answered differently:\n'
                f'{outputs["workflow"][:600]}\n---\n{outputs["conventional"][:600]}'
            )
        for i in range(iterations):
            order = SIDES if i % 2 == 0 else tuple(reversed(SIDES))
            for side in order:
                text, ledger, wall = await runners[side](1 + i)
                assert text == outputs[side]
                out[side]['walls'].append(wall)
    finally:
        for run_once in runners.values():
            await run_once.close()  # type: ignore[attr-defined]
    out['answer_first_line'] = outputs['workflow'].splitlines()[0]
    return out


def run(quick: bool = False) -> str:
    with tempfile.TemporaryDirectory(prefix='bench-idea-') as tmp:
        root = Path(tmp)
        files = make_project(root)
        log(f'  idea: {len(files)} files, instant models')
        instant = asyncio.run(measure(root, 0.0, 3 if quick else 6))
        log(f'  idea: every model request takes {LATENCY} s')
        slow = asyncio.run(measure(root, LATENCY, 1 if quick else 3))
    return report(files, instant, slow)


def tokens(chars: float) -> str:
    return f'{chars / CHARS_PER_TOKEN:,.0f}'


def report(files: list[str], instant: dict[str, Any], slow: dict[str, Any]) -> str:
    w, c = instant['workflow']['ledgers'][0], instant['conventional']['ledgers'][0]

    def row(label: str, a: float | None, b: float | None, fmt: Callable[[float], str]) -> list[str]:
        return [label, '–' if a is None else fmt(a), '–' if b is None else fmt(b), fmt_ratio(a, b)]

    rows = [
        row('orchestrator model requests', len(w.inputs), len(c.inputs), fmt_int),
        row('tool calls by the orchestrator model', w.tool_calls, c.tool_calls, fmt_int),
        row('input tokens into the orchestrator, all requests (≈)', sum(w.inputs), sum(c.inputs), tokens),
        row('· of which instructions + tool definitions (≈)', sum(w.fixed), sum(c.fixed), tokens),
        row('largest single request (≈ tokens)', max(w.inputs), max(c.inputs), tokens),
        row('output tokens written by the orchestrator (≈)', sum(w.outputs), sum(c.outputs), tokens),
        row(
            'wall, instant models (warm median)',
            med(instant['workflow']['walls']),
            med(instant['conventional']['walls']),
            fmt_time,
        ),
        row(
            'wall, instant models, first run in the process',
            instant['workflow']['cold'],
            instant['conventional']['cold'],
            fmt_time,
        ),
        row(
            f'wall, every model request takes {LATENCY} s (median)',
            med(slow['workflow']['walls']),
            med(slow['conventional']['walls']),
            fmt_time,
        ),
    ]
    blocks = [
        '### The idea: one `run_workflow` script vs. one tool call per turn (`bench_idea.py`)',
        f'The same job on both sides: "{PROMPT}" over {len(files)} files (examples/sample_project/*.py copied '
        f'twice, as a_*.py and b_*.py): list them, read each, review each with `reviewer`, summarise with '
        f'`summarizer`, answer. Same offline sub-agents, same workspace, same tool descriptions, same '
        f'final answer (checked: "{instant["answer_first_line"]}"). *run_workflow*: `h.orchestrator(...)` on '
        f"`Harness(store=':memory:', tracing=False)`, whose model (the offline demo planner) writes one script "
        f'that reads and reviews all files in gathers; a new script text each iteration, so it is type-checked '
        f'every time. *one call per turn*: a plain pydantic-ai `Agent` with the four as function tools, whose model '
        f'makes one tool call per turn. Tokens are characters / {CHARS_PER_TOKEN} of what each orchestrator request '
        f"carries (history text + instructions + tool definitions), recorded by the `FunctionModel`; sub-agents' "
        f'own tokens are not counted on either side (they are the same 11 sub-agent runs).',
        table(['per orchestrator run', 'run_workflow', 'one call per turn', 'run_workflow / per turn'], rows),
        f'Wall samples: instant run_workflow {spread(instant["workflow"]["walls"])}, per turn '
        f'{spread(instant["conventional"]["walls"])}; with {LATENCY} s per request run_workflow '
        f'{spread(slow["workflow"]["walls"])}, per turn {spread(slow["conventional"]["walls"])}. '
        f"Per request, the run_workflow orchestrator's inputs were "
        f"{', '.join(tokens(x) for x in w.inputs)} tokens; the per-turn agent's grew from {tokens(c.inputs[0])} to "
        f'{tokens(c.inputs[-1])}. For comparison, `result.usage().input_tokens` of the orchestrator runs (the '
        f"`FunctionModel`'s word-count estimate of the history only, no instructions or tool definitions): "
        f"run_workflow {w.reported:,}, which includes the 11 sub-agent runs' tokens (the harness adds them to the "
        f"orchestrator's usage), per turn {c.reported:,}, the orchestrator alone.",
    ]
    return '\n'.join(block.rstrip('\n') + '\n' for block in blocks)


def main() -> None:
    print(run(quick='--quick' in sys.argv))


if __name__ == '__main__':
    main()
