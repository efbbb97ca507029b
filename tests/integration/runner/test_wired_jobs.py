"""Jobs on a wired device through the real agent and the real server: the devices file wires
``modalix-bluebox`` (lab-a-01's) to an outlet of the PDU stand-in (through labgrid's Gude backend) and to a
simulated board's console; the agent power-cycles the board, waits for its login prompt, runs the job, and
powers it off after; a task with ``power: keep`` finds a board that is on as it was. A board that hangs
ends the job ``boot_failed`` with its console's last lines; a PDU that hangs ends it ``power_failed``
after ``timeout_s``. A board left in doubt is recovered before its next job: power-cycled and booted,
``good`` when it boots, ``bad`` with its console's last lines after three recoveries fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Final

import pytest
from sqlalchemy import select

from kerrigan.core.device_status import Health
from kerrigan.core.recovery import RECOVERY_TASK
from kerrigan.runner.devices_file import load_devices_file
from kerrigan.store.models import DeviceRow, JobRow
from kerrigan.testing.board import Mode, SimulatedBoard, State
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory, job_output, job_rows, tokens

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

OUTLET: Final = 4
BOOT_S: Final = 0.3
MANIFEST: Final = """\
name: board
on: {push: {branches: [main]}}
retry: {infrastructure: 0}
scheduling:
  labels: {kerrigan.target_id: modalix-bluebox}
tasks:
  - id: hil
    run: ./scripts/hil.sh
    vcpus: 1
