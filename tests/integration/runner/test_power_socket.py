"""A job's power socket at the job's end: a power call the job asked for ends before the socket is closed,
so the agent's own ``after_job`` off always comes after it."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from kerrigan.runner.boards.control import Board, BoardControl, CountedPower, GivenBack
from kerrigan.runner.boards.power_socket import PowerSocket
from kerrigan.runner.boards.threads import in_own_thread
from kerrigan.runner.devices_file.wiring import AfterJob, CommandPower, PowerWiring, Wiring

LATENCY_S = 0.3  # how long a switched-on request takes to reach the outlet once sent


class SlowPdu:
    """A PDU as labgrid drives it: each call a blocking request in a thread of its own, which no cancel
    stops; a switch-on reaches the outlet :data:`LATENCY_S` after it was released (the test's word)."""

    def __init__(self) -> None:
        self.outlet_on = False
        self.switched: list[bool] = []  # what reached the outlet, in order
        self.sent = threading.Event()
        self.release = threading.Event()

    def _reach(self, on: bool) -> None:
        self.outlet_on = on
        self.switched.append(on)

    async def on(self) -> None:
        def call() -> None:
            self.sent.set()
            self.release.wait(10)
            time.sleep(LATENCY_S)
            self._reach(True)

        await in_own_thread(call)

    async def off(self) -> None:
        self._reach(False)

    async def cycle(self, off_s: float) -> None:
        await self.off()
        await self.on()

    async def status(self) -> bool | None:
        return self.outlet_on


async def test_a_power_on_the_job_asked_for_ends_before_after_jobs_off(tmp_path: Path) -> None:
    pdu = SlowPdu()
    wiring = Wiring(PowerWiring(CommandPower(("true",), ("true",)), 1, 5), None, None, AfterJob.OFF)
    counted = CountedPower(pdu, lambda reason: None)  # type: ignore[arg-type]  # a stand-in driver
    board = Board("modalix-bluebox", None, wiring, power=counted)
    power = PowerSocket("job-1", [board], os.getuid(), tmp_path / "devices")
    path = await power.open()
    _reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b'{"op": "on"}\n')
    await writer.drain()
    assert await asyncio.to_thread(pdu.sent.wait, 10)  # the job's switch-on is on its way to the PDU
    # The job ends (its processes killed): the agent closes its socket, then applies after_job.
    closing = asyncio.create_task(power.close())
    await asyncio.sleep(0.2)
    pdu.release.set()
    await closing
    given = await BoardControl([board]).give_back()
    writer.close()
    await asyncio.sleep(2 * LATENCY_S)  # anything still on its way to the PDU has reached it
    assert given == GivenBack(powered_off=["modalix-bluebox"], power_unknown=[], problems=[])
    assert pdu.switched == [True, False]  # the job's on reached the outlet first: after_job's off is last
    assert pdu.outlet_on is False
    assert not (tmp_path / "devices").exists()
