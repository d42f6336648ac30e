"""Offline views of a run's stored spans (the dicts `tracing.RunSpanRecorder` produces).

`build_tree` nests the spans and `render_tree` draws them in the terminal with rich (the path a run
took over its script's possible calls is `Analysis.mermaid`). Nothing here needs a network,
an account or the OpenTelemetry SDK: the input is plain data, as read back from the run store.

How spans are recognised (by attributes first, so renamed spans still work):

- a call: has `harness.callee`, or is named `call ...`;
- the check: named `check`;
- a run: named `run_workflow ...`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from rich.tree import Tree

from .._records import SpanDict, preview
from ._names import (
    ATTR_ARGUMENTS,
    ATTR_ATTEMPT,
    ATTR_BUDGET_USED,
    ATTR_CALLEE,
    ATTR_ERRORS,
    ATTR_RESULT_PREVIEW,
    ATTR_SEQ,
    ATTR_SOURCE,
    ATTR_STATUS,
    ATTR_USAGE_COST,
    ATTR_USAGE_INPUT_TOKENS,
    ATTR_USAGE_OUTPUT_TOKENS,
    SPAN_CALL,
    SPAN_CHECK,
    SPAN_RUN,
    is_span,
)

PREVIEW_CHARS = 60


@dataclass
class Node:
    """One span and its child spans, children in start order."""

    span: SpanDict
    children: list[Node] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return duration_of(self.span)


def build_tree(spans: Iterable[SpanDict]) -> list[Node]:
    """Nest `spans` by `parent_span_id`; the roots, in start order.

    A span whose parent is not among `spans` (a remote parent, or one not recorded) is a root, and
    so is a span whose parent chain loops back to itself (corrupt data), so every span is shown once.
    """
    ordered = sorted(spans, key=lambda s: (_float(s.get('start')), _float(s.get('end'))))
    nodes: dict[str, Node] = {}
    for span in ordered:
        nodes.setdefault(str(span.get('span_id')), Node(span))
    roots: list[Node] = []
    for span in ordered:
        node = nodes[str(span.get('span_id'))]
        if node.span is not span:
            continue  # a duplicate span id: the first one wins
        parent = _parent(node, nodes)
        if parent is None or _loops(node, nodes):
            roots.append(node)
        else:
            parent.children.append(node)
    return roots


def render_tree(spans: Iterable[SpanDict], *, full: bool = False) -> Tree:
    """The span tree as a rich `Tree`: name, duration, status and the interesting attributes, and under
    a span that recorded an exception, the exception (with its stack trace when `full`)."""
    roots = build_tree(spans)
    limit = None if full else PREVIEW_CHARS
    if not roots:
        return Tree(Text('no spans recorded', style='dim'))
    if len(roots) == 1:
        tree = Tree(span_label(roots[0].span, limit))
        _add_children(tree, roots[0], limit)
        return tree
    tree = Tree(Text(f'{len(roots)} root spans', style='dim'))
    for root in roots:
        _add_children(tree.add(span_label(root.span, limit)), root, limit)
    return tree


def span_label(span: SpanDict, limit: int | None = PREVIEW_CHARS) -> Text:
    """One line for `span`: `name  12 ms  ok  key=value ...` (no rich markup is interpreted); values cut
    to `limit` characters (None: whole)."""
    attrs: Mapping[str, Any] = span.get('attributes') or {}
    failed = span.get('status') == 'error'
    text = Text()
    text.append(str(span.get('name', '?')), style='bold red' if failed else 'bold')
    text.append(f'  {format_duration(duration_of(span))}', style='dim')
    if failed:
        error = span.get('error')
        text.append('  error' + (f': {_line(error, limit)}' if error else ''), style='red')
    else:
        text.append('  ok', style='green')
    details = _details(span, attrs, limit)
    if details:
        text.append('  ' + '  '.join(details), style='cyan')
    return text


def format_duration(seconds: float) -> str:
    """`0.4 ms`, `12 ms`, `1.25 s`, `2 m 05 s`."""
    if seconds < 0.01:
        return f'{seconds * 1000:.1f} ms'
    if seconds < 1:
        return f'{seconds * 1000:.0f} ms'
    if seconds < 60:
        return f'{seconds:.2f} s'
    minutes, rest = divmod(round(seconds), 60)
    return f'{minutes} m {rest:02d} s'


def duration_of(span: SpanDict) -> float:
    return max(0.0, _float(span.get('end')) - _float(span.get('start')))


def error_count(value: Any) -> int:
    """How many errors `harness._errors` holds: an int, a list, a JSON list, or ty's text output."""
    if value is None or isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, list | tuple):
        return len(value)
    text = str(value).strip()
    if not text:
        return 0
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, int | list):
        return decoded if isinstance(decoded, int) else len(decoded)
    flagged = sum(1 for line in text.splitlines() if re.search(r'\berror\[', line))
    return flagged or 1


