"""A run's catalog manifest: what the catalog was when the run ran, and how today's differs from it.

Every run stores its manifest: the stubs text and, per callee, a digest of everything a script
relies on (kind, parameters, return type, side effects, rules as described), a digest of its rules'
logic (`rules`: each `After`'s fields and the code of its `when=`) and the optional `version=` given at
registration. Resume, replay and fork compare it with the current catalog before anything runs
(`admit`): nothing is written for a run that is refused. A change of rules, like a version change, is
one no type check can vouch for: only `accept_changes` admits it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from .._errors import CatalogChange, CatalogChanged
from ._callees import Callee


def manifest(callees: Mapping[str, Callee], stubs: str) -> dict[str, Any]:
    return {
        'stubs': stubs,
        'callees': {
            name: {'digest': digest(c), 'rules': rules_digest(c), 'version': c.version}
            for name, c in sorted(callees.items())
        },
    }


def digest(callee: Callee) -> str:
    shape = {
        'kind': callee.kind,
        'params': callee.params.model_json_schema(),
        'returns': callee.returns.schema,
        'side_effect': callee.side_effect,
        'requires': [rule.describe() for rule in callee.requires],
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:16]


def rules_digest(callee: Callee) -> str:
    """What the callee's rules decide by, code included: a loosened `when=` is a changed catalog."""
    identity = json.dumps([rule.identity() for rule in callee.requires], sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def changes(stored: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[CatalogChange]:
    """How the current catalog differs from a run's stored manifest (none for a run stored without one)."""
    if not stored:
        return []
    old, new = stored.get('callees', {}), current['callees']
    found = [CatalogChange(name, 'removed') for name in sorted(set(old) - set(new))]
    found += [CatalogChange(name, 'added') for name in sorted(set(new) - set(old))]
    for name in sorted(set(old) & set(new)):
        if 'rules' in old[name] and old[name]['rules'] != new[name]['rules']:  # (older runs stored no 'rules')
            found.append(CatalogChange(name, 'rules'))
        elif old[name]['digest'] != new[name]['digest']:
            found.append(CatalogChange(name, 'changed'))
        elif old[name].get('version') != new[name].get('version'):
            found.append(CatalogChange(name, 'version', f'{old[name].get("version")} -> {new[name].get("version")}'))
    return found


Admission = Literal['same', 'recheck', 'accepted']
"""How a stored run may go on under today's catalog: unchanged; once its script type-checks against the new
stubs; or accepted as it is (no type check: the person said so, and every call's arguments are still
validated when it is made)."""


def admit(run_id: str, found: list[CatalogChange], *, recheck: bool, accept_changes: bool) -> Admission:
    """How the run may go on despite the differences `found`, or `CatalogChanged`.

    Added callees alone change nothing a stored script relies on, so they are rechecked without being
    asked; a version or rules change is a change of behaviour no type check can vouch for.
    """
    if not found:
        return 'same'
    if accept_changes:
        return 'accepted'
    if all(change.kind == 'added' for change in found):
        return 'recheck'
    if recheck and all(change.kind not in ('version', 'rules') for change in found):
        return 'recheck'
    raise CatalogChanged(run_id, found)
