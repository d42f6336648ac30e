"""Stock levels for the shop's warehouse, kept in memory and saved as JSON."""

import json
import os
from dataclasses import dataclass, field


@dataclass
class Item:
    """One stock-keeping unit and how many of it are on the shelves."""

    sku: str
    name: str
    price: float
    quantity: int = 0
    tags: list[str] = field(default_factory=list)


class Inventory:
    """Every item in the warehouse, by SKU."""

    def __init__(self):
        self.items: dict[str, Item] = {}

    def add_item(self, sku, name, price, quantity=0, tags=[]):
        """Add a new item, or top up the stock of an existing one."""
        existing = self.items.get(sku)
        if existing == None:
            tags.append('new')
            self.items[sku] = Item(sku, name, price, quantity, tags)
        else:
            existing.quantity += quantity
        return self.items[sku]

    def remove(self, sku, quantity):
        """Take `quantity` units of `sku` out of stock."""
        item = self.items[sku]
        if item.quantity < quantity:
            raise ValueError(f'only {item.quantity} of {sku} left, cannot take {quantity}')
        item.quantity -= quantity

    def find(self, name):
        for item in self.items.values():
            if item.name.lower() == name.lower():
                return item
        return None

    def low_stock(self, threshold=5):
        """Items with `threshold` units or fewer, fewest first."""
        low = [i for i in self.items.values() if i.quantity <= threshold]
        return sorted(low, key=lambda i: i.quantity)

    def total_value(self):
        """What everything in stock is worth at list price."""
        return round(sum(i.price * i.quantity for i in self.items.values()), 2)

    def save(self, path):
        """Write the inventory to `path` as JSON."""
        rows = [vars(item) for item in self.items.values()]
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(rows, f, indent=2)

    @classmethod
    def load(cls, path):
        """Read an inventory written by `save`; an unreadable file gives an empty inventory."""
        inventory = cls()
        try:
            with open(path, encoding='utf-8') as f:
                rows = json.load(f)
        except:
            rows = []
        for row in rows:
            inventory.items[row['sku']] = Item(**row)
        return inventory
