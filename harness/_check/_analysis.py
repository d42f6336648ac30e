"""Static analysis of a script before it runs: every call it can make, and which rules a path can break.

The analysis reads the script's syntax tree (nothing runs) and is an upper bound: every call a run
of the script can make is a call site here, or, when a callee is used as a value (an alias, a list
of functions), a `dynamic` use, never silently missed: a call through such a value is dispatched
like a direct one, but where and in what order cannot be read from the source. Each site knows whether it sits in a loop
(with the loop's literal bound, or none), in a gather, or in an `except` branch.

Rules (`requires=`) are checked along the script's control flow with a must-analysis: at each call
site, the set of callees that have certainly completed successfully on every path to it. A site
whose predecessor is not certain is a violation ("issue_refund can run before check_entitlement").
Conditions on values (`same=`, `when=`) cannot be decided statically; they are enforced at every
call at run time. Calls inside helper functions defined in the script are analysed as if the
helper could be called first thing.
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .._catalog._rules import Access, After

GATHERS = frozenset({'gather', 'settle_all'})
"""Join helpers whose arguments run concurrently (`asyncio.gather`, `settle_all`)."""
SUCCESS_JOINS = frozenset({'gather'})
"""Joins that succeed only if every argument did: their arguments are certainly done after the await."""


@dataclass(frozen=True)
class CallSite:
    """One place in the script where a callee is called (or, in `Analysis.dynamic`, used as a value)."""

    callee: str
    line: int
    in_loop: bool = False
    loop_bound: int | None = None
    """Product of the literal bounds of the enclosing loops; None in a loop without one (or no loop)."""
    in_gather: bool = False
    in_except: bool = False
    max_calls: int | None = 1
    """The most times this site can run in one run of the script; None: no bound. Several sites may share a
    (callee, line) (a helper called from two places, `f(x), f(y)`): the calls made there are at most the sum."""

    @property
    def unbounded(self) -> bool:
        return self.max_calls is None


@dataclass
class Analysis:
    """What a script can do, before it runs (see the module docstring)."""

    calls: list[CallSite] = field(default_factory=list)
    dynamic: list[CallSite] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """Per rule that some path can break, a sentence saying where and how."""
    nodes: list[CallSite] = field(default_factory=list)
    """The flow graph's nodes: call sites (index = node id); 'start' and 'end' are implicit."""
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    """(from, to, kind): ids `n<i>`, `start`, `end`; kind `next` or `loop` (back to a loop's start)."""
    siblings: set[tuple[str, str]] = field(default_factory=set)
    """(a, b) and (b, a) for nodes in different arguments of one join: they run beside each other, so an
    edge between them (a loop's edge back) is never how a run goes from one to the other in one turn."""
    incomplete: list[tuple[int, str]] = field(default_factory=list)
    """(line, reason) for each construct the analysis could not follow; empty when it is complete."""

    @property
    def complete(self) -> bool:
        """Whether every call the script can make is accounted for by `calls` and `dynamic`."""
        return not self.incomplete

    @property
    def bounds(self) -> dict[str, int | None]:
        """Per callee, the most calls the script can make of it: the sum over its sites; None when a site
        is unbounded or the callee is used as a value (a value can be called anywhere, any number of times)."""
        found: dict[str, int | None] = {}
        for site in self.calls:
            before = found.get(site.callee, 0)
            found[site.callee] = None if before is None or site.max_calls is None else before + site.max_calls
        for site in self.dynamic:
            found[site.callee] = None
        return found

    @property
    def callees(self) -> set[str]:
        """Every callee the script can reach, directly or through a value."""
        return {site.callee for site in (*self.calls, *self.dynamic)}

    @property
    def unbounded(self) -> list[CallSite]:
        """Call sites in loops with no literal bound (`while`, `for` over a call result or a variable)."""
        return [site for site in self.calls if site.unbounded]

    def text(self) -> str:
        """The analysis as lines a person reads (`harness check --graph`)."""
        lines = [f'callees: {", ".join(sorted(self.callees)) or "none"}']
        for site in self.calls:
            where = []
            if site.in_loop:
                where.append(f'loop x{site.loop_bound}' if site.loop_bound is not None else 'loop (unbounded)')
            if site.in_gather:
                where.append('gather')
            if site.in_except:
                where.append('except')
            lines.append(f'  line {site.line}: {site.callee}' + (f'  [{", ".join(where)}]' if where else ''))
        lines.extend(f'  line {site.line}: {site.callee} used as a value (dynamic)' for site in self.dynamic)
        lines.extend(f'violation: {v}' for v in self.violations)
        return '\n'.join(lines)

    def mermaid(self, taken: Sequence[tuple[str, int | None]] = ()) -> str:
        """A flowchart of the script's possible calls; with `taken` ((callee, line) in call order, as a
        run's journal holds them), the path the run took is drawn thick and its calls highlighted."""
        path = self.path(taken)
        lines = ['flowchart TD', '  start([start])', '  end_([end])']
        lines.extend(f'  n{i}["{site.callee}<br/>line {site.line}"]' for i, site in enumerate(self.nodes))
        for src, dst, kind in self.edges:
            arrow = '==>' if (src, dst) in path else ('-.->' if kind == 'loop' else '-->')
            lines.append(f'  {_id(src)} {arrow} {_id(dst)}')
        visited = sorted({node for edge in path for node in edge if node.startswith('n')})
        if visited:
            lines.append('  classDef taken fill:#d4f7d4,stroke:#2a2;')
            lines.append(f'  class {",".join(visited)} taken;')
        thick = [str(i) for i, (src, dst, _kind) in enumerate(self.edges) if (src, dst) in path]
        if thick:
            lines.append(f'  linkStyle {",".join(thick)} stroke:#2a2,stroke-width:3px;')
        return '\n'.join(lines)

    def path(self, taken: Sequence[tuple[str, int | None]]) -> set[tuple[str, str]]:
        """The edges a run took, from its calls `(callee, line)` in call order.

        A call is reached from every node that may have run just before it: a source of one of its edges
        that the run has visited and that no later call has followed in sequence (a follower with an edge
        to this call). The calls of one gather (`siblings`) ran beside each other, never in sequence, even
        where a loop's edge back joins them: each starts from what ran before the gather, and the call
        after it is reached from each of them. Failing that, from the latest visited source. The end is
        reached the same way. Calls of one callee on one line (a gather's `f(x), f(y)`) are matched to
        those sites in turn, in the order the script makes them.
        """
        if not taken:
            return set()
        sites: dict[tuple[str, int], list[str]] = {}
        for i, site in enumerate(self.nodes):
            sites.setdefault((site.callee, site.line), []).append(f'n{i}')
        walk = _Walk(self.edges, self.siblings)
        turns: dict[tuple[str, int], int] = {}
        for callee, line in taken:
            if line is None or (callee, line) not in sites:
                continue
            candidates = sites[(callee, line)]
            turn = turns.get((callee, line), 0)
            turns[(callee, line)] = turn + 1
            walk.reach(candidates[turn % len(candidates)])
        walk.reach('end')
        return walk.taken


