"""The differential corpus of `tests/test_analysis_soundness.py`: a refund/email catalog of instant host tools,
hand-written adversarial scripts, and a small random grammar of generated ones.

Every script reads three inputs (`n: int`, `flag: bool`, `t: str`), so one script takes different paths
under the input sets of `INPUTS`; the tools fail for some arguments (`lookup` for x % 4 == 3,
`check_entitlement` for a ticket starting with `bad`; the script sees a RuntimeError naming the tool), so
try/except paths and refused rules are reached.
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass
from typing import Any

from typing_extensions import TypedDict  # pydantic needs it below Python 3.12

from harness import After, Harness

REQUIRES: dict[str, tuple[str, tuple[str, ...]]] = {
    'issue_refund': ('check_entitlement', ('ticket_id',)),
    'notify': ('lookup', ()),
}
"""callee -> (predecessor, `same=` fields): the catalog's rules, as the oracle reads refusals."""

CALLEES = frozenset({'lookup', 'check_entitlement', 'issue_refund', 'send_email', 'notify'})

INPUTS: list[dict[str, Any]] = [
    {'n': 0, 'flag': False, 't': 'T-1'},
    {'n': 3, 'flag': True, 't': 'bad-7'},
    {'n': 5, 'flag': False, 't': 'T-0'},
    {'n': 2, 'flag': True, 't': 'T-1'},
]
"""Each script runs under these: hand-written ones under all, generated ones under two in the default tier and
all four in the slow one (which also runs the hand-written ones under every input the catalog tells apart)."""


class Entitlement(TypedDict):
    eligible: bool
    max_cents: int


def register(h: Harness) -> Harness:
    """The catalog every corpus script is checked, analysed and run against."""

    @h.tool
    async def lookup(x: int) -> int:
        """x + 1; fails when x % 4 == 3."""
        if x % 4 == 3:
            raise ValueError('flaky')
        return x + 1

    @h.tool
    async def check_entitlement(ticket_id: str) -> Entitlement:
        """Whether the ticket may be refunded, and up to how much; fails for a ticket starting with `bad`."""
        if ticket_id.startswith('bad'):
            raise RuntimeError('no such ticket')
        return {'eligible': not ticket_id.endswith('0'), 'max_cents': 500}

    @h.tool(side_effect=True, requires=After('check_entitlement', same=('ticket_id',)))
    async def issue_refund(ticket_id: str, cents: int) -> str:
        """Refund the customer."""
        return f'refunded {cents}'

    @h.tool(side_effect=True)
    async def send_email(to: str, body: str) -> bool:
        """Send an email."""
        return True

    @h.tool(requires='lookup')
    async def notify(msg: str) -> bool:
        """Post a note (only after a successful lookup)."""
        return True

    return h


@dataclass(frozen=True)
class Case:
    name: str
    code: str
    refused: bool | None = False
    """True: `h.check` must refuse it (it never runs); None: it may refuse it (if not, it must be sound)."""
    complete: bool | None = True
    """True: the analysis must follow it all; None: it may say it cannot (then `strict=True` must refuse it)."""


def case(name: str, code: str, **kwargs: Any) -> Case:
    return Case(name, textwrap.dedent(code).strip() + '\n', **kwargs)


