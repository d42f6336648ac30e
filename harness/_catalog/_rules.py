"""Rules on what a script may call and in what order, decided at the pause against the run's journal.

A rule is checked for every call as the script makes it, before the call is journaled as started,
before any budget is spent and before anything runs; the only input is the call itself and the
calls the run has already made (`CallRecord`s, including those a resume, replay or fork answered
from the journal). So a rule holds whatever the script does, and holds again after a crash.

- `requires=`: a predecessor must have completed successfully earlier in the run: a callee name,
  an `After(name, same=(fields...), when=predicate, once=False)`, or a list of them (all must hold).
  With `once=True` each successful predecessor authorises one call (`Ledger`).
- A predecessor's result that was supplied rather than run (a fork's `result=`, a resume's answer, an
  eval baseline: `SUPPLIED`) does not satisfy the rule of a side-effecting callee, unless `trust_answers=True`.
- `allow=` / `deny=`: least privilege for one run or one orchestrator.

A refusal reaches the script as a catchable `PermissionError` naming the rule. A rule's logic is part of
its callee's manifest (`After.identity`, `fingerprint`), so a run resumes only under the rules it ran under.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import BuiltinFunctionType, CodeType, FunctionType, ModuleType
from typing import Any

from pydantic import BaseModel, JsonValue

from .._records import CallRecord, CallSource

SUPPLIED: frozenset[CallSource] = frozenset({'answered', 'baseline'})
"""Sources of a result no callee produced in this run's lineage: a person's or a tool's answer (a fork's
`result=`, a resume's `answers`), or an eval's baseline. They do not satisfy the rule of a side-effecting callee."""


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
            that raises, or returns an awaitable, fails; an `async def` one is refused here. Its code is
            part of the callee's manifest (`fingerprint`): a run made under another condition is not
            resumed under this one (`CatalogChanged`).
        once: each successful predecessor authorises one call, which consumes it when it is admitted
            (one entitlement check, one refund). An admitted call keeps what it consumed whether it then
            succeeds, fails, is cancelled or never starts: its effect may have happened; and when a later
            script's repeat of a refund that succeeded is answered from it (`_dispatch._effects`), since the
            rule is decided from the script's own calls before any answer, as `h.check` and a replay decide
            it. A call refused (by a rule, a budget or a person) consumes nothing. Each call of the predecessor
            runs (none is answered from an identical earlier one).
        trust_answers: let a result that was supplied rather than run (`SUPPLIED`: a fork's `result=`, a
            resume's answer, an eval baseline) satisfy the rule of a side-effecting callee. Off: only a
            predecessor that ran counts for a call that changes something.
    """

    callee: str
    same: tuple[str, ...] = ()
    when: Callable[[Any], bool] | Callable[[Any, dict[str, Any]], bool] | None = None
    once: bool = False
    trust_answers: bool = False
    reads_arguments: bool = field(default=False, init=False, repr=False, compare=False)
    """`when` takes the call's arguments too (read once: `inspect.signature` costs more than the check)."""

    def __post_init__(self) -> None:
        if isinstance(self.same, str):  # `same='ticket_id'` is an easy slip for a one-tuple
            object.__setattr__(self, 'same', (self.same,))
        if self.when is not None:
            if inspect.iscoroutinefunction(self.when):  # its coroutine would be truthy: every predecessor would pass
                raise TypeError(
                    'After(when=...) takes a plain function, not an async function: a rule is decided '
                    'at the pause, without awaiting.'
                )
            arity = _arity(self.when)
            if arity not in (1, 2):
                raise TypeError('After(when=...) takes a function of the result, or of the result and the arguments.')
            object.__setattr__(self, 'reads_arguments', arity == 2)

    def passes(self, result: Any, arguments: Mapping[str, Any]) -> bool:
        """Whether a predecessor's `result` satisfies `when` for a call with `arguments`."""
        if self.when is None:
            return True
        when: Callable[..., bool] = self.when
        try:
            verdict = when(result, dict(arguments)) if self.reads_arguments else when(result)
        except Exception:
            return False
        if inspect.isawaitable(verdict):  # not awaited at the pause: it decides nothing, so the rule fails
            getattr(verdict, 'close', lambda: None)()
            return False
        return bool(verdict)

    def admits(self, earlier: CallRecord, arguments: Mapping[str, Any]) -> bool:
        """Whether a call of the predecessor satisfies the rule for a call with `arguments` (consumed or not, run or
        supplied): it succeeded, with the `same` arguments, and its result passes `when`."""
        if earlier.status != 'ok' or any(earlier.arguments.get(name) != arguments.get(name) for name in self.same):
            return False
        return self.passes(earlier.result, arguments)

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
        if self.once:
            text += ' (each authorises one call)'
        if self.trust_answers:
            text += ' (a supplied answer counts)'
        return text

    def identity(self) -> list[Any]:
        """All the rule decides by, as plain data (the manifest's digest of the callee's rules)."""
        return [
            self.callee,
            list(self.same),
            None if self.when is None else fingerprint(self.when),
            self.once,
            self.trust_answers,
        ]


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
    """Which callees one run may call: `allow` (None: all) minus `deny`; and, for a run held for plan review
    (`_check._plan`), the plan a person approves, whose `bounds` cap how often each callee may be called."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    plan: Mapping[str, Any] | None = field(default=None, compare=False)
    """The plan as stored with the run (`ReviewPlan.stored`): `bounds` {callee: most calls, None: unbounded},
    `complete` (False: the analysis could not follow everything, so callees it does not name are not capped)."""

    @classmethod
    def of(cls, allow: Iterable[str] | None, deny: Iterable[str] | None) -> Access:
        return cls(frozenset(allow) if allow is not None else None, frozenset(deny or ()))

    def refusal(self, callee: str) -> str | None:
        if callee in self.deny:
            return f'{callee} is denied for this run'
        if self.allow is not None and callee not in self.allow:
            return f'{callee} is not among the callees allowed for this run ({", ".join(sorted(self.allow)) or "none"})'
        return None

    def over_plan(self, callee: str, made: int) -> str | None:
        """Why the approved plan refuses one more call of `callee` after `made` of them, or None."""
        if self.plan is None:
            return None
        bounds = self.plan.get('bounds') or {}
        if callee not in bounds and not self.plan.get('complete', True):
            return None
        most = bounds.get(callee, 0)
        if most is None or made < most:
            return None
        return f'{callee} is past the approved plan of this run, which allows {most} call(s) of it'

    def to_json(self) -> dict[str, Any] | None:
        """As stored with a run (None: unrestricted), so a resumed run keeps its restrictions."""
        if self.allow is None and not self.deny and self.plan is None:
            return None
        shown: dict[str, Any] = {'allow': sorted(self.allow) if self.allow is not None else None}
        shown['deny'] = sorted(self.deny)
        return shown if self.plan is None else {**shown, 'plan': dict(self.plan)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Access:
        if not data:
            return cls()
        return dataclasses.replace(cls.of(data.get('allow'), data.get('deny')), plan=data.get('plan'))

    def merged(self, other: Access) -> Access:
        """Both restrictions at once (an orchestrator's and one run's)."""
        if self.allow is None:
            allow = other.allow
        elif other.allow is None:
            allow = self.allow
        else:
            allow = self.allow & other.allow
        return Access(allow, self.deny | other.deny, self.plan or other.plan)


MAX_REFUSALS = 100
"""A script whose calls are refused more often than this (by rules or budgets) is stopped: it is
looping on calls that cannot succeed, and refusals cost it nothing else."""


@dataclass(frozen=True)
class Policy:
    """The control settings one run is dispatched under."""

    access: Access = Access()
    max_repeats: int | None = 10
    """The same call (callee and arguments) more often than this stops the script as stuck, and so does a
    call of a callee whose last this many results were the same failure (`_dispatch._counters`)."""
    max_concurrency: int | None = None
    """Calls in flight at once in the run."""
    call_concurrency: Mapping[str, int] = field(default_factory=dict)
    """Calls in flight at once per callee."""


class Ledger:
    """The run's calls by callee, and what `once` rules have consumed, for rule checks that cost what the
    predecessors cost, not the run.

    Consumption is decided in call order: a call consumes, per `once` rule, the earliest qualifying
    predecessor nobody consumed (`check`), and keeps it once it enters the run's records admitted (`add`).
    A restored run rebuilds the same from its journal (`restore`), so a resume, replay or fork consumes
    what the recorded run did; a call the restored interpreter makes again keeps its grant.
    """

    def __init__(self) -> None:
        self.by_callee: dict[str, list[CallRecord]] = {}
        self.position: dict[int, int] = {}
        """Where each seq's record is in its callee's list (a restored call made again replaces it)."""
        self.spent: dict[tuple[str, int], set[int]] = {}
        """Per (callee, index of its `once` rule): the predecessor seqs its calls consumed."""
        self.free: dict[tuple[str, int], int] = {}
        """Per `once` rule: the index in its predecessor's list before which every call is consumed (a check
        looks from there, so it costs what is left to consume, not the run)."""
        self.grants: dict[int, list[tuple[tuple[str, int], int]]] = {}
        """Per admitted call's seq: what it consumed, so a call made again after a restore keeps it."""
        self.claimed: tuple[int, str, list[tuple[tuple[str, int], int]]] | None = None
        """(seq, callee, grant) of the last check that passed: the grant is kept when that call is admitted (`add`)."""

    def add(self, record: CallRecord) -> None:
        calls = self.by_callee.setdefault(record.callee, [])
        at = self.position.get(record.seq)
        if at is not None and at < len(calls) and calls[at].seq == record.seq:
            calls[at] = record
        else:
            self.position[record.seq] = len(calls)
            calls.append(record)
        claimed, self.claimed = self.claimed, None
        if record.status == 'refused':  # refused after the check (a person, the journal): it consumes nothing
            self.release(record.seq)
        elif claimed is not None and claimed[:2] == (record.seq, record.callee):
            self.keep(record.seq, claimed[2])

    def made(self, callee: str, seq: int) -> int:
        """How many calls of `callee` the run made before the call `seq` (a restored call made again keeps its
        place)."""
        at = self.position.get(seq)
        calls = self.by_callee.get(callee, [])
        return at if at is not None and at < len(calls) and calls[at].seq == seq else len(calls)

    def keep(self, seq: int, grant: list[tuple[tuple[str, int], int]]) -> None:
        for key, predecessor in grant:
            self.spent.setdefault(key, set()).add(predecessor)
        if grant:
            self.grants[seq] = grant

    def release(self, seq: int) -> None:
        for key, predecessor in self.grants.pop(seq, ()):
            self.spent[key].discard(predecessor)
            self.free[key] = min(self.free.get(key, 0), self.position[predecessor])

    def restore(self, record: CallRecord, rules: tuple[After, ...], side_effect: bool) -> None:
        """Before `add`ing a journaled call of the run being restored: what it consumed when it was admitted is
        what a check in call order finds (every earlier call answered, as a resume from the first line has it)."""
        self.claimed = None
        if record.status != 'refused' and any(rule.once for rule in rules):
            self.check(record.callee, record.arguments, rules, side_effect, record.seq)

    def check(
        self, callee: str, arguments: Mapping[str, JsonValue], rules: tuple[After, ...], side_effect: bool, seq: int
    ) -> str | None:
        """Why the rules refuse the call, or None (and what its `once` rules would consume is `claimed`)."""
        self.claimed = None
        grant: list[tuple[tuple[str, int], int]] = []
        kept = seq in self.grants  # a restored call made again: admitted before, with what it consumed
        for index, rule in enumerate(rules):
            if rule.once and kept:
                continue
            found, supplied = self.find(rule, arguments, side_effect, (callee, index))
            if found is None:
                spent = rule.once and self.spent_on(rule, arguments, (callee, index))
                return unmet(callee, rule, supplied, spent=spent)
            if rule.once:
                grant.append(((callee, index), found.seq))
        self.claimed = (seq, callee, grant)
        return None

    def find(
        self, rule: After, arguments: Mapping[str, JsonValue], side_effect: bool, key: tuple[str, int]
    ) -> tuple[CallRecord | None, CallRecord | None]:
        """The earliest predecessor that satisfies `rule` and is not consumed; and, when there is none, a
        supplied one that would have (for the message)."""
        calls = self.by_callee.get(rule.callee, [])
        spent = self.spent.get(key, ()) if rule.once else ()
        start = self.free.get(key, 0)
        while start < len(calls) and calls[start].seq in spent:
            start += 1
        if rule.once:
            self.free[key] = start
        supplied = None
        for at in range(start, len(calls)):
            earlier = calls[at]
            if earlier.seq in spent or not rule.admits(earlier, arguments):
                continue
            if side_effect and not rule.trust_answers and earlier.source in SUPPLIED:
                supplied = supplied or earlier
                continue
            return earlier, None
        return None, supplied

    def spent_on(self, rule: After, arguments: Mapping[str, JsonValue], key: tuple[str, int]) -> bool:
        """Whether a consumed predecessor would have satisfied `rule` for this call: then calling it again is the
        fix (else the refusal's cause is a predecessor missing or failing its condition, which a repeat repeats)."""
        spent = self.spent.get(key, ())
        calls = self.by_callee.get(rule.callee, ())
        return any(earlier.seq in spent and rule.admits(earlier, arguments) for earlier in calls)


