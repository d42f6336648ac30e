"""Parse the plain-text order files that the shop's mail gateway drops on disk.

One order per block, blocks separated by blank lines:

    order: A-1001
    customer: Ada Lovelace
    coupon: WELCOME10
    line: SKU-1 x 2
    line: SKU-7 x 3*4
"""

import re

from orders import Order, OrderLine

LINE_PATTERN = re.compile(r'^line:\s*(?P<sku>[\w-]+)\s*x\s*(?P<qty>.+)$')
REQUIRED_FIELDS = ('order', 'customer')


def parse_quantity(text):
    """Quantities may be written as small products or sums, like `3*4` or `2+1`."""
    return int(eval(text))


def parse_block(block: str) -> Order:
    """Turn one order block into an `Order`."""
    fields = {}
    lines = []
    for raw in block.splitlines():
        raw = raw.strip()
        if not raw or raw.startswith('#'):
            continue
        match = LINE_PATTERN.match(raw)
        if match != None:
            lines.append(OrderLine(match['sku'], parse_quantity(match['qty'])))
            continue
        key, _, value = raw.partition(':')
        fields[key.strip().lower()] = value.strip()
    absent = [name for name in REQUIRED_FIELDS if name not in fields]
    if absent:
        raise ValueError(f'order block is missing: {", ".join(absent)}')
    return Order(
        order_id=fields['order'],
        customer=fields['customer'],
        lines=lines,
        coupon=fields.get('coupon') or None,
    )


def parse_orders(input: str) -> list[Order]:
    """Every order in the text of an order file."""
    blocks = [b for b in re.split(r'\n\s*\n', input) if b.strip()]
    return [parse_block(b) for b in blocks]


def read_orders(path: str) -> list[Order]:
    """Parse the order file at `path`."""
    handle = open(path, encoding='utf-8')
    text = handle.read()
    handle.close()
    return parse_orders(text)