@dataclass(eq=False)
class _Visit:
    node: str
    order: int
    followers: set[str] = field(default_factory=set)
    """Nodes the run went on to from this visit."""
    gather: _Gather | None = None
    """The run of a join this visit is a call of (a node with siblings only)."""


@dataclass(eq=False)
class _Gather:
    """One run of a join's calls: the nodes visited in it so far and the visits that ran just before it."""

    members: set[str]
    sources: list[_Visit]


class _Walk:
    """The path a run takes over the flow graph (`Analysis.path`): the latest visit of each node, and
    which nodes each visit led to. Only the latest visit of a node matters: a later one supersedes it,
    except as a source of the join its successor is in (the siblings of that successor start from it too)."""

    def __init__(self, edges: Iterable[tuple[str, str, str]], siblings: Iterable[tuple[str, str]] = ()) -> None:
        self.edges = {(src, dst) for src, dst, _kind in edges}
        self.incoming: dict[str, set[str]] = {}
        for src, dst in self.edges:
            self.incoming.setdefault(dst, set()).add(src)
        self.siblings: dict[str, set[str]] = {}
        for a, b in siblings:
            self.siblings.setdefault(a, set()).add(b)
        self.latest: dict[str, _Visit] = {'start': _Visit('start', 0)}
        self.taken: set[tuple[str, str]] = set()
        self.order = 0

    def reach(self, node: str) -> None:
        gather = self.open_gather(node)
        beside = gather.members if gather is not None else set()
        # The calls of this join ran beside `node`: not before it, whatever edge joins them.
        visits = [self.latest[src] for src in self.incoming.get(node, ()) if src in self.latest and src not in beside]
        if gather is not None:
            visits += [v for v in gather.sources if (v.node, node) in self.edges and v not in visits]
        # A follower with an edge to `node` ran between that visit and `node`, unless it is a call of
        # this join (then it ran beside `node`, and the visit may still lead here).
        before = [v for v in visits if not any((f, node) in self.edges for f in v.followers - beside)]
        if not before and visits:
            before = [max(visits, key=lambda v: v.order)]
        for visit in before:
            self.taken.add((visit.node, node))
            visit.followers.add(node)
        self.order += 1
        if gather is not None:
            gather.members.add(node)
            gather.sources.extend(v for v in before if v not in gather.sources)
        elif node in self.siblings:
            gather = _Gather({node}, before)
        self.latest[node] = _Visit(node, self.order, gather=gather)

    def open_gather(self, node: str) -> _Gather | None:
        """The join run `node` is the next call of: that of its latest-visited sibling, unless that run
        has called `node` or a call of `node`'s own argument already (then `node` starts the join's next
        run, as in a loop's next turn)."""
        siblings = self.siblings.get(node, set())
        near = [self.latest[s] for s in siblings if s in self.latest]
        if not near:
            return None
        gather = max(near, key=lambda v: v.order).gather
        return gather if gather is not None and gather.members <= siblings else None


