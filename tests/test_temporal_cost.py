"""Dollar budgets on the Temporal engine (#24.2): the `advance` that admits a call reserves its ceiling; the `call`
activity that runs it settles it to what its usage cost, in the journal and in the store's daily window. Against the
real dev server (`tests/test_temporal.py`'s `temporal_address`), with a worker in this process."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from harness._dispatch._cost import today
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
