"""Rule-based review of Python source with `ast`: the offline behaviour of the `reviewer` sub-agent.

`review_source(path, source, focus)` parses the file and reports real problems at their real line
numbers. Each rule belongs to a category, `bugs` (correctness, security, robustness) or `style`
(readability, maintainability), which `focus` selects. A file that does not parse gets one error
finding for the syntax error. Files that are not Python get a light text review instead.
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from .models import Finding, Focus, Review, Severity

Category = Literal['bugs', 'style']

MAX_FUNCTION_LINES = 50
"""A function longer than this (from `def` to its last line) is reported."""
MAX_FINDINGS = 100
MAX_TEXT_LINE = 120

SEVERITY_RANK: dict[str, int] = {'error': 0, 'warning': 1, 'info': 2}

SHADOWABLE_BUILTINS = frozenset(
    {
        'abs',
        'all',
        'any',
        'ascii',
        'bin',
        'bool',
        'breakpoint',
        'bytearray',
        'bytes',
        'callable',
        'chr',
        'classmethod',
        'compile',
        'complex',
        'delattr',
        'dict',
        'dir',
        'divmod',
        'enumerate',
        'eval',
        'exec',
        'filter',
        'float',
        'format',
        'frozenset',
        'getattr',
        'globals',
        'hasattr',
        'hash',
        'help',
        'hex',
        'id',
        'input',
        'int',
        'isinstance',
        'issubclass',
        'iter',
        'len',
        'list',
        'locals',
        'map',
        'max',
        'memoryview',
        'min',
        'next',
        'object',
        'oct',
        'open',
        'ord',
        'pow',
        'print',
        'property',
        'range',
        'repr',
        'reversed',
        'round',
        'set',
        'setattr',
        'slice',
        'sorted',
        'staticmethod',
        'str',
        'sum',
        'super',
        'tuple',
        'type',
        'vars',
        'zip',
    }
)
"""Builtins whose shadowing hides a function people call (constants like `copyright` are left out)."""

MUTABLE_FACTORIES = frozenset(
    {
        'list',
        'dict',
        'set',
        'bytearray',
        'defaultdict',
        'OrderedDict',
        'Counter',
        'deque',
    }
)
BROAD_EXCEPTIONS = frozenset({'Exception', 'BaseException'})
IMPORT_ERRORS = frozenset({'ImportError', 'ModuleNotFoundError'})
TODO_MARK = re.compile(r'\b(TODO|FIXME|XXX|HACK)\b')

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Issue:
    """A finding before focus filtering: a `Finding` plus the category the rule belongs to."""

    line: int
    severity: Severity
    category: Category
    message: str


def review_source(path: str, source: str, focus: Focus = 'all') -> Review:
    """Review one file; the findings are sorted by line, most severe first within a line."""
    if _looks_like_python(path, source):
        issues, stats = analyse_python(path, source)
    else:
        issues, stats = analyse_text(source), f'{_line_count(source)} lines of text checked'
    selected = [
        i for i in issues if focus == 'all' or i.category == focus or i.message.startswith('syntax error')
    ]
    selected.sort(key=lambda i: (i.line, SEVERITY_RANK[i.severity], i.message))
    dropped = max(0, len(selected) - MAX_FINDINGS)
    findings = [Finding(line=i.line, severity=i.severity, message=i.message) for i in selected[:MAX_FINDINGS]]
    verdict = 'needs_work' if any(f.severity != 'info' for f in findings) else 'ok'
    return Review(
        path=path,
        verdict=verdict,
        findings=findings,
        summary=summarize_findings(path, selected[:MAX_FINDINGS], focus=focus, stats=stats, dropped=dropped),
    )


def summarize_findings(
    path: str, findings: Sequence[Issue], *, focus: Focus, stats: str, dropped: int = 0
) -> str:
    """One paragraph: the verdict, the tally by severity, and the three most important findings.

    Most important means most severe first, then bugs before style, then by line.
    """
    scope = '' if focus == 'all' else f' ({focus} only)'
    if not findings:
        return f'{path}: no issues found{scope}; {stats}.'
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ('error', 'warning', 'info')}
    tally = ', '.join(f'{n} {_plural(s, n)}' for s, n in counts.items() if n)
    worst = sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity], f.category != 'bugs', f.line))[:3]
    top = '; '.join(f'line {f.line}: {_first_clause(f.message)}' for f in worst)
    more = f' ({dropped} more not shown)' if dropped else ''
    verdict = (
        'needs work' if any(f.severity != 'info' for f in findings) else 'looks fine apart from minor notes'
    )
    return f'{path} {verdict}{scope}: {tally}{more}. Most important: {top}.'


# -- Python ------------------------------------------------------------------------------------------


def analyse_python(path: str, source: str) -> tuple[list[Issue], str]:
    """All issues in a Python file, and a short description of what was checked."""
    try:
        tree = ast.parse(source, filename=path, type_comments=False)
    except SyntaxError as exc:
        line = exc.lineno or 1
        where = f' (column {exc.offset})' if exc.offset else ''
        return [
            Issue(line, 'error', 'bugs', f'syntax error: {exc.msg}{where}; the file cannot be imported')
        ], ('the file does not parse')
    except ValueError as exc:  # e.g. NUL bytes in the source
        return [
            Issue(1, 'error', 'bugs', f'syntax error: {exc}; the file cannot be imported')
        ], 'the file does not parse'
    checker = PythonChecker(path, tree)
    checker.run()
    issues = checker.issues + todo_comments(source)
    functions = sum(isinstance(n, FunctionNode) for n in ast.walk(tree))
    return issues, f'{_line_count(source)} lines and {functions} {_plural("function", functions)} checked'


class PythonChecker:
    """Walks one module's tree once per rule family; results land in `issues`."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.tree = tree
        self.issues: list[Issue] = []
        name = PurePosixPath(path.replace('\\', '/')).name
        parts = PurePosixPath(path.replace('\\', '/')).parts
        self.is_test = (
            name.startswith('test_')
            or name.endswith('_test.py')
            or name == 'conftest.py'
            or 'tests' in parts
            or 'test' in parts
        )
        self.is_package_init = name == '__init__.py'
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def add(self, node: ast.AST | int, severity: Severity, category: Category, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, 'lineno', 1)
        self.issues.append(Issue(line, severity, category, message))

    def run(self) -> None:
        self.check_exception_handlers()
        self.check_defaults_and_functions()
        self.check_comparisons()
        self.check_dangerous_calls()
        self.check_unused_imports()
        self.check_shadowed_builtins()
        self.check_asserts()
        self.check_unreachable()
        self.check_docstrings()

    # -- exceptions

    def check_exception_handlers(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.ExceptHandler):
                continue
            swallows = _only_passes(node.body)
            if node.type is None:
                tail = ' and silently ignores them' if swallows else ''
                self.add(
                    node,
                    'warning',
                    'bugs',
                    'bare `except:` also catches KeyboardInterrupt and SystemExit'
                    + tail
                    + '; catch the specific exceptions you expect',
                )
            elif swallows and _names_in(node.type) & BROAD_EXCEPTIONS:
                caught = ast.unparse(node.type)
                self.add(
                    node,
                    'warning',
                    'bugs',
                    f'`except {caught}: pass` silently swallows every error; handle, log or re-raise it',
                )

    # -- function definitions: mutable defaults, length

    def check_defaults_and_functions(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, FunctionNode | ast.Lambda):
                self._check_defaults(node)
            if isinstance(node, FunctionNode):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    self.add(
                        node,
                        'warning',
                        'style',
                        f'function `{node.name}` is {length} lines long (limit {MAX_FUNCTION_LINES}); '
                        'split it into smaller functions',
                    )

    def _check_defaults(self, node: FunctionNode | ast.Lambda) -> None:
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        owner = f'`{node.name}`' if isinstance(node, FunctionNode) else 'a lambda'
        for arg, default in pairs:
            if _is_mutable_literal(default):
                self.add(
                    default,
                    'warning',
                    'bugs',
                    f'mutable default argument `{arg.arg}={_short(ast.unparse(default))}` in {owner} is '
                    'shared between calls; default to None and create a new value inside the function',
                )

    # -- comparisons

    def check_comparisons(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Compare):
                continue
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                pair = (left, right)
                if isinstance(op, ast.Eq | ast.NotEq):
                    symbol = '==' if isinstance(op, ast.Eq) else '!='
                    if any(_is_const(side, None) for side in pair):
                        better = 'is' if isinstance(op, ast.Eq) else 'is not'
                        self.add(
                            node,
                            'warning',
                            'style',
                            f'comparison `{symbol} None` should be `{better} None` '
                            '(`==` can be overridden by __eq__)',
                        )
                    elif any(_is_const(side, True) or _is_const(side, False) for side in pair):
                        self.add(
                            node,
                            'info',
                            'style',
                            f'comparison `{symbol} True/False`: test the value itself (`if x:`, `if not x:`)',
                        )
                elif isinstance(op, ast.Is | ast.IsNot) and any(_is_identity_unsafe_literal(s) for s in pair):
                    word = 'is' if isinstance(op, ast.Is) else 'is not'
                    self.add(
                        node,
                        'error',
                        'bugs',
                        f'`{word}` compares identity, not value, against a literal; use `==`/`!=`',
                    )
                left = right

    # -- eval, exec, open

    def check_dangerous_calls(self) -> None:
        managed = {
            id(item.context_expr)
            for node in ast.walk(self.tree)
            if isinstance(node, ast.With | ast.AsyncWith)
            for item in node.items
        }
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            if name in ('eval', 'exec'):
                hint = (
                    'use ast.literal_eval, json.loads or a small parser'
                    if name == 'eval'
                    else 'call the code directly instead of building it as a string'
                )
                self.add(
                    node,
                    'error',
                    'bugs',
                    f'`{name}()` runs arbitrary code from its argument (a code-injection risk); {hint}',
                )
            elif (
                name == 'open'
                and id(node) not in managed
                and not isinstance(self.parents.get(node), ast.Return)
            ):
                self.add(
                    node,
                    'warning',
                    'bugs',
                    '`open()` outside a `with` block: the file is not closed if an error occurs; '
                    'use `with open(...) as f:`',
                )

    # -- imports

    def check_unused_imports(self) -> None:
        if self.is_package_init:
            return  # imports in __init__.py are usually re-exports
        used = self._used_names()
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.ImportFrom) and node.module == '__future__':
                continue
            if self._guarded_import(node):
                continue
            for alias in node.names:
                if alias.name == '*':
                    continue
                if alias.asname is not None and alias.asname == alias.name:
                    continue  # `import x as x`: an explicit re-export
                bound = alias.asname or alias.name.split('.')[0]
                if bound not in used:
                    shown = alias.name if alias.asname is None else f'{alias.name} as {alias.asname}'
                    what = (
                        f'from {"." * node.level}{node.module or ""} import {shown}'
                        if isinstance(node, ast.ImportFrom)
                        else f'import {shown}'
                    )
                    self.add(node, 'warning', 'style', f'unused import: `{what}`; remove it')

    def _used_names(self) -> set[str]:
        used: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                used.add(node.id)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == '__all__' for t in node.targets
            ):
                used.update(_strings_in(node.value))
        for annotation in self._annotations():
            for const in ast.walk(annotation):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    try:
                        parsed = ast.parse(const.value, mode='eval')
                    except SyntaxError:
                        continue
                    used.update(n.id for n in ast.walk(parsed) if isinstance(n, ast.Name))
        return used

    def _annotations(self) -> Iterable[ast.expr]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.arg) and node.annotation is not None:
                yield node.annotation
            elif isinstance(node, FunctionNode) and node.returns is not None:
                yield node.returns
            elif isinstance(node, ast.AnnAssign):
                yield node.annotation

    def _guarded_import(self, node: ast.AST) -> bool:
        """An import inside `try: ... except ImportError:` is an availability check."""
        current: ast.AST | None = node
        while current is not None:
            parent = self.parents.get(current)
            if isinstance(parent, ast.Try) and current in parent.body:
                for handler in parent.handlers:
                    if handler.type is not None and _names_in(handler.type) & IMPORT_ERRORS:
                        return True
            current = parent
        return False

    # -- shadowed builtins

    def check_shadowed_builtins(self) -> None:
        self._shadow_scope(self.tree.body, params=(), seen=set(), in_class=False)

    def _shadow_scope(
        self, body: Sequence[ast.stmt], *, params: Iterable[ast.arg], seen: set[str], in_class: bool
    ) -> None:
        for arg in params:
            self._shadow(arg, arg.arg, seen, 'parameter')
        for stmt in body:
            self._shadow_statement(stmt, seen, in_class)

    def _shadow_statement(self, stmt: ast.stmt, seen: set[str], in_class: bool) -> None:
        if isinstance(stmt, FunctionNode):
            if not in_class:
                self._shadow(stmt, stmt.name, seen, 'function')
            self._shadow_scope(stmt.body, params=_all_args(stmt.args), seen=set(), in_class=False)
            return
        if isinstance(stmt, ast.ClassDef):
            if not in_class:
                self._shadow(stmt, stmt.name, seen, 'class')
            self._shadow_scope(stmt.body, params=(), seen=set(), in_class=True)
            return
        # Statements of this scope: assignments, loops, with/except targets, comprehensions.
        for node in _walk_scope(stmt):
            if isinstance(node, FunctionNode | ast.ClassDef):
                self._shadow_statement(node, seen, in_class)
            elif isinstance(node, ast.Lambda):
                for arg in _all_args(node.args):
                    self._shadow(arg, arg.arg, set(), 'parameter')
            elif in_class:
                continue  # class attributes (e.g. a field named `id`) do not shadow anything
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self._shadow(node, node.id, seen, 'variable')
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._shadow(node, node.name, seen, 'variable')

    def _shadow(self, node: ast.AST, name: str, seen: set[str], kind: str) -> None:
        if name in SHADOWABLE_BUILTINS and name not in seen:
            seen.add(name)
            self.add(
                node,
                'warning',
                'bugs',
                f'{kind} `{name}` shadows the builtin `{name}()`, which is then unusable in this scope; '
                'rename it',
            )

    # -- assert as validation

    def check_asserts(self) -> None:
        if self.is_test:
            return
        for func in ast.walk(self.tree):
            if not isinstance(func, FunctionNode):
                continue
            params = {a.arg for a in _all_args(func.args)} - {'self', 'cls'}
            for node in _walk_scope_of(func):
                if isinstance(node, ast.Assert) and _names_in(node.test) & params:
                    self.add(
                        node,
                        'warning',
                        'bugs',
                        f'`assert` used to validate arguments of `{func.name}`: asserts are removed under '
                        '`python -O`; raise ValueError/TypeError instead',
                    )

    # -- unreachable code

    def check_unreachable(self) -> None:
        for node in ast.walk(self.tree):
            for field in ('body', 'orelse', 'finalbody'):
                block = getattr(node, field, None)
                if not isinstance(block, list):
                    continue
                for stmt, following in itertools.pairwise(block):
                    if isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break):
                        word = type(stmt).__name__.lower()
                        self.add(
                            following,
                            'warning',
                            'bugs',
                            f'unreachable code: it follows a `{word}` on line {stmt.lineno}',
                        )
                        break

    # -- docstrings

    def check_docstrings(self) -> None:
        if self.is_test:
            return
        for node in self.tree.body:
            if isinstance(node, FunctionNode) and _is_public(node.name) and not _is_overload(node):
                self._need_docstring(node, 'function')
            elif isinstance(node, ast.ClassDef) and _is_public(node.name):
                self._need_docstring(node, 'class')
                for member in node.body:
                    if (
                        isinstance(member, FunctionNode)
                        and _is_public(member.name)
                        and not _is_overload(member)
                    ):
                        self._need_docstring(member, 'method', owner=node.name)

    def _need_docstring(self, node: FunctionNode | ast.ClassDef, kind: str, owner: str | None = None) -> None:
        if ast.get_docstring(node) is None:
            name = f'{owner}.{node.name}' if owner else node.name
            self.add(node, 'info', 'style', f'public {kind} `{name}` has no docstring')


