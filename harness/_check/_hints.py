"""What the model reads when a check fails: ty's messages, each followed by a one-line hint for the
mistakes models make, the sandbox's own refusals of what ty accepts but Monty cannot run, and the
refusals of what would hide a script's calls from the analysis before the run (`_refusals`).

A hint says what to write instead. It is derived from the diagnostic, the script line it points at,
and the stubs (the catalog's signatures and result types), so it names the model's own functions.
"""

from __future__ import annotations

import ast
import copy
import functools
import keyword
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from .._errors import WorkflowTypeError
from ._parse import parse_script
from ._refusals import refusals
from ._scopes import Scopes

DIAGNOSTIC = re.compile(
    r'^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>\w+)\[(?P<rule>[\w-]+)\] (?P<message>.*)$'
)
"""One of ty's concise messages (`file:line:col: severity[rule] message`)."""
IMPORTABLE = (
    'asyncio, json, math, re, typing, collections, itertools, functools, dataclasses, datetime, decimal, '
    'copy, bisect, base64, hashlib, unicodedata, random (call random.seed(n) first)'
)
"""Modules a script can import and use (measured against pydantic-monty 1.4.0)."""
JOINS = 'fan out with `await asyncio.gather(...)`; keep going past failures with `settle_all(...)` or `settled(...)`'
LISTS = ('zip', 'enumerate', 'reversed')
"""Builtins that return a list in the sandbox where Python returns an iterator (as a generator expression)."""
TYPING = frozenset({'Any', 'Literal', 'Optional', 'Union', 'Callable'})
"""Names from typing a script must import to annotate with (the stubs' imports are not the script's);
measured to import in the sandbox (`TypedDict`, `NotRequired`, `Awaitable` check but fail to import)."""
UNSUPPORTED_SYNTAX = {
    'class inheritance': "use plain dicts (the stubs' TypedDicts are dicts) and functions",
    'yield': 'build and return a list instead of a generator',
}


def lint(code: str, functions: Iterable[str] = ()) -> list[str]:
    """What ty accepts but the sandbox cannot run, or what would hide the script's calls from the analysis
    (`functions`: the names the stubs define, which the script must not rebind), as diagnostics in ty's format."""
    try:
        tree = parse_script(code)
    except SyntaxError:
        return []  # ty reports it
    found = [
        f'workflow.py:{getattr(node, "lineno", 1)}:{getattr(node, "col_offset", 0) + 1}: error[not-analyzable] '
        f'{message}'
        for node, message in refusals(tree, Scopes(tree), set(functions))
    ]
    made = _lists(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += _keyword_joins(node)
            what = _list_to_next(node, made)
            if what:
                found.append(
                    f'workflow.py:{node.lineno}:{node.col_offset + 1}: error[unsupported-call] '
                    f'next() needs an iterator, and in the sandbox {what}'
                )
    return found


def _keyword_joins(node: ast.Call) -> list[str]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ''
    if name not in ('gather', 'settle_all') or not (name == 'settle_all' or _is_asyncio(func)):
        return []
    found = []
    for argument in node.keywords:
        what = f'`{argument.arg}=`' if argument.arg else '`**kwargs`'
        found.append(
            f'workflow.py:{node.lineno}:{node.col_offset + 1}: error[unsupported-argument] '
            f'{name}() takes no keyword arguments in the sandbox ({what})'
        )
    return found


def _lists(tree: ast.AST) -> dict[str, ast.Assign]:
    """Names bound only ever to what the sandbox makes a list where Python makes an iterator."""
    made: dict[str, ast.Assign] = {}
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.Assign) and isinstance(target, ast.Name) and _a_list(node.value):
            made[target.id] = node
    # a name also bound elsewhere (`g = iter(g)`, a loop target) may hold an iterator there
    return {name: assign for name, assign in made.items() if stores[name] == 1}


def _a_list(value: ast.expr) -> bool:
    """A generator expression, or a builtin call, that the sandbox evaluates to a list."""
    if isinstance(value, ast.GeneratorExp):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in LISTS


def _list_to_next(node: ast.Call, made: dict[str, ast.Assign]) -> str | None:
    """Why `next(...)` fails in the sandbox (its argument is a list there), or None."""
    if not (isinstance(node.func, ast.Name) and node.func.id == 'next' and node.args):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.GeneratorExp):
        return 'a generator expression is a list'
    if isinstance(arg, ast.Call) and _a_list(arg):
        return f'{ast.unparse(arg.func)}() returns a list'
    if isinstance(arg, ast.Name) and arg.id in made:
        return f'`{arg.id}` (made on line {made[arg.id].lineno}) is a list'
    return None


