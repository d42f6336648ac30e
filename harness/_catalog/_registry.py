"""Registering callees: what `Harness.add_agent`, `@subagent`, `@tool`, `add_callee` and `remove` do, and the
catalog text and manifest they make. The `Harness` facade is a `Registry`; the rest of the engine reads the
catalog it holds through `callees`, `stubs()` and `manifest()`."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel
from pydantic_ai.agent.abstract import AbstractAgent

from ._callees import Callee, CallKind, callee_from_agent, callee_from_function, check_cost, check_rules
from ._manifest import manifest
from ._rules import Requires, normalize
from ._stubs import check_type_names, render_stubs

F = TypeVar('F', bound=Callable[..., Any])


class _NotGiven(enum.Enum):
    """The default of `add_agent(side_effect=...)`: False for the engine, but the audit tells it from an explicit
    `side_effect=False` (a sub-agent whose own tools may change the world is reported unless it was given)."""

    TOKEN = 'not given'


NOT_GIVEN = _NotGiven.TOKEN


class Registry:
    """The catalog of one Harness: its callees by name, and the stubs and manifest made from them (cached until
    the catalog changes)."""

    inherit_model: bool

    def __init__(self) -> None:
        super().__init__()  # the other parts of the Harness, in its method resolution order
        self._callees: dict[str, Callee] = {}
        self._stubs: str | None = None
        self._manifest: dict[str, Any] | None = None

    def add_agent(
        self,
        agent: AbstractAgent[Any, Any],
        *,
        name: str | None = None,
        description: str | None = None,
        params: type[BaseModel] | None = None,
        inherit_model: bool | None = None,
        side_effect: bool | Literal[_NotGiven.TOKEN] = NOT_GIVEN,
        expose_errors: bool = False,
        requires: Requires = None,
        version: str | None = None,
        approval: bool = False,
        cost: float | None = None,
    ) -> AbstractAgent[Any, Any]:
        """Register a pydantic-ai Agent as `async def name(*, task: str) -> <output type>`.

        With `params=SomeModel`, the model's fields are the keyword parameters instead and reach the
        agent as a prompt rendered with `format_as_xml`. `side_effect`, `expose_errors`, `requires`
        `version`, `approval` and `cost` are as for `tool`; without `side_effect=`, `harness audit` reports
        the sub-agent as possibly side-effecting when its agent has tools of its own. Without `cost=`, a
        call's ceiling is its model's price (genai-prices) times the sub-agent usage limits.
        """
        callee = callee_from_agent(
            agent,
            name=name,
            description=description,
            params=params,
            existing=set(self._callees),
            inherit_model=self.inherit_model if inherit_model is None else inherit_model,
        )
        self.add_callee(
            with_options(
                callee,
                side_effect=side_effect,
                expose_errors=expose_errors,
                requires=requires,
                version=version,
                approval=approval,
                cost=cost,
            )
        )
        return agent

    @overload
    def subagent(self, fn: F, /) -> F: ...
    @overload
    def subagent(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        side_effect: bool = False,
        expose_errors: bool = False,
        requires: Requires = None,
        version: str | None = None,
        approval: bool = False,
        cost: float | None = None,
    ) -> Callable[[F], F]: ...
    def subagent(self, fn: Any = None, /, **options: Any) -> Any:
        """Register an async function with keyword parameters as a sub-agent (counts against `max_agent_calls`)."""
        return self._register_function('agent', fn, options)

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        side_effect: bool = False,
        expose_errors: bool = False,
        requires: Requires = None,
        version: str | None = None,
        approval: bool = False,
        cost: float | None = None,
    ) -> Callable[[F], F]: ...
    def tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a host function (sync or async) that scripts may call (counts against `max_tool_calls`).

        Options: `name`, `description` (default: the docstring), `side_effect=True` for a call that
        changes the world (never re-run silently after a crash; marked in the stubs),
        `expose_errors=True` to show the script its exception messages, and `requires=` (a callee
        name, an `After(...)`, or a list) for predecessors that must have succeeded earlier in the
        run: otherwise the call is refused with a `PermissionError`, before it runs. `version=`
        marks a change of behaviour: runs record it, and resuming one under another version is
        refused unless accepted. `approval=True`: a person must approve each call before it runs;
        a run that reaches one stops with `status == 'waiting'` (stored, holding no worker) until
        `approve` / `reject` and `resume`. `cost=` (USD): the most one call can cost, for `estimate` (a host
        tool costs nothing unless it says so; a sub-agent function without one is unpriced).
        """
        return self._register_function('tool', fn, options)

    def _register_function(self, kind: CallKind, fn: Any, options: dict[str, Any]) -> Any:
        def register(f: F) -> F:
            callee = callee_from_function(
                f,
                kind=kind,
                existing=set(self._callees),
                name=options.get('name'),
                description=options.get('description'),
            )
            flags = {key: value for key, value in options.items() if key not in ('name', 'description')}
            self.add_callee(with_options(callee, **flags))
            return f

        return register if fn is None else register(fn)

    def add_callee(self, callee: Callee) -> None:
        """Register a prepared `Callee` (for example one taken from another Harness)."""
        check_type_names([*(c for name, c in self._callees.items() if name != callee.name), callee])
        self._callees[callee.name] = callee
        self._stubs = self._manifest = None

    def remove(self, name: str) -> None:
        """Unregister a callee (to replace a built-in, for example)."""
        if name not in self._callees:
            raise KeyError(f'no sub-agent or tool named {name!r}; registered: {sorted(self._callees)}')
        del self._callees[name]
        self._stubs = self._manifest = None

    @property
    def callees(self) -> Mapping[str, Callee]:
        return dict(self._callees)

    def stubs(self) -> str:
        """The exact catalog text the model is shown and the checker checks scripts against."""
        if self._stubs is None:
            check_rules(self._callees)
            self._stubs = render_stubs(self._callees.values())
        return self._stubs

    def manifest(self) -> dict[str, Any]:
        """The catalog as runs store it: the stubs, and per callee a digest, a digest of its rules and a version."""
        if self._manifest is None:
            self._manifest = manifest(self._callees, self.stubs())
        return self._manifest


def with_options(
    callee: Callee,
    *,
    side_effect: bool | Literal[_NotGiven.TOKEN] = NOT_GIVEN,
    expose_errors: bool = False,
    requires: Requires = None,
    version: str | None = None,
    approval: bool = False,
    cost: float | None = None,
) -> Callee:
    """A registered callee with the options given at registration (`side_effect` not given: False)."""
    rules = normalize(requires)
    given = side_effect is not NOT_GIVEN
    return dataclasses.replace(
        callee,
        side_effect=False if side_effect is NOT_GIVEN else side_effect,
        side_effect_given=given,
        expose_errors=expose_errors,
        requires=rules,
        version=version,
        approval=approval,
        cost=check_cost(cost, callee.name),
    )
