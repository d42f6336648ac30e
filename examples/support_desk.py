"""A support desk: check entitlement, then refund, for every open ticket at once.

    python examples/support_desk.py                # offline demo: a scripted planner sends WORKFLOW
    HARNESS_MODEL=openai:gpt-4.1-mini python examples/support_desk.py   # a real model writes its own

Three host tools over an in-memory ticket table: `open_tickets`, `check_entitlement` and the
side-effecting `issue_refund`. The refund policy lives in the catalog, in one place: `issue_refund`
is registered with `requires=After('check_entitlement', same=('ticket_id',), when=..., once=True)`, so
the harness refuses, at the pause and before anything runs, a refund that does not follow a successful
entitlement check of the same ticket that allows that amount, whatever script the model writes
(and after a crash and resume too). Each check pays for one refund (`once=True`: a loop of refunds after
one check pays once), and only a check that ran counts: a fork whose edited check result says
"eligible" does not pay an ineligible ticket. The workflow resolves every ticket concurrently without guarding
anything itself; a second script that tries the refund first is flagged by `check` and refused at
run time. `issue_refund` is idempotent: it reads the call's `CallContext` (injected by the harness,
hidden from the script) and pays at most once per idempotency key, so resuming a run that crashed
mid-refund cannot pay twice.
"""

from __future__ import annotations

import threading
from typing import Any

from example_runner import run_example
from pydantic import BaseModel, Field
from rich.console import Console

from harness import After, CallContext, Harness, PolicyViolation

# -- the desk: an in-memory ticket table and three host tools ----------------------------------------

REFUND_WINDOW_DAYS = 30
REFUND_LIMIT = 100  # dollars per ticket without a manager


class Ticket(BaseModel):
    """An open support ticket asking for money back."""

    id: str
    customer: str
    summary: str
    requested: int = Field(description='Dollars the customer asks for.')


class Entitlement(BaseModel):
    """Whether a ticket may be refunded, and up to how much."""

    eligible: bool
    max_refund: int = Field(description='Dollars; 0 when not eligible.')
    reason: str


# ticket id -> (customer, summary, requested, paid, days since purchase)
TICKETS: dict[str, tuple[str, str, int, int, int]] = {
    'T-1001': ('Ada', 'Charged twice for the March invoice', 49, 98, 3),
    'T-1002': ('Grace', 'Cancelled the annual plan after a week', 240, 240, 8),
    'T-1003': ('Linus', "Wants last year's plan refunded", 120, 120, 400),
    'T-1004': ('Barbara', 'Add-on never activated', 30, 30, 12),
}
REFUNDED: dict[str, int] = {'T-1004': 30}  # ticket id -> dollars refunded so far (T-1004 was refunded by phone)
RECEIPTS: dict[str, str] = {}  # idempotency key -> receipt of the refund made under it
_lock = threading.Lock()  # sync tools run in worker threads, concurrently


def open_tickets() -> list[Ticket]:
    """The open refund tickets, oldest first."""
    return [Ticket(id=tid, customer=c, summary=s, requested=r) for tid, (c, s, r, _, _) in TICKETS.items()]


def check_entitlement(*, ticket_id: str) -> Entitlement:
    """Whether the ticket may be refunded and the most that may be refunded on it (in dollars).

    Refunds are allowed within 30 days of purchase, up to what was paid and not yet refunded, and at
    most $100 per ticket.
    """
    if ticket_id not in TICKETS:
        raise ValueError(f'no ticket {ticket_id!r}')
    _, _, _, paid, days = TICKETS[ticket_id]
    left = paid - REFUNDED.get(ticket_id, 0)
    if days > REFUND_WINDOW_DAYS:
        return Entitlement(eligible=False, max_refund=0, reason=f'purchased {days} days ago (limit 30)')
    if left <= 0:
        return Entitlement(eligible=False, max_refund=0, reason='already refunded in full')
    return Entitlement(eligible=True, max_refund=min(left, REFUND_LIMIT), reason=f'${left} refundable')


def issue_refund(*, ticket_id: str, amount: int, ctx: CallContext) -> str:
    """Refund `amount` dollars on a ticket and return the receipt."""
    with _lock:
        if ctx.idempotency_key in RECEIPTS:  # this very call already paid (a resumed run): don't pay again
            return RECEIPTS[ctx.idempotency_key]
        REFUNDED[ticket_id] = REFUNDED.get(ticket_id, 0) + amount
        receipt = f'R-{len(RECEIPTS) + 1:03d}: ${amount} to {TICKETS[ticket_id][0]} for {ticket_id}'
        RECEIPTS[ctx.idempotency_key] = receipt
        return receipt


