"""Dollar budgets on the Temporal engine (#24.2): the `advance` that admits a call reserves its ceiling; the `call`
activity that runs it settles it to what its usage cost, in the journal and in the store's daily window. Against the
real dev server (`tests/test_temporal.py`'s `temporal_address`), with a worker in this process."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness._dispatch._cost import today
from harness._errors import PlanRejected
from harness._temporal._host import connect, worker

sys.path.insert(0, str(Path(__file__).parent / 'helpers'))
sys.path.insert(0, str(Path(__file__).parent))
from cost_worker import SCRIPT, build
from test_cost import CEILING, priced, ran
from test_temporal import temporal_address  # noqa: F401  (the session's dev server)


async def test_dollar_costs_settle_on_temporal_to_the_priced_usage(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    """8 calls gathered under max_cost=$0.006: the first advance reserves 4 ceilings ($0.0015 each) and refuses 4;
    each call activity settles its call to what its usage cost, so the run's cost, the journal's and the daily
    window's spent are the priced usage, and nothing is left reserved."""
    queue = f'test-{uuid.uuid4().hex[:8]}'
    h = build(
        str(tmp_path / 'runs.db'), max_cost=4 * CEILING, daily_cost={'tenant-a': 1.0}, temporal=temporal_address,
        task_queue=queue,
    )  # fmt: skip
    client = await connect(temporal_address)
    try:
        async with worker(h, client, queue):
            r = await h.run(SCRIPT, inputs={'n': 8}, budget_key='tenant-a')
        assert h.store is not None
        day = h.store.spend_of('tenant-a', today())
        row = h.store.get_run(r.run_id)
    finally:
        await h.aclose()
    assert ran(r) == [0, 1, 2, 3]
    assert [c.cost_usd for c in r.calls if c.status == 'ok'] == pytest.approx([priced(t) for t in range(4)])
    assert r.cost_usd == pytest.approx(sum(priced(t) for t in range(4))) and r.cost_usd < 4 * CEILING
    assert day == pytest.approx((sum(priced(t) for t in range(4)), 0.0))
    assert row is not None and row.budget_key == 'tenant-a'
    assert sum(v.startswith('refused: The cost budget (max_cost=$0.0060) has $0.0000 left') for v in r.value) == 4


async def held_run(h: Any, task: asyncio.Future[Any]) -> str:
    """The run `task` started, once it is stored waiting for its plan (nothing of it ran)."""
    assert h.store is not None
    while True:
        rows = h.store.waiting_runs()
        if rows:
            return rows[0]
        assert not task.done(), task.result()
        await asyncio.sleep(0.05)


async def test_plan_review_on_temporal_holds_the_run_until_a_person_decides(
    temporal_address: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`Harness(review=..., temporal=...)`: the script's workflow stops before its first call, the run stored
    `waiting` with its plan; `approve(run_id)` signals it and it runs under the plan's bounds; a rejected plan ends
    the run as `PlanRejected`, nothing of it run."""
    from test_review import SCRIPT
    from test_review import build as build_review

    queue = f'test-{uuid.uuid4().hex[:8]}'
    calls: list[str] = []
    h = build_review(tmp_path / 'runs.db', calls, temporal=temporal_address, task_queue=queue)
    client = await connect(temporal_address)
    try:
        async with worker(h, client, queue):
            task = asyncio.ensure_future(h.run(SCRIPT))
            run_id = await held_run(h, task)
            row = h.store.get_run(run_id) if h.store is not None else None
            assert row is not None and row.status == 'waiting' and calls == []
            await asyncio.to_thread(h.approve, run_id, by='dana')
            result = await asyncio.wait_for(task, 30)
            assert result.value == ['sent to ann', 'sent to bob']
            assert calls == ['draft ann', 'send ann', 'draft bob', 'send bob']

            calls.clear()
            task = asyncio.ensure_future(h.run(SCRIPT))
            run_id = await held_run(h, task)
            await asyncio.to_thread(h.reject, run_id, reason='not today', by='dana')
            with pytest.raises(PlanRejected, match=f'The plan of run {run_id} was rejected by dana: not today'):
                await asyncio.wait_for(task, 30)
            assert calls == []
    finally:
        await h.aclose()
