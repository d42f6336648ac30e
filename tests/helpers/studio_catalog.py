"""A catalog for the studio's tests (`--agents studio_catalog:catalog`, beside the built-ins): a tool a person
must approve, and one whose failure has an operator-side exception to show."""

from __future__ import annotations

from harness import Harness

catalog = Harness(store=None, tracing=False)


@catalog.tool(side_effect=True, approval=True)
async def send_email(*, to: str, body: str) -> str:
    """Send an email; a person approves each one before it goes."""
    return f'sent to {to} ({len(body)} chars)'


@catalog.tool
async def lookup(*, key: str) -> dict[str, int]:
    """The ledger's counts for `key`."""
    if key == 'missing':
        raise KeyError(f'no entry {key!r} in the ledger')
    return {'count': len(key), 'open': len(key) % 3}
