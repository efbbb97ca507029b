"""The agent's ``/metrics`` count what it does to the boards its devices file wires, scraped over HTTP after a
wired job on a simulated board behind the PDU stand-in: every power switch by why it was made
(``kerrigan_device_power_cycles_total``) and how long each boot it waited for took
(``kerrigan_device_boot_seconds``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from kerrigan.runner.agent import Agent
from kerrigan.runner.boards.figures import BOOT_BUCKETS
from kerrigan.testing.board import Mode, SimulatedBoard, State
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory
from tests.integration.runner.test_wired_jobs import BOOT_S, MANIFEST, OUTLET, board, pdu, recoveries, run_job
from tests.unit.runner.metrics_scrape import Scrape, scrape

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

__all__ = ["board", "pdu"]  # the fixtures, shared with test_wired_jobs

DEVICE: Final = "modalix-bluebox"
CYCLES: Final = "kerrigan_device_power_cycles_total"
# The job cycles its own board through its power socket, as `kerrigan device power cycle` does.
CYCLE_ITSELF: Final = """\
#!/usr/bin/env python3
import os, socket
sock = socket.socket(socket.AF_UNIX)
sock.connect(os.environ["KERRIGAN_DEVICE_SOCKET"])
sock.sendall(b'{"op": "cycle"}\\n')
print("cycle:", sock.makefile().readline().strip())
"""


def with_metrics(agents: AgentFactory, started: list[Agent]) -> Callable[..., Agent]:
    """``agents``, each serving its metrics on a free port; those started go to ``started``."""

    def start(*args: Any, **overrides: Any) -> Agent:
        agent = agents(*args, metrics_port=0, **overrides)
        started.append(agent)
        return agent

    return start


async def scraped(agent: Agent) -> Scrape:
    async with aiohttp.ClientSession() as http:
        return await scrape(http, agent.metrics_port)


def cycles(figures: Scrape) -> dict[str, float]:
    return {
        reason: figures.value(CYCLES, device=DEVICE, reason=reason)
        for reason in ("job", "recovery", "job_request", "after_job")
    }


async def test_a_jobs_cycle_its_own_cycle_and_the_off_after_are_counted_and_its_boot_timed(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    started: list[Agent] = []
    output = await run_job(harness, with_metrics(agents, started), tmp_path, pdu, board, CYCLE_ITSELF)
    assert output == 'succeeded None 0\ncycle: {"ok": true, "state": "on"}\n', output
    [agent] = started
    figures = await scraped(agent)

    # The agent's cycle before the job, the job's own, the agent's off after it: one each.
    assert cycles(figures) == {"job": 1, "recovery": 0, "job_request": 1, "after_job": 1}
    assert pdu.switches == [(OUTLET, False), (OUTLET, True)] * 2 + [(OUTLET, False)]
    # One boot waited for (the job's own cycle is not waited for by the agent), as long as the job was told.
    boots = "kerrigan_device_boot_seconds"
    assert figures.value(f"{boots}_count", device=DEVICE) == 1
    took = figures.value(f"{boots}_sum", device=DEVICE)
    assert BOOT_S * 0.8 < took < BOOT_BUCKETS[0]
    for bound in BOOT_BUCKETS:
        assert figures.value(f"{boots}_bucket", device=DEVICE, le=f"{bound:g}") == 1
    assert figures.value(f"{boots}_bucket", device=DEVICE, le="+Inf") == 1


async def test_power_keep_on_a_board_that_is_on_counts_only_the_off_after_and_no_boot(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    pdu.switch(OUTLET, True)  # left on, booted, by the last job
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)
    started: list[Agent] = []
    manifest = MANIFEST + "    power: keep\n"
    start = with_metrics(agents, started)
    output = await run_job(harness, start, tmp_path, pdu, board, "#!/bin/sh\necho kept\n", manifest=manifest)
    assert output == "succeeded None 0\nkept\n", output
    [agent] = started
    figures = await scraped(agent)

    assert cycles(figures) == {"job": 0, "recovery": 0, "job_request": 0, "after_job": 1}
    assert figures.value("kerrigan_device_boot_seconds_count", device=DEVICE) == 0
    assert figures.value("kerrigan_device_boot_seconds_sum", device=DEVICE) == 0


async def test_a_recoverys_cycle_is_counted_as_one_and_its_boot_timed(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    board.mode = Mode.HANG_AT_BOOT
    started: list[Agent] = []
    output = await run_job(harness, with_metrics(agents, started), tmp_path, pdu, board)
    assert output.startswith("failed boot_failed 75\n"), output
    board.mode = Mode.BOOTS

    async def recovered() -> bool:
        return any(row.state == "succeeded" for row in await recoveries(harness))

    await harness.wait_until(recovered, timeout=30)
    [agent] = started
    figures = await scraped(agent)
    # The job's cycle (its boot hung), the recovery's, and the off after each.
    assert cycles(figures) == {"job": 1, "recovery": 1, "job_request": 0, "after_job": 2}
    assert figures.value("kerrigan_device_boot_seconds_count", device=DEVICE) == 1  # the hung one never ended
