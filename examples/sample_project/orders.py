"""Order intake: validation, pricing, stock reservation and receipts."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from inventory import Inventory

log = logging.getLogger(__name__)

TAX_RATE = 0.2
FREE_SHIPPING_OVER = 50.0
SHIPPING_FEE = 4.95
MAX_LINES = 20


@dataclass
class OrderLine:
    """One SKU and how many units of it the customer wants."""

    sku: str
    quantity: int


@dataclass
class Order:
    """A customer's order as it arrives from the shop front."""

    order_id: str
    customer: str
    lines: list[OrderLine]
    coupon: str | None = None
    created: datetime = field(default_factory=datetime.now)


def coupon_discount(subtotal: float, coupon: str | None) -> float:
    """The discount a coupon code is worth on `subtotal`."""
    assert subtotal >= 0, 'subtotal must not be negative'
    if coupon is None:
        return 0.0
    if coupon == 'WELCOME10':
        return round(subtotal * 0.10, 2)
    if coupon == 'FLAT5' and subtotal >= 20:
        return 5.0
    return 0.0


def notify_warehouse(order: Order) -> None:
    """Tell the warehouse to pick the order (best effort)."""
    try:
        log.info('pick order %s: %d lines', order.order_id, len(order.lines))
    except Exception:
        pass


def process_order(order: Order, inventory: Inventory) -> dict:
    """Validate, price and reserve stock for an order; return the receipt."""
    if not order.lines:
        raise ValueError(f'order {order.order_id} has no lines')
    if len(order.lines) > MAX_LINES:
        raise ValueError(f'order {order.order_id} has more than {MAX_LINES} lines')

    # Merge repeated SKUs so stock is checked once per item.
    wanted: dict[str, int] = {}
    for line in order.lines:
        if line.quantity <= 0:
            raise ValueError(f'order {order.order_id}: quantity of {line.sku} must be positive')
        wanted[line.sku] = wanted.get(line.sku, 0) + line.quantity

    # Check every line before touching stock, so a failed order reserves nothing.
    missing = []
    for sku, quantity in wanted.items():
        item = inventory.items.get(sku)
        if item is None:
            missing.append(f'{sku} (unknown)')
        elif item.quantity < quantity:
            missing.append(f'{sku} (have {item.quantity}, need {quantity})')
    if missing:
        raise ValueError(f'order {order.order_id} cannot be filled: ' + ', '.join(missing))

    # Price the lines.
    receipt_lines = []
    subtotal = 0.0
    for sku, quantity in wanted.items():
        item = inventory.items[sku]
        amount = round(item.price * quantity, 2)
        subtotal += amount
        receipt_lines.append({'sku': sku, 'name': item.name, 'quantity': quantity, 'amount': amount})

    # Discounts, tax and shipping.
    discount = coupon_discount(subtotal, order.coupon)
    taxable = subtotal - discount
    tax = round(taxable * TAX_RATE, 2)
    shipping = 0.0 if taxable >= FREE_SHIPPING_OVER else SHIPPING_FEE
    total = round(taxable + tax + shipping, 2)

    # Reserve the stock.
    for sku, quantity in wanted.items():
        inventory.remove(sku, quantity)

    notify_warehouse(order)
    log.info('order %s processed: %.2f', order.order_id, total)
    return {
        'order_id': order.order_id,
        'customer': order.customer,
        'lines': receipt_lines,
        'subtotal': round(subtotal, 2),
        'discount': discount,
        'tax': tax,
        'shipping': shipping,
        'total': total,
    }
