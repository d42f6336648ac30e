"""The analysis is sound (#23.2): differential against real runs in the real Monty sandbox.

Each corpus script (tests/helpers/soundness_corpus.py: hand-written adversarial ones and generated ones) is
checked, analysed with `h.analyze`, then run under several inputs; every run's journal (its calls in call order,
each with its callee and line) is held against the analysis:

(a) every call is a `CallSite` of `a.calls` at its (callee, line), or its callee has a `dynamic` use;
(b) per (callee, line), the calls made are at most the sum of the `max_calls` of the sites there (None:
    unbounded), and per callee at most `a.bounds[callee]`;
(c) every transition the run made (start -> first call, each call -> the next, last call -> end) is an edge of
    `a.edges` from a node of the first's sites to a node of the second's; a call that runs beside others (in a
    join's arguments, or in a script function a join runs as a task) follows some call made before it;
(d) every call a rule refused at run time (the script saw a `PermissionError`) has a violation of `a.violations`
    at its line, unless the refusal was for a value (`same=`): a predecessor had succeeded, for another ticket.
    Values are not the analysis's to decide; it promises the order, so an order the run broke must be reported.

The checker must refuse the constructs that defeat the analysis (eval, classes, rebinding a callee's name...),
and the analysis must follow every script the grammar writes (`a.complete`). The oracle is held to the same
runs: the coarsest sound analysis (any call anywhere, unbounded) must pass it, and each kind of hole in an
analysis must fail it; and where a script bounds its calls literally, the analysis must say so exactly. A miss
fails with the script, its inputs, the run's journal and what the analysis did not report. The slow tier runs a
larger generated set.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from soundness_corpus import CALLEES, HAND, INPUTS, REQUIRES, Case, generated, register

from harness import Harness, WorkflowError
from harness._check._analysis import Analysis, CallSite
from harness._records import CallRecord

JOINS = frozenset({'gather', 'settle_all', 'first_of', 'quorum'})
"""Joins that run their arguments as tasks of their own (`within` awaits its one argument in place)."""
DEFAULT_SEEDS = range(100)
SLOW_SEEDS = range(10_000, 11_000)


def harness(**kwargs: Any) -> Harness:
    # The checks are run once per script explicitly (`check`), so the runs skip the type check; no budgets and
    # no repeat limit, so a refusal is always a rule's.
    return register(
        Harness(store=':memory:', tracing=False, type_check=False, max_repeats=None, max_tool_calls=None, **kwargs)
    )


@pytest.fixture(scope='module')
def desk() -> Iterator[Harness]:
    with harness() as h:
        yield h


@pytest.fixture(scope='module')
def strict_desk() -> Iterator[Harness]:
    with harness(strict=True) as h:
        yield h


def run(h: Harness, code: str, inputs: dict[str, Any]) -> list[CallRecord]:
    """The run's catalog calls in call order (the join helpers' own host calls left out), whether it ended at
    the script's end or by an error (a run that raised makes its transition to the end from its last call too)."""
    try:
        run_id = h.run_sync(code, inputs=inputs).run_id
    except WorkflowError as exc:
        assert exc.run_id is not None, exc.message
        run_id = exc.run_id
    assert h.store is not None
    return [c for c in h.store.calls(run_id) if c.callee in CALLEES]


def joined_lines(code: str) -> set[int]:
    """The lines whose calls may run beside others: the lines of a join's arguments and, when a join runs a
    script function's coroutine (as a task whose calls interleave with the others'), the lines of every
    function of the script (any of them may run in such a task)."""
    tree = ast.parse(code)
    lines: set[int] = set()
    tasks = False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) in JOINS):
            continue
        for arg in node.args:
            lines.update(_span(arg))
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            if isinstance(inner, ast.ListComp | ast.GeneratorExp):
                inner = inner.elt
            tasks = tasks or not (isinstance(inner, ast.Call) and _name(inner.func) in CALLEES | JOINS)
    if tasks:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                lines.update(_span(node))
    return lines


def _span(node: ast.expr | ast.stmt) -> range:
    return range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def misses(a: Analysis, calls: list[CallRecord], *, joined: set[int]) -> list[str]:
    """What the run did that the analysis did not report (empty: the analysis holds for this run)."""
    sites: dict[tuple[str, int | None], list[Any]] = defaultdict(list)
    for site in a.calls:
        sites[(site.callee, site.line)].append(site)
    dynamic = {site.callee for site in a.dynamic}
    found = [
        f'call #{c.seq} {c.callee} at line {c.line} is not a reported call site (and {c.callee} has no dynamic use)'
        for c in calls
        if (c.callee, c.line) not in sites and c.callee not in dynamic
    ]
    found += _bound_misses(a, sites, calls, dynamic)
    found += _edge_misses(a, calls, dynamic, joined=joined)
    found += _violation_misses(a, calls)
    return found


