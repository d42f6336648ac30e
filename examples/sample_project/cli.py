"""Command line for the shop back office: stock reports and order processing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from inventory import Inventory
from order_parser import read_orders
from orders import process_order
from utils import format_money, percent


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subcommand per task."""
    parser = argparse.ArgumentParser(prog='shop', description=__doc__)
    parser.add_argument('--inventory', default='inventory.json', help='inventory file (JSON)')
    commands = parser.add_subparsers(dest='command', required=True)

    low = commands.add_parser('low-stock', help='list items that are running out')
    low.add_argument('--threshold', type=int, default=5)

    commands.add_parser('value', help='what the stock is worth')

    process = commands.add_parser('process', help='process an order file')
    process.add_argument('orders', help='order file (plain text)')
    process.add_argument('--dry-run', action='store_true', help='price the orders without saving stock')
    return parser


def report_low_stock(inventory: Inventory, threshold: int) -> None:
    """Print the items with `threshold` units or fewer."""
    items = inventory.low_stock(threshold)
    if not items:
        print(f'No item has {threshold} units or fewer.')
    for item in items:
        print(f'{item.sku:<10} {item.name:<30} {item.quantity:>5}')


def process_file(inventory: Inventory, path: str) -> int:
    """Process every order in `path`; return how many failed."""
    failed = 0
    orders = read_orders(path)
    for order in orders:
        try:
            receipt = process_order(order, inventory)
        except ValueError as exc:
            failed += 1
            print(f'FAILED {order.order_id}: {exc}', file=sys.stderr)
            continue
        print(f'{receipt["order_id"]:<10} {receipt["customer"]:<24} {format_money(receipt["total"])}')
    print(f'{len(orders) - failed} of {len(orders)} orders processed ({percent(failed, len(orders))} failed)')
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is 1 when any order failed."""
    args = build_parser().parse_args(argv)
    inventory = Inventory.load(args.inventory)
    if args.command == 'low-stock':
        report_low_stock(inventory, args.threshold)
        return 0
    if args.command == 'value':
        print(format_money(inventory.total_value()))
        return 0
    failed = process_file(inventory, args.orders)
    if not args.dry_run:
        inventory.save(args.inventory)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