HAND: list[Case] = [
    case(
        'helper_in_loop',
        """
        async def send(i: int) -> bool:
            return await send_email(to="a@x", body=str(i))
        for i in range(25):
            await send(i)
    """,
    ),
    case(
        'helper_in_input_loop',
        """
        async def mail(i: int) -> bool:
            return await send_email(to="c@x", body=str(i))
        for i in range(n * 6):
            await mail(i)
    """,
    ),
    case(
        'helper_in_while',
        """
        async def one(k: int) -> int:
            return await lookup(x=k)
        c = 0
        while c < n:
            c += 1
            await one(c * 4)
    """,
    ),
    case(
        'nested_helpers',
        """
        async def inner(k: int) -> int:
            return await lookup(x=k)
        async def middle(k: int) -> int:
            a = await inner(k)
            return a + await inner(k + 4)
        async def outer(k: int) -> int:
            s = 0
            for j in range(3):
                s += await middle(k + j * 8)
            return s
        await outer(0)
        await middle(n * 4)
        await send_email(to="a@x", body="done")
    """,
    ),
    case(
        'recursion_by_argument',
        """
        async def down(d: int) -> int:
            if d <= 0:
                return 0
            await send_email(to="r@x", body=str(d))
            return 1 + await down(d - 1)
        await down(n + 20)
    """,
    ),
    case(
        'mutual_recursion',
        """
        async def ping(d: int) -> int:
            if d <= 0:
                return 0
            await lookup(x=d * 4)
            return await pong(d - 1)
        async def pong(d: int) -> int:
            if d <= 0:
                return 0
            await notify(msg="pong")
            return await ping(d - 1)
        await ping(n + 3)
    """,
    ),
    case(
        'lambda_called_in_loop',
        """
        f = lambda k: lookup(x=k)
        for i in range(3):
            await f(i * 4)
        await send_email(to="a@x", body="x")
    """,
    ),
    case(
        'lambda_default_argument',
        """
        async def g(send=lambda: send_email(to="a@x", body="hi")) -> bool:
            return await send()
        for i in range(15):
            await g()
    """,
    ),
    case(
        'default_argument_calls',
        """
        async def g(k: int, first=lookup(x=8)) -> int:
            return k + await first
        await send_email(to="a@x", body="before")
        await g(1)
    """,
    ),
    case(
        'short_circuit_or',
        """
        skip = flag
        ok = skip or await check_entitlement(ticket_id=t)
        await issue_refund(ticket_id=t, cents=100)
    """,
    ),
    case(
        'short_circuit_and_caught',
        """
        done = flag and await lookup(x=n)
        try:
            await notify(msg="x")
        except PermissionError:
            await send_email(to="ops@x", body="refused")
    """,
    ),
    case(
        'conditional_expression',
        """
        e = None if flag else await check_entitlement(ticket_id=t)
        try:
            await issue_refund(ticket_id=t, cents=100)
        except PermissionError:
            pass
    """,
    ),
    case(
        'finally_after_raising_check',
        """
        try:
            await check_entitlement(ticket_id=t)
        finally:
            await issue_refund(ticket_id=t, cents=50)
    """,
    ),
    case(
        'try_except_else_finally',
        """
        try:
            e = await check_entitlement(ticket_id=t)
        except Exception:
            await send_email(to="ops@x", body="check failed")
        else:
            await issue_refund(ticket_id=t, cents=e["max_cents"])
        finally:
            await lookup(x=1)
        await notify(msg="end")
    """,
    ),
    case(
        'refund_after_swallowed_failure',
        """
        try:
            await check_entitlement(ticket_id=t)
        except Exception:
            await send_email(to="ops@x", body="failed")
        try:
            await issue_refund(ticket_id=t, cents=10)
        except PermissionError:
            await send_email(to="ops@x", body="refused")
    """,
    ),
    case(
        'early_return_in_helper',
        """
        async def pay(tid: str) -> str:
            e = await check_entitlement(ticket_id=tid)
            if not e["eligible"]:
                return "no"
            return await issue_refund(ticket_id=tid, cents=100)
        try:
            await pay(t)
        except Exception:
            await send_email(to="ops@x", body="failed")
        await send_email(to="c@x", body="bye")
    """,
    ),
    case(
        'break_and_continue',
        """
        for i in range(6):
            if i == n:
                break
            if i % 2:
                continue
            await lookup(x=i * 4)
        else:
            await notify(msg="all")
        await send_email(to="a@x", body="x")
    """,
    ),
    case(
        'while_true_with_counter',
        """
        c = 0
        while True:
            c += 1
            if c > n + 1:
                break
            try:
                await lookup(x=c)
            except Exception:
                continue
            await notify(msg=str(c))
    """,
    ),
    case(
        'nested_comprehensions',
        """
        xs = [await lookup(x=i * 4 + j * 4) for i in range(3) for j in range(2)]
        ys = [await lookup(x=i * 4) for i in range(n) if i % 2 == 0]
        zs = [[await lookup(x=4 * j) for j in range(i)] for i in range(3)]
        ws = {i: await notify(msg=str(i)) for i in range(2)}
        await send_email(to="a@x", body=str(len(xs) + len(ys) + len(zs) + len(ws)))
    """,
    ),
    case(
        'comprehension_over_helper',
        """
        async def h(k: int) -> int:
            a = await lookup(x=k * 4)
            return a + await lookup(x=k * 4 + 1)
        vs = [await h(i) for i in range(4) if i != n]
        await send_email(to="a@x", body=str(vs))
    """,
    ),
    case(
        'gather_helpers',
        """
        import asyncio
        async def pair(k: int) -> int:
            a = await lookup(x=k * 4)
            await notify(msg=str(a))
            return a
        r = await asyncio.gather(pair(0), pair(1), pair(2))
        await send_email(to="a@x", body=str(r))
    """,
    ),
    case(
        'gather_comprehension',
        """
        import asyncio
        async def pair(k: int) -> int:
            a = await lookup(x=k * 4)
            b = await lookup(x=k * 4 + 1)
            return a + b
        r = await asyncio.gather(*[pair(i) for i in range(n)])
        s = await asyncio.gather(*[lookup(x=i * 4) for i in range(5)])
        await send_email(to="a@x", body=str(r + s))
    """,
    ),
    case(
        'gather_in_loop',
        """
        import asyncio
        for i in range(3):
            await asyncio.gather(lookup(x=i * 4), send_email(to="a@x", body=str(i)))
        await notify(msg="done")
    """,
    ),
    case(
        'gather_of_gathers',
        """
        import asyncio
        rs = await asyncio.gather(*[asyncio.gather(lookup(x=i * 4), lookup(x=i * 8)) for i in range(3)])
        await send_email(to="a@x", body=str(rs))
    """,
    ),
    case(
        'gather_check_beside_refund',
        """
        import asyncio
        try:
            await asyncio.gather(check_entitlement(ticket_id=t), issue_refund(ticket_id=t, cents=5))
        except PermissionError:
            await send_email(to="ops@x", body="refused")
    """,
    ),
    case(
        'settle_all_then_mail_failures',
        """
        res = await settle_all(*[lookup(x=i) for i in range(6)])
        for r in res:
            if not r["ok"]:
                await send_email(to="ops@x", body=r.get("error", ""))
    """,
    ),
    case(
        'settle_all_over_helpers',
        """
        async def step(k: int) -> int:
            a = await lookup(x=k)
            await notify(msg=str(a))
            return a
        res = await settle_all(step(1), step(3), step(n))
        await send_email(to="a@x", body=str(len(res)))
    """,
    ),
    case(
        'first_of_and_quorum',
        """
        v = await first_of(lookup(x=1), lookup(x=2))
        w = await quorum(2, lookup(x=4), lookup(x=5), lookup(x=n))
        z = await within(5, lookup(x=8))
        await send_email(to="a@x", body=str([v, w, z]))
    """,
    ),
    case(
        'unawaited_call_awaited_later',
        """
        p = lookup(x=1)
        await send_email(to="a@x", body="between")
        q = lookup(x=n * 4)
        await q
        await p
    """,
    ),
    case(
        'closure_helper',
        """
        async def outer(k: int) -> int:
            async def inner(j: int) -> int:
                return await lookup(x=j)
            s = 0
            for i in range(k):
                s += await inner(i * 4)
            return s
        await outer(3)
        await outer(n)
    """,
    ),
    case(
        'helper_retries_in_except',
        """
        async def safe(k: int) -> int:
            try:
                return await lookup(x=k)
            except Exception:
                return await lookup(x=k + 1)
        for i in range(4):
            await safe(i)
        await notify(msg="ok")
    """,
    ),
    case(
        'check_in_helper_with_early_exit',
        """
        async def checked(tid: str) -> bool:
            if flag:
                return False
            await check_entitlement(ticket_id=tid)
            return True
        try:
            if await checked(t):
                await issue_refund(ticket_id=t, cents=10)
        except Exception:
            pass
    """,
    ),
    case(
        'refund_of_another_ticket',
        """
        await check_entitlement(ticket_id="T-9")
        try:
            await issue_refund(ticket_id=t, cents=10)
        except PermissionError:
            await send_email(to="ops@x", body="refused")
    """,
    ),
    case(
        'walrus_fstring_assert',
        """
        if (v := await lookup(x=n)) > 2:
            await send_email(to="a@x", body=f"{await lookup(x=v * 4)}")
        assert await notify(msg="x")
    """,
    ),
    case(
        'conditional_helper_definitions',
        """
        if flag:
            async def act(k: int) -> int:
                return await lookup(x=k)
        else:
            async def act(k: int) -> int:
                await send_email(to="a@x", body="b")
                return k
        for i in range(3):
            await act(i * 4)
    """,
    ),
    case(
        'helpers_passed_as_values',
        """
        async def a1(k: int) -> int:
            return await lookup(x=k)
        async def a2(k: int) -> int:
            await send_email(to="a@x", body=str(k))
            return k
        fs = [a1, a2]
        for f in fs * 3:
            await f(n * 4)
    """,
        complete=None,
    ),
    case(
        'helper_as_argument',
        """
        async def twice(f, k: int) -> int:
            return await f(k) + await f(k + 4)
        async def look(k: int) -> int:
            return await lookup(x=k)
        await twice(look, 0)
        await twice(look, n * 4)
    """,
        complete=None,
    ),
    case(
        'alias_of_callee',
        """
        send = send_email
        for i in range(4):
            await send(to="a@x", body=str(i))
    """,
    ),
    case(
        'callee_in_a_list',
        """
        tools = [lookup]
        for i in range(n):
            await tools[0](x=i * 4)
        await notify(msg="x")
    """,
    ),
    case(
        'callee_as_argument',
        """
        async def run(f, k: int) -> int:
            return await f(x=k)
        await run(lookup, 4)
        await run(lookup, n * 4)
    """,
    ),
    case(
        'callee_as_default_value',
        """
        async def g(f=send_email) -> bool:
            return await f(to="a@x", body="b")
        for i in range(3):
            await g()
    """,
    ),
    case(
        'nonlocal_counter',
        """
        async def outer() -> int:
            c = 0
            async def bump() -> None:
                nonlocal c
                c += 1
                await lookup(x=c * 4)
            for i in range(n):
                await bump()
            return c
        await outer()
        await send_email(to="a@x", body="x")
    """,
    ),
    case(
        'helper_coroutine_awaited_later',
        """
        async def pair(k: int) -> int:
            a = await lookup(x=k)
            return a + await lookup(x=k + 4)
        p = pair(n * 4)
        await send_email(to="a@x", body="between")
        await p
    """,
    ),
    case(
        'first_of_over_helpers',
        """
        async def slow(k: int) -> int:
            await lookup(x=k)
            return await lookup(x=k + 4)
        async def fast(k: int) -> int:
            return await lookup(x=k)
        v = await first_of(slow(n), fast(n + 1))
        w = await within(5, slow(0))
        await send_email(to="a@x", body=str(v + w))
    """,
    ),
    case(
        'script_raises_after_a_call',
        """
        for i in range(3):
            try:
                v = await lookup(x=i + n)
                if v > 3:
                    raise ValueError("big")
                await notify(msg="small")
            except ValueError:
                await send_email(to="a@x", body="big")
                break
    """,
    ),
    case(
        'match_guard_calls',
        """
        match n:
            case 0 if await lookup(x=0) > 0:
                await send_email(to="a@x", body="zero")
            case 3 | 5:
                await notify(msg="odd")
            case _:
                await lookup(x=8)
    """,
    ),
    case(
        'while_else_and_nested_def_in_loop',
        """
        c = 0
        while c < n:
            c += 1
            async def step(k: int) -> int:
                return await lookup(x=k * 4)
            await step(c)
        else:
            await send_email(to="a@x", body="done")
    """,
    ),
    case(
        'lambda_returning_a_gather',
        """
        import asyncio
        both = lambda k: asyncio.gather(lookup(x=k), lookup(x=k + 4))
        for i in range(2):
            await both(i * 8)
        await notify(msg="x")
    """,
    ),
    case(
        'settled_directly',
        """
        r = await settled(check_entitlement(ticket_id=t))
        if r["ok"]:
            await issue_refund(ticket_id=t, cents=10)
        else:
            await send_email(to="ops@x", body=r.get("error", ""))
    """,
    ),
    case(
        'callee_in_a_dict',
        """
        table = {"mail": send_email}
        for i in range(n):
            await table["mail"](to="a@x", body=str(i))
    """,
    ),
    case(
        'refund_in_loop_after_one_check',
        """
        e = await check_entitlement(ticket_id=t)
        for i in range(n):
            await issue_refund(ticket_id=t, cents=e["max_cents"])
    """,
    ),
    case(
        'return_inside_finally_loop',
        """
        async def attempt(k: int) -> int:
            for i in range(3):
                try:
                    return await lookup(x=k + i)
                except Exception:
                    await send_email(to="ops@x", body=str(i))
            return -1
        await attempt(n)
        await attempt(3)
        await notify(msg="x")
    """,
    ),
    case(
        'coroutines_kept_then_gathered',
        """
        import asyncio
        async def pair(k: int) -> int:
            a = await lookup(x=k * 4)
            return a + await lookup(x=k * 4 + 1)
        ps = [pair(i) for i in range(3)]
        await send_email(to="a@x", body="between")
        await asyncio.gather(*ps)
        await notify(msg="x")
    """,
    ),
    case(
        'coroutines_appended_in_a_loop',
        """
        import asyncio
        async def pair(k: int) -> int:
            return await lookup(x=k * 4)
        aws = []
        for i in range(n):
            aws.append(pair(i))
            aws.append(lookup(x=i * 8))
        await asyncio.gather(*aws)
        await send_email(to="a@x", body="x")
    """,
    ),
    case(
        'forward_reference_between_helpers',
        """
        async def first(k: int) -> int:
            return await second(k) + await second(k + 4)
        async def second(k: int) -> int:
            return await lookup(x=k)
        for i in range(2):
            await first(i * 8)
    """,
    ),
    case(
        'helper_alias_and_default_helper',
        """
        async def mail(i: int) -> bool:
            return await send_email(to="a@x", body=str(i))
        g = mail
        async def run(f=mail) -> bool:
            return await f(0)
        for i in range(3):
            await g(i)
            await run()
    """,
    ),
    case(
        'function_returning_a_call',
        """
        def start(k: int):
            return lookup(x=k)
        def later(k: int):
            return lambda: lookup(x=k)
        for i in range(3):
            await start(i * 4)
            await later(i * 4)()
    """,
    ),
    case(
        'loop_bounds_of_every_shape',
        """
        for ch in "abc":
            await lookup(x=0)
        for i in range(10, 0, -3):
            await lookup(x=4)
        for x in [await lookup(x=8), await lookup(x=12)]:
            await notify(msg=str(x))
        while False:
            await send_email(to="a@x", body="never")
    """,
    ),
    case(
        'exception_from_a_helper',
        """
        async def risky(k: int) -> int:
            v = await lookup(x=k)
            return v
        for i in range(n):
            try:
                await risky(i)
            except Exception:
                await send_email(to="ops@x", body=str(i))
                continue
            await notify(msg=str(i))
    """,
    ),
    case(
        'finally_runs_on_return',
        """
        async def guarded(k: int) -> int:
            try:
                return await lookup(x=k)
            finally:
                await send_email(to="a@x", body="finally")
        try:
            await guarded(n)
        except Exception:
            await notify(msg="failed")
        await guarded(0)
    """,
    ),
    case(
        'helper_in_a_comprehension_condition',
        """
        async def pred(k: int) -> bool:
            return await lookup(x=k) > 2
        xs = [i for i in range(4) if await pred(i * 4)]
        await send_email(to="a@x", body=str(xs))
    """,
    ),
    case(
        'conditional_awaitables',
        """
        import asyncio
        v = await (lookup(x=1) if flag else lookup(x=2))
        r = await asyncio.gather(lookup(x=4) if flag else notify(msg="x"), lookup(x=8))
        await send_email(to="a@x", body=str(v))
    """,
    ),
    case(
        'identity_and_wrapping_decorators',
        """
        def same(f):
            return f
        def twice(f):
            async def wrapper(k: int) -> int:
                await f(k)
                return await f(k + 4)
            return wrapper
        @same
        async def one(k: int) -> int:
            return await lookup(x=k)
        @twice
        async def two(k: int) -> int:
            return await lookup(x=k + 8)
        await one(0)
        await two(n * 4)
        await notify(msg="x")
    """,
        complete=None,
    ),
    case(
        'defaults_evaluated_per_definition',
        """
        for i in range(3):
            async def g(v=lookup(x=i * 4)) -> int:
                return await v
            await g()
        f = lambda w=send_email(to="a@x", body="default"): w
        await f()
    """,
    ),
    case(
        'shared_state_in_recursive_helper',
        """
        state = {"count": 0}
        async def bump() -> None:
            state["count"] += 1
            if state["count"] < 4:
                await lookup(x=state["count"] * 4)
                await bump()
        await bump()
        await send_email(to="a@x", body=str(state))
    """,
    ),
    case(
        'loop_over_a_conditional_range',
        """
        for i in (range(3) if flag else range(5)):
            await lookup(x=i * 4)
        await notify(msg="x")
    """,
    ),
    case(
        'sorted_with_a_calling_key',
        """
        async def score(k: int) -> int:
            return await lookup(x=k * 4)
        keys = [score(k) for k in range(3)]
        vals = [await c for c in keys]
        best = sorted(range(3), key=lambda i: vals[i])
        await send_email(to="a@x", body=str(best))
    """,
    ),
    case(
        'fire_and_forget_call',
        """
        pending = lookup(x=4)
        for i in range(2):
            pending = send_email(to="a@x", body=str(i))
        await lookup(x=8)
    """,
    ),
    case(
        'calls_in_loop_headers_and_conditions',
        """
        for i in range(await lookup(x=n)):
            await notify(msg=str(i))
        for j in [await lookup(x=0)] * 3:
            await lookup(x=j * 4)
        c = 0
        while await lookup(x=c * 4) < 9:
            c += 1
        await send_email(to="a@x", body=str(c))
    """,
    ),
    case(
        'calls_in_elif_and_assert_message',
        """
        if n == 0:
            await lookup(x=0)
        elif await lookup(x=n * 4) > 5:
            await notify(msg="big")
        elif await notify(msg="small"):
            await send_email(to="a@x", body="small")
        try:
            assert flag, await lookup(x=12)
        except AssertionError:
            await send_email(to="ops@x", body="assert")
    """,
    ),
    case(
        'calls_in_subscripts_slices_and_keys',
        """
        xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        d = {await lookup(x=0): await lookup(x=4)}
        v = xs[await lookup(x=0):await lookup(x=8)]
        d[await lookup(x=12)] = 1
        await send_email(to="a@x", body=str([d, v, xs[await lookup(x=n * 4) % 10]]))
    """,
    ),
    case(
        'chained_short_circuits',
        """
        a = flag and await lookup(x=1) or await notify(msg="or")
        b = (not flag) or (await lookup(x=n) > 2 and await notify(msg="and"))
        c = await lookup(x=4) if flag else (await lookup(x=8) if n > 2 else await notify(msg="else"))
        await send_email(to="a@x", body=str([a, b, c]))
    """,
    ),
    case(
        'raise_from_plain_code',
        """
        for i in range(4):
            try:
                v = await lookup(x=i)
                d = {"a": 1}
                if v > n:
                    d["missing"] += 1
                await notify(msg="fine")
            except KeyError:
                await send_email(to="ops@x", body="key")
            except Exception:
                await send_email(to="ops@x", body="other")
                raise
    """,
    ),
    case(
        'break_in_finally_and_try_in_while',
        """
        c = 0
        while c < 5:
            c += 1
            try:
                await lookup(x=c + n)
            except Exception:
                await send_email(to="ops@x", body="e")
            finally:
                if c == 3:
                    break
            await notify(msg=str(c))
        else:
            await send_email(to="a@x", body="no break")
    """,
    ),
    case(
        'list_of_helper_coroutines_awaited_in_loop',
        """
        async def one(k: int) -> int:
            await lookup(x=k)
            return await lookup(x=k + 8)
        for co in [one(0), one(4), one(n)]:
            await co
            await notify(msg="x")
    """,
    ),
    case(
        'first_of_quorum_within_of_helpers_in_loop',
        """
        async def two(k: int) -> int:
            await lookup(x=k)
            return await lookup(x=k + 4)
        for i in range(2):
            await first_of(two(i * 8), lookup(x=n))
            await quorum(1, two(i), two(i + 8))
            await within(3, two(i * 8))
        await notify(msg="x")
    """,
    ),
    case(
        'assert_message_is_evaluated_only_on_failure',
        """
        try:
            await lookup(x=0)
            assert flag, await lookup(x=12)
            await send_email(to="a@x", body="after")
        except AssertionError:
            await notify(msg="assert")
    """,
    ),
    case(
        'starred_argument_after_a_keyword',
        """
        async def g(*args: int, x: int = 0) -> int:
            return x
        await g(x=await lookup(x=0), *[await notify(msg="a")])
        await send_email(to="a@x", body="x")
    """,
    ),
    case(
        'task_outlives_a_failed_gather',
        """
        import asyncio
        async def pair(k: int) -> int:
            a = await lookup(x=k)
            await notify(msg=str(a))
            return a + await lookup(x=k + 8)
        try:
            await asyncio.gather(pair(n), pair(0), pair(4))
        except Exception:
            await send_email(to="ops@x", body="failed")
        await send_email(to="a@x", body="after")
        await check_entitlement(ticket_id=t)
    """,
    ),
    # 2,048 inlined calls of l11: past the analysis's inline limit, while a run makes a few dozen calls.
    case(
        'helpers_past_the_inline_limit',
        """
        async def l0(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="0")
            return await l1(k - 1) + await l1(k - 2)
        async def l1(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="1")
            return await l2(k - 1) + await l2(k - 2)
        async def l2(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="2")
            return await l3(k - 1) + await l3(k - 2)
        async def l3(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="3")
            return await l4(k - 1) + await l4(k - 2)
        async def l4(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="4")
            return await l5(k - 1) + await l5(k - 2)
        async def l5(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="5")
            return await l6(k - 1) + await l6(k - 2)
        async def l6(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="6")
            return await l7(k - 1) + await l7(k - 2)
        async def l7(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="7")
            return await l8(k - 1) + await l8(k - 2)
        async def l8(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="8")
            return await l9(k - 1) + await l9(k - 2)
        async def l9(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="9")
            return await l10(k - 1) + await l10(k - 2)
        async def l10(k: int) -> int:
            if k <= 0:
                return await lookup(x=4)
            await send_email(to="a@x", body="10")
            return await l11(k - 1) + await l11(k - 2)
        async def l11(k: int) -> int:
            return await lookup(x=k * 4)
        await l0(n)
        await notify(msg="x")
    """,
    ),
    # Evaluation order, one call a line, so each transition is between different sites.
    case(
        'evaluation_order_of_assignments',
        """
        d = {1: 0, 5: 0}
        xs = [3, 1]
        d[
            await lookup(x=0)
        ] = (
            await lookup(x=24)
        )
        d[
            await lookup(x=4)
        ] += (
            await lookup(x=8)
        )
        (xs[
            await lookup(x=n) % 2
        ], xs[
            await lookup(x=12) % 2
        ]) = (
            await lookup(x=16),
            await lookup(x=20),
        )
    """,
    ),
    case(
        'evaluation_order_of_expressions',
        """
        xs = [1, 2, 3, 4, 5, 6]
        d = {
            await lookup(x=0):
            await lookup(x=4),
            await notify(msg="k"):
            await lookup(x=8),
        }
        v = xs[
            await lookup(x=0) % 2:
            await lookup(x=n):
            1]
        w = await lookup(x=
            await lookup(x=
                await lookup(x=0) * 4
            ) * 4
        )
        await send_email(to="a@x", body=str([d, v, w]))
    """,
    ),
    case(
        'evaluation_order_of_call_arguments',
        """
        async def g(a: int, *rest: int, b: int = 0, **more: int) -> int:
            return a
        v = await g(
            await lookup(x=0),
            *[
                await lookup(x=4)],
            b=
            await lookup(x=8),
            **{"z":
               await lookup(x=n)})
        await send_email(to="a@x", body=str(v))
    """,
    ),
    case(
        'alias_and_direct_call_on_one_line',
        """
        look = lookup
        vs = await settle_all(lookup(x=9), look(x=n), lookup(x=4))
        for i in range(2):
            await notify(msg=str(await look(x=i * 4) + await lookup(x=8)))
    """,
    ),
    case(
        'guarded_callee_as_a_value',
        """
        r = issue_refund
        async def pay(f, k: int) -> str:
            return await f(ticket_id=t, cents=k)
        try:
            await r(ticket_id=t, cents=1)
        except PermissionError:
            await send_email(to="ops@x", body="refused")
        if flag:
            await check_entitlement(ticket_id="T-1")
        try:
            await pay(issue_refund, 2)
        except Exception:
            await send_email(to="ops@x", body="failed")
    """,
    ),
    case(
        'gather_imported_other_ways',
        """
        import asyncio as aio
        from asyncio import gather
        async def pair(k: int) -> int:
            a = await lookup(x=k * 4)
            await notify(msg=str(a))
            return a
        await aio.gather(pair(0), pair(n))
        await gather(*[pair(i) for i in range(2)])
        await send_email(to="a@x", body="x")
    """,
    ),
    case(
        'gather_of_settled_helpers',
        """
        import asyncio
        async def pair(k: int) -> int:
            a = await lookup(x=k)
            await notify(msg=str(a))
            return a + await lookup(x=k + 4)
        rs = await asyncio.gather(*[settled(pair(i)) for i in range(n)], settled(lookup(x=3)))
        for r in rs:
            if not r["ok"]:
                await send_email(to="ops@x", body=r.get("error", ""))
    """,
    ),
    case(
        'recursive_task_outlives_a_failed_gather',
        """
        import asyncio
        async def walk(k: int) -> int:
            if k <= 0:
                return 0
            if k == 1:
                await lookup(x=3)
            await lookup(x=0)
            await lookup(x=4)
            await notify(msg=str(k))
            await lookup(x=8)
            await asyncio.gather(walk(k - 1), walk(k - 2))
            return 1
        try:
            await walk(n)
        except Exception:
            await send_email(to="ops@x", body="failed")
            await send_email(to="ops@x", body="again")
            await send_email(to="ops@x", body="and again")
        await check_entitlement(ticket_id=t)
    """,
    ),
    # Constructs a workflow never needs and that defeat the analysis: the checker refuses them.
    case(
        'eval_a_callee',
        """
        e = eval("send_" + "email")
        await e(to="z@x", body="w")
    """,
        refused=True,
    ),
    case(
        'exec_a_call',
        """
        exec("x = 1")
        await send_email(to="z@x", body="w")
    """,
        refused=True,
    ),
    case(
        'compile_a_call',
        """
        c = compile("1", "s", "eval")
        await send_email(to="z@x", body="w")
    """,
        refused=True,
    ),
    case(
        'globals_lookup',
        """
        f = globals()["send_" + "email"]
        await f(to="z@x", body="w")
    """,
        refused=True,
    ),
    case(
        'vars_lookup',
        """
        f = vars()["send_email"]
        await f(to="z@x", body="w")
    """,
        refused=True,
    ),
    case(
        'computed_getattr',
        """
        import asyncio
        g = getattr(asyncio, "gat" + "her")
        await g(send_email(to="z@x", body="w"))
    """,
        refused=True,
    ),
    case(
        'class_method_calls',
        """
        class Mailer:
            async def send(self, i: int) -> bool:
                return await send_email(to="x@x", body=str(i))
        m = Mailer()
        for i in range(n + 1):
            await m.send(i)
    """,
        refused=True,
    ),
    case(
        'local_def_shadows_check',
        """
        async def check_entitlement(ticket_id: str) -> dict[str, bool]:
            return {"eligible": True}
        await check_entitlement(ticket_id=t)
        await issue_refund(ticket_id=t, cents=100)
    """,
        refused=True,
    ),
    case(
        'assignment_shadows_callee',
        """
        async def fake(x: int) -> int:
            return x
        lookup = fake
        await lookup(x=1)
        await notify(msg="x")
    """,
        refused=True,
    ),
    case(
        'import_shadows_callee',
        """
        from asyncio import gather as lookup
        await lookup()
        await notify(msg="x")
    """,
        refused=True,
    ),
    case(
        'parameter_shadows_callee',
        """
        async def f(lookup: int) -> int:
            return lookup + 1
        await f(1)
        await notify(msg="x")
    """,
        refused=None,
    ),
    case(
        'loop_variable_shadows_callee',
        """
        for send_email in [1, 2]:
            pass
        await lookup(x=0)
    """,
        refused=None,
    ),
    # A name bound once to a literal and only looped over is bounded by the literal; any other use spoils it.
    case(
        'constant_list_looped_over',
        """
        tickets = ["T-1", "T-2", "T-3"]
        for t in tickets:
            await check_entitlement(ticket_id=t)
        xs = [await lookup(x=4 * i) for i in (0, 1)]
        codes = {"a": 1, "b": 2}
        ys = [await notify(msg=k) for k in codes]
    """,
    ),
    case(
        'constant_list_grown_by_a_method',
        """
        xs = [0, 4]
        xs.append(8)
        xs.extend([12, 16])
        for x in xs:
            await lookup(x=x)
    """,
    ),
    case(
        'constant_list_grown_through_an_alias',
        """
        xs = [0]
        ys = xs
        ys += [4, 8, 12]
        for x in xs:
            await lookup(x=x)
    """,
    ),
    case(
        'constant_list_grown_by_a_helper',
        """
        xs = [0]
        def grow(v: list[int]) -> None:
            v.append(4)
            v.append(8)
        grow(xs)
        for x in xs:
            await lookup(x=x)
    """,
    ),
    case(
        'constant_list_rebound_through_global',
        """
        xs = [0]
        def more() -> None:
            global xs
            xs = [0, 4, 8, 12]
        more()
        for x in xs:
            await lookup(x=x)
    """,
        refused=None,
    ),
    case(
        'constant_list_rebound_at_the_top',
        """
        xs = [0]
        if n > 1:
            xs = [0, 4, 8, 12, 16]
        for x in xs:
            await lookup(x=x)
    """,
    ),
    case(
        'constant_list_augmented',
        """
        xs = [0]
        xs *= 6
        for x in xs:
            await lookup(x=x)
    """,
    ),
    case(
        'constant_list_shadowed_by_a_parameter',
        """
        xs = [0]
        async def each(xs: list[int]) -> None:
            for x in xs:
                await lookup(x=x)
        await each([0, 4, 8, 12])
    """,
    ),
    case(
        'constant_list_iterated_while_growing',
        """
        xs = [0, 4]
        for x in xs:
            if len(xs) < 6:
                xs.append(x + 4)
            await lookup(x=x)
    """,
    ),
]