"""
HIL: Final = '#!/bin/sh\necho "booted in $KERRIGAN_BOOT_SECONDS s"\n'


@pytest.fixture
async def pdu() -> AsyncIterator[GudePdu]:
    async with GudePdu(outlets=8) as stand_in:
        yield stand_in


@pytest.fixture
async def board(pdu: GudePdu) -> AsyncIterator[SimulatedBoard]:
    async with SimulatedBoard(boot_s=BOOT_S) as simulated:
        simulated.attach(pdu, OUTLET)
        yield simulated


async def run_job(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
    pdu: GudePdu,
    board: SimulatedBoard,
    hil: str = HIL,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
    manifest: str = MANIFEST,
) -> str:
    """Run the board workflow on lab-a-01 with modalix-bluebox wired; its job's state, reason, output."""
    devices = tmp_path / "devices.yml"
    devices.write_text(
        "devices:\n"
        "  modalix-bluebox:\n"
        f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
        "off_s: 1, timeout_s: 1}\n"
        f"    console: {{serial: {{port: {board.path}}}}}\n"
        "    boot: {ready: 'login:', fail: ['Kernel panic'], timeout_s: 2}\n",
        encoding="utf-8",
    )
    hosts = await tokens(harness, "lab-a-01")
    agents("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(devices))
    [run] = await harness.push_commit({".kerrigan/workflows/board.yml": manifest, "scripts/hil.sh": hil})
    if meanwhile is not None:
        await meanwhile()

    async def ended() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

    await harness.wait_until(ended, timeout=30)
    row = (await job_rows(harness))[0]  # after it, the board's recoveries when it ended in doubt
    return f"{row.state} {row.reason} {row.exit_status}\n" + await job_output(harness, row.pk)


async def recoveries(harness: Harness) -> list[JobRow]:
    """The recovery jobs of the lab, oldest first."""
    return [row for row in await job_rows(harness) if row.task_id == RECOVERY_TASK]


async def health_of(harness: Harness, device_id: str) -> tuple[Health, str]:
    async with harness.database.sessions() as session:
        row = await session.scalar(select(DeviceRow).where(DeviceRow.id == device_id))
    assert row is not None
    return row.health, row.health_reason


async def test_the_board_is_cycled_and_booted_before_the_job_and_off_after(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    pdu.switch(OUTLET, True)  # left on by the last job
    assert board.powered
    output = await run_job(harness, agents, tmp_path, pdu, board)
    head, _, rest = output.partition("\n")
    assert head == "succeeded None 0", output
    seconds = float(rest.removeprefix("booted in ").split()[0])
    assert BOOT_S * 0.8 < seconds < 2
    # The manual switch, then the agent's cycle (off, on) and after_job's off.
    assert pdu.switches[1:] == [(OUTLET, False), (OUTLET, True), (OUTLET, False)]
    assert board.boots == 2  # the board's own power-on at the start, and the cycle's
    assert not board.powered


async def test_a_task_with_power_keep_finds_a_board_that_is_on_as_it_was(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    pdu.switch(OUTLET, True)  # left on, booted, by the last job
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)
    hil = '#!/bin/sh\necho "boot seconds: ${KERRIGAN_BOOT_SECONDS:-none}"\n'
    manifest = MANIFEST + "    power: keep\n"
    output = await run_job(harness, agents, tmp_path, pdu, board, hil, manifest=manifest)
    assert output == "succeeded None 0\nboot seconds: none\n", output
    # Only the manual switch, then after_job's off: no cycle, and no boot but the board's own.
    assert pdu.switches[1:] == [(OUTLET, False)]
    assert board.boots == 1
    assert not board.powered


async def test_a_board_that_hangs_at_boot_ends_its_job_boot_failed_with_the_consoles_last_lines(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    board.mode = Mode.HANG_AT_BOOT
    output = await run_job(harness, agents, tmp_path, pdu, board)
    assert output.startswith("failed boot_failed 75\n"), output
    assert (
        "kerrigan: boot_failed: modalix-bluebox: no line matched boot.ready ('login:') within 2 s" in output
    )
    assert "kerrigan: the console's last lines:\n" in output
    assert "printk: console [ttyS2] enabled" in output
    assert "booted in" not in output  # its command never ran
    assert pdu.switches[-1] == (OUTLET, False)  # powered off after
    assert not board.powered


async def test_a_pdu_that_hangs_ends_the_job_power_failed_after_timeout_s(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    pdu.hang()
    output = await run_job(harness, agents, tmp_path, pdu, board)
    pdu.behave()
    assert output.startswith("failed power_failed 75\n"), output
    assert (
        f"kerrigan: power_failed: modalix-bluebox: PDU gude at 127.0.0.1:{pdu.port} outlet {OUTLET}: "
        "switching it off: no answer within 1 s"
    ) in output
    assert "booted in" not in output


async def test_a_pdu_silent_for_a_while_holds_the_check_run_and_the_job_runs_once_it_answers(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    """The agent reports the job's start before it powers the board: the server still knows the command
    never ran (``power_failed``), so neither the job's retries nor the board's recoveries are spent."""
    pdu.hang()
    silent_recoveries = 3  # FAILED_RECOVERIES_FOR_BAD: as many counted would have made the board bad

    async def power_returns() -> None:
        async def waited() -> bool:
            rows = await recoveries(harness)
            return sum(row.reason == "power_failed" for row in rows) >= silent_recoveries

        await harness.wait_until(waited, timeout=30)
        assert [run["status"] for run in harness.github.check_runs.values()] == ["in_progress"]
        assert (await health_of(harness, "modalix-bluebox"))[0] is Health.UNKNOWN
        pdu.behave()

    manifest = MANIFEST.replace("retry: {infrastructure: 0}\n", "")  # two retries, the default
    output = await run_job(harness, agents, tmp_path, pdu, board, meanwhile=power_returns, manifest=manifest)
    assert output.startswith("retried power_failed 75\n"), output
    [run] = harness.github.check_runs.values()
    assert run["conclusion"] == "success"
    attempts = [
        (row.attempt, row.state, row.reason) for row in await job_rows(harness) if row.task_id == "hil"
    ]
    assert attempts == [(1, "retried", "power_failed"), (2, "succeeded", None)]
    assert await health_of(harness, "modalix-bluebox") == (Health.GOOD, "recovered: it booted")


async def test_a_console_that_goes_away_while_the_job_runs_stops_it_console_lost(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    async def unplug() -> None:
        await wait_until(lambda: board.state is State.LOGIN, timeout=15)
        await asyncio.sleep(1.0)  # the command is running
        await board.close()

    hil = '#!/bin/sh\necho "running"\nsleep 30\necho "never"\n'
    output = await run_job(harness, agents, tmp_path, pdu, board, hil, unplug)
    assert output.startswith("failed console_lost 75\n"), output
    assert "running" in output
    assert "never" not in output
    assert f"kerrigan: console_lost: modalix-bluebox: console {board.path} went away: " in output
    assert pdu.switches[-1] == (OUTLET, False)  # powered off after


async def test_a_board_that_hung_is_recovered_and_good_again(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    board.mode = Mode.HANG_AT_BOOT
    output = await run_job(harness, agents, tmp_path, pdu, board)
    assert output.startswith("failed boot_failed 75\n"), output
    board.mode = Mode.BOOTS  # whatever hung it has passed: the recovery's power cycle brings it back

    async def recovered() -> bool:
        return any(row.state == "succeeded" for row in await recoveries(harness))

    await harness.wait_until(recovered, timeout=30)
    [recovery] = await recoveries(harness)
    assert recovery.device_id == "modalix-bluebox"
    assert await health_of(harness, "modalix-bluebox") == (Health.GOOD, "recovered: it booted")
    assert board.boots == 2  # the job's hung boot, then the recovery's
    assert pdu.switches[-3:] == [(OUTLET, False), (OUTLET, True), (OUTLET, False)]  # cycled, then off


async def test_three_failed_recoveries_make_the_board_bad_with_its_console_as_evidence(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    board.mode = Mode.HANG_AT_BOOT
    output = await run_job(harness, agents, tmp_path, pdu, board)
    assert output.startswith("failed boot_failed 75\n"), output

    async def bad() -> bool:
        return (await health_of(harness, "modalix-bluebox"))[0] is Health.BAD

    await harness.wait_until(bad, timeout=60)
    _, reason = await health_of(harness, "modalix-bluebox")
    assert reason.startswith(
        "3 recoveries failed in a row (the last boot_failed); the console's last lines: "
    )
    assert "printk: console [ttyS2] enabled" in reason  # where the simulated board hangs
    rows = await recoveries(harness)
    assert [(row.state, row.reason) for row in rows] == [("failed", "boot_failed")] * 3
    assert board.boots == 4  # the job's, then each recovery's
    await harness.settle()
    assert len(await recoveries(harness)) == 3  # no fourth: a bad board waits for a person or its check


async def test_a_job_takes_its_board_only_once_a_persons_power_cycle_under_way_ended(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    """A person's cycle (``kerrigan power``) is under way on the agent when the job is offered: the job's own
    cycle waits for the board's lock, so the person's off is not followed by the job's off and the person's
    on in the middle of the job's boot; a person's request once the job holds the board is refused busy."""
    devices = tmp_path / "devices.yml"
    devices.write_text(
        "devices:\n"
        "  modalix-bluebox:\n"
        f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
        "off_s: 2, timeout_s: 1}\n"
        f"    console: {{serial: {{port: {board.path}}}}}\n"
        "    boot: {ready: 'login:', timeout_s: 5}\n",
        encoding="utf-8",
    )
    hosts = await tokens(harness, "lab-a-01")
    agent = agents("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(devices))
    await wait_until(lambda: "device_power" in agent.capabilities, timeout=15)
    cycle = {"id": "p1", "device": "modalix-bluebox", "action": "cycle"}
    person = asyncio.create_task(agent._person_power.perform(cycle))
    await wait_until(lambda: pdu.switches == [(OUTLET, False)], timeout=15)  # its off_s has begun
    hil = '#!/bin/sh\nsleep 1\necho "booted in $KERRIGAN_BOOT_SECONDS s"\n'
    [run] = await harness.push_commit({".kerrigan/workflows/board.yml": MANIFEST, "scripts/hil.sh": hil})
    await wait_until(lambda: agent._held_by_job("modalix-bluebox"), timeout=15)
    assert not person.done()  # the job came while the person's cycle was under way
    assert await person == {"state": "on"}
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)  # the job's boot
    assert await agent._person_power.perform(cycle | {"action": "off"}) == {
        "failure": "busy",
        "message": "a job holds modalix-bluebox on this host",
    }

    async def ended() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

    await harness.wait_until(ended, timeout=30)
    [row] = await job_rows(harness)
    assert (row.state, row.exit_status) == ("succeeded", 0), await job_output(harness, row.pk)
    # The person's off and on, then the job's cycle (off, on) and after_job's off: never interleaved.
    assert pdu.switches == [(OUTLET, False), (OUTLET, True), (OUTLET, False), (OUTLET, True), (OUTLET, False)]
