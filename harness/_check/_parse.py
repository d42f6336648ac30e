"""The host's one parse of a script, bounded before anything recursive reads it.

The type check, the hints, the refusals and the analysis read a script's syntax tree on the host, outside the
sandbox's limits, and most of them walk it recursively. `parse_script` is the only way they get a tree:

- a script over `MAX_SCRIPT_CHARS` is refused before `ast.parse` (the syntax tree of a few hundred KB of code
  takes hundreds of MB);
- CPython's parser guards itself (200 bracket levels, its parser stack, its recursion check while it builds the
  tree) and raises `SyntaxError`, `RecursionError` or `MemoryError`: the last two become a refusal here;
- the tree's depth is measured without recursion and refused past `MAX_DEPTH` (a 30,000-term `+` chain is a
  tree 30,000 levels deep), so no recursive walker of the host meets a tree it cannot walk, and refused past
  `MAX_BRACKETS` brackets inside brackets, `MAX_CALL_DEPTH` calls inside calls or `MAX_FUNCTION_DEPTH` functions
  inside functions, where ty's check, which runs in
  a worker of the pool, grows past seconds (`abs(abs(...))` doubles in time with each level). What is left of
  ty's slow cases ends at the pool's request timeout, a clear check failure (`_checker`).

Monty itself refuses a script nested past about 150 levels ("Source is too deeply nested"), so `MAX_DEPTH`
refuses nothing the sandbox could run. A refusal is a `ScriptTooComplex`, a `WorkflowTypeError` naming the limit
and what to write instead; nothing has run.
"""

from __future__ import annotations

import ast
import contextlib
import threading

from .._errors import WorkflowTypeError

MAX_SCRIPT_CHARS = 256 * 1024
"""The longest script the host parses (characters); pass large data as `inputs=`, not in the source."""
MAX_DEPTH = 200
"""The deepest syntax tree the host walks (statements and expressions, each node one level)."""
MAX_BRACKETS = 32
"""The most brackets nested inside each other: displays, comprehensions, subscripts and calls (ty's check of a
list nested 100 deep takes seconds, 150 deep past its timeout)."""
MAX_CALL_DEPTH = 10
"""The most calls nested inside each other's arguments (`f(g(h(...)))`): ty's check of 12 nested `dict(...)`
takes seconds, of 14 more than its worker's memory."""
MAX_FUNCTION_DEPTH = 8
"""The most functions defined inside each other: ty's check of 15 takes a second, of 20 past its timeout."""
BRACKETS = (
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Dict,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Subscript,
    ast.Call,
)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
NESTINGS: tuple[tuple[tuple[type[ast.AST], ...], int, str, str], ...] = (
    (
        BRACKETS,
        MAX_BRACKETS,
        'brackets are nested more than {limit} deep ([[[...]]], or calls and subscripts inside them)',
        'build nested data step by step, or pass it as inputs=',
    ),
    (
        (ast.Call,),
        MAX_CALL_DEPTH,
        'calls are nested more than {limit} deep (f(g(h(...))))',
        'give the inner results names (x = h(...); y = g(x))',
    ),
    (
        FUNCTIONS,
        MAX_FUNCTION_DEPTH,
        'functions are defined more than {limit} deep inside each other',
        'define them side by side and pass what they share as arguments',
    ),
)
"""What is counted on each path from the root, how many of it a path may hold, and what the model reads past it:
what it wrote, and what to write instead."""
ANY_NESTING = tuple({kind for kinds, *_ in NESTINGS for kind in kinds})
NOTHING_RAN = 'Nothing ran.'


class ScriptTooComplex(WorkflowTypeError):
    """The script is over a limit of the host's parse (size, nesting): refused before the type check.

    `line` is where (None: the whole script), `reason` the limit and what to write instead."""

    def __init__(self, reason: str, *, line: int | None = None, rule: str = 'too-complex') -> None:
        super().__init__(f'line {line}: {reason}' if line else reason[:1].upper() + reason[1:])
        self.line = line
        self.reason = reason
        self.rule = rule
        """As the checker's message names it: `invalid-syntax` for nesting past the parser's depth, as Monty's own
        parser refusal is; `too-complex` for the limits of the type check."""

    def diagnostic(self) -> str:
        """The refusal as one of the checker's messages (`workflow.py:line:col: error[rule] message`)."""
        return f'workflow.py:{self.line or 1}:1: error[{self.rule}] {self.reason}'