# -- the grammar ---------------------------------------------------------------------------------


class Grammar:
    """A random script over the catalog: helpers (one recursive, bounded by its argument; two calling each other,
    through a gather; one a lambda; helpers
    calling earlier ones, some with a closure inside or a decorator; now and then a helper or `lookup` used as
    a value), loops with literal and input bounds
    (with `else`), while loops with counters and calls in their conditions, try/except/else/finally, raise,
    assert, break/continue, early returns, gathers, settle_all, first_of, quorum and within over calls and
    helpers, a helper's coroutine awaited later, comprehensions, match, short-circuit and conditional
    expressions. Every script it writes type-checks; its arguments and conditions depend on the inputs, so
    runs of one script differ."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.helpers: list[str] = []
        self.lines: list[str] = []
        self.kept = 0
        """Coroutines kept in a variable to be awaited later (`p0`, `p1`...)."""
        self.decorators: list[str] = []
        self.lookups = ['lookup']
        """Names `lookup` is called by (an alias makes it a dynamic use)."""

    def script(self) -> str:
        rng = self.rng
        self.lines = ['import asyncio']
        if rng.random() < 0.4:
            self.function('rec', recursive=True)
        if rng.random() < 0.2:
            self.mutual()
        for i in range(rng.randint(0, 3)):
            self.function(f'h{i}')
        if rng.random() < 0.3:
            self.emit(0, f'f0 = lambda k: {self.call(["k"])}')
            self.helpers.append('f0')
        if self.helpers and rng.random() < 0.2:  # a helper used as a value: its calls may run anywhere
            self.emit(0, f'g0 = {rng.choice(self.helpers)}')
            self.helpers.append('g0')
        if rng.random() < 0.15:  # a callee used as a value: a dynamic use
            self.emit(0, 'look = lookup')
            self.lookups.append('look')
        self.emit(0, 'v = 0')
        caught = rng.random() < 0.5  # half the scripts catch what escapes, so more runs reach their end
        if caught:
            self.emit(0, 'try:')
        for _ in range(rng.randint(1, 3)):
            self.block(1, int(caught), in_loop=False, in_function=False, names=['n'], in_try=caught)
        if caught:
            self.emit(0, 'except Exception:')
            self.emit(1, 'await send_email(to="ops@x", body="gave up")')
        return '\n'.join(self.lines) + '\n'

    def function(self, name: str, *, recursive: bool = False) -> None:
        rng = self.rng
        if not recursive and rng.random() < 0.15:  # decorated: a value to the analysis, run where it is called
            if 'same' not in self.decorators:
                self.lines[1:1] = ['def same(f):', '    return f']
                self.decorators.append('same')
            self.emit(0, '@same')
        self.emit(0, f'async def {name}(k: int) -> int:')
        self.emit(1, 'v = k')
        if recursive:
            self.emit(1, 'if k <= 0:')
            self.emit(2, 'return 0')
        inner = not recursive and rng.random() < 0.25  # a closure, callable in this body only
        if inner:
            self.emit(1, 'async def inner(j: int) -> int:')
            self.emit(2, f'return await {self.call(["j", "k"])}')
            self.helpers.append('inner')
        self.block(2, 1, in_loop=False, in_function=True, names=['k'])
        if inner:
            self.helpers.remove('inner')
        if recursive:
            self.emit(1, f'v += await {name}(k - 1)')
        self.emit(1, 'return v')
        self.helpers.append(name)

    def mutual(self) -> None:
        """Two functions that call each other, one of them through a gather that doubles the calls."""
        for name, tail in (
            ('m0', 'return v + await m1(k - 1)'),
            ('m1', 'vs = await asyncio.gather(m0(k - 2), m0(k - 3))\nreturn v + len(vs)'),
        ):
            self.emit(0, f'async def {name}(k: int) -> int:')
            self.emit(1, 'v = k')
            self.emit(1, 'if k <= 0:')
            self.emit(2, 'return 0')
            self.block(2, 1, in_loop=False, in_function=True, names=['k'])
            self.lines.extend('    ' + line for line in tail.split('\n'))
        self.helpers.append('m0')

    def emit(self, indent: int, text: str) -> None:
        self.lines.extend('    ' * indent + line for line in text.split('\n'))

    def split(self) -> str:
        """Where an expression may break its line (inside brackets): then each call has a line of its own, and
        the order of the calls of one statement is checked call by call."""
        return '\n        ' if self.rng.random() < 0.4 else ' '

    def block(
        self, depth: int, indent: int, *, in_loop: bool, in_function: bool, names: list[str], in_try: bool = False
    ) -> None:
        for _ in range(self.rng.randint(1, 4 if depth < 3 else 2)):
            self.statement(depth, indent, in_loop=in_loop, in_function=in_function, names=names, in_try=in_try)

    # -- expressions

    def int_expr(self, names: list[str]) -> str:
        rng = self.rng
        choice = rng.random()
        if choice < 0.35:
            return str(rng.randint(0, 12))
        name = rng.choice([*names, 'v'])
        if choice < 0.7:
            return name
        return f'{name} % {rng.randint(2, 6)} + {rng.randint(0, 4)}'

    def condition(self, names: list[str]) -> str:
        rng = self.rng
        return rng.choice(
            [
                'flag',
                'not flag',
                f'n > {rng.randint(0, 4)}',
                f'v % 2 == {rng.randint(0, 1)}',
                f'{rng.choice([*names, "v"])} < {rng.randint(1, 6)}',
                't.startswith("T")',
                f'await {self.call(names)} > {rng.randint(2, 8)}',
            ]
        )

    def ticket(self) -> str:
        return self.rng.choice(['t', 't', '"T-1"', '"bad-2"'])

    def call(self, names: list[str]) -> str:
        """An awaitable int call: a catalog call or a helper."""
        if self.helpers and self.rng.random() < 0.4:
            return f'{self.rng.choice(self.helpers)}({self.int_expr(names)})'
        return f'{self.rng.choice(self.lookups)}(x={self.int_expr(names)})'

    def iterable(self) -> str:
        rng = self.rng
        return rng.choice([f'range({rng.randint(0, 3)})', 'range(n)', f'[{rng.randint(0, 5)}, {rng.randint(0, 5)}]'])

    # -- statements

    def statement(
        self, depth: int, indent: int, *, in_loop: bool, in_function: bool, names: list[str], in_try: bool = False
    ) -> None:
        rng = self.rng
        kinds = ['call', 'call', 'notify', 'email', 'check', 'refund', 'short', 'ternary']
        if in_try:  # raised where a handler may catch it (most of the time), so runs go on
            kinds += ['raise', 'assert']
        if depth < 3:
            kinds += ['if', 'for', 'while', 'try', 'join', 'comprehension', 'kept', 'match']
        if in_loop:
            kinds += ['break', 'continue']
        if in_function:
            kinds += ['return']
        kind = rng.choice(kinds)
        where = {'in_loop': in_loop, 'in_function': in_function, 'names': names, 'in_try': in_try}
        if kind in ('if', 'for', 'while', 'try', 'match', 'kept'):
            getattr(self, f'compound_{kind}')(depth, indent, **where)
        elif kind == 'join':
            self.join(indent, names)
        else:
            self.simple(kind, indent, names)

    def simple(self, kind: str, indent: int, names: list[str]) -> None:
        rng = self.rng
        expr = self.int_expr(names)
        if kind == 'email':
            self.emit(indent, f'await send_email(to="a@x", body=str({expr}))')
        elif kind == 'assert':  # its message is evaluated only when the test fails
            self.emit(indent, f'assert {self.condition(names)}, await {self.call(names)}')
        elif kind in ('break', 'continue', 'return', 'raise'):
            self.emit(indent, f'if {self.condition(names)}:')
            self.emit(indent + 1, {'return': 'return v', 'raise': 'raise ValueError("raised")'}.get(kind, kind))
        elif kind == 'comprehension':
            cond = f' if {self.condition([*names, "j"])}' if rng.random() < 0.5 else ''
            element = f'await {self.call([*names, "j"])}'
            self.emit(indent, f'v += len([{element}{self.split()}for j in {self.iterable()}{cond}])')
        else:
            second = f'{self.split()}+ await {self.call(names)}' if rng.random() < 0.3 else ''
            self.guarded(
                indent,
                {
                    'call': f'v += (await {self.call(names)}{second})',
                    'notify': f'await notify(msg=str({expr}))',
                    'check': f'e = await check_entitlement(ticket_id={self.ticket()})',
                    'refund': f'await issue_refund(ticket_id={self.ticket()}, cents={expr})',
                    'short': f'b = {self.condition(names)} {rng.choice(["or", "and"])} await notify(msg="s")',
                    'ternary': f'v = await {self.call(names)} if {self.condition(names)} else v',
                }[kind],
            )

    def guarded(self, indent: int, line: str) -> None:
        """`line`, most of the time in a try whose handler mails: a call that fails or is refused does not always
        end the run, so the rest of the script is reached too."""
        if self.rng.random() < 0.4:
            self.emit(indent, line)
            return
        self.emit(indent, 'try:')
        self.emit(indent + 1, line)
        self.emit(indent, f'except {self.rng.choice(["Exception", "PermissionError"])}:')
        self.emit(indent + 1, 'await send_email(to="ops@x", body="failed")')

    def join(self, indent: int, names: list[str]) -> None:
        rng = self.rng
        kind = rng.choice(
            ['asyncio.gather', 'settle_all', 'asyncio.gather', 'settle_all', 'first_of', 'quorum', 'within']
        )
        if kind == 'within':
            self.emit(indent, f'v += await within(5, {self.call(names)})')
            return
        if kind in ('asyncio.gather', 'settle_all') and rng.random() < 0.4:
            args = f'*[{self.call([*names, "j"])} for j in {self.iterable()}]'
        else:
            args = ','.join(f'{self.split()}{self.call(names)}' for _ in range(rng.randint(1, 3)))
        if kind == 'quorum':
            args = f'1, {args}'
        self.guarded(indent, f'vs = await {kind}({args})')

    def compound_if(self, depth: int, indent: int, **where: Any) -> None:
        self.emit(indent, f'if {self.condition(where["names"])}:')
        self.block(depth + 1, indent + 1, **where)
        if self.rng.random() < 0.3:
            self.emit(indent, f'elif {self.condition(where["names"])}:')
            self.block(depth + 1, indent + 1, **where)
        if self.rng.random() < 0.5:
            self.emit(indent, 'else:')
            self.block(depth + 1, indent + 1, **where)

    def compound_for(self, depth: int, indent: int, **where: Any) -> None:
        var = f'i{depth}'
        self.emit(indent, f'for {var} in {self.iterable()}:')
        self.block(depth + 1, indent + 1, **{**where, 'in_loop': True, 'names': [*where['names'], var]})
        self.loop_else(depth, indent, **where)

    def compound_while(self, depth: int, indent: int, **where: Any) -> None:
        rng = self.rng
        var = f'c{depth}'
        self.emit(indent, f'{var} = 0')
        test = f'{var} < {rng.choice(["n", str(rng.randint(0, 3))])}'
        if rng.random() < 0.3:
            test += f' and await {self.call(where["names"])} > {rng.randint(0, 6)}'
        self.emit(indent, f'while {test}:')
        self.emit(indent + 1, f'{var} += 1')  # first, so a `continue` cannot skip it
        self.block(depth + 1, indent + 1, **{**where, 'in_loop': True, 'names': [*where['names'], var]})
        self.loop_else(depth, indent, **where)

    def loop_else(self, depth: int, indent: int, **where: Any) -> None:
        if self.rng.random() < 0.25:
            self.emit(indent, 'else:')
            self.block(depth + 1, indent + 1, **where)

    def compound_try(self, depth: int, indent: int, **where: Any) -> None:
        rng = self.rng
        self.emit(indent, 'try:')
        self.block(depth + 1, indent + 1, **{**where, 'in_try': True})
        for error in rng.sample(['ValueError', 'PermissionError', 'RuntimeError', 'Exception'], rng.randint(1, 2)):
            self.emit(indent, f'except {error}:')
            self.block(depth + 1, indent + 1, **where)
        if rng.random() < 0.3:
            self.emit(indent, 'else:')
            self.block(depth + 1, indent + 1, **where)
        if rng.random() < 0.3:
            self.emit(indent, 'finally:')
            self.block(depth + 1, indent + 1, **where)

    def compound_match(self, depth: int, indent: int, **where: Any) -> None:
        rng = self.rng
        self.emit(indent, f'match {rng.choice(["n", "v % 4"])}:')
        for value in rng.sample(range(4), rng.randint(1, 2)):
            guard = f' if {self.condition(where["names"])}' if rng.random() < 0.4 else ''
            self.emit(indent + 1, f'case {value}{guard}:')
            self.block(depth + 1, indent + 2, **where)
        if rng.random() < 0.5:
            self.emit(indent + 1, 'case _:')
            self.block(depth + 1, indent + 2, **where)

    def compound_kept(self, depth: int, indent: int, **where: Any) -> None:
        """A call or a helper's coroutine kept in a variable, awaited after more statements (or never, when
        they return, break or raise first)."""
        name = f'p{self.kept}'
        self.kept += 1
        self.emit(indent, f'{name} = {self.call(where["names"])}')
        self.block(depth + 1, indent, **where)
        self.emit(indent, f'v += await {name}')


def generated(seed: int) -> str:
    return Grammar(seed).script()