def _id(node: str) -> str:
    return 'end_' if node == 'end' else node


def analyze(
    code: str,
    callees: Iterable[str],
    *,
    requires: Mapping[str, tuple[After, ...]] | None = None,
    side_effects: Iterable[str] = (),
    access: Access | None = None,
) -> Analysis:
    """Analyse `code` against a catalog: its callee names, their rules and which have side effects.

    Raises `SyntaxError` for a script that does not parse (the type check reports it first).
    """
    tree = ast.parse(code)
    walker = _Walker(frozenset(callees), dict(requires or {}))
    walker.block(tree.body, _State(frozenset(), {'start'}))
    walker.finish()
    result = walker.result
    effects = set(side_effects)
    access = access or Access()
    for site in result.calls:
        denied = access.refusal(site.callee)
        if denied is not None:
            result.violations.append(f'line {site.line}: {denied}, but the script calls it.')
    for site in result.dynamic:
        if walker.requires.get(site.callee) or site.callee in effects:
            result.violations.append(
                f'line {site.line}: {site.callee} is used as a value, so the order of its calls cannot be checked '
                'before the run; call it directly.'
            )
    result.violations.extend(
        f'line {site.line}: {site.callee} has side effects and is called in a loop with no literal bound.'
        for site in result.unbounded
        if site.callee in effects
    )
    return result


@dataclass(frozen=True)
class _State:
    done: frozenset[str]
    """Callees that certainly completed successfully on every path to here."""
    frontier: set[str]
    """Graph nodes that may have run last before here."""


@dataclass
class _Context:
    loops: tuple[int | None, ...] = ()
    gather: int = 0
    except_: int = 0