def stub_functions(stubs: str) -> set[str]:
    """The functions the stubs define: the catalog's callees and the script helpers (the joins, `log`, `phase`)."""
    return set(re.findall(r'^(?:async )?def (\w+)\(', stubs, re.M))


def unsupported_syntax(display: str, rule: str = 'unsupported-syntax') -> str:
    """Monty's parser refusing a construct (a `NotImplementedError` while defining the wrapped script,
    or a `SyntaxError` shown as a traceback), as a diagnostic on the script's own line (the wrapper
    adds one line above it). The place is the innermost frame's `File "...", line N`, not any `line N`
    in the source line the traceback shows."""
    lines = re.findall(r'^\s*File "[^"\n]*", line (\d+)', display, re.MULTILINE)
    line = max(int(lines[-1]) - 1, 1) if lines else 1
    reason = display.strip().splitlines()[-1].split(': ', 1)[-1]
    reason = reason.replace('The monty syntax parser does not yet support', 'the sandbox does not support')
    return f'workflow.py:{line}:1: error[{rule}] {reason}'


def with_hints(text: str, code: str, stubs: str) -> str:
    """`text` (ty's concise messages) with a `hint:` line after each message a hint applies to."""
    lines = code.splitlines()
    context = _Context(stubs, code)
    out = []
    seen: set[str] = set()
    for message in text.splitlines():
        out.append(message)
        m = DIAGNOSTIC.match(message.strip())
        if m is None:
            continue
        line = lines[int(m['line']) - 1] if 0 < int(m['line']) <= len(lines) else ''
        for rule, hint in HINTS:
            if rule == m['rule'] or rule == '*':
                text_hint = hint(m['message'], line, context.at(int(m['line'])))
                if text_hint and text_hint not in seen:
                    seen.add(text_hint)
                    out.append(f'  hint: {text_hint}')
                    break
    return '\n'.join(out)


class _Context:
    """What a hint may know: the catalog's signatures and result types (read from the stubs), the
    script's syntax tree, and the line the message is about (`lineno`, set by `at`)."""

    def __init__(self, stubs: str, code: str = '') -> None:
        found = re.finditer(r'^async def (?P<name>\w+)(?P<sig>\(.*?\) -> .+?):$', stubs, re.M)
        self.signatures = {m['name']: m['sig'].strip() for m in found}
        self.typed_dicts = set(re.findall(r'^class (\w+)\(TypedDict', stubs, re.M))
        self.code = code
        self.lineno = 0

    @functools.cached_property
    def tree(self) -> ast.Module:
        try:
            return parse_script(self.code)
        except (SyntaxError, WorkflowTypeError):
            return ast.Module(body=[], type_ignores=[])

    def at(self, lineno: int) -> _Context:
        """This context, about the message on script line `lineno` (the tree is parsed once for all)."""
        self.tree  # noqa: B018 (parse before copying, so the copies share it)
        here = copy.copy(self)
        here.lineno = lineno
        return here

    def signature(self, name: str) -> str | None:
        sig = self.signatures.get(name)
        return f'`{name}{sig}`' if sig else None


def _overload(message: str, line: str, ctx: _Context) -> str | None:
    if 'str.join' in message:
        return 'join takes strings only: write `", ".join(str(x) for x in items)`.'
    func = _quoted(message)
    if func in ('max', 'min', 'sorted') and re.search(r'key\s*=\s*\w+\.get\b', line):
        return f'`key=d.get` may return None, which {func}() cannot compare: write `key=lambda k: d[k]`.'
    if func in ('max', 'min', 'sorted'):
        return 'the key must return one comparable type for every item: write `key=lambda x: ...` that does.'
    return None


def _attribute(message: str, line: str, ctx: _Context) -> str | None:
    m = re.search(r'Object of type `(?P<type>[\w\[\], |]+)` has no attribute `(?P<attr>\w+)`', message)
    if m and (m['type'] in ctx.typed_dicts or m['type'].startswith(('dict', 'Settled'))):
        return f'results are plain dicts: write `x["{m["attr"]}"]`, not `x.{m["attr"]}`.'
    m = re.search(r'Module `asyncio` has no member `(\w+)`', message)
    if m:
        return f'the sandbox has no asyncio.{m[1]}: {JOINS}.'
    return None


def _reference(message: str, line: str, ctx: _Context) -> str | None:
    name = _quoted(message)
    if name == 'open':
        reader = ' use `read_file(path=...)`' if 'read_file' in ctx.signatures else ' use a tool that reads files'
        return f'there is no filesystem in the sandbox:{reader}.'
    if name in TYPING:
        return f'write `from typing import {name}` first.'
    if name and name.endswith('Error'):
        return 'catch `Exception` (a failed call raises RuntimeError, a refused one PermissionError).'
    return None


