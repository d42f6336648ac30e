"""Offline stand-ins for the built-in sub-agents' models (pydantic-ai `FunctionModel`s).

They exist so the demo and the tests run with no network and no API key. Only the reviewer does real
work, and not by imitating a model: it runs ruff on the source and reports ruff's findings as a
`Review`. The others are canned and say so: the summarizer keeps the first sentence of the first few
lines, the critic applies a fixed four-point rubric, the drafter and the editor fill a template.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from .models import CritiqueRequest, EditRequest, Finding, Focus, Review, ReviewRequest, Score, Severity

# -- the reviewer: ruff -------------------------------------------------------------------------------

BUG_RULES = 'F,B,E711,E712,E721,E722,E9,S102,S307,S101,S110,BLE001,PLE,PLW,A,SIM115'
"""Rule families that catch bugs: pyflakes, bugbear, eval/exec, bare or blind excepts, shadowed builtins."""
STYLE_RULES = 'E,W,UP,SIM,C4'
SELECT: dict[str, str] = {'bugs': BUG_RULES, 'style': STYLE_RULES, 'all': f'{BUG_RULES},{STYLE_RULES}'}

# The first prefix that matches a rule code decides its severity; anything else is 'info'.
SEVERITY: tuple[tuple[str, Severity], ...] = (
    *((p, 'error') for p in ('invalid-syntax', 'E9', 'F63', 'F7', 'F82', 'S102', 'S307', 'PLE')),
    *((p, 'info') for p in ('F401', 'A', 'S101')),
    *((p, 'warning') for p in ('B', 'E7', 'F', 'BLE', 'S1', 'PLW', 'SIM115')),
)
RANK = {'error': 0, 'warning': 1, 'info': 2}


def ruff_bin() -> str:
    try:
        from ruff import find_ruff_bin

        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which('ruff')
        if found is None:
            raise RuntimeError('the offline reviewer needs ruff (pip install ruff)') from None
        return found


def review_source(path: str, source: str, focus: Focus = 'all') -> Review:
    """Run `ruff check` on `source` (named `path`) with the `focus` rule families; ruff's findings as a `Review`."""
    if PurePosixPath(path).suffix not in {'.py', '.pyi', ''}:
        summary = 'Not a Python file: the offline reviewer only runs ruff on Python source.'
        return Review(path=path, verdict='ok', findings=[], summary=summary)
    name = PurePosixPath(path).name if path.endswith(('.py', '.pyi')) else 'input.py'
    command = [
        ruff_bin(),
        'check',
        '--isolated',
        '--no-cache',
        '--output-format',
        'json',
        '--line-length',
        '120',
        '--select',
        SELECT[focus],
        '--stdin-filename',
        name,
        '-',
    ]
    done = subprocess.run(command, input=source, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode not in (0, 1):  # 1 means "found something"
        raise RuntimeError(f'ruff failed: {done.stderr.strip()[:300]}')
    lines = source.splitlines()
    findings = []
    for item in json.loads(done.stdout or '[]'):
        code, row = item['code'] or 'invalid-syntax', item['location']['row']
        label = code if item['name'] in (None, code) else f'{code} {item["name"]}'
        snippet = lines[row - 1].strip()[:80] if 0 < row <= len(lines) else ''
        severity = next((s for prefix, s in SEVERITY if code.startswith(prefix)), 'info')
        message = f'{label}: {item["message"]}' + (f' (`{snippet}`)' if snippet else '')
        findings.append(Finding(line=row, severity=severity, message=message))
    findings.sort(key=lambda f: (RANK[f.severity], f.line))
    ruff = 'ruff' if focus == 'all' else f'ruff ({focus} rules)'
    worst = ', '.join(f'{f.message.split(":")[0]} at line {f.line}' for f in findings[:4])
    summary = (
        f'{ruff} flags {len(findings)} problem(s), most serious first: {worst}.'
        if findings
        else f'{ruff} finds no problem.'
    )
    verdict = 'needs_work' if any(f.severity != 'info' for f in findings) else 'ok'
    return Review(path=path, verdict=verdict, findings=findings, summary=summary)


# -- the canned ones ----------------------------------------------------------------------------------


def summarize(text: str, lines: int = 6) -> str:
    """The first sentence of each of the first `lines` lines (an instruction line ending in ':' is skipped)."""
    rows = [row.strip() for row in text.strip().splitlines() if row.strip()]
    if len(rows) > 1 and rows[0].endswith(':'):
        rows = rows[1:]
    firsts = [re.split(r'(?<=[.!?])\s+', row)[0][:300] for row in rows[:lines]]
    return ' '.join(firsts) or '(nothing to summarize)'


def critique(question: str, answer: str) -> Score:
    """A fixed rubric: four checks, 2.5 points each."""
    asked = {w for w in re.findall(r'[a-z0-9]+', question.lower()) if len(w) > 3}
    said = set(re.findall(r'[a-z0-9]+', answer.lower()))
    checks = {
        'it answers something': bool(answer.strip()),
        "it uses most of the question's words": not asked or len(asked & said) * 2 >= len(asked),
        'it is under 1,200 characters': len(answer) < 1200,
        'it has no [placeholders]': not re.search(r'\[[^\]]+\]', answer),
    }
    reasons = [('yes: ' if ok else 'no: ') + check for check, ok in checks.items()]
    return Score(score=round(10 * sum(checks.values()) / len(checks)), reasons=reasons)


def draft(task: str) -> str:
    topic = textwrap.shorten(task.strip().splitlines()[0], 70, placeholder='...') if task.strip() else 'Draft'
    note = '[offline draft: this restates the task; a real model writes it]'
    return f'Subject: {topic}\n\nHi team,\n\n{task.strip()}\n\n{note}'


def edit(draft_text: str, feedback: str) -> str:
    return f'{draft_text.rstrip()}\n\n[offline edit: a real model would apply: {feedback.strip() or "no feedback"}]'


# -- the models ---------------------------------------------------------------------------------------


def prompt_of(messages: list[ModelMessage]) -> str:
    """The text of the latest user prompt."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            texts = [p.content for p in message.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]
            if texts:
                return '\n'.join(texts)
    return ''


def fields_of(prompt: str) -> dict[str, str]:
    """The `<input>` block the harness renders for a sub-agent registered with `params=` (else {})."""
    start, end = prompt.find('<input>'), prompt.rfind('</input>')
    try:
        root = ET.fromstring(prompt[start : end + len('</input>')]) if 0 <= start < end else None
    except ET.ParseError:
        root = None
    return {child.tag: child.text or '' for child in root} if root is not None else {}


async def reviewer_answer(prompt: str) -> Review:
    fields = fields_of(prompt)  # a plain prompt is the source itself
    r = ReviewRequest.model_validate(fields) if fields else ReviewRequest(path='input.py', source=prompt)
    return await asyncio.to_thread(review_source, r.path, r.source, r.focus)


def critic_answer(prompt: str) -> Score:
    r = CritiqueRequest.model_validate(fields_of(prompt) or {'question': '', 'answer': prompt})
    return critique(r.question, r.answer)


def editor_answer(prompt: str) -> str:
    r = EditRequest.model_validate(fields_of(prompt) or {'draft': prompt, 'feedback': ''})
    return edit(r.draft, r.feedback)


ANSWERS: dict[str, Callable[[str], Any]] = {
    'reviewer': reviewer_answer,
    'summarizer': summarize,
    'critic': critic_answer,
    'drafter': draft,
    'editor': editor_answer,
}


def offline_model(name: str) -> FunctionModel:
    """The offline model of built-in sub-agent `name`: structured outputs go out as an output-tool call."""
    answer_of = ANSWERS[name]

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        result = answer_of(prompt_of(messages))
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, BaseModel) and info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, result.model_dump(mode='json'))])
        return ModelResponse(parts=[TextPart(result.model_dump_json() if isinstance(result, BaseModel) else result)])

    return FunctionModel(respond, model_name=f'offline:{name}')


__all__ = ['critique', 'draft', 'edit', 'offline_model', 'review_source', 'summarize']
