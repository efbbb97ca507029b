"""The lab's figures for ``/metrics`` (:class:`kerrigan.web.metrics.LabMetrics`) stop when told to, wherever
their loop waits: a stopping ``kerrigan serve`` waits for that loop (``DISPATCHER_STOP_S``), and one stopped
while the lab was idle waited out the refresh interval before it exited."""

from __future__ import annotations

import asyncio

from kerrigan.store.database import Database
from kerrigan.testing.waiting import wait_until
from kerrigan.web.metrics import LabMetrics

STOP_WITHIN_S = 10.0  # far less than the refresh below: the loop must not wait for it


async def test_stopped_while_waiting_for_a_change_it_returns_without_waiting_for_the_next_refresh(
    db: Database,
) -> None:
    metrics = LabMetrics(db, refresh_s=3600.0, min_gap_s=0.01)
    running = asyncio.create_task(metrics.run())
    try:
        await wait_until(lambda: metrics.figures is not None, timeout=10, what="the first read")
        await asyncio.sleep(0.2)  # past the gap after a read: it waits for a change or the next refresh
        assert not running.done()
        metrics.stop()
        await asyncio.wait_for(running, STOP_WITHIN_S)
    finally:
        running.cancel()
    assert running.exception() is None
