"""Static analysis of a script before it runs: every call it can make, how often, in what order, and
which rules a path can break.

The analysis reads the script's syntax tree (nothing runs). What it guarantees, when `complete`:
- every call a run of the script makes is a `CallSite` of `calls` at its line, or a call through a
  callee used as a value (an alias, a list of functions), which is a `dynamic` use at the line of the
  value (where and in what order such a value is called cannot be read from the source);
- the calls a run makes at one (callee, line) are at most the sum of `max_calls` over its sites there;
  `bounds` sums them per callee (None: unbounded, or used as a value);
- every transition a run makes between consecutive calls at sites, including `start` to its first call
  and its last call to `end`, is an edge of `edges` between nodes of those sites;
- every `requires=` rule some path can break is in `violations`.
This holds across the script's own functions (each call of a helper is analysed where it is made),
recursion, lambdas, default arguments, comprehensions, short-circuit and conditional expressions,
try/except/finally, loops, joins, and names that shadow a callee: `_flow` says how. What the analysis
cannot follow (`eval`/`exec`, names looked up by a computed string) is listed in `incomplete` with its
line; the checker refuses it in workflow scripts, with classes and shadowed callee names (`_refusals`),
and `Harness(strict=True)` refuses an incomplete analysis.

Rules (`requires=`) are checked along the control flow with a must-analysis: at each call site, the
set of callees that have certainly completed successfully on every path to it. A site whose
predecessor is not certain is a violation ("issue_refund can run before check_entitlement").
Conditions on values (`same=`, `when=`) cannot be decided statically; they are enforced at every
call at run time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .._catalog._rules import Access, After
from ._flow import DRAWN, Context, Walker, max_calls
from ._parse import parse_script
from ._refusals import unfollowable


@dataclass(frozen=True)
class CallSite:
    """One place in the script where a callee is called (or, in `Analysis.dynamic`, used as a value)."""

    callee: str
    line: int
    in_loop: bool = False
    """In a loop, counting the loops around the calls of the helper it is in (and recursion)."""
    loop_bound: int | None = None
    """Product of the literal bounds of those loops; None in a loop without one (or no loop)."""
    in_gather: bool = False
    in_except: bool = False
    max_calls: int | None = 1
    """The most times this site can run in one run of the script; None: no bound. Several sites may share a
    (callee, line) (a helper called from two places, `f(x), f(y)`): the calls made there are at most the sum."""
    via: tuple[int, ...] = ()
    """For a site in a script function, the lines of the calls that lead to it (outermost first)."""

    @property
    def unbounded(self) -> bool:
        return self.max_calls is None


@dataclass
class Analysis:
    """What a script can do, before it runs (see the module docstring)."""

    calls: list[CallSite] = field(default_factory=list)
    dynamic: list[CallSite] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """Per rule that some path can break, a sentence saying where and how; likewise a call the run's allow/deny
    refuses, a guarded or side-effecting callee used as a value, and a side effect with no bound (`analyze`)."""
    nodes: list[CallSite] = field(default_factory=list)
    """The flow graph's nodes: call sites (index = node id); 'start' and 'end' are implicit."""
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    """(from, to, kind): ids `n<i>`, `start`, `end`. The flow as written is `next` and `loop` (back to a loop's
    start); `beside` (calls of a join's arguments, which interleave), `raise` (to the end) and `any` (to and
    from a function used as a value) complete the over-approximation and are not drawn."""
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
    def findings(self) -> list[str]:
        """What `check` warns of (and `strict=True` refuses): the violations, then what could not be followed."""
        return [
            *self.violations,
            *(
                f'line {line}: {reason}; the analysis cannot tell which calls it makes, so '
                'strict mode refuses the script'
                for line, reason in self.incomplete
            ),
        ]

    @property
    def bounds(self) -> dict[str, int | None]:
        """Per callee the script can reach, the most calls it can make of it: the sum over its sites; None when
        a site is unbounded or the callee is used as a value (a value can be called anywhere, any number of
        times). A callee that is not a key cannot be called."""
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
        """Call sites with no bound: in a loop with no literal bound (`while`, `for` over a call result or a
        variable), in recursion, or in a function used as a value."""
        return [site for site in self.calls if site.unbounded]

    def text(self) -> str:
        """The analysis as lines a person reads (`harness check --graph`)."""
        lines = [f'callees: {", ".join(sorted(self.callees)) or "none"}']
        bounds = self.bounds
        if bounds:
            lines.append(
                'most calls: '
                + ', '.join(
                    f'{callee} {"unbounded" if bound is None else bound}' for callee, bound in sorted(bounds.items())
                )
            )
        for site in self.calls:
            where = ['unbounded' if site.max_calls is None else f'max {site.max_calls}']
            if site.via:
                where.append('called from line ' + ' > '.join(str(line) for line in site.via))
            if site.in_gather:
                where.append('gather')
            if site.in_except:
                where.append('except')
            lines.append(f'  line {site.line}: {site.callee}  [{", ".join(where)}]')
        lines.extend(f'  line {site.line}: {site.callee} used as a value (dynamic, unbounded)' for site in self.dynamic)
        lines.extend(f'violation: {v}' for v in self.violations)
        lines.extend(f'incomplete: line {line}: {reason}' for line, reason in self.incomplete)
        return '\n'.join(lines)

    @property
    def flow(self) -> list[tuple[str, str, str]]:
        """The edges of the flow as written (`next`, `loop`): what `mermaid` draws and `path` follows."""
        return [edge for edge in self.edges if edge[2] in DRAWN]

    def mermaid(self, taken: Sequence[tuple[str, int | None]] = ()) -> str:
        """A flowchart of the script's possible calls; with `taken` ((callee, line) in call order, as a
        run's journal holds them), the path the run took is drawn thick and its calls highlighted."""
        path = self.path(taken)
        lines = ['flowchart TD', '  start([start])', '  end_([end])']
        lines.extend(f'  n{i}["{site.callee}<br/>line {site.line}"]' for i, site in enumerate(self.nodes))
        drawn = self.flow
        for src, dst, kind in drawn:
            arrow = '==>' if (src, dst) in path else ('-.->' if kind == 'loop' else '-->')
            lines.append(f'  {_id(src)} {arrow} {_id(dst)}')
        visited = sorted({node for edge in path for node in edge if node.startswith('n')})
        if visited:
            lines.append('  classDef taken fill:#d4f7d4,stroke:#2a2;')
            lines.append(f'  class {",".join(visited)} taken;')
        thick = [str(i) for i, (src, dst, _kind) in enumerate(drawn) if (src, dst) in path]
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
        walk = _Walk(self.flow, self.siblings)
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

    Raises `SyntaxError` for a script that does not parse (the type check reports it first), `ScriptTooComplex`
    (a `WorkflowTypeError`) for one past the host's limits (`_parse`).
    """
    tree = parse_script(code)
    walker = Walker(tree, frozenset(callees), dict(requires or {}))
    flow = walker.run()
    sites = [_site(callee, line, context) for callee, line, context in flow.nodes]
    result = Analysis(
        calls=sites,
        nodes=list(sites),
        edges=flow.edges,
        siblings=flow.siblings,
        dynamic=[
            dataclasses.replace(_site(callee, line, context), max_calls=None) for callee, line, context in flow.dynamic
        ],
        violations=list(dict.fromkeys(flow.violations)),  # a helper called twice breaks a rule once per line
        incomplete=list(
            dict.fromkeys((getattr(node, 'lineno', 0), reason) for node, reason in unfollowable(tree, walker.scopes))
        ),
    )
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
        dict.fromkeys(
            f'line {site.line}: {site.callee} has side effects and is called in a loop with no literal bound (or '
            'through recursion, or in a function used as a value), so it can run any number of times.'
            for site in result.unbounded
            if site.callee in effects
        )
    )
    return result


def _site(callee: str, line: int, context: Context) -> CallSite:
    bound = max_calls(context)
    return CallSite(
        callee,
        line,
        in_loop=bool(context.loops),
        loop_bound=bound if context.loops else None,
        in_gather=context.gather,
        in_except=context.except_,
        via=context.via,
        max_calls=bound,
    )