class _Walker:
    def __init__(self, callees: frozenset[str], requires: dict[str, tuple[After, ...]]) -> None:
        self.callees = callees
        self.requires = requires
        self.result = Analysis()
        self.context = _Context()
        self.ends: set[str] = set()

    def finish(self) -> None:
        for node in sorted(self.ends):
            self.result.edges.append((node, 'end', 'next'))

    # -- statements ----------------------------------------------------------------------------

    def block(self, body: Sequence[ast.stmt], state: _State, *, top: bool = True) -> _State:
        for stmt in body:
            state = self.statement(stmt, state)
        if top:
            self.ends |= state.frontier
        return state

    def statement(self, stmt: ast.stmt, state: _State) -> _State:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for default in [*stmt.args.defaults, *stmt.args.kw_defaults, *stmt.decorator_list]:
                if default is not None:
                    state = self.expression(default, state)
            saved, self.context = self.context, _Context()
            self.block(stmt.body, _State(frozenset(), {'start'}), top=False)  # a helper may run first
            self.context = saved
            return state
        if isinstance(stmt, ast.If):
            state = self.expression(stmt.test, state)
            yes = self.block(stmt.body, state, top=False)
            no = self.block(stmt.orelse, state, top=False)
            return _join(yes, no)
        if isinstance(stmt, ast.For | ast.AsyncFor):
            state = self.expression(stmt.iter, state)
            return self.loop(stmt.body, stmt.orelse, state, _bound(stmt.iter))
        if isinstance(stmt, ast.While):
            state = self.expression(stmt.test, state)
            return self.loop(stmt.body, stmt.orelse, state, None)
        if isinstance(stmt, ast.Try | ast.TryStar):
            return self.try_(stmt, state)
        if isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                state = self.expression(item.context_expr, state)
            return self.block(stmt.body, state, top=False)
        if isinstance(stmt, ast.Match):
            state = self.expression(stmt.subject, state)
            branches = [self.block(case.body, state, top=False) for case in stmt.cases]
            joined = state
            for branch in branches:
                joined = _join(joined, branch)
            return joined
        # Simple statements: their expressions, in order.
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                state = self.expression(child, state)
        return state

    def loop(self, body: list[ast.stmt], orelse: list[ast.stmt], state: _State, bound: int | None) -> _State:
        saved = self.context
        self.context = _Context(loops=(*saved.loops, bound), gather=saved.gather, except_=saved.except_)
        first = len(self.result.nodes)
        inside = self.block(body, state, top=False)
        entries = {dst for src, dst, _kind in self.result.edges if src in state.frontier and dst.startswith('n')
                   and int(dst[1:]) >= first}
        for src in sorted(inside.frontier - state.frontier):
            for dst in sorted(entries):
                self.result.edges.append((src, dst, 'loop'))
        self.context = saved
        # The body may run zero times: what it completes is not certain after the loop.
        after = _State(state.done, state.frontier | inside.frontier)
        return self.block(orelse, after, top=False)

    def try_(self, stmt: ast.Try | ast.TryStar, state: _State) -> _State:
        first = len(self.result.nodes)
        body = self.block(stmt.body, state, top=False)
        body = self.block(stmt.orelse, body, top=False)
        raised = {f'n{i}' for i in range(first, len(self.result.nodes))}
        # A handler may start after any call in the body failed: only what was done before is certain.
        handler_start = _State(state.done, state.frontier | raised)
        joined = body
        saved = self.context
        self.context = _Context(loops=saved.loops, gather=saved.gather, except_=saved.except_ + 1)
        for handler in stmt.handlers:
            joined = _join(joined, self.block(handler.body, handler_start, top=False))
        self.context = saved
        return self.block(stmt.finalbody, joined, top=False)

    # -- expressions ---------------------------------------------------------------------------

    def expression(self, expr: ast.expr, state: _State) -> _State:
        """Visit `expr` in evaluation order; calls chain one after another, a gather's fan out."""
        awaited: set[str] = set()
        frontier = set(state.frontier)
        frontier = self.visit(expr, state.done, frontier, awaited, direct_await=False)
        return _State(state.done | awaited, frontier)

    def visit(self, node: ast.AST, done: frozenset[str], frontier: set[str], awaited: set[str], *,
              direct_await: bool) -> set[str]:
        if isinstance(node, ast.Await):
            return self.visit(node.value, done, frontier, awaited, direct_await=True)
        if isinstance(node, ast.Call):
            return self.call(node, done, frontier, awaited, direct_await=direct_await)
        if isinstance(node, ast.Name) and node.id in self.callees and isinstance(node.ctx, ast.Load):
            self.result.dynamic.append(self.site(node.id, node.lineno))
            return frontier
        if isinstance(node, ast.Lambda):
            saved, self.context = self.context, _Context()
            self.visit(node.body, frozenset(), {'start'}, set(), direct_await=False)
            self.context = saved
            return frontier
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return self.comprehension(node, done, frontier, awaited)
        for child in ast.iter_child_nodes(node):
            frontier = self.visit(child, done, frontier, awaited, direct_await=False)
        return frontier

    def call(self, node: ast.Call, done: frozenset[str], frontier: set[str], awaited: set[str], *,
             direct_await: bool) -> set[str]:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.callees:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                frontier = self.visit(arg, done, frontier, awaited, direct_await=False)
            site = self.site(func.id, node.lineno)
            self.result.calls.append(site)
            self.check_rules(site, done | awaited)
            node_id = f'n{len(self.result.nodes)}'
            self.result.nodes.append(site)
            self.result.edges.extend((src, node_id, 'next') for src in sorted(frontier))
            if direct_await:
                awaited.add(func.id)
            return {node_id}
        join = _join_name(func)
        if join is None:
            frontier = self.visit(func, done, frontier, awaited, direct_await=False)
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                frontier = self.visit(arg, done, frontier, awaited, direct_await=False)
            return frontier
        # A join: its arguments start together from the same point and end together; none of them
        # is certainly done before another starts.
        self.context.gather += 1
        branches: set[str] = set()
        before = set(awaited)
        finished: set[str] = set()
        arms: list[list[str]] = []
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            direct = isinstance(arg, ast.Call) and direct_await and join in SUCCESS_JOINS
            seen = set(before)
            first = len(self.result.nodes)
            branches |= self.visit(arg, done, set(frontier), seen, direct_await=direct)
            arms.append([f'n{i}' for i in range(first, len(self.result.nodes))])
            if direct:
                finished |= seen - before
        self.context.gather -= 1
        for i, arm in enumerate(arms):
            for a, b in itertools.product(arm, itertools.chain.from_iterable(arms[:i])):
                self.result.siblings |= {(a, b), (b, a)}
        awaited |= finished
        return branches or frontier

    def comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                      done: frozenset[str], frontier: set[str], awaited: set[str]) -> set[str]:
        bound: int | None = 1
        for generator in node.generators:
            frontier = self.visit(generator.iter, done, frontier, awaited, direct_await=False)
            this = _bound(generator.iter)
            bound = None if bound is None or this is None or generator.ifs else bound * this
        saved = self.context
        self.context = _Context(loops=(*saved.loops, bound), gather=saved.gather, except_=saved.except_)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        parts += [cond for generator in node.generators for cond in generator.ifs]
        inner = set(frontier)
        for part in parts:
            inner = self.visit(part, done, inner, set(), direct_await=False)
        self.context = saved
        return frontier | inner

    def site(self, callee: str, line: int) -> CallSite:
        loops = self.context.loops
        bound = None if not loops or any(b is None for b in loops) else math.prod(b for b in loops if b is not None)
        return CallSite(callee, line, in_loop=bool(loops), loop_bound=bound, in_gather=self.context.gather > 0,
                        in_except=self.context.except_ > 0, max_calls=bound if loops else 1)

    def check_rules(self, site: CallSite, done: frozenset[str]) -> None:
        for rule in self.requires.get(site.callee, ()):
            if rule.callee not in done:
                self.result.violations.append(
                    f'line {site.line}: {site.callee} can run before {rule.callee} has succeeded'
                    f'{rule.conditions()}; at run time such a call is refused.'
                )


def _join(a: _State, b: _State) -> _State:
    return _State(a.done & b.done, a.frontier | b.frontier)


def _join_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute) and func.attr in GATHERS:
        return func.attr
    if isinstance(func, ast.Name) and func.id in GATHERS:
        return func.id
    return None


def _bound(iterable: ast.expr) -> int | None:
    """How many times a `for` over `iterable` runs, when the source says so literally."""
    if isinstance(iterable, ast.List | ast.Tuple | ast.Set) and not any(
        isinstance(e, ast.Starred) for e in iterable.elts
    ):
        return len(iterable.elts)
    if isinstance(iterable, ast.Dict):
        return len(iterable.keys)
    if isinstance(iterable, ast.Constant) and isinstance(iterable.value, str | bytes):
        return len(iterable.value)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == 'range':
        values = [a.value for a in iterable.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
        if len(values) == len(iterable.args) and 1 <= len(values) <= 3:
            return len(range(*values))
    return None