def _call(message: str, line: str, ctx: _Context) -> str | None:
    m = re.search(r'function `(\w+)`', message)
    signature = ctx.signature(m[1]) if m else None
    if signature is None:
        return None
    return f'call it with keyword arguments, as its stub says: {signature}.'


def _import(message: str, line: str, ctx: _Context) -> str | None:
    return f'the sandbox can import: {IMPORTABLE}.'


def _unsupported(message: str, line: str, ctx: _Context) -> str | None:
    if 'gather() takes no keyword' in message and 'return_exceptions' in message:
        return 'use `settle_all(...)` (or `settled(...)` around each call) to keep the results that succeeded.'
    if 'takes no keyword' in message:
        return JOINS + '.'
    for what, hint in UNSUPPORTED_SYNTAX.items():
        if what in message:
            return hint + '.'
    return None


def _syntax(message: str, line: str, ctx: _Context) -> str | None:
    if 'too deeply nested' in message:
        return 'split it into steps: assign the inner parts to variables first.'
    return None


def _next(message: str, line: str, ctx: _Context) -> str | None:
    made = _lists(ctx.tree)
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Call) and node.lineno == ctx.lineno and _list_to_next(node, made):
            return _iterator_fix(node, made)
    return None


def _iterator_fix(node: ast.Call, made: dict[str, ast.Assign]) -> str:
    """The `next(...)` call (or, for a name, where its value is made) with the list made an iterator."""
    arg = node.args[0]
    if isinstance(arg, ast.Name):
        assign = made[arg.id]
        fixed = ast.unparse(ast.Assign(targets=assign.targets, value=_as_iterator(assign.value), lineno=0))
        return f'make it an iterator where it is made (line {assign.lineno}): `{fixed}`.'
    fixed = ast.unparse(ast.Call(func=node.func, args=[_as_iterator(arg), *node.args[1:]], keywords=node.keywords))
    if len(fixed) > 120:
        fixed = 'next(iter([x for x in xs if ...]), None)'
    return f'write `{fixed}` (`iter()` of a list is an iterator), or a `for` loop that breaks.'


def _as_iterator(value: ast.expr) -> ast.expr:
    if isinstance(value, ast.GeneratorExp):
        value = ast.ListComp(elt=value.elt, generators=value.generators)
    return ast.Call(func=ast.Name(id='iter', ctx=ast.Load()), args=[value], keywords=[])


def _dict_literal(message: str, line: str, ctx: _Context) -> str | None:
    """ty types an unannotated dict literal from its values and refuses a later value of another type,
    naming the use: point at the literal and say how to annotate it."""
    for dict_type in _dict_types(message):
        found = _literal_of(dict_type, ctx)
        if found is None:
            continue
        node, annotation = found
        key_type = _type_args(dict_type)[0]
        key = re.search(r'with key of type `([^`]*)`', message)
        if key and not _heads(key[1]) <= _heads(key_type):
            return f'the dict literal on line {node.lineno} has `{key_type}` keys: index it with one of them.'
        return (
            f'`{dict_type}` is the type ty gave the dict literal on line {node.lineno} (from its values): '
            f'{annotation} (after `from typing import Any`).'
        )
    return None


def _dict_types(message: str) -> list[str]:
    """The dict types a message names (`dict[str, int | str]`), outermost only."""
    return [t for t in re.findall(r'`([^`]+)`', message) if re.fullmatch(r'dict\[.+\]', t) and _balanced(t)]


def _literal_of(dict_type: str, ctx: _Context) -> tuple[ast.Dict, str] | None:
    """The assigned dict literal of that type nearest above the message's line, with how to
    annotate it so that it holds any value."""
    key_type, value_type = _type_args(dict_type)
    found = []
    for stmt in ast.walk(ctx.tree):
        if isinstance(stmt, ast.Assign):
            for node, path, key in _literals(stmt.value):
                if _typed_as(node.keys, key_type) and _typed_as(node.values, value_type):
                    found.append((node, _annotation(stmt, path, key, key_type)))
    above = [f for f in found if f[0].lineno <= ctx.lineno]
    return max(above, key=lambda f: f[0].lineno) if above else min(found, key=lambda f: f[0].lineno, default=None)


def _literals(
    value: ast.expr, path: tuple[type, ...] = (), key: str | None = None
) -> Iterator[tuple[ast.Dict, tuple[type, ...], str | None]]:
    """The dict literals in an assigned value, each with the kinds of the literals around it and,
    in an outer dict, its key there."""
    if isinstance(value, ast.Dict):
        yield value, path, key
        for k, v in zip(value.keys, value.values, strict=True):
            name = k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None
            yield from _literals(v, (*path, ast.Dict), name)
    elif isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        for element in value.elts:
            yield from _literals(element, (*path, type(value)))
    elif isinstance(value, (ast.ListComp, ast.SetComp)):
        yield from _literals(value.elt, (*path, type(value)))


