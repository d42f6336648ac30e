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
    return desk(make_harness(strict=True), sent)


def covered(h: Harness, script: str) -> list[Any]:
    """Run `script` for real and assert the analysis covers the run: each call at a site, within the sum of the
    bounds of its (callee, line), each transition (from start, to the end) an edge. Returns the calls."""
    analysis = h.analyze(script)
    try:
        calls = h.run_sync(script).calls
    except WorkflowError as exc:
        calls = exc.calls
    sites: dict[tuple[str, int | None], list[Any]] = {}
    nodes: dict[tuple[str, int | None], set[str]] = {}
    for i, site in enumerate(analysis.calls):
        sites.setdefault((site.callee, site.line), []).append(site)
        nodes.setdefault((site.callee, site.line), set()).add(f'n{i}')
    for (callee, line), count in Counter((c.callee, c.line) for c in calls).items():
        assert (callee, line) in sites, (callee, line, analysis.text())
        bounds = [site.max_calls for site in sites[(callee, line)]]
        assert None in bounds or count <= sum(b for b in bounds if b is not None), (callee, line, analysis.text())
    edges = {(src, dst) for src, dst, _kind in analysis.edges}
    path = [{'start'}, *(nodes[(c.callee, c.line)] for c in calls), {'end'}]
    for before, after in itertools.pairwise(path):
        assert any((a, b) in edges for a in before for b in after), (before, after, analysis.text())
    return calls


def test_a_class_method_is_refused_and_still_found(h: Harness, loose: Harness) -> None:
    script = ('class Mailer:\n    async def go(self, to: str) -> str:\n'
              '        return await send_email(to=to, body="hi")\n'
              'm = Mailer()\nfor to in ["a", "b", "c"]:\n    await m.go(to)')
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
    site, = h.analyze(script).calls
    assert (site.callee, site.line, site.max_calls) == ('send_email', 1, 1)  # made once, where the lambda is
    assert len(covered(h, script)) == 1 and sent == ['a']
    as_default = ('async def notify(send=lambda: send_email(to="x", body="b")) -> str:\n    return await send()\n'
                  'for i in range(3):\n    await notify()')
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
        h: Harness, strict: Harness, sent: list[str]) -> None:
    script = ('async def notify(i: int) -> str:\n    return await send_email(to=str(i), body="x")\n'
              'for i in range(25):\n    await notify(i)')
    site, = h.analyze(script).calls
    assert (site.line, site.in_loop, site.loop_bound, site.max_calls) == (2, True, 25, 25)
    assert h.analyze(script).bounds == {'send_email': 25}
    assert 'max 25' in h.analyze(script).text() and 'most calls: send_email 25' in h.analyze(script).text()
    assert len(covered(h, script)) == 25 and len(sent) == 25
    assert strict.check(script).ok  # a literal bound: strict lets it run


def test_recursion_is_unbounded(h: Harness, strict: Harness) -> None:
    script = ('async def chain(n: int) -> int:\n    if n == 0:\n        return 0\n'
              '    await send_email(to=str(n), body="x")\n    return await chain(n - 1)\nawait chain(8)')
    site, = h.analyze(script).calls
    assert site.max_calls is None and 'unbounded' in h.analyze(script).text()
    assert len(covered(h, script)) == 8
    mutual = ('async def ping(n: int) -> int:\n    if n <= 0:\n        return 0\n'
              '    await send_email(to=str(n), body="p")\n    return await pong(n - 1)\n'
              'async def pong(n: int) -> int:\n    await lookup(q=str(n))\n    return await ping(n - 1)\n'
              'await ping(5)\nawait lookup(q="end")')
    assert h.analyze(mutual).bounds == {'send_email': None, 'lookup': None}
    assert len(covered(h, mutual)) == 7
    report = strict.check(script)
    assert not report.ok
    assert 'send_email has side effects and is called in a loop with no literal bound' in report.errors


def test_a_loop_over_a_side_effect_through_a_helper_fails_strict(strict: Harness, sent: list[str]) -> None:
    script = ('async def notify(to: str) -> str:\n    return await send_email(to=to, body="x")\n'
              'for to in await lookup(q="all"):\n    await notify(to)')
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
}


@pytest.mark.parametrize('form', HIDING)
def test_a_violation_behind_a_short_circuit_or_a_finally_is_reported(h: Harness, loose: Harness, form: str) -> None:
    script = HIDING[form]
    report = h.check(script)
    assert report.ok and any(HIDDEN in w for w in report.warnings), report.warnings
    with pytest.raises(WorkflowError):  # at run time the refund is refused (or the check failed): it can happen
        h.run_sync(script)


def test_a_local_def_shadowing_the_callee_is_refused_and_does_not_hide_the_violation(
        h: Harness, loose: Harness) -> None:
    script = ('async def check_entitlement(ticket_id: str) -> dict[str, bool]:\n    return {"eligible": True}\n'
              'await check_entitlement(ticket_id="T")\nawait issue_refund(ticket_id="T", cents=1)')
    report = h.check(script)
    assert not report.ok and '`check_entitlement` is a catalog function: a function of that name' in report.errors
    assert any(HIDDEN in v for v in loose.analyze(script).violations)
    for shadow in ('for check_entitlement in [1]:\n    pass', 'import json as send_email', 'send_email = print'):
        assert 'is a catalog function' in h.check(shadow).errors, shadow


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