def check_size(code: str) -> None:
    """Refuse a script too long to parse on the host (cheap: before anything reads it)."""
    if len(code) > MAX_SCRIPT_CHARS:
        raise ScriptTooComplex(
            f'the script is {len(code):,} characters long; the limit is {MAX_SCRIPT_CHARS:,}. Pass large data '
            f'as inputs= rather than in the source, or split the work into shorter scripts. {NOTHING_RAN}'
        )


def parse_script(code: str) -> ast.Module:
    """The script's syntax tree, or `SyntaxError` for a script that is not Python, or `ScriptTooComplex` for one
    over the host's limits (size, depth, brackets, nested calls, nested functions)."""
    check_size(code)
    try:
        tree = ast.parse(code)
    except (RecursionError, MemoryError):
        raise _too_deep(None) from None
    except SyntaxError as exc:
        if _nesting_syntax_error(exc):  # CPython's own limit; Monty may accept what it refuses (1,000 parentheses)
            raise _too_deep(exc.lineno) from None
        raise
    refusal = _refusal(code, tree)
    if refusal is not None:
        raise refusal
    return tree


def bound_script(code: str) -> None:
    """Refuse a script over the host's limits; a `SyntaxError` is left to the type check, which reports it."""
    with contextlib.suppress(SyntaxError):
        parse_script(code)


def _refusal(code: str, tree: ast.Module) -> ScriptTooComplex | None:
    """The limit `tree` (parsed from `code`) is over; measured once per script text (the check, the hints and the
    analysis each parse it)."""
    with _lock:
        if code in _verdicts:
            verdict = _verdicts[code]
            return None if verdict is None else ScriptTooComplex(verdict[1], line=verdict[0], rule=verdict[2])
    found = _measure(tree)
    with _lock:
        while len(_verdicts) >= 64:
            del _verdicts[next(iter(_verdicts))]
        _verdicts[code] = None if found is None else (found.line, found.reason, found.rule)
    return found


_verdicts: dict[str, tuple[int | None, str, str] | None] = {}
_lock = threading.Lock()


def _measure(tree: ast.AST) -> ScriptTooComplex | None:
    """Walk `tree` with an explicit stack, counting its depth and the nestings of `NESTINGS` on every path; the
    first limit a path is over."""
    stack: list[tuple[ast.AST, int, tuple[int, ...]]] = [(tree, 1, (0,) * len(NESTINGS))]
    while stack:
        node, depth, counts = stack.pop()
        line = getattr(node, 'lineno', None)
        if depth > MAX_DEPTH:
            return _too_deep(line)
        if isinstance(node, ANY_NESTING):
            counts = tuple(n + isinstance(node, kinds) for n, (kinds, *_) in zip(counts, NESTINGS, strict=True))
            for n, (_, limit, what, fix) in zip(counts, NESTINGS, strict=True):
                if n > limit:
                    reason = f'{what.format(limit=limit)}, more than the type check can follow in time: {fix}.'
                    return ScriptTooComplex(f'{reason} {NOTHING_RAN}', line=line)
        stack.extend((child, depth + 1, counts) for child in ast.iter_child_nodes(node))
    return None


def _too_deep(line: int | None) -> ScriptTooComplex:
    return ScriptTooComplex(
        f'the script is too deeply nested (more than {MAX_DEPTH} levels: a very long chain of operators such as '
        f'1 + 1 + ..., or brackets inside brackets): split it into steps: assign the inner parts to variables first, '
        f'and build long sums in a loop (total = 0; for x in xs: total += x). {NOTHING_RAN}',
        line=line,
        rule='invalid-syntax',
    )


def _nesting_syntax_error(exc: SyntaxError) -> bool:
    """CPython's parser refusing the nesting itself (too many nested parentheses, or indentation levels)."""
    return any(text in str(exc.msg) for text in ('too many nested', 'too deeply nested', 'too many levels'))
