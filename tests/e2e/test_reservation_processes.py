"""A board for a person while CI runs, across real processes: the GitHub stand-in, ``kerrigan serve``, a
runner agent, and ``kerrigan reserve`` / ``kerrigan reservations`` as a person types them.

A person reserves board-a of a two-board rig and is told where the rig's devices file says it is wired (its
serial port and power outlet; not the PDU password the file keeps from them). A push then queues two CI
jobs: one runs on board-b, the other waits for board-a, the session page its check run links saying why
(``device reserved by octocat until ...``). Releasing the reservation hands board-a to the waiting job at
once, while the first is still running.
"""

from __future__ import annotations

import asyncio
import html
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from kerrigan.store.models import JobRow
from kerrigan.testing.github import push_payload
from kerrigan.testing.process_lab import REPOSITORY, ProcessLab, deliver, process_lab, runner_agent

SHA = "c" * 40
INVENTORY = """
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [hubot]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: board-b, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
"""
MANIFEST = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  max_devkits: 2
  labels: {sdk: "2.2.0"}
tasks:
  - id: flash
    run: ./ci/slow.sh
    vcpus: 1
  - id: smoke
    run: ./ci/slow.sh
    vcpus: 1
"""
DEVICES = """
devices:
  board-a:
    env:
      KERRIGAN_SERIAL: /dev/serial/by-id/usb-FTDI_board-a-if00-port0
      POWER_OUTLET: pdu-3:7
      PDU_PASSWORD: hunter2
    holder_sees: [KERRIGAN_SERIAL, POWER_OUTLET]
"""
SLOW = '#!/bin/sh\necho "on $KERRIGAN_DEVICE_ID"\nsleep 12\n'


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[ProcessLab]:
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={".kerrigan/workflows/bench.yml": MANIFEST, "ci/slow.sh": SLOW},
        environment={"KERRIGAN_PUBLIC_READ": "1"},  # pages without signing in
        github_arguments=["--public"],  # of a public repository: anyone's under the read rule
    ) as started:
        yield started


async def kerrigan(lab: ProcessLab, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kerrigan.cli", *args,
        env={**os.environ, **lab.env, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def jobs(lab: ProcessLab) -> dict[str, JobRow]:
    async with lab.database.sessions() as db:
        return {row.task_id: row for row in (await db.scalars(select(JobRow))).all()}


async def until(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := await check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        await asyncio.sleep(0.1)
    return found


async def test_ci_works_around_a_reserved_board_and_takes_it_the_moment_it_is_released(
    lab: ProcessLab,
) -> None:
    status, token, err = await kerrigan(lab, "tokens", "create", "--login", "octocat")
    assert status == 0, err
    person = {"KERRIGAN_URL": lab.base, "KERRIGAN_TOKEN": token.strip()}
    devices = lab.folder / "devices.yml"
    devices.write_text(DEVICES, encoding="utf-8")
    async with runner_agent(lab, "rig-01", "--devices-file", str(devices), graceful=True):
        status, out, err = await kerrigan(
            lab, "reserve", "--device", "board-a", "--for", "1h", "--note", "UART bring-up", env=person
        )
        assert status == 0, err
        assert out.startswith("reserved board-a on runner host rig-01 until ")
        reservation = out.split("(reservation ", 1)[1].split(")", 1)[0]
        # The rig's devices file tells the person where the board is wired, and only what it lets them see.
        assert "  settings on rig-01 (its devices file's, shown to you alone):\n" in out, out
        assert "    KERRIGAN_SERIAL=/dev/serial/by-id/usb-FTDI_board-a-if00-port0\n" in out
        assert "    POWER_OUTLET=pdu-3:7\n" in out
        assert "hunter2" not in out

        await deliver(lab, "push", push_payload(REPOSITORY, SHA))

        async def one_running() -> dict[str, JobRow] | None:
            found = await jobs(lab)
            states = sorted(row.state for row in found.values())
            return found if states == ["queued", "running"] else None

        found = await until("one CI job running, one queued", one_running)
        [running] = [row for row in found.values() if row.state == "running"]
        [waiting] = [row for row in found.values() if row.state == "queued"]
        assert running.device_id == "board-b"  # CI went to the other board
        # Why it waits, on the session page the check run links (its scheduling diagnostics).
        async with aiohttp.ClientSession() as http, http.get(f"{lab.github_url}/_check-runs") as answer:
            [check_run] = await answer.json()
        page_url = check_run["details_url"]
        async with aiohttp.ClientSession() as http, http.get(page_url) as answer:
            page = html.unescape(await answer.text())
        assert "device reserved by octocat until " in page
        assert "UART bring-up" in page

        status, out, err = await kerrigan(lab, "reservations", "release", reservation, env=person)
        assert (status, out.strip()) == (
            0,
            f"released reservation {reservation}: board-a is free for the queue",
        )
        released_at = time.monotonic()

        async def handed_over() -> JobRow | None:
            row = (await jobs(lab))[waiting.task_id]
            return (
                row if row.device_id == "board-a" and row.state in ("leased", "accepted", "running") else None
            )

        await until("the waiting job leased board-a", handed_over, timeout=10)
        handed_s = time.monotonic() - released_at
        first = (await jobs(lab))[running.task_id]
        assert first.state == "running"  # at once: the first job is still on board-b
        assert handed_s < 5, f"board-a went to the waiting job {handed_s:.1f} s after the release"