def _bound_misses(
    a: Analysis, sites: dict[tuple[str, int | None], list[Any]], calls: list[CallRecord], dynamic: set[str]
) -> list[str]:
    """(b). A callee used as a value can be called through it on any line, a line of its sites too: its calls
    are held to its bound (`a.bounds`), not to its sites'."""
    found = []
    for (callee, line), count in Counter((c.callee, c.line) for c in calls if c.callee not in dynamic).items():
        bounds = [site.max_calls for site in sites.get((callee, line), ())]
        if bounds and None not in bounds and count > sum(bounds):
            found.append(f'{callee} at line {line} was called {count} times; its sites allow {sum(bounds)}')
    for callee, count in Counter(c.callee for c in calls).items():
        if callee not in a.bounds:
            found.append(f'{callee} was called {count} times; a.bounds has no entry for it')
        elif (bound := a.bounds[callee]) is not None and count > bound:
            found.append(f'{callee} was called {count} times; a.bounds says at most {bound}')
    return found


def _edge_misses(a: Analysis, calls: list[CallRecord], dynamic: set[str], *, joined: set[int]) -> list[str]:
    """(c). Outside joins, the calls' order is the order of the script's one thread: each call must follow the one
    made just before it by an edge. The arguments of a join run beside each other (a flow graph draws them as
    branches from one point, not as a chain), and a join over a script function's coroutines interleaves the
    calls of its tasks in an order the scheduler picks: so a call on one of the `joined` lines must follow some
    call made before it, or the start. Every other call is checked as in sequence: a call after a join
    follows the last call of one of its arguments, the first call follows the start; and where a task
    outlives its join (a gather raised while another of its coroutines went on) the calls it makes between
    the script's are transitions the graph must have too. A call through a value (a dynamic use) has no
    node: the flow goes on from the call before it. A call of a callee with a dynamic use may be one, or a
    call at a site of its line: nothing is asserted about the transition into it, and the next call may
    follow either."""
    nodes: dict[tuple[str, int | None], set[str]] = defaultdict(set)
    for i, site in enumerate(a.nodes):
        nodes[(site.callee, site.line)].add(f'n{i}')
    before: dict[str, set[str]] = defaultdict(set)
    """Per node (and `end`), the nodes with an edge to it."""
    for src, dst, _kind in a.edges:
        before[dst].add(src)

    def follows(here: set[str], sources: set[str]) -> bool:
        return any(before[d] & sources for d in here)

    def name(c: CallRecord | None) -> str:
        return 'the start' if c is None else f'call #{c.seq} {c.callee} (line {c.line})'

    found = []
    reached = {'start'}
    """The nodes of the calls made so far (and the start)."""
    previous: tuple[CallRecord | None, set[str]] | None = (None, {'start'})
    """The call just made, and the nodes it may have been; None when it has none (a miss (a) reports)."""
    for c in calls:
        here = nodes.get((c.callee, c.line), set())
        if c.callee in dynamic:
            # Made through the value (no node: the flow goes on from the call before), or at a site here.
            previous = (c, here | previous[1]) if previous is not None else None
            reached |= here
            continue
        if not here:
            found.append(f'{name(c)} has no node in the flow graph')
        elif c.line in joined:
            if not follows(here, reached):
                found.append(f'no edge from the start or any call made before it to {name(c)}')
        elif previous is not None and not follows(here, previous[1]):
            found.append(f'no edge from {name(previous[0])} to {name(c)}')
        previous = (c, here) if here else None
        reached |= here
    if previous is not None and not follows({'end'}, previous[1]):
        found.append(f'no edge from {name(previous[0])} to the end')
    return found


