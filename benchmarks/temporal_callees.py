"""The catalog `bench_temporal.py`'s worker processes serve (`harness worker --agents temporal_callees:catalog`)."""

from __future__ import annotations

from harness import Harness

catalog = Harness(store=None)


@catalog.tool
def burn(*, seed: int) -> int:
    """A fixed amount of CPU work (about 50 ms on its own), so throughput is bounded by cores, not by waiting."""
    return sum((i * seed) % 7 for i in range(1_500_000))
