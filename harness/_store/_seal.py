"""Seals for the run store: the key, kept away from the data it protects, and the MACs over it.

What is sealed (HMAC-SHA256 with the key):
- every journal row, over its run id, its seq and all it says (so an edited row, a row moved to
  another seq, or a row copied from another run does not verify);
- every run, over what it ran and how it ended, its call count and the head of its journal (the XOR
  of its rows' seal hashes, kept up to date write by write: a deleted row, or a row put back to an
  earlier version of itself, changes the head);
- every snapshot, over its run id, its position, the ledger of calls it waits on and the Monty dump.

The key is `HARNESS_SECRET` (any text), else a random key in a 0600 file in the user's config
directory (`$XDG_CONFIG_HOME/harness/secret`, created on first use; `_key`). The store records only the
key's id, to tell "sealed with another key" from "tampered with". This protects against anyone who
can edit the store but not read the key; it does not protect against someone who has the key (or
runs code as the same user).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from typing import Any

from ._key import SealKeyError as SealKeyError  # the key is `_key`'s; named here as it was
from ._key import config_dir as config_dir
from ._key import store_key as store_key


def key_id(key: bytes) -> str:
    """What the store records of its key: enough to recognise it, nothing to forge with."""
    return hashlib.sha256(b'harness-key-id:' + key).hexdigest()[:16]


class Sealer:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def mac(self, *parts: Any) -> str:
        text = json.dumps(parts, ensure_ascii=False, separators=(',', ':'), default=str)
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def check(self, seal: str | None, *parts: Any) -> bool:
        return seal is not None and hmac.compare_digest(seal, self.mac(*parts))

    def blob(self, data: bytes) -> bytes:
        return hmac.new(self.key, data, hashlib.sha256).digest()


HEAD_FORMAT = 'x1:'
"""The prefix of a journal head in the current format; a head without it is the earlier, chained format."""


def head(seals: Iterable[str]) -> str:
    """The journal's head: the XOR of its rows' seal hashes.

    Each seal is a keyed MAC over its row, seq included, so the head needs no order and one write updates
    it in time proportional to the rows written (`advance`). A removed row, or a row put back to an earlier
    version of itself, changes it; nobody without the key can make a seal that cancels the change out.
    """
    return advance(HEAD_FORMAT + '0' * 64, (), seals)


def advance(current: str, removed: Iterable[str], added: Iterable[str]) -> str:
    """`current` with the `removed` seals taken out and the `added` ones put in (XOR is its own inverse)."""
    value = int(current.removeprefix(HEAD_FORMAT), 16)
    for seal in (*removed, *added):
        value ^= int.from_bytes(hashlib.sha256(seal.encode()).digest())
    return f'{HEAD_FORMAT}{value:064x}'


def chained_head(seals: Iterable[str]) -> str:
    """A head in the earlier format (a hash over the seals in seq order), still verified."""
    digest = hashlib.sha256()
    for seal in seals:
        digest.update(seal.encode())
    return digest.hexdigest()
