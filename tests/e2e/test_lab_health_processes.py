"""Device health and host pauses end to end: ``kerrigan serve``, the GitHub stand-in and two ``kerrigan
runner`` processes (rig-01 with board-a, rig-02 with board-b), as an operator runs them; what GitHub shows is
read back through the stand-in's API.

- A paused host drains: the job running there goes on (board-a's task hangs here, so it is still running
  at the end; tests/integration/github/test_host_pause_agents.py sees one finish), a push after the pause
  gets none of its devices (board-b is in maintenance then, so the push waits), and its check run says who
  paused the host and why.
- An owner's maintenance, with its reason and until, reaches the check run of a push that needs the board.
- A board whose health check fails leaves the eligible set, and comes back when its check passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from datetime import UTC, datetime, timedelta

from kerrigan.core.device_status import HostPause
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import Device, DeviceState
from kerrigan.core.matching import resolve
from kerrigan.core.requirements import Requirements
from kerrigan.runner.isolation.cgroups import empty
from kerrigan.runner.records import JobRecords
from kerrigan.store.audit import Change
from kerrigan.store.health_checks.queueing import queue_check
from kerrigan.store.inventory import get_device, load_inventory, save_device, set_state
from kerrigan.store.runners import set_pause
from kerrigan.testing.process_lab import ProcessLab, check_runs, jobs_of, push, runner_agent, session_at


async def test_a_paused_host_drains_and_its_pause_is_explained(rigs: ProcessLab) -> None:
    db = rigs.database
    async with runner_agent(rigs, "rig-01"), runner_agent(rigs, "rig-02"):
        first = "e" * 40
        await push(rigs, first)
        deadline = time.monotonic() + 60
        while not any(row.host == "rig-01" and row.state == "running" for row in await jobs_of(rigs)):
            assert time.monotonic() < deadline, "no job ran on rig-01"
            await asyncio.sleep(0.1)
        now = datetime.now(UTC)
        async with db.sessions() as session, session.begin():
            pause = HostPause("kernel upgrade", "octocat", now)
            assert await set_pause(session, "rig-01", pause, Change("octocat", now)) is not None
            # board-b would take the second push's tasks and pass them in a second, and a finished check
            # run no longer lists the devices passed over; in maintenance, the push waits and says why
            maintenance = DeviceState.MAINTENANCE
            change = Change("octocat", now)
            await set_state(session, "board-b", maintenance, "probe swap", until=None, change=change)
        [held] = [row for row in await jobs_of(rigs) if row.host == "rig-01" and row.state == "running"]
        second = "f" * 40
        await push(rigs, second)
        await session_at(rigs, second, timeout=60, done=False)
        deadline = time.monotonic() + 60
        while True:
            runs = await check_runs(rigs, second)
            text = " ".join(str(run["output"]) for run in runs)
            if "runner host rig-01 paused by octocat: kernel upgrade" in text:
                break
            assert time.monotonic() < deadline, text[:2000]
            await asyncio.sleep(0.5)
        assert "probe swap" in text
        rows = await jobs_of(rigs)
        newest = max(row.session_pk for row in rows)
        assert "rig-01" not in {row.host for row in rows if row.session_pk == newest}
        assert [row.state for row in rows if row.pk == held.pk] == ["running"]  # the pause stopped nothing
    for record in JobRecords(rigs.folder / "rig-01").load_all():  # the killed agent's hanging job is ours
        if record.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(record.pid, signal.SIGKILL)
        if record.cgroup is not None:
            empty(record.cgroup)


async def test_an_owners_maintenance_reaches_the_check_run(rigs: ProcessLab) -> None:
    db = rigs.database
    now = datetime.now(UTC)
    until = now + timedelta(hours=2)
    async with db.sessions() as session, session.begin():
        for device in ("board-a", "board-b"):
            await set_state(
                session,
                device,
                DeviceState.MAINTENANCE,
                "reflashing the bootloader",
                until=until,
                change=Change("octocat", now),
            )
    async with runner_agent(rigs, "rig-01"), runner_agent(rigs, "rig-02"):
        sha = "a1" * 20
        await push(rigs, sha)
        deadline = time.monotonic() + 60
        expected = (
            f"device in maintenance since {now:%Y-%m-%d %H:%M} by octocat until {until:%Y-%m-%d %H:%M}: "
            "reflashing the bootloader"
        )
        while True:
            runs = await check_runs(rigs, sha)
            text = " ".join(str(run["output"]) for run in runs)
            if expected in text:
                break
            assert time.monotonic() < deadline, text[:2000]
            await asyncio.sleep(0.5)
        [run] = runs
        assert run["status"] == "queued"


async def test_a_failing_health_check_takes_a_board_out_and_a_passing_one_brings_it_back(
    rigs: ProcessLab,
) -> None:
    db = rigs.database

    async def check(command: str) -> None:
        now = datetime.now(UTC)
        async with db.sessions() as session, session.begin():
            stored = await get_device(session, "board-a")
            replaced = dataclasses.replace(stored.device, health_check=HealthCheck(command))
            await save_device(session, replaced, Change("octocat", now))
        async with db.sessions() as session, session.begin():
            assert (await queue_check(session, "board-a", now, why="asked")).queued

    async def health_becomes(value: str) -> Device:
        deadline = time.monotonic() + 60
        while True:
            async with db.sessions() as session:
                device = (await load_inventory(session)).devices_by_id["board-a"]
            if device.health.health.value == value:
                return device
            assert time.monotonic() < deadline, f"board-a's health stayed {device.health.health.value}"
            await asyncio.sleep(0.2)

    async def eligible() -> list[str]:
        async with db.sessions() as session:
            inventory = await load_inventory(session)
        return [device.id for device in resolve(Requirements(), inventory).eligible]

    async with runner_agent(rigs, "rig-01"), runner_agent(rigs, "rig-02"):
        await check("false")
        bad = await health_becomes("bad")
        assert bad.health.reason == "health check failed"
        assert await eligible() == ["board-b"]
        await check("true")
        await health_becomes("good")
        assert await eligible() == ["board-a", "board-b"]
