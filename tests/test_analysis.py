"""The analysis before the run is sound: every call a real run makes is a reported site, within its bound, and
every transition between its calls a reported edge; what would hide a call is refused by the check.

Real Monty and a real (in-memory) SQLite store; a refund/email catalog as in issue 23.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from harness import After, Harness, WorkflowError
from harness._catalog._rules import Access

REFUND_RULE = After('check_entitlement', same=('ticket_id',), when=lambda result: result['eligible'])
HIDDEN = 'issue_refund can run before check_entitlement has succeeded'


def desk(h: Harness, sent: list[str]) -> Harness:
    @h.tool
    async def check_entitlement(*, ticket_id: str) -> dict[str, bool]:
        """Whether the ticket may be refunded; fails for tickets starting with ERR."""
        if ticket_id.startswith('ERR'):
            raise ValueError('the entitlement service is down')
        return {'eligible': not ticket_id.endswith('NO')}

    @h.tool(side_effect=True, requires=REFUND_RULE)
    async def issue_refund(*, ticket_id: str, cents: int) -> str:
        """Refund the customer."""
        return f'refunded {ticket_id}'

    @h.tool(side_effect=True)
    async def send_email(*, to: str, body: str) -> str:
        """Send an email."""
        sent.append(to)
        return 'sent'

    @h.tool
    async def lookup(*, q: str) -> list[str]:
        """Addresses matching q."""
        return [f'{q}{i}@example.com' for i in range(3)]

    return h


@pytest.fixture
def sent() -> list[str]:
    return []


@pytest.fixture
def h(make_harness: Any, sent: list[str]) -> Harness:
    return desk(make_harness(), sent)


@pytest.fixture
def loose(make_harness: Any, sent: list[str]) -> Harness:
    """No type check: runs what the checker refuses, to show the analysis still covers it."""
    return desk(make_harness(type_check=False), sent)


@pytest.fixture
def strict(make_harness: Any, sent: list[str]) -> Harness:
    # send_email has no guard: allowed by name, so these tests see the analysis' refusals, not the audit's
    return desk(make_harness(strict=True, allow_unguarded=['send_email']), sent)


@pytest.fixture(scope='module')
def toys() -> Any:
    h = Harness(store=':memory:', type_check=False, max_repeats=None)

    @h.tool
    async def ping(*, i: int) -> int:
        return i

    @h.tool
    async def fail(*, reason: str) -> str:
        raise ValueError(reason)

    @h.tool(side_effect=True)
    async def send_email(*, to: str, body: str) -> str:
        return 'sent'

    yield h
    h.close()


def covered(h: Harness, script: str) -> list[Any]:
    """Run `script` for real and assert the analysis covers the run: each call at a site (or through a value),
    within the sum of the bounds of its (callee, line), each transition between the calls at sites (from the
    start, to the end) an edge. Returns the calls."""
    analysis = h.analyze(script)
    try:
        calls = h.run_sync(script).calls
    except WorkflowError as exc:  # the journal holds every call the failed run made
        assert h.store is not None and exc.run_id is not None
        calls = h.store.calls(exc.run_id)
    calls = [c for c in calls if not c.callee.startswith('join:')]  # a join's own decisions, journaled beside the calls
    sites: dict[tuple[str, int | None], list[Any]] = {}
    nodes: dict[tuple[str, int | None], set[str]] = {}
    for i, site in enumerate(analysis.calls):
        sites.setdefault((site.callee, site.line), []).append(site)
        nodes.setdefault((site.callee, site.line), set()).add(f'n{i}')
    values = {site.callee for site in analysis.dynamic}
    for (callee, line), count in Counter((c.callee, c.line) for c in calls).items():
        if (callee, line) not in sites:  # a call through a value: its callee is a dynamic use
            assert callee in values, (callee, line, analysis.text())
            continue
        bounds = [site.max_calls for site in sites[(callee, line)]]
        assert None in bounds or count <= sum(b for b in bounds if b is not None), (callee, line, analysis.text())
    edges = {(src, dst) for src, dst, _kind in analysis.edges}
    path = [{'start'}, *(nodes[(c.callee, c.line)] for c in calls if (c.callee, c.line) in nodes), {'end'}]
    for before, after in itertools.pairwise(path):
        assert any((a, b) in edges for a in before for b in after), (before, after, analysis.text())
    return calls


def test_a_class_method_is_refused_and_still_found(h: Harness, loose: Harness) -> None:
    script = (
        'class Mailer:\n    async def go(self, to: str) -> str:\n'
        '        return await send_email(to=to, body="hi")\n'
        'm = Mailer()\nfor to in ["a", "b", "c"]:\n    await m.go(to)'
    )
    report = h.check(script)
    assert not report.ok and 'a class with methods is refused in workflow scripts' in report.errors
    assert 'use functions' in report.errors
    assert h.check('from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nP(x=1)').ok  # data only
    analysis = loose.analyze(script)
    assert analysis.bounds == {'send_email': None}  # a method may run anywhere, any number of times
    assert len(covered(loose, script)) == 3


def test_a_lambda_default_argument_calling_send_email_is_found_and_bounded(h: Harness, sent: list[str]) -> None:
    script = 'notify = lambda r=send_email(to="a", body="b"): r\nawait notify()\nawait notify()'
    assert h.check(script).ok
    (site,) = h.analyze(script).calls
    assert (site.callee, site.line, site.max_calls) == ('send_email', 1, 1)  # made once, where the lambda is
    assert len(covered(h, script)) == 1 and sent == ['a']
    as_default = (
        'async def notify(send=lambda: send_email(to="x", body="b")) -> str:\n    return await send()\n'
        'for i in range(3):\n    await notify()'
    )
    assert h.analyze(as_default).bounds == {'send_email': None}  # the lambda is a value: it runs where it is called
    assert len(covered(h, as_default)) == 3


def test_eval_is_refused_and_leaves_the_analysis_incomplete(h: Harness, strict: Harness, loose: Harness) -> None:
    script = 'await eval("send_" + "email")(to="a", body="b")'
    report = h.check(script)
    assert not report.ok and 'workflow.py:1:7: error[not-analyzable] eval() runs code made at run time' in report.errors
    assert 'call the functions directly' in report.errors
    analysis = loose.analyze(script)
    assert not analysis.complete and analysis.incomplete[0][0] == 1 and 'eval()' in analysis.incomplete[0][1]
    assert 'incomplete: line 1: eval()' in analysis.text()
    # The strict mode's own check refuses an incomplete analysis too, whatever the checker let through.
    assert strict._rule_errors(script, Access())[0].startswith('line 1: eval() runs code made at run time')
    assert 'strict mode refuses' in strict._rule_errors(script, Access())[0]
    assert not strict.check(script).ok


def test_getattr_by_a_computed_name_and_locals_are_refused_a_literal_name_is_not(h: Harness) -> None:
    assert 'getattr() with a computed attribute name' in h.check('import math\ngetattr(math, "p" + "i")').errors
    assert 'locals() reads variables by a computed name' in h.check('x = locals()').errors
    assert 'not-analyzable' not in h.check('import math\ngetattr(math, "pi")').errors


def test_a_helper_called_in_a_loop_has_the_loops_bound_and_a_real_run_stays_within_it(
    h: Harness, strict: Harness, sent: list[str]
) -> None:
    script = (
        'async def notify(i: int) -> str:\n    return await send_email(to=str(i), body="x")\n'
        'for i in range(25):\n    await notify(i)'
    )
    (site,) = h.analyze(script).calls
    assert (site.line, site.in_loop, site.loop_bound, site.max_calls) == (2, True, 25, 25)
    assert h.analyze(script).bounds == {'send_email': 25}
    assert 'line 2: send_email  [max 25, called from line 4]' in h.analyze(script).text()
    assert 'most calls: send_email 25' in h.analyze(script).text() and site.via == (4,)
    assert len(covered(h, script)) == 25 and len(sent) == 25
    assert strict.check(script).ok  # a literal bound: strict lets it run


def test_a_loop_over_a_name_bound_once_to_a_literal_is_bounded_by_it(
    h: Harness, strict: Harness, sent: list[str]
) -> None:
    script = 'to = ["a@x", "b@x", "c@x"]\nfor t in to:\n    await send_email(to=t, body="x")'
    assert h.analyze(script).bounds == {'send_email': 3} and h.analyze(script).complete
    assert len(covered(h, script)) == 3 and strict.check(script).ok
    for spoilt in ('to.append("d@x")', 'alias = to', 'del to', 'to = ["z@x"]', 'print(len(to))'):
        assert h.analyze(script + '\n' + spoilt).bounds == {'send_email': None}, spoilt


def test_recursion_is_unbounded(h: Harness, strict: Harness) -> None:
    script = (
        'async def chain(n: int) -> int:\n    if n == 0:\n        return 0\n'
        '    await send_email(to=str(n), body="x")\n    return await chain(n - 1)\nawait chain(8)'
    )
    (site,) = h.analyze(script).calls
    assert site.max_calls is None and 'unbounded' in h.analyze(script).text()
    assert len(covered(h, script)) == 8
    mutual = (
        'async def ping(n: int) -> int:\n    if n <= 0:\n        return 0\n'
        '    await send_email(to=str(n), body="p")\n    return await pong(n - 1)\n'
        'async def pong(n: int) -> int:\n    await lookup(q=str(n))\n    return await ping(n - 1)\n'
        'await ping(5)\nawait lookup(q="end")'
    )
    assert h.analyze(mutual).bounds == {'send_email': None, 'lookup': None}
    assert len(covered(h, mutual)) == 7
    report = strict.check(script)
    assert not report.ok
    assert 'send_email has side effects and is called in a loop with no literal bound' in report.errors


def test_a_loop_over_a_side_effect_through_a_helper_fails_strict(strict: Harness, sent: list[str]) -> None:
    script = (
        'async def notify(to: str) -> str:\n    return await send_email(to=to, body="x")\n'
        'for to in await lookup(q="all"):\n    await notify(to)'
    )
    report = strict.check(script)
    assert not report.ok and 'line 2: send_email has side effects and is called in a loop' in report.errors
    with pytest.raises(WorkflowError, match='strict mode'):
        strict.run_sync(script)
    assert sent == []


HELPER_SCRIPTS = [
    # a helper with an early return, called in a loop, then more calls in the caller
    'async def first(q: str) -> str:\n    found = await lookup(q=q)\n    if q == "b":\n        return found[0]\n'
    '    await send_email(to=found[1], body="x")\n    return found[2]\n'
    'for q in ["a", "b", "c"]:\n    await first(q)\n    await send_email(to=q, body="after")\nawait lookup(q="end")',
    # a gather over a helper: its calls interleave
    'import asyncio\nasync def two(q: str) -> str:\n    xs = await lookup(q=q)\n'
    '    return await send_email(to=xs[0], body=q)\n'
    'await asyncio.gather(*[two(q) for q in ["a", "b", "c"]])\nawait asyncio.gather(two("d"), two("e"))\n'
    'await lookup(q="end")',
    # a finally in a helper, after a call that failed; the caller's except; a nested def and a lambda
    'async def careful(t: str) -> str:\n    try:\n        await check_entitlement(ticket_id=t)\n    finally:\n'
    '        await send_email(to=t, body="tried")\n    return t\n'
    'def label(x: str) -> str:\n    inner = lambda y: y + "!"\n    return inner(x)\n'
    'for t in ["T1", "ERR", "T2"]:\n    try:\n        await careful(label(t))\n    except Exception:\n'
    '        await lookup(q=t)',
    # while with break/continue through a helper, settle_all over helpers
    'async def probe(i: int) -> bool:\n    xs = await lookup(q=str(i))\n    return len(xs) > i\n'
    'i = 0\nwhile True:\n    i += 1\n    if i == 2:\n        continue\n    if not await probe(i):\n        break\n'
    'rs = await settle_all(probe(1), check_entitlement(ticket_id="ERR"))\nawait send_email(to="x", body=str(rs))',
]


@pytest.mark.parametrize('script', HELPER_SCRIPTS, ids=range(len(HELPER_SCRIPTS)))
def test_with_helpers_every_transition_of_a_real_run_is_an_edge(h: Harness, script: str) -> None:
    assert h.check(script).ok, h.check(script).errors
    assert covered(h, script)


HIDING = {
    'or': 'skip = True\nok = skip or await check_entitlement(ticket_id="T")\n'
    'await issue_refund(ticket_id="T", cents=1)',
    'if-else': 'skip = True\ne = None if skip else await check_entitlement(ticket_id="T")\n'
    'await issue_refund(ticket_id="T", cents=1)',
    'finally': 'try:\n    await check_entitlement(ticket_id="ERR-1")\nfinally:\n'
    '    await issue_refund(ticket_id="ERR-1", cents=1)',
    'and': 'go = False\ngo and await check_entitlement(ticket_id="T")\nawait issue_refund(ticket_id="T", cents=1)',
    'assert': 'assert True, await check_entitlement(ticket_id="T")\nawait issue_refund(ticket_id="T", cents=1)',
}


def test_a_helper_left_running_by_a_failed_gather_is_covered(h: Harness) -> None:
    """When one argument of a gather fails, the gather raises, but a script coroutine beside it goes on making
    calls after the handler's (Monty 1.4.0): those calls may follow any later call."""
    script = (
        'import asyncio\nasync def slow(q: str) -> str:\n    await lookup(q=q)\n    await lookup(q=q + "2")\n'
        '    return await send_email(to=q, body="late")\n'
        'try:\n    await asyncio.gather(slow("a"), check_entitlement(ticket_id="ERR"))\nexcept Exception:\n'
        '    await lookup(q="handler")\nawait lookup(q="after")\nawait lookup(q="last")'
    )
    calls = covered(h, script)
    assert [(c.callee, c.line) for c in calls][-2:] == [('send_email', 5), ('lookup', 11)]  # still running


