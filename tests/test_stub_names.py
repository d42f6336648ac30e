"""Names the stubs could not render: refused at registration, naming the fix (pydantic-ai 2.62's
`FunctionSignature` renders a keyword alias as is, and leaves a same-named type bare inside another type)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, create_model
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from harness import RegistrationError


class Mail(BaseModel):
    sender: str = Field(alias='from')
    to: str


def test_a_keyword_alias_is_refused_naming_a_usable_name(make_harness):
    h = make_harness()
    with pytest.raises(RegistrationError, match=r"mailer: parameter 'from' .*not a keyword argument.*'from_'"):
        h.add_agent(Agent(TestModel(), name='mailer'), params=Mail)
    assert 'mailer' not in h.callees


class Fetch(BaseModel):
    url: str
    age: int = Field(0, alias='max-age')


class FetchOk(BaseModel):
    url: str
    age: int = Field(0, alias='max_age')


def test_an_alias_that_is_no_identifier_is_refused_and_a_usable_one_works(make_harness):
    h = make_harness()
    with pytest.raises(RegistrationError, match=r"fetch: parameter 'max-age' .*'max_age'"):
        h.add_agent(Agent(TestModel(custom_output_text='fetched'), name='fetch'), params=Fetch)
    h.add_agent(Agent(TestModel(custom_output_text='fetched'), name='fetch'), params=FetchOk)
    assert 'async def fetch(*, url: str, max_age: int = 0) -> str:' in h.stubs()
    assert h.run_sync('await fetch(url="u", max_age=3)').value == 'fetched'


# Two different classes named alike, as from two modules.
FirstItem = create_model('Item', name=(str, ...))
SecondItem = create_model('Item', size=(int, ...))


class Order(BaseModel):
    items: list[FirstItem]


def test_same_named_types_inside_another_type_are_refused(make_harness):
    h = make_harness()

    @h.tool
    def order(*, order_id: str) -> Order:
        return Order(items=[])

    with pytest.raises(RegistrationError, match=r"its type Order has a field 'items' of type Item.*Rename"):

        @h.tool
        def stock(*, sku: str) -> SecondItem:
            return SecondItem(size=1)

    assert set(h.callees) == {'order'}  # the catalog is as it was


def test_same_named_types_used_directly_are_told_apart(make_harness):
    h = make_harness()

    @h.tool
    def first(*, n: int) -> FirstItem:
        return FirstItem(name=str(n))

    @h.tool
    def second(*, n: int) -> list[SecondItem]:
        return [SecondItem(size=n)]

    stubs = h.stubs()
    assert 'async def first(*, n: int) -> first_Item:' in stubs
    assert 'async def second(*, n: int) -> list[second_Item]:' in stubs
    report = h.check('a = await first(n=1)\nb = await second(n=2)\nx = a["name"] + b[0]["size"]')
    assert not report.ok and 'unsupported-operator' in report.errors
    assert h.run_sync('a = await first(n=1)\nb = await second(n=2)\na["name"] + str(b[0]["size"])').value == '12'