def todo_comments(source: str) -> list[Issue]:
    found: list[Issue] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and (mark := TODO_MARK.search(token.string)):
                text = _short(token.string.lstrip('# ').strip(), 80)
                found.append(
                    Issue(
                        token.start[0], 'info', 'style', f'{mark.group(1)} comment left in the code: "{text}"'
                    )
                )
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


# -- text files --------------------------------------------------------------------------------------


def analyse_text(source: str) -> list[Issue]:
    """Light checks for non-Python files: leftover markers, very long lines, trailing whitespace, tabs."""
    issues: list[Issue] = []
    trailing = 0
    for number, line in enumerate(source.splitlines(), start=1):
        if mark := TODO_MARK.search(line):
            issues.append(Issue(number, 'info', 'style', f'{mark.group(1)} marker left in the file'))
        if len(line) > MAX_TEXT_LINE:
            issues.append(
                Issue(number, 'info', 'style', f'line is {len(line)} characters long (over {MAX_TEXT_LINE})')
            )
        if line != line.rstrip() and trailing < 5:
            trailing += 1
            issues.append(Issue(number, 'info', 'style', 'trailing whitespace'))
        if '\ufffd' in line:
            issues.append(
                Issue(number, 'warning', 'bugs', 'replacement character: the text was decoded with errors')
            )
    return issues