def entitled(entitlement: dict[str, Any], arguments: dict[str, Any]) -> bool:
    """The refund policy: the ticket is eligible and the amount is within its max_refund."""
    return entitlement['eligible'] and 0 < arguments['amount'] <= entitlement['max_refund']


REFUND_POLICY = After('check_entitlement', same=('ticket_id',), when=entitled, once=True)


def register_desk(h: Harness) -> None:
    """Register the desk's tools, as if each were decorated with `@h.tool(...)`.

    `requires=REFUND_POLICY`: the harness refuses a refund unless a successful check_entitlement of the
    same ticket earlier in the run allows that amount, and no other refund has used that check.
    `side_effect=True`: a resume never re-runs an `issue_refund` that was in flight at a crash unless told
    to. `expose_errors=True`: the script sees the tools' error messages (they hold no secrets).
    """
    h.tool(expose_errors=True)(open_tickets)
    h.tool(expose_errors=True)(check_entitlement)
    h.tool(side_effect=True, expose_errors=True, requires=REFUND_POLICY)(issue_refund)


# -- the workflow ----------------------------------------------------------------------------------

PROMPT = (
    'Work through the open refund tickets. For each one, check the entitlement first and refund only '
    'if eligible, at most its max_refund (and no more than the customer asked for). Tell me what each '
    'ticket got and the total refunded.'
)

# The centrepiece: the script the orchestrator's model sends to `run_workflow`, type-checked against
# the catalog and run in the Monty sandbox.
WORKFLOW = """\
import asyncio


async def resolve(ticket: Ticket) -> dict:
    entitlement = await check_entitlement(ticket_id=ticket["id"])
    if not entitlement["eligible"]:
        return {"ticket": ticket["id"], "refunded": 0, "note": entitlement["reason"]}
    amount = min(ticket["requested"], entitlement["max_refund"])
    receipt = await issue_refund(ticket_id=ticket["id"], amount=amount)
    return {"ticket": ticket["id"], "refunded": amount, "note": receipt}


# Fan out: all tickets at once; within one ticket the two calls stay in order.
tickets = await open_tickets()
outcomes = await asyncio.gather(*[resolve(t) for t in tickets])
{"tickets": outcomes, "total_refunded": sum(o["refunded"] for o in outcomes)}
"""


# A script that skips the check: `check` flags it before it runs, and the harness refuses the refund.
REFUND_FIRST = 'await issue_refund(ticket_id="T-1002", amount=240)\n'


def report(value: Any) -> str:
    """The offline planner's answer, written from the script's value."""
    if not isinstance(value, dict) or 'tickets' not in value:
        return f'The workflow returned: {value}'
    lines = [f'{t["ticket"]}: refunded ${t["refunded"]} ({t["note"]})' for t in value['tickets']]
    return '\n'.join([*lines, f'Total refunded: ${value["total_refunded"]}'])


def register(h: Harness, model: Any) -> None:
    """The catalog this example's orchestrator sees (`model` is None offline: the built-ins' stand-ins)."""
    register_desk(h)  # no sub-agents needed: the desk is host tools only


def receipts(console: Console) -> None:
    """The host's own books, whatever the model said; then a script that tries the refund first."""
    console.print(f'Receipts issued: {"; ".join(sorted(RECEIPTS.values())) or "none"}', markup=False)
    with Harness(store=':memory:') as h:
        register_desk(h)
        for warning in h.check(REFUND_FIRST).warnings:
            console.print(f'check flags the refund-first script: {warning}', markup=False)
        try:
            h.run_sync(REFUND_FIRST)
        except PolicyViolation as exc:
            console.print(f'and the harness refused it: {exc.message.splitlines()[0]}', markup=False)
    console.print(f'Receipts issued: {"; ".join(sorted(RECEIPTS.values())) or "none"}', markup=False)


def main() -> None:
    run_example(
        description='A support desk with an idempotent refund tool.',
        prompt=PROMPT,
        workflow=WORKFLOW,
        report=report,
        register=register,
        epilogue=receipts,
    )


if __name__ == '__main__':
    main()
