"""The walker behind `analyze`: the script's control flow, read from its syntax tree, as call sites and edges.

Soundness is by construction, from these rules (each over-approximates what a run can do):
- A call of a script function runs its body *at the call*, walked there with the caller's state (what
  is certainly done, which nodes may have run last) and context (the enclosing loops' bounds), so each
  call point has its own sites. An `async def` runs where it is awaited (directly, or as an argument of
  an awaited join); called anywhere else it is a value.
- A function in a cycle of calls (recursion) is walked once per outer call as an unbounded loop whose
  sites may follow each other in any order. A function that is a value (passed around, a method, a
  lambda that is not a named helper, an `async def` not awaited where it is called) is walked once, on
  its own: its sites are unbounded and may run between any two calls (`any` edges).
- Loops (`for`, `while`, comprehensions) multiply their bodies' bounds by their literal trip count, or
  make them unbounded; their bodies may run zero times; `break`/`continue`/`return`/`raise` leave
  through the frames they name; a `finally` starts from every point of its `try`.
- The arguments of a join (`gather`, `settle_all`, `settled`, `first_of`, `quorum`, `within`) run
  beside each other: any call of one may follow any call of another (`beside` edges); an argument of a
  join other than `gather` may stop at any of its calls (a failure it keeps, a cancellation).
- Any call may raise out of the script (`raise` edges to the end).

The must-analysis (`requires=`) only counts a callee done where every path to here awaited it to success:
later operands of `and`/`or`, one arm of a conditional expression, a loop's or comprehension's body, a
handler's `try` body, the arguments of any join but `gather`, and a callee name the script rebinds do not.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._catalog._rules import After
from ._bounds import constant_iterables, literal_bound
from ._scopes import Function, Scopes

JOINS = frozenset({'gather', 'settle_all', 'settled', 'first_of', 'quorum', 'within'})
"""Join helpers whose awaitable arguments run beside each other when the join is awaited."""
SUCCESS_JOINS = frozenset({'gather'})
"""Joins that succeed only if every argument did: their arguments are certainly done after the await."""
INLINE_LIMIT = 2000
"""Sites, or helper bodies walked, past which a helper's further calls are followed as a value (once each),
so that helpers calling helpers cannot make the walk exponential."""
DRAWN = frozenset({'next', 'loop'})
"""Edge kinds of the flow as written; the others (`beside`, `raise`, `any`) complete the over-approximation."""
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
Frontier = frozenset[str]
Visited = tuple[Frontier, frozenset[str]]
"""What visiting an expression gives: the nodes that may have run last after it, and the callees it
certainly awaited to success when it completes."""


@dataclass(frozen=True)
class State:
    done: frozenset[str]
    """Callees that certainly completed successfully on every path to here."""
    frontier: Frontier
    """Graph nodes that may have run last before here."""
    dead: bool = False
    """No path reaches here (after a `return`, `raise`, `break` or `continue`)."""


DEAD = State(frozenset(), frozenset(), dead=True)


def join(*states: State) -> State:
    live = [s for s in states if not s.dead]
    if not live:
        return DEAD
    return State(frozenset.intersection(*(s.done for s in live)), frozenset().union(*(s.frontier for s in live)))


@dataclass(frozen=True)
class Context:
    loops: tuple[int | None, ...] = ()
    gather: bool = False
    except_: bool = False
    via: tuple[int, ...] = ()
    """The lines of the calls of script functions that lead here, outermost first."""


@dataclass(eq=False)
class _Jump:
    state: State


@dataclass(eq=False)
class _Loop:
    breaks: list[_Jump] = field(default_factory=list)
    continues: list[_Jump] = field(default_factory=list)


@dataclass
class Flow:
    """What the walk found; `_analysis.analyze` makes it an `Analysis`."""

    nodes: list[tuple[str, int, Context]] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    siblings: set[tuple[str, str]] = field(default_factory=set)
    dynamic: list[tuple[str, int, Context]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


class Walker:
    def __init__(self, tree: ast.Module, callees: frozenset[str], requires: dict[str, tuple[After, ...]]) -> None:
        self.tree = tree
        self.scopes = Scopes(tree)
        self.callees = callees
        self.requires = requires
        self.rebound = {name for name, _node in self.scopes.bindings_of(set(callees))}
        self.counts = not self.scopes.bindings_of({'range'})
        """Whether `range(...)` is the builtin (a literal trip count can be read from it)."""
        self.constants = constant_iterables(tree)
        self.flow = Flow()
        self.context = Context()
        self.seen: set[tuple[str, str, bool]] = set()
        self.loops: list[_Loop] = []
        self.frames: list[list[_Jump]] = []
        self.jumps: list[_Jump] = []
        self.stack: list[int] = []
        self.regions: list[list[str]] = []
        self.values: set[int] = set(self.scopes.values)
        self.loose: set[str] = set()
        """Nodes of functions walked as values: they may run between any two calls."""
        self.outliving: set[int] = set()
        """Recursion regions whose recursive call a gather runs as a task that can outlive the gather (`join_`)."""
        self.walking_value = False
        self.inlined = 0

    def run(self) -> Flow:
        frame: list[_Jump] = []
        self.frames.append(frame)
        end = self.block(self.tree.body, State(frozenset(), frozenset({'start'})))
        self.link(join(end, *(j.state for j in frame)).frontier, 'end', 'next')
        self.walk_values()
        self.close()
        return self.flow

    # -- graph ---------------------------------------------------------------------------------

    def link(self, sources: Frontier | set[str], dst: str, kind: str) -> None:
        drawn = kind in DRAWN  # a pair may be both: drawn (a loop's edge back) and not (calls of one join)
        for src in sorted(sources):
            if (src, dst, drawn) not in self.seen:
                self.seen.add((src, dst, drawn))
                self.flow.edges.append((src, dst, kind))

    def node(self, callee: str, line: int, frontier: Frontier, done: frozenset[str]) -> str:
        node_id = f'n{len(self.flow.nodes)}'
        self.flow.nodes.append((callee, line, self.context))
        for region in self.regions:
            region.append(node_id)
        if self.walking_value:
            self.loose.add(node_id)
        self.link(frontier, node_id, 'next')
        for rule in self.requires.get(callee, ()):
            if rule.callee not in done:
                self.flow.violations.append(
                    f'line {line}: {callee} can run before {rule.callee} has succeeded'
                    f'{rule.conditions()}; at run time such a call is refused.'
                )
        return node_id

    def ids(self, first: int) -> list[str]:
        return [f'n{i}' for i in range(first, len(self.flow.nodes))]

    def walk_values(self) -> None:
        """Each function that is a value, once, as if called anywhere any number of times with nothing done."""
        walked: set[int] = set()
        functions = [n for n in ast.walk(self.tree) if isinstance(n, Function)]
        while pending := [f for f in functions if id(f) in self.values and id(f) not in walked]:
            for function in pending:
                walked.add(id(function))
                self.walking_value, self.context, self.stack = True, Context(loops=(None,)), [id(function)]
                self.body_of(function, State(frozenset(), frozenset()))  # from anywhere: its `any` edges
        self.walking_value = False

    def close(self) -> None:
        nodes = self.ids(0)
        for node in sorted(self.loose, key=lambda n: int(n[1:])):
            self.link({'start', *nodes}, node, 'any')
            for dst in [*nodes, 'end']:
                self.link({node}, dst, 'any')
        for node in ['start', *nodes]:
            self.link({node}, 'end', 'raise')

    # -- statements ----------------------------------------------------------------------------

    def block(self, body: Sequence[ast.stmt], state: State) -> State:
        for stmt in body:
            if state.dead:
                break  # what follows a return, raise, break or continue in one block never runs
            state = self.statement(stmt, state)
        return state

    def statement(self, stmt: ast.stmt, state: State) -> State:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            args = stmt.args
            return self.sequence([*stmt.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d)], state)
        if isinstance(stmt, ast.ClassDef):
            state = self.sequence([*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)], state)
            return self.block(stmt.body, state)  # a class body runs where it stands
        if isinstance(stmt, ast.If):
            test = self.expression(stmt.test, state)
            return join(self.block(stmt.body, test), self.block(stmt.orelse, test))
        if isinstance(stmt, ast.For | ast.AsyncFor):
            return self.for_(stmt, self.expression(stmt.iter, state))
        if isinstance(stmt, ast.While):
            return self.while_(stmt, state)
        if isinstance(stmt, ast.Try | ast.TryStar):
            return self.try_(stmt, state)
        if isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                state = self.sequence([item.context_expr, *([item.optional_vars] if item.optional_vars else [])], state)
            return self.block(stmt.body, state)
        if isinstance(stmt, ast.Match):
            return self.match(stmt, state)
        if isinstance(stmt, ast.Return | ast.Raise | ast.Break | ast.Continue):
            return self.leave(stmt, state)
        if isinstance(stmt, ast.Assert):
            test = self.expression(stmt.test, state)
            if stmt.msg is not None:
                self.expression(stmt.msg, test)  # only when the test fails, and then it raises
            return test
        if isinstance(stmt, ast.Assign):
            return self.sequence([stmt.value, *stmt.targets], state)  # the value is evaluated first
        if isinstance(stmt, ast.AnnAssign):
            return self.sequence([e for e in (stmt.value, stmt.target) if e is not None], state)
        return self.sequence([c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.expr)], state)

    def sequence(self, exprs: Sequence[ast.expr], state: State) -> State:
        for expr in exprs:
            state = self.expression(expr, state)
        return state

    def leave(self, stmt: ast.Return | ast.Raise | ast.Break | ast.Continue, state: State) -> State:
        state = self.sequence([c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.expr)], state)
        if isinstance(stmt, ast.Raise):
            return DEAD  # to a handler or the end: those start from every call of their `try` (and `raise` edges)
        jump = _Jump(state)
        self.jumps.append(jump)
        if isinstance(stmt, ast.Return):
            self.frames[-1].append(jump)
        elif self.loops:
            (self.loops[-1].breaks if isinstance(stmt, ast.Break) else self.loops[-1].continues).append(jump)
        return DEAD

    def iterate(self, state: State, bound: int | None, body: Callable[[State], State]) -> tuple[State, _Loop]:
        """A loop's body, any number of turns: each turn may start after any way the last one ended."""
        loop = _Loop()
        self.loops.append(loop)
        saved = self.context
        self.context = dataclasses.replace(saved, loops=(*saved.loops, bound))
        first, mark, jumps = len(self.flow.nodes), len(self.flow.edges), len(self.jumps)
        end = body(state)
        back = join(end, *(j.state for j in loop.continues))
        for jump in self.jumps[jumps:]:  # a break or return made before any call of a later turn
            if jump.state.frontier & state.frontier and jump not in loop.continues:
                jump.state = State(jump.state.done, jump.state.frontier | back.frontier)
        entries = sorted(
            {
                dst
                for src, dst, kind in self.flow.edges[mark:]
                if kind == 'next' and src in state.frontier and dst.startswith('n') and int(dst[1:]) >= first
            },
            key=lambda n: int(n[1:]),
        )
        for dst in entries:
            self.link(back.frontier - state.frontier, dst, 'loop')
        self.context = saved
        self.loops.pop()
        return back, loop

    def bound(self, iterable: ast.expr) -> int | None:
        return None if isinstance(iterable, ast.Call) and not self.counts else literal_bound(iterable, self.constants)

    def for_(self, stmt: ast.For | ast.AsyncFor, state: State) -> State:
        back, loop = self.iterate(
            state, self.bound(stmt.iter), lambda s: self.block(stmt.body, self.expression(stmt.target, s))
        )
        done = self.block(stmt.orelse, join(state, back))  # it ends at its head: after no turn or any
        return join(done, *(j.state for j in loop.breaks))

    def while_(self, stmt: ast.While, state: State) -> State:
        tests: list[State] = []

        def turn(s: State) -> State:
            tests.append(self.expression(stmt.test, s))
            return self.block(stmt.body, tests[-1])

        back, loop = self.iterate(state, None, turn)
        test = tests[0]
        frontier = test.frontier | (back.frontier if test.frontier & state.frontier else frozenset())
        forever = isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
        ended = DEAD if forever else State(test.done, frontier)  # it ends when its test fails
        return join(self.block(stmt.orelse, ended), *(j.state for j in loop.breaks))

    def try_(self, stmt: ast.Try | ast.TryStar, state: State) -> State:
        first, mark = len(self.flow.nodes), len(self.jumps)
        body = self.block(stmt.body, state)
        # A handler may start after any call of the body failed: only what was done before it is certain.
        raised = State(state.done, state.frontier | frozenset(self.ids(first)))
        ended = self.block(stmt.orelse, body)
        saved = self.context
        self.context = dataclasses.replace(saved, except_=True)
        handled = [
            self.block(handler.body, self.sequence([handler.type] if handler.type else [], raised))
            for handler in stmt.handlers
        ]
        self.context = saved
        joined = join(ended, *handled)
        if not stmt.finalbody:
            return joined
        # The finally runs after the body or a handler ended, returned or raised anywhere.
        start = State(state.done, state.frontier | frozenset(self.ids(first)) | joined.frontier)
        final = self.block(stmt.finalbody, start)
        for jump in self.jumps[mark:]:  # a return, break or continue leaves through the finally
            jump.state = State(jump.state.done, jump.state.frontier | final.frontier)
        if joined.dead or final.dead:
            return DEAD
        return State(joined.done | final.done, final.frontier)

    def match(self, stmt: ast.Match, state: State) -> State:
        subject = self.expression(stmt.subject, state)
        tried, ends = subject, []
        for case in stmt.cases:
            guard = self.expression(case.guard, tried) if case.guard is not None else tried
            ends.append(self.block(case.body, guard))
            tried = State(subject.done, tried.frontier | guard.frontier)
        return join(tried, *ends)  # no case may match

    # -- expressions ---------------------------------------------------------------------------

    def expression(self, expr: ast.expr, state: State) -> State:
        if state.dead:
            return state
        frontier, certain = self.visit(expr, state.done, state.frontier)
        return State(state.done | certain, frontier)

    def visit(self, node: ast.AST, done: frozenset[str], frontier: Frontier) -> Visited:
        """Visit `node` in evaluation order: (the nodes that may have run last after it, the callees it
        certainly awaited to success when it completes)."""
        if isinstance(node, ast.Await):
            if isinstance(node.value, ast.Call):
                return self.call(node.value, done, frontier, runs=True, succeeds=True)
            return self.visit(node.value, done, frontier)
        if isinstance(node, ast.Call):
            return self.call(node, done, frontier, runs=False, succeeds=False)
        if isinstance(node, ast.Name):
            self.value(node)
            return frontier, frozenset()
        if isinstance(node, ast.Lambda):
            return self.visit_all([*node.args.defaults, *(d for d in node.args.kw_defaults if d)], done, frontier)
        if isinstance(node, _COMPREHENSIONS):
            return self.comprehension(node, done, frontier)
        if isinstance(node, ast.BoolOp | ast.Compare):
            return self.short_circuit(node, done, frontier)
        if isinstance(node, ast.IfExp):
            frontier, certain = self.visit(node.test, done, frontier)
            yes, sure = self.visit(node.body, done | certain, frontier)
            no, also = self.visit(node.orelse, done | certain, frontier)
            return yes | no, certain | (sure & also)  # one arm runs
        if isinstance(node, ast.Dict):
            pairs = [part for k, v in zip(node.keys, node.values, strict=True) for part in (k, v) if part is not None]
            return self.visit_all(pairs, done, frontier)  # key, value, key, value
        return self.visit_all(
            [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr | ast.keyword)], done, frontier
        )

    def visit_all(self, nodes: Sequence[ast.AST], done: frozenset[str], frontier: Frontier) -> Visited:
        certain: frozenset[str] = frozenset()
        for child in nodes:
            frontier, more = self.visit(child, done, frontier)
            certain |= more
        return frontier, certain

    def short_circuit(self, node: ast.BoolOp | ast.Compare, done: frozenset[str], frontier: Frontier) -> Visited:
        """`a or b`, `a and b`, `a < b < c`: only the first operands certainly run; it may stop after any."""
        first, rest = (
            (node.values[0], node.values[1:]) if isinstance(node, ast.BoolOp) else (node.left, node.comparators)
        )
        if isinstance(node, ast.Compare):
            frontier, certain = self.visit_all([first, rest[0]], done, frontier)
            rest = rest[1:]
        else:
            frontier, certain = self.visit(first, done, frontier)
        stops = set(frontier)
        for operand in rest:
            frontier, _maybe = self.visit(operand, done | certain, frontier)
            stops |= frontier
        return frozenset(stops), certain

    def value(self, name: ast.Name) -> None:
        """A name read (not called): a callee used as a value is a dynamic use."""
        if (
            name.id in self.callees
            and isinstance(name.ctx, ast.Load)
            and (not self.scopes.is_script_name(name) or name.id in self.rebound)
        ):
            self.flow.dynamic.append((name.id, name.lineno, self.context))

    def call(self, node: ast.Call, done: frozenset[str], frontier: Frontier, *, runs: bool, succeeds: bool) -> Visited:
        """A call; `runs`: its coroutine is awaited here (an `async def` body runs here); `succeeds`: it
        certainly completed successfully when the evaluation goes on."""
        func = node.func
        join_kind = self.join_name(func)
        if join_kind is not None:
            return self.join_(node, join_kind, done, frontier, runs=runs)
        certain: frozenset[str] = frozenset()
        if not isinstance(func, ast.Name):
            frontier, certain = self.visit(func, done, frontier)
        more_frontier, more = self.visit_all(_arguments(node), done, frontier)
        frontier, certain = more_frontier, certain | more
        at = done | certain  # the arguments completed before the call starts
        if not isinstance(func, ast.Name):
            return frontier, certain
        options: list[tuple[Frontier, frozenset[str]]] = []
        function = self.scopes.function(func)
        if function is not None:
            options.append(self.inline(function, at, frontier, runs=runs, line=node.lineno))
        if func.id in self.callees and (not self.scopes.is_script_name(func) or func.id in self.rebound):
            node_id = self.node(func.id, node.lineno, frontier, at)
            sure = succeeds and not self.scopes.is_script_name(func) and func.id not in self.rebound
            options.append((frozenset({node_id}), frozenset({func.id}) if sure else frozenset()))
        if not options:
            return frontier, certain
        return frozenset().union(*(f for f, _c in options)), certain | frozenset.intersection(*(c for _f, c in options))

    def inline(self, function: Function, done: frozenset[str], frontier: Frontier, *, runs: bool, line: int) -> Visited:
        """A script function's body at its call, with the caller's state and loops."""
        if isinstance(function, ast.AsyncFunctionDef) and not runs:
            self.values.add(id(function))  # its body runs where the coroutine is awaited, unknown here
            return frontier, frozenset()
        if id(function) in self.stack:
            return frontier, frozenset()  # a recursive call: the loop around the outer call covers it
        self.inlined += 1
        if len(self.flow.nodes) > INLINE_LIMIT or self.inlined > INLINE_LIMIT:
            self.values.add(id(function))
            return frontier, frozenset()
        recursive = id(function) in self.scopes.recursive
        saved = self.context
        region: list[str] = []
        self.context = dataclasses.replace(saved, via=(*saved.via, line))
        if recursive:  # a cycle of calls: an unbounded loop whose calls may follow each other in any order
            self.context = dataclasses.replace(self.context, loops=(*saved.loops, None))
            self.regions.append(region)
        self.stack.append(id(function))
        end = self.body_of(function, State(done, frontier))
        self.stack.pop()
        self.context = saved
        if recursive:
            self.regions.pop()
            if id(region) in self.outliving:
                self.loose.update(region)
            for node in region:
                self.link(frontier, node, 'next')
                self.link(frozenset(region), node, 'loop')
            end = State(end.done, end.frontier | frozenset(region)) if not end.dead else end
        if end.dead:
            return frontier, frozenset()  # it never returns: what follows never runs
        return end.frontier, end.done

    def body_of(self, function: Function, state: State) -> State:
        frame: list[_Jump] = []
        self.frames.append(frame)
        loops, self.loops = self.loops, []
        if isinstance(function, ast.Lambda):
            end = self.expression(function.body, state)
        else:
            end = self.block(function.body, state)
        self.loops = loops
        self.frames.pop()
        return join(end, *(j.state for j in frame))

    def join_(self, node: ast.Call, kind: str, done: frozenset[str], frontier: Frontier, *, runs: bool) -> Visited:
        """A join: its arguments start together from the same point and run beside each other."""
        saved = self.context
        self.context = dataclasses.replace(saved, gather=True)
        arms: list[list[str]] = []
        exits: list[Frontier] = []
        certain: frozenset[str] = frozenset()
        succeeds = runs and kind in SUCCESS_JOINS
        for arg in _arguments(node):
            first = len(self.flow.nodes)
            value = arg.value if isinstance(arg, ast.keyword) else arg
            if isinstance(value, ast.Call):
                out, sure = self.call(value, done, frontier, runs=runs, succeeds=succeeds)
            elif isinstance(value, ast.Starred) and isinstance(value.value, _COMPREHENSIONS):
                out, sure = self.comprehension(value.value, done, frontier, arm=(runs, succeeds))
            else:
                out, sure = self.visit(arg, done, frontier)
            arm = self.ids(first)
            if kind not in SUCCESS_JOINS:
                out = out | frozenset(arm)  # it may stop at any of its calls (a failure it keeps, a cancellation)
            elif (len(node.args) + len(node.keywords) > 1 or isinstance(value, ast.Starred)) and self.coroutine(value):
                # When another argument fails, the gather raises but a script coroutine goes on running
                # (measured in Monty 1.4.0): its calls may come between any later ones. A recursive call
                # has no nodes of its own here: its calls are those of the recursion being walked.
                self.loose.update(arm)
                if self.recursive_call(value):
                    self.outliving.update(id(region) for region in self.regions)
            arms.append(arm)
            exits.append(out)
            certain |= sure if succeeds else frozenset()
        self.context = saved
        for i, arm in enumerate(arms):
            for a in arm:
                for b in (b for other in arms[:i] for b in other):
                    self.flow.siblings |= {(a, b), (b, a)}
                    self.link({a}, b, 'beside')
                    self.link({b}, a, 'beside')
        return (frozenset().union(*exits) if exits else frontier), certain

    def join_name(self, func: ast.expr) -> str | None:
        """The join a call's function is: a helper of the prelude, or asyncio's gather however it is imported
        (`asyncio.gather`, `aio.gather`, `from asyncio import gather`); a name the script rebinds is none."""
        if isinstance(func, ast.Attribute) and func.attr == 'gather' and isinstance(func.value, ast.Name):
            module = self.scopes.imported(func.value) if self.scopes.is_script_name(func.value) else func.value.id
            return 'gather' if module == 'asyncio' else None  # (the prelude imports asyncio for every script)
        if isinstance(func, ast.Name) and self.scopes.is_script_name(func):
            return 'gather' if self.scopes.imported(func) == 'asyncio.gather' else None
        if isinstance(func, ast.Name) and func.id in JOINS:
            return func.id
        return None

    def recursive_call(self, arg: ast.AST) -> bool:
        """Whether a join's argument calls a script function being walked (a recursion), which `inline` skips."""
        function = (
            self.scopes.function(arg.func) if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) else None
        )
        return function is not None and id(function) in self.stack

    def coroutine(self, arg: ast.AST) -> bool:
        """Whether a join's argument is (or, starred, makes) coroutines of the script's own functions."""
        if isinstance(arg, ast.Starred) and isinstance(arg.value, _COMPREHENSIONS):
            arg = arg.value.value if isinstance(arg.value, ast.DictComp) else arg.value.elt
        return (
            isinstance(arg, ast.Call)
            and isinstance(arg.func, ast.Name)
            and isinstance(self.scopes.function(arg.func), ast.AsyncFunctionDef)
        )

    def comprehension(
        self,
        node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
        done: frozenset[str],
        frontier: Frontier,
        *,
        arm: tuple[bool, bool] | None = None,
    ) -> Visited:
        """A comprehension: nested loops over its generators, each bounded by its literal iterable. As the
        starred argument of a join (`arm`: runs, succeeds), each element's call is one of its arguments."""
        generators = node.generators
        frontier, certain = self.visit(generators[0].iter, done, frontier)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        first = len(self.flow.nodes)

        def level(i: int, state: State) -> State:
            def turn(s: State) -> State:
                stops = []
                for condition in generators[i].ifs:  # a false filter ends the turn: the bound stays an upper bound
                    s = self.expression(condition, s)
                    stops.append(s)
                if i + 1 < len(generators):
                    s = level(i + 1, self.expression(generators[i + 1].iter, s))
                else:
                    for part in parts:
                        s = self.element(part, s, arm)
                return join(s, *stops)

            back, _loop = self.iterate(state, self.bound(generators[i].iter), turn)
            return join(state, back)

        end = level(0, State(done | certain, frontier))
        if arm is not None:  # its elements run beside each other
            calls = self.ids(first)
            for a in calls:
                for b in calls:
                    self.link({a}, b, 'beside')
        return end.frontier, certain

    def element(self, part: ast.expr, state: State, arm: tuple[bool, bool] | None) -> State:
        if arm is None or not isinstance(part, ast.Call):
            return self.expression(part, state)
        frontier, _certain = self.call(part, state.done, state.frontier, runs=arm[0], succeeds=arm[1])
        return State(state.done, frontier)


def _arguments(node: ast.Call) -> list[ast.AST]:
    """A call's arguments in evaluation order: the positional ones (with `*rest`), then the keywords, whatever
    the source order (`f(x=a(), *b())` calls b first, in Python and in the sandbox)."""
    return [*node.args, *node.keywords]


def max_calls(context: Context) -> int | None:
    """The most times a site in `context` runs: the product of its loops' bounds (None if one has none)."""
    if any(b is None for b in context.loops):
        return None
    return math.prod(b for b in context.loops if b is not None)
