"""A process for the predicate fingerprint test: a refund catalog whose rules' `when=` are written every way a
catalog module writes them (lambdas in a loop, closures, a factory, a bound method, functools.partial, a builtin,
module-level helpers and data, library functions imported by name). `run` stops the workflow at an approval
(after doing other work first, as a long-lived process has) and prints its run id; `resume`, in a fresh process
with another hash seed, resumes it and prints its value as JSON. An unchanged catalog is no catalog change.

    python predicate_worker.py run STORE
    python predicate_worker.py resume STORE RUN_ID
"""

from __future__ import annotations

import functools
import json
import operator
import re
import sys
from collections.abc import Callable
from fnmatch import fnmatch
from re import fullmatch

from harness import After, Harness

LIMITS = {'gold': 5000, 'silver': 1500}
TIERS = frozenset({'gold', 'silver', 'bronze'})


def within_limit(result: dict, args: dict) -> bool:
    return args['cents'] <= LIMITS[result['tier']]


def at_most(cents: int) -> Callable[[dict, dict], bool]:
    return lambda result, args: args['cents'] <= cents


class Desk:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def allows(self, result: dict, args: dict) -> bool:
        return args['cents'] <= self.cents


defaults = [lambda result, n=n: len(result) > n for n in range(2)]
late = [lambda result: len(result) > n - 2 for n in range(2)]  # noqa: B023 (each reads the loop's last n)
RULES = [
    After('check_entitlement', same=('ticket_id',), when=lambda result: result['eligible'], once=True),
    After('check_entitlement', when=within_limit),
    After('check_entitlement', when=at_most(700)),
    After('check_entitlement', when=Desk(900).allows),
    After('check_entitlement', when=functools.partial(operator.ne, None)),
    After('check_entitlement', when=bool),
    After('check_entitlement', when=defaults[1]),
    After('check_entitlement', when=late[0]),
    After('check_entitlement', when=lambda result: result['tier'] in TIERS and result['tier'] in {'gold', 'silver'}),
    After('check_entitlement', when=lambda result, args: fullmatch(r'T-\d+', args['ticket_id']) is not None),
    After('check_entitlement', when=lambda result, args: re.fullmatch(r'T-\d+', args['ticket_id']) is not None),
    After('check_entitlement', when=lambda result, args: fnmatch(args['ticket_id'], 'T-*')),
    After('check_entitlement', when=lambda result: json.loads(json.dumps(result)) == result),
]
SCRIPT = (
    'e = await check_entitlement(ticket_id="T-1")\nawait pause_here(i=1)\nawait issue_refund(ticket_id="T-1", cents=5)'
)


def build(store: str) -> Harness:
    h = Harness(store=store)

    @h.tool
    async def check_entitlement(*, ticket_id: str) -> dict[str, object]:
        """Whether the ticket may be refunded."""
        return {'eligible': True, 'tier': 'gold'}

    @h.tool(approval=True)
    async def pause_here(*, i: int) -> int:
        """A step a person approves."""
        return i

    @h.tool(side_effect=True, requires=RULES)
    async def issue_refund(*, ticket_id: str, cents: int) -> str:
        """Refund the customer."""
        return f'refunded {ticket_id}'

    return h


if __name__ == '__main__':
    mode, store = sys.argv[1], sys.argv[2]
    if mode == 'run':
        for n in range(5):  # the process did other work first: the library's caches hold what it did
            re.compile('x' * n)
            fnmatch('x' * n, 'y*')
        with build(store) as h:
            result = h.run_sync(SCRIPT)
            h.approve(result.run_id, 2)
            print(result.run_id)
    else:
        with build(store) as h:
            print(json.dumps(h.resume_sync(sys.argv[3]).value))