def counted(rules: Iterable[tuple[After, ...]]) -> frozenset[str]:
    """The callees a `once` rule counts the calls of: each call of one authorises one call, so an identical call
    is never answered from an earlier one's result (`_sources.EarlierScript`): one check that ran, one refund."""
    return frozenset(rule.callee for requires in rules for rule in requires if rule.once)


def unmet(callee: str, rule: After, supplied: CallRecord | None, *, spent: bool = False) -> str:
    """The refusal of a call whose rule no predecessor satisfies (`spent`: one did, and a call consumed it)."""
    text = f'{callee} requires {rule.describe()}; it was not called.'
    if supplied is not None:
        origin = (
            "an eval baseline's recorded result" if supplied.source == 'baseline' else "a fork's or a person's answer"
        )
        return (
            f'{text} The {rule.callee} result of call #{supplied.seq} was supplied, not run ({origin}), and '
            f'authorises no side effect: call {rule.callee} first.'
        )
    if spent:
        return f'{text} Each {rule.callee} authorises one call: call {rule.callee} again first.'
    return f'{text} Call {rule.callee} first.'


def refusal(
    callee: str,
    arguments: Mapping[str, JsonValue],
    rules: tuple[After, ...],
    access: Access,
    ledger: Ledger,
    *,
    side_effect: bool = False,
    seq: int = 0,
) -> str | None:
    """Why this call may not run now (the message the script's `PermissionError` carries), or None: then what
    its `once` rules consume is kept if the call is admitted (`Ledger.add`)."""
    denied = access.refusal(callee) or access.over_plan(callee, ledger.made(callee, seq))
    if denied is not None:
        ledger.claimed = None
        return f'{denied}; it was not called.'
    return ledger.check(callee, arguments, rules, side_effect, seq)


