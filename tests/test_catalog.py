"""Registration: every mistake fails at registration with an error that names the fix."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.models.test import TestModel

from harness import Harness, RegistrationError


def fresh() -> Harness:
    return Harness(store=':memory:')


async def ok(*, task: str) -> str:
    return task


@pytest.mark.parametrize(
    ('name', 'fix'),
    [
        ('', 'pass name='),
        ('not valid', 'not a Python identifier'),
        ('class', 'Python keyword'),
        ('asyncio', 'shadow'),
        ('print', 'shadow'),
        ('settled', 'shadow'),
        ('len', 'shadow'),
        ('_private', 'public name'),
    ],
)
def test_bad_names_are_refused_with_the_fix(name: str, fix: str):
    with pytest.raises(RegistrationError, match=fix):
        fresh().subagent(name=name)(ok)


def test_agent_without_a_name_is_refused():
    with pytest.raises(RegistrationError, match='pass name='):
        fresh().add_agent(Agent(TestModel()))


def test_duplicates_are_refused():
    h = fresh()
    h.subagent(name='dup')(ok)
    with pytest.raises(RegistrationError, match='already registered'):
        h.tool(name='dup')(ok)


def test_untyped_parameters_and_returns_are_refused():
    async def untyped(*, task):  # type: ignore[no-untyped-def]
        return task

    async def no_return(*, task: str):  # type: ignore[no-untyped-def]
        return task

    with pytest.raises(RegistrationError, match="parameter 'task' has no type annotation"):
        fresh().subagent(untyped)
    with pytest.raises(RegistrationError, match='no return annotation'):
        fresh().subagent(no_return)


class Opaque:
    pass


def test_types_that_cannot_cross_are_refused():
    async def takes(*, thing: Opaque) -> str:
        return ''

    async def gives(*, task: str) -> Opaque:
        return Opaque()

    with pytest.raises(RegistrationError, match='cannot cross into the sandbox'):
        fresh().subagent(takes)
    with pytest.raises(RegistrationError, match='cannot cross into the sandbox'):
        fresh().subagent(gives)


def test_var_args_are_refused():
    async def star(*args: str) -> str:
        return ''

    with pytest.raises(RegistrationError, match='keyword parameters only'):
        fresh().subagent(star)


def test_subagent_must_be_async_but_tools_need_not():
    def sync(*, x: int) -> int:
        return x

    with pytest.raises(RegistrationError, match='async def'):
        fresh().subagent(sync)
    h = fresh()
    h.tool(sync)
    assert 'async def sync(*, x: int) -> int:' in h.stubs()


def test_params_model_fields_become_keyword_parameters_and_docs():
    class Request(BaseModel):
        """Ignored: the agent's description is the docstring."""

        path: str
        strict: bool = False

    h = fresh()
    h.add_agent(Agent(TestModel(), name='linter', description='Lints one file.'), params=Request)
    stubs = h.stubs()
    assert 'async def linter(*, path: str, strict: bool = False) -> str:' in stubs
    assert '"""Lints one file."""' in stubs


def test_invalid_settings_name_the_fix():
    with pytest.raises(UserError, match='max_agent_calls must be a whole number of at least 1'):
        Harness(store=':memory:', max_agent_calls=0)
    # Not a count at all: the same one line naming the fix, never a raw TypeError from a comparison.
    with pytest.raises(UserError, match=r'max_agent_calls must be .* give a large number\), not None'):
        Harness(store=':memory:', max_agent_calls=None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"max_tool_calls must be .* \(None: no limit\), not '5'"):
        Harness(store=':memory:', max_tool_calls='5')  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"call_caps\['x'\] must be a whole number of at least 0.*not 2.5"):
        Harness(store=':memory:', call_caps={'x': 2.5})  # type: ignore[dict-item]
    with pytest.raises(UserError, match='unknown sandbox limit'):
        Harness(store=':memory:', limits={'max_durations_secs': 1})


def test_stub_text_is_what_the_checker_uses():
    h = fresh()

    @h.tool
    def fetch(*, url: str) -> dict[str, Any]:
        """Fetch a URL (pretend)."""
        return {}

    stubs = h.stubs()
    # The catalog type-checks as a module on its own, and a script using it passes.
    assert h.check('r = await fetch(url="x")\nr["k"]').ok
    assert stubs.startswith('import asyncio\n')
    assert 'async def settled(aw: Awaitable[T]) -> Settled[T]:' in stubs


@pytest.mark.parametrize('bad', [-0.01, float('nan'), float('inf'), '0.02', True])
def test_a_cost_ceiling_must_be_a_non_negative_finite_number(bad: Any):
    h = fresh()
    with pytest.raises(RegistrationError, match=r'cost= is a ceiling in USD per call .* e\.g\. cost=0\.02'):
        h.add_agent(Agent(TestModel(), name='writer'), cost=bad)
    with pytest.raises(RegistrationError, match='cost='):
        h.subagent(name='w', cost=bad)(ok)
    with pytest.raises(RegistrationError, match='cost='):
        h.tool(name='t', cost=bad)(ok)
    assert not h.callees  # nothing half-registered


def test_a_cost_ceiling_is_kept_per_callee_and_is_not_part_of_its_digest():
    """A ceiling is accounting, not what a script relies on: changing one must not make stored runs' catalog
    'changed' (as call_caps, set on the Harness, never are)."""
    h, other = fresh(), fresh()
    h.add_agent(Agent(TestModel(), name='writer'), cost=0.02)
    h.subagent(name='w', cost=0)(ok)
    h.tool(name='t', cost=1)(ok)
    assert (h.callees['writer'].cost, h.callees['w'].cost, h.callees['t'].cost) == (0.02, 0.0, 1.0)
    other.add_agent(Agent(TestModel(), name='writer'))
    other.subagent(name='w')(ok)
    other.tool(name='t')(ok)
    assert other.callees['writer'].cost is None
    assert h.manifest() == other.manifest()