# -- helpers -----------------------------------------------------------------------------------------


def _looks_like_python(path: str, source: str) -> bool:
    suffix = PurePosixPath(path.replace('\\', '/')).suffix.lower()
    if suffix in ('.py', '.pyi', '.pyw'):
        return True
    if suffix:
        return False
    if source.startswith('#!') and 'python' in source.split('\n', 1)[0]:
        return True
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    # Prose rarely parses; when it does it is a lone name or constant, never assignments or calls.
    trivial = (ast.Name, ast.Constant)
    return any(not (isinstance(s, ast.Expr) and isinstance(s.value, trivial)) for s in tree.body)


def _only_passes(body: Sequence[ast.stmt]) -> bool:
    return all(
        isinstance(s, ast.Pass | ast.Continue)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value in (Ellipsis,))
        for s in body
    )


def _names_in(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
    return names


def _is_mutable_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    return isinstance(node, ast.Call) and _call_name(node) in MUTABLE_FACTORIES


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in ('builtins', 'collections')
    ):
        return func.attr
    return None


def _is_const(node: ast.expr, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _is_identity_unsafe_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is not None and node.value is not Ellipsis and not isinstance(node.value, bool)
    return isinstance(node, ast.List | ast.Dict | ast.Set | ast.Tuple | ast.JoinedStr)


def _strings_in(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _all_args(args: ast.arguments) -> list[ast.arg]:
    found = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    found += [a for a in (args.vararg, args.kwarg) if a is not None]
    return found


def _walk_scope(node: ast.AST) -> Iterable[ast.AST]:
    """`node` and its descendants, stopping at (but yielding) nested functions, classes and lambdas."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, FunctionNode | ast.ClassDef | ast.Lambda):
            yield child
        else:
            yield from _walk_scope(child)


def _walk_scope_of(func: FunctionNode) -> Iterable[ast.AST]:
    for stmt in func.body:
        for node in _walk_scope(stmt):
            if not isinstance(node, FunctionNode | ast.ClassDef | ast.Lambda):
                yield node


def _is_public(name: str) -> bool:
    return not name.startswith('_')


def _is_overload(node: FunctionNode) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == 'overload')
        or (isinstance(d, ast.Attribute) and d.attr == 'overload')
        for d in node.decorator_list
    )


def _plural(word: str, n: int) -> str:
    if word == 'info':
        return 'info'
    return word if n == 1 else word + 's'


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + '...'


def _first_clause(message: str) -> str:
    return message.split('; ')[0]


def _line_count(source: str) -> int:
    return len(source.splitlines())


__all__ = ['Issue', 'PythonChecker', 'analyse_python', 'analyse_text', 'review_source', 'summarize_findings']