def fingerprint(fn: Callable[..., Any]) -> str:
    """A digest of what a predicate does: its code (bytecode, constants, names, nested functions), its defaults,
    and the data it reads from its closure and globals (plain data, and the fields of a dataclass, pydantic model or
    enum member: `_fields`), or the object a method is bound to. Equal for the same code and data in any process;
    a function of the catalog's own code it reads is followed; a library's function (`_library`), a builtin or a
    class is named; anything else it reads is named by its type. (Bytecode is the interpreter's: a Python upgrade
    changes the digest, so a run resumes under the Python it ran on, or is accepted.)"""
    walk = _Walk(home=_package(getattr(fn, '__func__', fn)))
    text = json.dumps(walk.described(fn), sort_keys=True, separators=(',', ':'), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_LIBRARY = tuple(
    sorted({os.path.join(sysconfig.get_path(name), '') for name in ('stdlib', 'platstdlib', 'purelib', 'platlib')})
)
"""Where the standard library and installed packages live."""


@dataclass
class _Walk:
    """One predicate's walk for `fingerprint`: the functions seen so far, and the package it belongs to."""

    home: str
    seen: set[int] = field(default_factory=set)
    path: set[int] = field(default_factory=set)
    """The containers and data objects being described: one that holds itself is a cycle, named, not walked forever."""

    def described(self, value: Any) -> Any:
        """`value` as plain data."""
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, bytes):
            return value.hex()
        if isinstance(value, list | tuple | frozenset | set | dict):
            return self.unless_cycle(value, self.container)
        return self.other(value)

    def unless_cycle(self, value: Any, describe: Callable[[Any], Any]) -> Any:
        """`describe(value)`, or a mark where `value` holds itself (through its items or its fields)."""
        if id(value) in self.path:
            return '<cycle>'
        self.path.add(id(value))
        try:
            return describe(value)
        finally:
            self.path.discard(id(value))

    def container(self, value: list[Any] | tuple[Any, ...] | frozenset[Any] | set[Any] | dict[Any, Any]) -> Any:
        """A list, tuple, set or dict, item by item (a set in a fixed order)."""
        if isinstance(value, list | tuple):
            return [self.described(v) for v in value]
        if isinstance(value, frozenset | set):
            return sorted((self.described(v) for v in value), key=repr)
        # a key that is not a string by its description (a repr may hold an address)
        return {k if isinstance(k, str) else json.dumps(self.described(k)): self.described(v) for k, v in value.items()}

    def other(self, value: Any) -> Any:
        """Code, a partial, or a function followed into what it reads; anything else by a name (see `fingerprint`)."""
        if isinstance(value, CodeType):
            return {
                'code': value.co_code.hex(),
                'consts': self.described(value.co_consts),
                'names': list(value.co_names),
                'args': value.co_argcount,
            }
        if isinstance(value, functools.partial):
            return {
                'partial': self.described(value.func),
                'args': self.described(value.args),
                'keywords': self.described(value.keywords),
            }
        if isinstance(value, type | BuiltinFunctionType):  # a class or a builtin: by its name
            return _name(value)
        if (fields := _fields(value)) is not None:  # a dataclass, pydantic model or enum member: its data too
            return self.unless_cycle(value, lambda v: {'of': _name(type(v)), 'fields': self.described(fields)})
        fn = getattr(value, '__func__', value)  # a bound method: its function, and what it is bound to
        if fn is not value and isinstance(fn, FunctionType):
            return {'method': self.other(fn), 'self': self.described(getattr(value, '__self__', None))}
        if not isinstance(fn, FunctionType):  # any other object: by its type's name
            return _name(type(value))
        if _package(fn) != self.home and _library(fn):  # its module's state (a cache) is the process's
            return _name(fn)
        if id(fn) in self.seen:  # recursion, or a function read twice
            return fn.__qualname__
        self.seen.add(id(fn))
        cells = [cell.cell_contents for cell in fn.__closure__ or () if _filled(cell)]
        reads = {name: fn.__globals__[name] for name in sorted(_names(fn.__code__)) if name in fn.__globals__}
        return {
            'fn': self.described(fn.__code__),
            'defaults': self.described(fn.__defaults__ or ()),
            'kwdefaults': self.described(fn.__kwdefaults__ or {}),
            'closure': self.described(cells),
            'globals': {name: self.described(v) for name, v in reads.items() if not isinstance(v, ModuleType)},
        }


def _fields(value: Any) -> dict[str, Any] | None:
    """The data of a value that is data by its declaration (a dataclass, a pydantic model, an enum member: a policy's
    settings), or None: an object of another kind may hold anything (a client, a cache) and is named by its type."""
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    if isinstance(value, enum.Enum):
        return {'name': value.name, 'value': value.value}
    return None


def _name(named: Any) -> str:
    return f'{named.__module__}.{named.__qualname__}'


def _package(fn: Any) -> str:
    """The top-level package a function's module is in."""
    return (getattr(fn, '__module__', None) or '').partition('.')[0]


def _library(fn: FunctionType) -> bool:
    """Whether a function is the standard library's or an installed package's (one with no file is the catalog's
    own: defined in a notebook or a REPL)."""
    file = getattr(sys.modules.get(fn.__module__ or ''), '__file__', None)
    return file is not None and file.startswith(_LIBRARY)


def _names(code: CodeType) -> set[str]:
    """Every global name a code object and the code nested in it may read."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _names(const)
    return found


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # a cell not assigned yet
        return False
    return True


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
