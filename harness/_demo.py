"""The offline demo planner: a rule-based stand-in for the orchestrator's model.

It is a pydantic-ai `FunctionModel` that writes real workflow scripts against the catalog it is
shown (the `run_workflow` tool description) for a few kinds of request, then answers from the
script's value. Everything after the script is written (check, sandbox, dispatch, store, traces)
is the real engine.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ._toolset import TOOL_NAME

HELP = (
    'I am the offline demo planner, so I only understand a few kinds of request:\n'
    '- "review the code in PATH": reads every Python file under PATH, reviews them in parallel, and summarises;\n'
    '- "write/draft ...": drafts three answers, scores them with the critic, and refines the best one;\n'
    '- a question ("what/why/how ...?"): asks the drafter from three angles and summarises.\n'
    'For anything else, plug in a real model: set HARNESS_MODEL (e.g. openai:gpt-4.1-mini, with its key), '
    'pass --model, or point HARNESS_BASE_URL at an OpenAI-compatible server such as Ollama or vLLM.'
)


def demo_model() -> FunctionModel:
    return FunctionModel(plan, model_name='demo-planner')


def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    catalog = ' '.join(t.description or '' for t in info.function_tools if t.name == TOOL_NAME)
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart) and getattr(part, 'outcome', None) == 'retried':
                return ModelResponse(
                    parts=[TextPart(f'The workflow failed and I cannot repair scripts offline:\n{part.content}')]
                )
            if isinstance(part, ToolReturnPart) and part.tool_name == TOOL_NAME:
                return ModelResponse(parts=[TextPart(answer(latest_prompt(messages), part.content))])
    prompt = latest_prompt(messages)
    script = write_script(prompt, catalog)
    if script is None or TOOL_NAME not in {t.name for t in info.function_tools}:
        return ModelResponse(parts=[TextPart(HELP)])
    return ModelResponse(parts=[ToolCallPart(TOOL_NAME, {'code': script})])


def latest_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ''


def has(catalog: str, *names: str) -> bool:
    return all(re.search(rf'async def {name}\(', catalog) for name in names)


def write_script(prompt: str, catalog: str) -> str | None:
    text = prompt.lower()
    if 'review' in text and has(catalog, 'list_files', 'read_file', 'reviewer', 'summarizer'):
        return review_script(target_path(prompt))
    if re.search(r'\b(write|draft|compose)\b', text) and has(catalog, 'drafter', 'critic', 'editor'):
        return best_of_three_script(prompt)
    if (text.rstrip().endswith('?') or re.match(r'\s*(what|why|how|when|which|who|explain)\b', text)) and has(
        catalog, 'drafter', 'summarizer'
    ):
        return question_script(prompt)
    return None


def target_path(prompt: str) -> str:
    """The path named in the request ("review the code in examples/app"), else the workspace root."""
    match = re.search(r'\b(?:in|under|of|at)\s+([\w./-]+)', prompt)
    candidates = [match.group(1)] if match else []
    candidates += [tok for tok in prompt.split() if '/' in tok or tok.endswith('.py')]
    for candidate in candidates:
        cleaned = candidate.strip('"\'`.,;:').rstrip('/')
        if cleaned and cleaned not in {'the', 'code', 'this'}:
            return cleaned
    return '.'


def review_script(path: str) -> str:
    pattern = '**/*.py' if path in {'', '.'} else (path if path.endswith('.py') else f'{path}/**/*.py')
    return f"""\
import asyncio

files = await list_files(pattern={json.dumps(pattern)})
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
digest = "\\n".join(f"{{path}}:{{line}} [{{severity}}] {{message}}" for severity, path, line, message in findings[:40])
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
import asyncio

question = {json.dumps(prompt)}
views = ["the basics", "the trade-offs", "a worked example"]
answers = await settle_all(*[drafter(task=f"{{question}} Focus on {{v}}.") for v in views])
usable = [a["value"] for a in answers if a["ok"]]
summary = await summarizer(task=question + "\\n\\n" + "\\n\\n".join(usable))
{{"summary": summary, "perspectives": len(usable)}}
"""


def answer(prompt: str, value: Any) -> str:
    """The planner's final answer, written from the script's value."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return json.dumps(value, indent=2, default=str)
    note = value.get('note') if 'result' in value else None
    if note is not None:
        value = value['result'] if isinstance(value['result'], dict) else {'result': value['result']}
    lines: list[str] = []
    if 'findings' in value:
        findings = value['findings']
        lines.append(
            f'Reviewed {value["files"]} file(s); {len(findings)} finding(s); '
            f'needs work: {", ".join(value["needs_work"]) or "none"}.'
        )
        for f in findings[:10]:
            lines.append(f'- {f["path"]}:{f["line"]} [{f["severity"]}] {f["message"]}')
        if len(findings) > 10:
            lines.append(f'- ... and {len(findings) - 10} more')
        if value.get('failed'):
            lines.append(f'Could not review: {", ".join(value["failed"])}')
        lines.append('')
        lines.append(summary_text(value['summary']))
    elif 'answer' in value:
        lines.append(str(value['answer']))
        lines.append(
            f'\n(best of {len(value["scores"])} drafts, scores {value["scores"]}, chose the {value["chosen"]} one)'
        )
    elif 'summary' in value:
        lines.append(summary_text(value['summary']))
    else:
        lines.append(json.dumps(value, indent=2, default=str))
    if note:
        lines.append(f'\nNote: {note}')
    return '\n'.join(lines)


def summary_text(summary: Any) -> str:
    if isinstance(summary, dict):
        for key in ('summary', 'text', 'content'):
            if key in summary:
                rest = [f'- {p}' for p in summary.get('key_points', summary.get('points', []))]
                return '\n'.join([str(summary[key]), *rest])
        return json.dumps(summary, indent=2)
    return str(summary)