def _violation_misses(a: Analysis, calls: list[CallRecord]) -> list[str]:
    """(d). A callee used as a value is called where the value is: its violation may name the line of the value."""
    used: dict[str, set[int]] = defaultdict(set)
    for site in a.dynamic:
        used[site.callee].add(site.line)
    found = []
    for c in calls:
        if c.status != 'refused' or c.callee not in REQUIRES:
            continue
        predecessor, same = REQUIRES[c.callee]
        earlier = [p for p in calls if p.seq < c.seq and p.callee == predecessor and p.status == 'ok']
        if earlier and not any(all(p.arguments.get(f) == c.arguments.get(f) for f in same) for p in earlier):
            continue  # refused for its value only: a predecessor succeeded, for another ticket
        lines = {c.line, *used[c.callee]}
        if not any(v.startswith(f'line {line}:') and c.callee in v for v in a.violations for line in lines):
            found.append(
                f'call #{c.seq} {c.callee} at line {c.line} was refused by its rule ({c.error}); '
                'a.violations has nothing for that line'
            )
    return found


def numbered(code: str) -> str:
    return '\n'.join(f'{i:3} | {line}' for i, line in enumerate(code.splitlines(), 1))


def differential(h: Harness, strict: Harness | None, c: Case, inputs: list[dict[str, Any]], *, idle: bool) -> None:
    """Check, analyse and run `c` under each of `inputs`; fail with every miss."""
    report = h.check(c.code, inputs=inputs[0])
    if c.refused:
        assert not report.ok, f'the checker accepted a script it must refuse:\n{numbered(c.code)}'
        return
    if not report.ok:
        assert c.refused is None, f'a corpus script does not pass the check:\n{numbered(c.code)}\n{report.errors}'
        return
    a = h.analyze(c.code)
    # The worst case before the run (#24) is the analysis' bounds: held below, so never below a run's calls.
    assert h.estimate(c.code).calls == a.bounds and report.estimate is not None and report.estimate.calls == a.bounds
    missing = set(a.violations) - set(report.warnings)
    assert not missing, f'check does not report what the analysis found: {sorted(missing)}'
    if not a.complete:
        assert c.complete is None, f'the analysis cannot follow {a.incomplete}:\n{numbered(c.code)}'
        assert a.incomplete and all(isinstance(line, int) for line, _reason in a.incomplete), a.incomplete
        assert strict is not None and not strict.check(c.code, inputs=inputs[0]).ok, 'strict accepted it'
        return
    failures = held(h, c.code, a, inputs, idle=idle)
    if failures:
        pytest.fail(
            f'{c.name}: the analysis missed what a run did\n{numbered(c.code)}\n'
            + '\n'.join(failures)
            + f'\nanalysis:\n{a.text()}',
            pytrace=False,
        )


def held(h: Harness, code: str, a: Analysis, inputs: list[dict[str, Any]], *, idle: bool = True) -> list[str]:
    """Run `code` under each of `inputs`; per run that did something `a` does not report, what it did.
    `idle=False`: a script that makes no call under any of them tests nothing, and fails too. Each run is also
    held against the coarsest sound analysis, which must pass: the oracle asks only what is true of the run."""
    joined = joined_lines(code)
    coarse = coarsest(code)
    failures = []
    made = 0
    for values in inputs:
        calls = run(h, code, values)
        made += len(calls)
        found = misses(a, calls, joined=joined)
        found += [
            f'THE ORACLE IS WRONG: it rejects the coarsest sound analysis: {miss}'
            for miss in misses(coarse, calls, joined=joined)
        ]
        if found:
            journal = ', '.join(f'#{r.seq} {r.callee}@{r.line}:{r.status}' for r in calls)
            failures.append(f'inputs {values}: calls {journal}\n  ' + '\n  '.join(found))
    if not made and not idle:
        failures.append('no run made a call: the script tests nothing')
    return failures


