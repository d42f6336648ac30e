"""The offline demo planner: a scripted stand-in for the orchestrator's model (`demo_model()`).

A pydantic-ai `FunctionModel` that knows three kinds of request. For each it writes a real workflow
script against the catalog it is shown (the `run_workflow` tool's description), sends it, and
answers from the script's value. Everything between (check, sandbox, dispatch, store, traces) is
the real engine.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from .offline import prompt_of

TOOL = 'run_workflow'  # the harness's one tool: a stable public name
HELP = (
    'I am the offline demo planner, so I only understand a few kinds of request:\n'
    '- "review PATH" (a folder or a .py file): reads the Python files there, reviews them in parallel, and '
    'summarises;\n'
    '- "write/draft ...": drafts three answers, scores them with the critic, and refines the best one;\n'
    '- a question ("what/why/how ...?"): asks the drafter from three angles and summarises.\n'
    'For anything else, plug in a real model: set HARNESS_MODEL (e.g. openai:gpt-4.1-mini, with its key), '
    'pass --model, or point HARNESS_BASE_URL at an OpenAI-compatible server such as Ollama or vLLM.'
)


def demo_model() -> FunctionModel:
    return FunctionModel(plan, stream_function=stream_plan, model_name='demo-planner')


async def stream_plan(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """`plan`, streamed as a model streams: the answer a few words at a time, a script as one tool call."""
    for part in plan(messages, info).parts:
        if isinstance(part, TextPart):
            words = re.findall(r'\S+\s*|\s+', part.content)
            for i in range(0, len(words), 4):
                yield ''.join(words[i : i + 4])
        elif isinstance(part, ToolCallPart):
            yield {0: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id='script')}


def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """First turn: a script for `run_workflow` (or the help text); second turn: the answer from its value."""
    last = messages[-1]
    for part in last.parts if isinstance(last, ModelRequest) else []:
        if isinstance(part, ToolReturnPart) and getattr(part, 'outcome', None) == 'retried':
            text = f'The workflow failed and I cannot repair scripts offline:\n{part.content}'
            return ModelResponse(parts=[TextPart(text)])
        if isinstance(part, ToolReturnPart) and part.tool_name == TOOL:
            return ModelResponse(parts=[TextPart(answer(part.content))])
    catalog = ' '.join(t.description or '' for t in info.function_tools if t.name == TOOL)
    script = write_script(prompt_of(messages), catalog) if catalog else None
    return ModelResponse(parts=[ToolCallPart(TOOL, {'code': script})] if script else [TextPart(HELP)])


def write_script(prompt: str, catalog: str) -> str | None:
    """A workflow script for `prompt` over the callees in `catalog` (stubs text), or None."""

    def has(*names: str) -> bool:
        return all(f'async def {name}(' in catalog for name in names)

    text = prompt.lower().strip()
    if 'review' in text and has('list_files', 'read_file', 'reviewer', 'summarizer'):
        return review_script(review_target(prompt))
    if re.search(r'\b(write|draft|compose)\b', text) and has('drafter', 'critic', 'editor'):
        return best_of_three_script(prompt)
    if (text.endswith('?') or re.match(r'(what|why|how|when|which|who|explain)\b', text)) and has(
        'drafter', 'summarizer'
    ):
        return question_script(prompt)
    return None


def review_target(prompt: str) -> str:
    """The workspace path a review request names: a word that looks like a path (it has a `/` or is a `.py`
    file), else the word after in/under/of/at; `.` (the whole workspace) when it names none."""
    words = [word.lstrip('"\'`(').rstrip('.,;:!?"\'`)') for word in prompt.split()]
    named = next((w for w in words if '/' in w or w.endswith('.py')), None)
    if named is None:
        match = re.search(r'\b(?:in|under|of|at)\s+([\w./-]+)', prompt)
        named = match.group(1).strip('.,;:') if match else ''
    path = re.sub(r'^(?:\./)+', '', named).rstrip('/')  # an absolute path stays one: the workspace refuses it
    return '.' if path in {'', '.', 'the', 'this', 'my', 'our'} else path


def review_script(path: str) -> str:
    """Review one file (`path` ends in .py), the Python files under a folder, or (`.`) the whole workspace."""
    if path.endswith('.py'):
        files = f'files = [{json.dumps(path)}]'  # read as named: a missing file fails with read_file's hint
    else:
        files = f'files = await list_files(pattern={json.dumps("**/*.py" if path == "." else f"{path}/**/*.py")})'
    return f"""\