def _annotation(stmt: ast.Assign, path: tuple[type, ...], key: str | None, key_type: str) -> str:
    """How to annotate a dict literal: its variable's type, or (in another literal, whose type
    ty keeps for it even when the outer one is annotated) a variable of its own."""
    target = stmt.targets[0]
    name = target.id if len(stmt.targets) == 1 and isinstance(target, ast.Name) else None
    if name and not path:
        return f'annotate it, `{name}: dict[{key_type}, Any] = {{...}}`'
    if name and path in ((ast.List,), (ast.ListComp,)):
        return f'annotate it, `{name}: list[dict[{key_type}, Any]] = [...]`'
    own = key if key and key.isidentifier() and not keyword.iskeyword(key) else 'row'
    return f'give it a variable of its own, annotated: `{own}: dict[{key_type}, Any] = {{...}}`, used in its place'


def _typed_as(nodes: Sequence[ast.expr | None], type_text: str) -> bool:
    """Whether literal keys (or values) can be what ty rendered as `type_text` (`int | str`)."""
    heads = {_head_of(n) for n in nodes}
    known = heads - {None}
    return known <= _heads(type_text) and (None in heads or known == _heads(type_text))


def _head_of(node: ast.expr | None) -> str | None:
    """The outer type of a literal; None when not a literal (a name, a call, the `**d` of a dict)."""
    if isinstance(node, ast.Constant):
        return 'None' if node.value is None else type(node.value).__name__
    kinds = {
        ast.List: 'list',
        ast.ListComp: 'list',
        ast.Dict: 'dict',
        ast.DictComp: 'dict',
        ast.Set: 'set',
        ast.SetComp: 'set',
        ast.Tuple: 'tuple',
        ast.JoinedStr: 'str',
    }
    return kinds.get(type(node))


def _heads(type_text: str) -> set[str]:
    """The outer types of a rendered union: `list[int] | Literal["a"] | None` -> list, str, None."""
    heads = set()
    for member in _split(type_text, '|'):
        literal = re.fullmatch(r'Literal\[(.+)\]', member)
        if literal:
            value = literal[1]
            member = 'str' if value[0] in '"\'' else 'bool' if value in ('True', 'False') else 'int'
        heads.add(member.split('[', 1)[0])
    return heads


def _type_args(dict_type: str) -> tuple[str, str]:
    args = _split(dict_type[len('dict[') : -1], ',')
    return (args[0], args[1]) if len(args) == 2 else ('str', 'Any')


def _split(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside brackets, each part stripped."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == '[') - (char == ']')
        if char == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:].strip()]


def _balanced(text: str) -> bool:
    return text.count('[') == text.count(']')


def _argument_type(message: str, line: str, ctx: _Context) -> str | None:
    if re.search(r'found `[^`]*\| ', message) or re.search(r'`dict\[str, [^`]*\|', message):
        return (
            'a dict literal with values of different types is typed `dict[str, A | B]`: annotate it '
            '(`row: dict[str, Any] = {...}`, after `from typing import Any`) or read the value into a typed '
            'variable first.'
        )
    return None


def _operator(message: str, line: str, ctx: _Context) -> str | None:
    if '| None' in message:
        return (
            'a value that may be None (from `d.get(k)`, or a `NotRequired` field) needs a default: '
            '`d.get(k, 0)`, or `d[k]` when the key is certain.'
        )
    return None


def _missing_key(message: str, line: str, ctx: _Context) -> str | None:
    if '"value"' in message or "'value'" in message:
        return 'a `Settled` has "value" only when "ok" is True: test `r["ok"]` first, or use `r.get("value")`.'
    return None


Hint = Callable[[str, str, _Context], str | None]
HINTS: list[tuple[str, Hint]] = [
    ('no-matching-overload', _overload),
    ('unresolved-attribute', _attribute),
    ('unresolved-reference', _reference),
    ('too-many-positional-arguments', _call),
    ('unknown-argument', _call),
    ('missing-argument', _call),
    ('unresolved-import', _import),
    ('unsupported-argument', _unsupported),
    ('unsupported-syntax', _unsupported),
    ('unsupported-call', _next),
    ('invalid-syntax', _syntax),
    ('invalid-assignment', _dict_literal),
    ('invalid-argument-type', _dict_literal),
    ('invalid-argument-type', _argument_type),
    ('invalid-return-type', _dict_literal),
    ('unsupported-operator', _dict_literal),
    ('unsupported-operator', _operator),
    ('invalid-key', _missing_key),
    ('possibly-missing-key', _missing_key),
]


def _quoted(message: str) -> str | None:
    m = re.search(r'`(\w+)`', message)
    return m[1] if m else None


def _is_asyncio(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == 'asyncio'