def coarsest(code: str) -> Analysis:
    """The coarsest sound analysis, read off the syntax: every catalog call is a site with no bound, every
    other use of a callee's name is dynamic, any call can follow any other, and any rule can break anywhere.
    (It is sound for the corpus's runnable scripts, which rebind no callee's name.)"""
    tree = ast.parse(code)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    sites = [
        CallSite(node.func.id, node.lineno, max_calls=None)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLEES
    ]
    dynamic = [
        CallSite(node.id, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id in CALLEES and id(node) not in called
    ]
    ids = ['start', *(f'n{i}' for i in range(len(sites))), 'end']
    return Analysis(
        calls=sites,
        dynamic=dynamic,
        nodes=list(sites),
        edges=[(src, dst, 'next') for src in ids[:-1] for dst in ids[1:]],
        violations=[f'line {site.line}: {site.callee} can break its rule.' for site in sites + dynamic],
    )


@pytest.mark.parametrize('c', HAND, ids=[c.name for c in HAND])
def test_hand_written(desk: Harness, strict_desk: Harness, c: Case) -> None:
    differential(desk, strict_desk, c, INPUTS, idle=False)


@pytest.mark.parametrize('seed', DEFAULT_SEEDS)
def test_generated(desk: Harness, seed: int) -> None:
    differential(desk, None, Case(f'seed {seed}', generated(seed)), INPUTS[seed % 2 :: 2], idle=True)


GRID = [{'n': n, 'flag': flag, 't': t} for n in range(7) for flag in (False, True) for t in ('T-1', 'T-0', 'bad-7')]
"""Every input the catalog tells apart, for the slow tier's runs of the hand-written scripts."""


@pytest.mark.slow
@pytest.mark.parametrize('c', HAND, ids=[c.name for c in HAND])
def test_hand_written_every_input(desk: Harness, strict_desk: Harness, c: Case) -> None:
    differential(desk, strict_desk, c, GRID, idle=False)


@pytest.mark.slow
@pytest.mark.parametrize('seed', SLOW_SEEDS)
def test_generated_slow(desk: Harness, seed: int) -> None:
    differential(desk, None, Case(f'seed {seed}', generated(seed)), INPUTS, idle=True)


# -- the oracle itself: it sees what an analysis leaves out (that it asks only what is true: `held`) -----------


LEAKY = """\
for i in range(3):
    await lookup(x=i * 4)
try:
    await issue_refund(ticket_id=t, cents=1)
except PermissionError:
    pass
"""


class Capped(Analysis):
    @property
    def bounds(self) -> dict[str, int | None]:
        return {**super().bounds, 'lookup': 2}


@pytest.mark.parametrize('hole', ['site', 'bound', 'callee bound', 'edge', 'violation'])
def test_the_oracle_finds_what_an_analysis_leaves_out(desk: Harness, hole: str) -> None:
    a = coarsest(LEAKY)
    lookup_node = next(f'n{i}' for i, site in enumerate(a.nodes) if site.callee == 'lookup')
    if hole == 'site':
        a.calls = [site for site in a.calls if site.callee != 'issue_refund']
    elif hole == 'bound':
        a.calls = [dataclasses.replace(site, max_calls=2) for site in a.calls]
    elif hole == 'callee bound':  # every site unbounded, but the callee said to be called at most twice
        a = Capped(**{f.name: getattr(a, f.name) for f in dataclasses.fields(a)})
    elif hole == 'edge':
        a.edges = [edge for edge in a.edges if edge[:2] != (lookup_node, lookup_node)]
    else:
        a.violations = []
    (failure,) = held(desk, LEAKY, a, INPUTS[:1])
    expected = {
        'site': 'issue_refund at line 4 is not a reported call site',
        'bound': 'lookup at line 2 was called 3 times; its sites allow 2',
        'callee bound': 'lookup was called 3 times; a.bounds says at most 2',
        'edge': 'no edge from call #1 lookup (line 2) to call #2',
        'violation': 'issue_refund at line 4 was refused by its rule',
    }[hole]
    assert expected in failure, failure


TIGHT = {
    'helper_in_loop': {'send_email': 25},
    'nested_helpers': {'lookup': 8, 'send_email': 1},
    'lambda_called_in_loop': {'lookup': 3, 'send_email': 1},
    'comprehension_over_helper': {'lookup': 8, 'send_email': 1},
    'gather_helpers': {'lookup': 3, 'notify': 3, 'send_email': 1},
    'gather_of_gathers': {'lookup': 6, 'send_email': 1},
    'break_and_continue': {'lookup': 6, 'notify': 1, 'send_email': 1},
    'forward_reference_between_helpers': {'lookup': 4},
    'gather_imported_other_ways': {'lookup': 4, 'notify': 4, 'send_email': 1},
}
"""The most calls each of these scripts can make, by hand: what the source says literally."""


@pytest.mark.parametrize('name', TIGHT)
def test_the_analysis_is_not_vacuous(desk: Harness, name: str) -> None:
    """Soundness alone is met by an analysis that says "anything, anywhere": where a script bounds its calls
    literally, the analysis says so, with no dynamic use and no unbounded site."""
    (c,) = [c for c in HAND if c.name == name]
    a = desk.analyze(c.code)
    assert (a.complete, a.dynamic, a.bounds) == (True, [], TIGHT[name]), a.text()