import asyncio

{files}
sources = await asyncio.gather(*[read_file(path=f) for f in files])
outcomes = await settle_all(*[reviewer(path=f, source=s) for f, s in zip(files, sources)])
reviews = [o["value"] for o in outcomes if o["ok"]]
failed = [f for f, o in zip(files, outcomes) if not o["ok"]]
findings = []
for r in reviews:
    for finding in r["findings"]:
        findings.append((finding["severity"], r["path"], finding["line"], finding["message"]))
rank = {{"error": 0, "warning": 1, "info": 2}}
findings.sort(key=lambda f: (rank[f[0]], f[1], f[2]))
digest = "\\n".join(r["path"] + ": " + r["summary"] for r in reviews)
summary = await summarizer(task="Summarise this code review of {path} for the developer:\\n" + digest)
{{"files": len(files), "needs_work": [r["path"] for r in reviews if r["verdict"] == "needs_work"],
 "findings": [{{"path": p, "line": n, "severity": s, "message": m}} for s, p, n, m in findings],
 "failed": failed, "summary": summary}}
"""


def best_of_three_script(prompt: str) -> str:
    return f"""\
import asyncio

request = {json.dumps(prompt)}
angles = ["concise", "thorough", "friendly"]
drafts = await asyncio.gather(*[drafter(task=f"{{request}} (tone: {{a}})") for a in angles])
scores = await asyncio.gather(*[critic(question=request, answer=d) for d in drafts])
best = max(range(len(drafts)), key=lambda i: scores[i]["score"])
final = await editor(draft=drafts[best], feedback="; ".join(scores[best]["reasons"]) or "polish it")
{{"answer": final, "scores": [s["score"] for s in scores], "chosen": angles[best]}}
"""


def question_script(prompt: str) -> str:
    return f"""\
question = {json.dumps(prompt)}
views = ["the basics", "the trade-offs", "a worked example"]
answers = await settle_all(*[drafter(task=f"{{question}} Focus on {{v}}.") for v in views])
usable = [a["value"] for a in answers if a["ok"]]
summary = await summarizer(task=question + "\\n\\n" + "\\n\\n".join(usable))
{{"summary": summary, "perspectives": len(usable)}}
"""


def answer(value: Any, shown: int = 20) -> str:
    """The planner's final answer, written from the script's value (the tool's return)."""
    note = value.get('note') if isinstance(value, dict) and 'result' in value else None
    if note is not None:
        value = value['result']
    if not isinstance(value, dict):
        text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    elif 'findings' in value:
        findings = value['findings']
        lines = [
            f'Reviewed {value["files"]} file(s); {len(findings)} finding(s); '
            f'needs work: {", ".join(value["needs_work"]) or "none"}.',
            '',
        ]
        lines += [f'- {f["path"]}:{f["line"]} [{f["severity"]}] {f["message"]}' for f in findings[:shown]]
        if len(findings) > shown:
            lines.append(f'- ... and {len(findings) - shown} more')
        if value['failed']:
            lines.append(f'Could not review: {", ".join(value["failed"])}')
        text = '\n'.join([*lines, '', f'Summary: {value["summary"]}'])
    elif 'answer' in value:
        text = (
            f'{value["answer"]}\n\n(best of {len(value["scores"])} drafts, scores {value["scores"]}, '
            f'chose the {value["chosen"]} one)'
        )
    else:
        text = str(value.get('summary', json.dumps(value, indent=2, default=str)))
    return f'{text}\n\nNote: {note}' if note else text


__all__ = ['HELP', 'answer', 'demo_model', 'plan', 'write_script']
