"""Offline, rule-based models for the built-in sub-agents (pydantic-ai `FunctionModel`s).

Each built-in agent gets a `FunctionModel` whose function reads the user prompt, applies the
agent's rules, and answers the way a real model would: by calling the output tool with JSON
arguments for a structured output, or with text for a `str` output. Sub-agents registered with
`params=` receive their arguments as XML (`format_as_xml(..., root_tag='input')`), which
`parse_input` turns back into a dict.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from . import review, writing
from .models import CritiqueRequest, EditRequest, ReviewRequest

Rule = Callable[[str], BaseModel | str]
"""Turns the user prompt into the agent's output."""

ROOT_TAG = 'input'


# -- reading the prompt ----------------------------------------------------------------------------------


def latest_prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the most recent user prompt in the conversation."""
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        texts = []
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                content = part.content
                if isinstance(content, str):
                    texts.append(content)
                else:
                    texts.extend(item for item in content if isinstance(item, str))
        if texts:
            return '\n'.join(texts)
    return ''


def parse_input(prompt: str, root_tag: str = ROOT_TAG) -> dict[str, Any] | None:
    """The fields of an `<input>...</input>` block in `prompt` as a dict, or None if there is none.

    Leaf elements become strings (nothing is guessed: pydantic converts them when validating),
    elements whose children are all `<item>`s (or share one tag) become lists, others dicts.
    Falls back to a tolerant regex when the XML is not well formed.
    """
    start = prompt.find(f'<{root_tag}>')
    end = prompt.rfind(f'</{root_tag}>')
    if start == -1 or end == -1 or end < start:
        return None
    block = prompt[start : end + len(root_tag) + 3]
    try:
        root = ET.fromstring(block)
    except ET.ParseError:
        return _parse_loosely(block[len(root_tag) + 2 : -(len(root_tag) + 3)])
    value = _element_value(root)
    return value if isinstance(value, dict) else None


def _element_value(element: ET.Element) -> Any:
    children = list(element)
    if not children:
        return element.text or ''
    tags = {child.tag for child in children}
    if tags == {'item'} or (len(tags) == 1 and len(children) > 1):
        return [_element_value(child) for child in children]
    return {child.tag: _element_value(child) for child in children}


def _parse_loosely(body: str) -> dict[str, Any] | None:
    fields = {
        m.group(1): html.unescape(m.group(2))
        for m in re.finditer(r'<([A-Za-z_][\w.-]*)>(.*?)</\1>', body, re.S)
    }
    return fields or None


def parse_request(prompt: str, model: type[BaseModel], fallback: Callable[[str], dict[str, Any]]) -> Any:
    """Validate the prompt's `<input>` block as `model`; prompts without one go through `fallback`."""
    fields = parse_input(prompt)
    if fields is None:
        fields = fallback(prompt)
    known = {k: v for k, v in fields.items() if k in model.model_fields}
    try:
        return model.model_validate(known)
    except ValueError:
        return model.model_validate(fallback(prompt))


def _labelled(prompt: str, first: str, second: str) -> dict[str, str] | None:
    """`First: ... Second: ...` in a plain prompt."""
    m = re.search(rf'(?is)\b{first}\s*:\s*(.*?)\n\s*{second}\s*:\s*(.*)$', prompt)
    return {first: m.group(1).strip(), second: m.group(2).strip()} if m else None


# -- the rules -------------------------------------------------------------------------------------------


def review_rule(prompt: str) -> BaseModel:
    def fallback(text: str) -> dict[str, Any]:
        m = re.search(r'(?m)^(?:path|file)\s*:\s*(\S+)\s*$', text)
        return {'path': m.group(1) if m else '<input>', 'source': text, 'focus': 'all'}

    request: ReviewRequest = parse_request(prompt, ReviewRequest, fallback)
    return review.review_source(request.path, request.source, request.focus)


def summarize_rule(prompt: str) -> str:
    return writing.summarize(prompt)


def critique_rule(prompt: str) -> BaseModel:
    def fallback(text: str) -> dict[str, Any]:
        return _labelled(text, 'question', 'answer') or {'question': '', 'answer': text}

    request: CritiqueRequest = parse_request(prompt, CritiqueRequest, fallback)
    return writing.critique(request.question, request.answer)


def draft_rule(prompt: str) -> str:
    return writing.draft(prompt)


def edit_rule(prompt: str) -> str:
    def fallback(text: str) -> dict[str, Any]:
        return _labelled(text, 'draft', 'feedback') or {'draft': text, 'feedback': ''}

    request: EditRequest = parse_request(prompt, EditRequest, fallback)
    return writing.edit(request.draft, request.feedback)


# -- the model --------------------------------------------------------------------------------------------


def rule_model(name: str, rule: Rule) -> FunctionModel:
    """A `FunctionModel` that answers every request with `rule(latest user prompt)`.

    A structured result goes out as a call of the agent's output tool (as a model would send it);
    text goes out as a text part. The rules are deterministic, so a retry (after a validation error)
    gets the same answer and the run fails fast instead of looping.
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        result = rule(latest_prompt(messages))
        if isinstance(result, BaseModel):
            payload = result.model_dump(mode='json')
            if info.output_tools:
                return ModelResponse(parts=[ToolCallPart(tool_name=info.output_tools[0].name, args=payload)])
            return ModelResponse(parts=[TextPart(content=result.model_dump_json())])
        if info.output_tools and not info.allow_text_output:
            return ModelResponse(
                parts=[ToolCallPart(tool_name=info.output_tools[0].name, args={'response': result})]
            )
        return ModelResponse(parts=[TextPart(content=result)])

    respond.__name__ = f'{name}_rules'
    return FunctionModel(respond, model_name=f'offline-rules:{name}')


__all__ = [
    'critique_rule',
    'draft_rule',
    'edit_rule',
    'latest_prompt',
    'parse_input',
    'parse_request',
    'review_rule',
    'rule_model',
    'summarize_rule',
]