def _details(span: SpanDict, attrs: Mapping[str, Any], limit: int | None = PREVIEW_CHARS) -> list[str]:
    kind = _kind(span)
    out: list[str] = []
    if kind == 'call':
        if attrs.get(ATTR_SEQ) is not None:
            out.append(f'#{attrs[ATTR_SEQ]}')
        if attrs.get(ATTR_ARGUMENTS) is not None:
            out.append(f'args={_line(attrs[ATTR_ARGUMENTS], limit)}')
        if attrs.get(ATTR_RESULT_PREVIEW) is not None:
            out.append(f'-> {_line(attrs[ATTR_RESULT_PREVIEW], limit)}')
        attempt = _int(attrs.get(ATTR_ATTEMPT))
        if attempt is not None and attempt > 1:
            out.append(f'attempt {attempt}')
        source = attrs.get(ATTR_SOURCE)
        if source and source != 'live':
            out.append(f'[{source}]')
    elif kind == 'check':
        errors = error_count(attrs.get(ATTR_ERRORS))
        out.append(f'{errors} error{"s" if errors != 1 else ""}' if errors else 'no errors')
    elif kind == 'run':
        for key, label in ((ATTR_STATUS, 'status'), (ATTR_BUDGET_USED, 'budget')):
            if attrs.get(key) is not None:
                out.append(f'{label}={_line(attrs[key], limit)}')
        if attrs.get(ATTR_USAGE_INPUT_TOKENS) is not None:
            out.append(usage_text(attrs))
    model = attrs.get('gen_ai.request.model') or attrs.get('gen_ai.response.model')
    if model and kind != 'call':
        out.append(f'model={model}')
    tokens_in = attrs.get('gen_ai.usage.input_tokens')
    tokens_out = attrs.get('gen_ai.usage.output_tokens')
    if tokens_in is not None or tokens_out is not None:
        out.append(f'tokens in={_or_unknown(tokens_in)} out={_or_unknown(tokens_out)}')
    if attrs.get('operation.cost') is not None:
        out.append(f'cost=${float(attrs["operation.cost"]):.4f}')
    return out


def usage_text(attrs: Mapping[str, Any]) -> str:
    """`sub-agents: tokens in=… out=… cost=$…` from a run span's `harness.usage.*` totals."""
    text = (
        f'sub-agents: tokens in={_or_unknown(attrs.get(ATTR_USAGE_INPUT_TOKENS))} '
        f'out={_or_unknown(attrs.get(ATTR_USAGE_OUTPUT_TOKENS))}'
    )
    cost = attrs.get(ATTR_USAGE_COST)
    return text + (f' cost=${float(cost):.4f}' if cost is not None else '')


def _or_unknown(value: Any) -> str:
    return '?' if value is None else str(value)


def _kind(span: SpanDict) -> str:
    attrs: Mapping[str, Any] = span.get('attributes') or {}
    name = str(span.get('name', ''))
    if ATTR_CALLEE in attrs or is_span(name, SPAN_CALL):
        return 'call'
    if name == SPAN_CHECK:
        return 'check'
    if name == SPAN_RUN or is_span(name, SPAN_RUN):
        return 'run'
    return 'other'


def _add_children(branch: Tree, node: Node, limit: int | None = PREVIEW_CHARS) -> None:
    for exception in node.span.get('exceptions') or []:
        line = f'exception {exception.get("type", "?")}: {exception.get("message", "")}'
        if limit is None:
            stack = Text(line + '\n', style='red')
            stack.append(str(exception.get('stacktrace', '')).rstrip(), style='dim')
            branch.add(stack)
        else:
            branch.add(Text(_line(line, limit) + '  (--full: stack trace)', style='red'))
    for child in node.children:
        _add_children(branch.add(span_label(child.span, limit)), child, limit)


def _parent(node: Node, nodes: Mapping[str, Node]) -> Node | None:
    parent_id = node.span.get('parent_span_id')
    return nodes.get(str(parent_id)) if parent_id else None


def _loops(node: Node, nodes: Mapping[str, Node]) -> bool:
    """Whether `node`'s parent chain comes back to `node` (a chain entering another loop is fine)."""
    seen: set[int] = set()
    current = _parent(node, nodes)
    while current is not None and id(current) not in seen:
        if current is node:
            return True
        seen.add(id(current))
        current = _parent(current, nodes)
    return False


def _line(value: Any, limit: int | None = PREVIEW_CHARS) -> str:
    """A value on one line of the view: whitespace collapsed, cut to `limit` (None: whole)."""
    value = ' '.join(value.split()) if isinstance(value, str) else value
    return preview(value, limit if limit is not None else 1 << 60, as_text=True)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
