"""A delivery stored while the worker is looking wakes it at once: the wake is not lost to the idle poll."""

from __future__ import annotations

import asyncio
from typing import Any

from kerrigan.github.delivery_worker import DeliveryWorker


class LookingWorker(DeliveryWorker):
    """Finds nothing on its first look, during which a delivery arrives (a wake); records the second."""

    def __init__(self) -> None:
        app: Any = None  # never used: process_one is this class's own
        router: Any = None
        super().__init__(app, router, idle_poll_s=3600.0)
        self.looks = 0
        self.looked_again = asyncio.Event()

    async def process_one(self) -> bool:
        self.looks += 1
        if self.looks == 1:
            self.wake()  # stored while this look's query ran: it found nothing yet
            return False
        self.looked_again.set()
        await asyncio.sleep(3600)  # and then stays busy, as a long delivery would
        return True


async def test_a_wake_during_a_look_that_found_nothing_makes_the_worker_look_again_at_once() -> None:
    worker = LookingWorker()
    running = asyncio.create_task(worker.run())
    try:
        # Lost, the wake would leave the worker in its hour-long idle poll: this wait would time out.
        await asyncio.wait_for(worker.looked_again.wait(), 10)
        assert worker.looks == 2
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