@pytest.mark.parametrize('form', HIDING)
def test_a_violation_behind_a_short_circuit_or_a_finally_is_reported(h: Harness, loose: Harness, form: str) -> None:
    script = HIDING[form]
    report = h.check(script)
    assert report.ok and any(HIDDEN in w for w in report.warnings), report.warnings
    with pytest.raises(WorkflowError):  # at run time the refund is refused (or the check failed): it can happen
        h.run_sync(script)


def test_a_local_def_shadowing_the_callee_is_refused_and_does_not_hide_the_violation(
    h: Harness, loose: Harness
) -> None:
    script = (
        'async def check_entitlement(ticket_id: str) -> dict[str, bool]:\n    return {"eligible": True}\n'
        'await check_entitlement(ticket_id="T")\nawait issue_refund(ticket_id="T", cents=1)'
    )
    report = h.check(script)
    assert not report.ok and '`check_entitlement` is a catalog function: a function of that name' in report.errors
    assert any(HIDDEN in v for v in loose.analyze(script).violations)
    for shadow in ('for check_entitlement in [1]:\n    pass', 'import json as send_email', 'send_email = print'):
        assert 'is a catalog function' in h.check(shadow).errors, shadow
    assert '`settled` is a join helper' in h.check('settled = 1').errors
    for helper in ('log', 'phase'):  # no join: the model is told what the name is
        errors = h.check(f'{helper} = 1').errors
        assert f'`{helper}` is a script helper' in errors and 'join' not in errors, errors


