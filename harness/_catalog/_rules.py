"""Rules on what a script may call and in what order, decided at the pause against the run's journal.

A rule is checked for every call as the script makes it, before the call is journaled as started,
before any budget is spent and before anything runs; the only input is the call itself and the
calls the run has already made (`CallRecord`s, including those a resume, replay or fork answered
from the journal). So a rule holds whatever the script does, and holds again after a crash.

- `requires=`: a predecessor must have completed successfully earlier in the run: a callee name,
  an `After(name, same=(fields...), when=predicate)`, or a list of them (all must hold).
- `allow=` / `deny=`: least privilege for one run or one orchestrator.

A refusal reaches the script as a catchable `PermissionError` naming the rule.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from .._records import CallRecord


@dataclass(frozen=True)
class After:
    """A call may run only after a successful call to `callee` earlier in the same run.

    Args:
        callee: the predecessor's name.
        same: argument names whose values must equal the predecessor's (`same=('ticket_id',)`:
            the refund is for the ticket that was checked). Each must be a parameter of both.
        when: a condition on the predecessor's result (plain data, as the script saw it), or on
            the result and this call's arguments (`when=lambda result, args: args['cents'] <=
            result['max_cents']`); the rule holds only for a predecessor that passes it. A condition
            that raises fails.
    """

    callee: str
    same: tuple[str, ...] = ()
    when: Callable[[Any], bool] | Callable[[Any, dict[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.same, str):  # `same='ticket_id'` is an easy slip for a one-tuple
            object.__setattr__(self, 'same', (self.same,))
        if self.when is not None and _arity(self.when) not in (1, 2):
            raise TypeError('After(when=...) takes a function of the result, or of the result and the arguments.')

    def passes(self, result: Any, arguments: Mapping[str, Any]) -> bool:
        """Whether a predecessor's `result` satisfies `when` for a call with `arguments`."""
        if self.when is None:
            return True
        when: Callable[..., bool] = self.when
        try:
            return bool(when(result, dict(arguments)) if _arity(when) == 2 else when(result))
        except Exception:
            return False

    def describe(self) -> str:
        """The rule in words, as the model and the audit read it."""
        return f'a successful {self.callee}(...) earlier in the run{self.conditions()}'

    def conditions(self) -> str:
        """What the predecessor's call must also satisfy, in words ('' when nothing)."""
        text = ''
        if self.same:
            text += ' with the same ' + ', '.join(self.same)
        if self.when is not None:
            text += (',' if self.same else '') + ' whose result passes its condition'
        return text


Requirement = str | After
Requires = Requirement | Sequence[Requirement] | None


def normalize(requires: Requires) -> tuple[After, ...]:
    """`requires=` as given at registration, as a tuple of `After`s."""
    if requires is None:
        return ()
    items = [requires] if isinstance(requires, str | After) else list(requires)
    rules = []
    for item in items:
        if isinstance(item, str):
            rules.append(After(item))
        elif isinstance(item, After):
            rules.append(item)
        else:
            kind = type(item).__name__
            raise TypeError(f'requires= takes a callee name, an After(...), or a list of them, not {kind}')
    return tuple(rules)


@dataclass(frozen=True)
class Access:
    """Which callees one run may call: `allow` (None: all) minus `deny`."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    @classmethod
    def of(cls, allow: Iterable[str] | None, deny: Iterable[str] | None) -> Access:
        return cls(frozenset(allow) if allow is not None else None, frozenset(deny or ()))

    def refusal(self, callee: str) -> str | None:
        if callee in self.deny:
            return f'{callee} is denied for this run'
        if self.allow is not None and callee not in self.allow:
            return f'{callee} is not among the callees allowed for this run ({", ".join(sorted(self.allow)) or "none"})'
        return None

    def to_json(self) -> dict[str, list[str] | None] | None:
        """As stored with a run (None: unrestricted), so a resumed run keeps its restrictions."""
        if self.allow is None and not self.deny:
            return None
        return {'allow': sorted(self.allow) if self.allow is not None else None, 'deny': sorted(self.deny)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Access:
        if not data:
            return cls()
        return cls.of(data.get('allow'), data.get('deny'))

    def merged(self, other: Access) -> Access:
        """Both restrictions at once (an orchestrator's and one run's)."""
        if self.allow is None:
            allow = other.allow
        elif other.allow is None:
            allow = self.allow
        else:
            allow = self.allow & other.allow
        return Access(allow, self.deny | other.deny)


MAX_REFUSALS = 100
"""A script whose calls are refused more often than this (by rules or budgets) is stopped: it is
looping on calls that cannot succeed, and refusals cost it nothing else."""


@dataclass(frozen=True)
class Policy:
    """The control settings one run is dispatched under."""

    access: Access = Access()
    max_repeats: int | None = 10
    """The same call (callee and arguments) more often than this stops the script as stuck."""
    max_concurrency: int | None = None
    """Calls in flight at once in the run."""
    call_concurrency: Mapping[str, int] = field(default_factory=dict)
    """Calls in flight at once per callee."""


class Ledger:
    """The run's calls by callee, for rule checks that cost what the predecessors cost, not the run."""

    def __init__(self) -> None:
        self.by_callee: dict[str, list[CallRecord]] = {}

    def add(self, record: CallRecord) -> None:
        self.by_callee.setdefault(record.callee, []).append(record)

    def satisfies(self, rule: After, arguments: Mapping[str, JsonValue]) -> bool:
        for earlier in self.by_callee.get(rule.callee, ()):
            if earlier.status != 'ok':
                continue
            if any(earlier.arguments.get(name) != arguments.get(name) for name in rule.same):
                continue
            if not rule.passes(earlier.result, arguments):
                continue
            return True
        return False


def refusal(
    callee: str, arguments: Mapping[str, JsonValue], rules: tuple[After, ...], access: Access, ledger: Ledger
) -> str | None:
    """Why this call may not run now (the message the script's `PermissionError` carries), or None."""
    denied = access.refusal(callee)
    if denied is not None:
        return f'{denied}; it was not called.'
    for rule in rules:
        if not ledger.satisfies(rule, arguments):
            return f'{callee} requires {rule.describe()}; it was not called. Call {rule.callee} first.'
    return None


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