def test_the_must_analysis_still_credits_what_certainly_ran(strict: Harness) -> None:
    """Soundness does not cost the common cases: a check awaited first, in a helper, in a gather, a retry loop."""
    for script in (
        'e = await check_entitlement(ticket_id="T")\nif e["eligible"]:\n    await issue_refund(ticket_id="T", cents=1)',
        'async def ok(t: str) -> bool:\n    return (await check_entitlement(ticket_id=t))["eligible"]\n'
        'if await ok("T"):\n    await issue_refund(ticket_id="T", cents=1)',
        'import asyncio\ne, xs = await asyncio.gather(check_entitlement(ticket_id="T"), lookup(q="q"))\n'
        'await issue_refund(ticket_id="T", cents=1)',
        'while True:\n    e = await check_entitlement(ticket_id="T")\n    if e["eligible"]:\n        break\n'
        'await issue_refund(ticket_id="T", cents=1)',
    ):
        assert strict.check(script).ok, (script, strict.check(script).errors)


ADVERSARIAL = [
    # (run without the type check: some use what the checker refuses, or untyped helpers)
    'def g(*args, x=0):\n    return x\n'  # positional arguments are evaluated before keywords, whatever the order
    'g(x=await ping(i=1), *[await send_email(to="a", body="b")])\nawait ping(i=3)',
    'from asyncio import gather\nasync def h(k):\n    await ping(i=k)\n    return await ping(i=k + 1)\n'
    'await gather(h(1), h(2))\nawait ping(i=0)',
    'import asyncio as aio\nasync def h(k):\n    await ping(i=k)\n    return await send_email(to=str(k), body="x")\n'
    'await aio.gather(*[h(k) for k in range(3)])\nawait ping(i=0)',
    'async def notify(i):\n    await send_email(to=str(i), body="x")\nfor i in range(25):\n    await notify(i)',
    'async def chain(n):\n    if n == 0:\n        return 0\n    await send_email(to="a", body="b")\n'
    '    return await chain(n - 1)\nawait chain(20)',
    'class M:\n    async def go(self):\n        return await send_email(to="a", body="b")\nm = M()\n'
    'for i in range(3):\n    await m.go()',
    'async def notify(send=lambda: send_email(to="a", body="b")):\n    return await send()\n'
    'for i in range(4):\n    await notify()',
    'f = lambda r=send_email(to="a", body="b"): r\nawait f()\nawait f()',
    'async def h(k):\n    x = await ping(i=k)\n    if x > 1:\n        return x\n    await ping(i=100)\n'
    '    return 0\nfor k in range(4):\n    await h(k)\n    await fail(reason="a") if k == 9 else None\n'
    'await ping(i=-1)',
    'import asyncio\nasync def two(k):\n    await ping(i=k)\n    await ping(i=k + 10)\n'
    'await asyncio.gather(two(1), two(2))\nawait ping(i=0)',
    'import asyncio\nasync def two(k):\n    await ping(i=k)\n    await ping(i=k + 10)\n'
    'await asyncio.gather(*[two(k) for k in range(3)])\nawait ping(i=0)',
    'async def h():\n    return await ping(i=5)\nc = h()\nawait ping(i=6)\nawait c',
    'async def h(k):\n    try:\n        await fail(reason="x")\n    finally:\n        await ping(i=k)\n'
    'for k in range(2):\n    try:\n        await h(k)\n    except Exception:\n        await ping(i=50)\n'
    'await ping(i=99)',
    'n = 0\nwhile True:\n    n = await ping(i=n + 1)\n    if n >= 3:\n        break\n    await ping(i=100)\n'
    'await ping(i=7)',
    'async def a(n):\n    if n <= 0:\n        return 0\n    await ping(i=n)\n    return await b(n - 1)\n'
    'async def b(n):\n    await ping(i=-n)\n    return await a(n - 1)\nawait a(5)\nawait ping(i=0)',
    'def pick(x):\n    return x * 2\nfs = [ping, ping]\nfor f in fs:\n    await f(i=pick(1))',
    'r = await settle_all(ping(i=1), fail(reason="x"))\nr2 = await settled(fail(reason="y"))\nawait ping(i=3)',
    'async def g(k):\n    await fail(reason="no")\n    await ping(i=k)\nrs = await settle_all(g(1), g(2))\n'
    'await ping(i=0)',
    'xs = [await ping(i=i) for i in range(3) if i != 1]\n'
    'ys = {await ping(i=i): await ping(i=i + 1) for i in [1, 2]}\nawait ping(i=9)',
    'def s(k):\n    return ping(i=k)\nimport asyncio\nawait asyncio.gather(*[s(k) for k in range(3)])',
    'async def h(xs):\n    for x in xs:\n        try:\n            if x == 2:\n'
    '                return await ping(i=x)\n            await ping(i=x + 10)\n        finally:\n'
    '            await ping(i=99)\n    return 0\nawait h([1, 2, 3])\nawait h([5])\nawait ping(i=-1)',
    'def outer(n):\n    def inner(k):\n        return ping(i=k)\n    return [inner(k) for k in range(n)]\n'
    'for j in range(2):\n    cs = outer(2)\n    for c in cs:\n        await c\nawait ping(i=0)',
    'xs = [await ping(i=x * 10 + y) for x in range(2) for y in [await ping(i=100 + x), 1]]\nawait ping(i=0)',
    'i = 0\nwhile await ping(i=i) < 3:\n    i += 1\n    if i == 1:\n        continue\n'
    '    await ping(i=50 + i)\nawait ping(i=-5)',
    'for i in range(3):\n    try:\n        if i == 1:\n            break\n        await ping(i=i)\n'
    '    finally:\n        await ping(i=10 + i)\nawait ping(i=-1)',
    'async def r(n):\n    if n == 0:\n        return 0\n    await ping(i=n)\n    x = await r(n - 1)\n'
    '    await ping(i=100 + n)\n    return x\nawait r(3)\nawait ping(i=-1)',
    'import asyncio\nasync def loop3(k):\n    for j in range(3):\n        await ping(i=k * 10 + j)\n'
    '    return k\nawait asyncio.gather(loop3(1), loop3(2), ping(i=7))\nawait ping(i=-1)',
    'async def g(k):\n    await ping(i=k)\n    await fail(reason="x")\n    await ping(i=k + 1)\n'
    'rs = await settle_all(g(1), g(2), ping(i=5))\nawait ping(i=-1)',
    'async def g(k):\n    await ping(i=k)\n    return k\nx = await first_of(g(1), g(2))\n'
    'y = await quorum(1, g(3), ping(i=4))\nz = await within(5.0, g(6))\nawait ping(i=-1)',
    'x = 3\nmatch x:\n    case 1:\n        await ping(i=1)\n    case n if await ping(i=n) > 2:\n'
    '        await ping(i=30)\n    case _:\n        await ping(i=40)\nawait ping(i=-1)',
    'async def helper(k):\n    return await ping(i=k)\nasync def f(x=await helper(3)):\n    return x\n'
    'await f()\nawait f()',
    'def deco(fn):\n    return fn\n@deco\nasync def d(k):\n    return await ping(i=k)\nfor k in range(3):\n'
    '    await d(k)',
    'async def h(k):\n    if k:\n        raise ValueError("no")\n    return await ping(i=k)\n'
    'for k in [0, 1, 0]:\n    try:\n        await h(k)\n    except ValueError:\n        await ping(i=77)\n'
    'await ping(i=-1)',
    'async def a():\n    await ping(i=1)\n    return True\nasync def b():\n    await ping(i=2)\n'
    '    return False\nif await a() and await b() or await a():\n    await ping(i=3)\n'
    'await ping(i=4) if await b() else await ping(i=5)',
    'async def k(n):\n    total = 0\n    for i in range(n):\n        if i == 2:\n            break\n'
    '        total += await ping(i=i)\n    else:\n        total += await ping(i=99)\n    return total\n'
    'await k(1)\nawait k(5)\nawait ping(i=-1)',
    'import asyncio\nasync def w(k):\n    r = await settled(fail(reason=str(k)))\n    if not r["ok"]:\n'
    '        await ping(i=k)\n    return r\nout = await asyncio.gather(*[w(k) for k in range(3)], w(9))\n'
    'await ping(i=-1)',
    'async def f():\n    return await ping(i=1)\ncs = [f(), f()]\nawait ping(i=2)\nfor c in cs:\n    await c',
    'state = {"n": 0}\ndef bump():\n    state["n"] += 1\n    return ping(i=state["n"])\nwhile state["n"] < 3:\n'
    '    await bump()\nawait ping(i=-1)',
    'async def outer():\n    x = 0\n    async def inner():\n        nonlocal x\n        x += 1\n'
    '        return await ping(i=x)\n    for _ in range(3):\n        await inner()\n    return x\nawait outer()',
]


@pytest.mark.parametrize('script', ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_scripts_are_covered_by_their_analysis(toys: Harness, script: str) -> None:
    covered(toys, script)
