"""Wired boards end to end: the GitHub stand-in, ``kerrigan serve`` and ``kerrigan runner`` agents as
processes, each agent given a devices file that wires its board to an outlet of the PDU stand-in (labgrid's
Gude backend) and to a simulated board's console (its pseudo-terminal); the PDU and the boards run on the
test's own event loop.

- A push's job runs on a board the agent power-cycled (and switched off after): the job logs in through
  ``KERRIGAN_CONSOLE`` and power-cycles its board itself with ``kerrigan device power``; the console is a
  log of its own, and the check run of a job that passed shows none of it.
- A board that hangs at boot fails its job ``boot_failed`` with the boot log in the check run; the job passes
  on its peer. Still hanging, the board's three recoveries fail and it is ``bad`` with its console's last
  lines; one that hung once is recovered and ``good``.
- A cancelled job's board is switched off, and the recovery power-cycles it before the device's next job.
- The PDU's password (in the devices file's ``host``) reaches no job's environment, output, console log,
  check run, session page or the agent's log.
"""

from __future__ import annotations

import contextlib
import html
import json
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import aiohttp
import pytest
from sqlalchemy import select

from kerrigan.core.device_status import Health
from kerrigan.core.inventory import DeviceState
from kerrigan.core.recovery import RECOVERY_TASK
from kerrigan.store.audit import Change
from kerrigan.store.inventory import set_state
from kerrigan.store.models import DeviceRow, JobRow
from kerrigan.store.tokens import create_token
from kerrigan.testing.board import Mode, SimulatedBoard, State
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.process_lab import (
    ProcessLab,
    check_runs,
    jobs_of,
    process_lab,
    push,
    runner_agent,
    session_at,
)
from kerrigan.testing.waiting import wait_until
from tests.integration.runner.test_board_access import cli_out_of_reach, job

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

HOSTS: Final = {"board-a": "rig-01", "board-b": "rig-02"}
OUTLETS: Final = {"board-a": 1, "board-b": 2}
BOOT_S: Final = 0.5
BOOT_TIMEOUT_S: Final = 5  # a loaded machine boots a 0.5 s board well within it; a hung one fails at it
CONSOLE_HEADING: Final = "last lines of its board's console"
HUNG_LAST_LINE: Final = "printk: console [ttyS2] enabled"  # where Mode.HANG_AT_BOOT stops
INVENTORY: Final = """
hosts:
  - id: rig-01
  - id: rig-02
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: board-b, board: modalix, target_type: devkit, os_type: linux, host: rig-02}
"""


def manifest(run: str = "./scripts/hil.sh") -> str:
    return f"""
name: hil
on: {{push: {{branches: [main]}}}}
scheduling:
  max_devkits: 1
tasks:
  - id: hil
    run: {run}
    vcpus: 1
"""


PASS: Final = '#!/bin/sh\necho "on $KERRIGAN_DEVICE_ID, booted in $KERRIGAN_BOOT_SECONDS s"\n'


@dataclass(frozen=True)
class Rig:
    """The lab, its PDU and its boards (by device id), each board on its own outlet."""

    lab: ProcessLab
    pdu: GudePdu
    boards: Mapping[str, SimulatedBoard]

    def devices_file(self, device: str) -> Path:
        """The devices file of ``device``'s runner host: its power, console and boot."""
        board = self.boards[device]
        path = self.lab.folder / f"devices-{HOSTS[device]}.yml"
        path.write_text(
            "devices:\n"
            f"  {device}:\n"
            f"    power: {{pdu: {{model: {MODEL}, host: '{self.pdu.host}:{self.pdu.port}', "
            f"index: {OUTLETS[device]}}}, off_s: 1, timeout_s: 10}}\n"
            f"    console: {{serial: {{port: {board.path}}}}}\n"
            f"    boot: {{ready: 'login:', fail: ['Kernel panic'], timeout_s: {BOOT_TIMEOUT_S}}}\n",
            encoding="utf-8",
        )
        return path

    def agent(self, device: str) -> contextlib.AbstractAsyncContextManager[object]:
        """The agent of ``device``'s runner host, given its devices file; stopped gracefully."""
        host = HOSTS[device]
        return runner_agent(self.lab, host, "--devices-file", str(self.devices_file(device)), graceful=True)

    def switches(self, device: str) -> list[bool]:
        """What ``device``'s outlet was told, in order (True: on)."""
        return [on for outlet, on in self.pdu.switches if outlet == OUTLETS[device]]


@contextlib.asynccontextmanager
async def wired_rig(
    tmp_path: Path, hil: str, *, credentials: tuple[str, str] | None = None
) -> AsyncIterator[Rig]:
    """The lab of :data:`INVENTORY` whose pushes run ``hil`` on one board, its PDU and its two boards (off);
    no agent runs until the test starts one."""
    async with (
        GudePdu(outlets=2, credentials=credentials) as pdu,
        SimulatedBoard(boot_s=BOOT_S) as board_a,
        SimulatedBoard(boot_s=BOOT_S) as board_b,
        process_lab(
            tmp_path,
            inventory=INVENTORY,
            files={".kerrigan/workflows/hil.yml": manifest(), "scripts/hil.sh": hil},
            environment={"KERRIGAN_PUBLIC_READ": "1"},  # the session page without signing in
            github_arguments=["--public"],
        ) as lab,
    ):
        board_a.attach(pdu, OUTLETS["board-a"])
        board_b.attach(pdu, OUTLETS["board-b"])
        yield Rig(lab, pdu, {"board-a": board_a, "board-b": board_b})


async def api_token(lab: ProcessLab) -> str:
    """An API token of octocat, the pool's owner."""
    async with lab.database.sessions() as session, session.begin():
        return await create_token(session, "octocat", datetime.now(UTC))


async def api_text(lab: ProcessLab, path: str, token: str) -> str:
    """``GET /api/v1{path}`` as text (it must be answered 200)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http, http.get(f"{lab.base}/api/v1{path}", headers=headers) as got:
        text = await got.text()
        assert got.status == 200, text
        return text


async def check_run_text(lab: ProcessLab, sha: str) -> str:
    """Every check run at ``sha``, whole, once all are completed (title, summary, text)."""

    async def completed() -> list[dict[str, object]] | None:
        runs = await check_runs(lab, sha)
        return runs if runs and all(run["status"] == "completed" for run in runs) else None

    runs = await wait_until(completed, timeout=60, interval=0.3, what=f"completed check runs at {sha[:7]}")
    return "\n".join(json.dumps(run["output"]) for run in runs)


async def session_page(lab: ProcessLab, sha: str) -> str:
    """The session page the check run at ``sha`` links, unescaped."""
    [run] = await check_runs(lab, sha)
    async with aiohttp.ClientSession() as http, http.get(str(run["details_url"])) as answer:
        assert answer.status == 200
        return html.unescape(await answer.text())


async def recoveries(lab: ProcessLab) -> list[JobRow]:
    return [row for row in await jobs_of(lab) if row.task_id == RECOVERY_TASK]


async def health_of(lab: ProcessLab, device: str) -> tuple[Health, str]:
    async with lab.database.sessions() as session:
        row = await session.scalar(select(DeviceRow).where(DeviceRow.id == device))
    assert row is not None
    return row.health, row.health_reason


# -- a job on a wired board --------------------------------------------------------------------------------

DRIVE: Final = """\
until(b"login:", b"\\n")  # the prompt may have been printed before the job opened its terminal
print("cycle:", kerrigan("device", "power", "cycle"))
print("booted again:", "Booting Linux" in until(b"login:", wait_s=30))
print("status:", kerrigan("device", "power", "status"))
"""


async def test_a_push_runs_its_job_on_a_board_the_agent_cycled_and_the_job_drives_it(tmp_path: Path) -> None:
    if (why := cli_out_of_reach()) is not None:
        pytest.skip(f"{why}: its job could not run kerrigan device power")
    async with wired_rig(tmp_path, job(DRIVE)) as rig:
        lab, board = rig.lab, rig.boards["board-a"]
        token = await api_token(lab)
        sha = "1a" * 20
        async with rig.agent("board-a"):
            await push(lab, sha)
            session = await session_at(lab, sha, timeout=60)
            text = await check_run_text(lab, sha)
        [row] = await jobs_of(lab)
        output = await api_text(lab, f"/jobs/{row.pk}/output", token)
        console = await api_text(lab, f"/jobs/{row.pk}/console", token)

    assert (session.conclusion, row.state, row.device_id) == ("success", "succeeded", "board-a"), output
    assert "cycle: 0 on\n" in output
    assert "booted again: True\n" in output
    assert "status: 0 on\n" in output
    # The agent's cycle (off, on), the job's own (off, on), and after_job's off.
    assert rig.switches("board-a") == [False, True, False, True, False]
    assert board.boots == 2
    assert not board.powered
    assert rig.switches("board-b") == []  # its host has no agent: never leased
    # The console is a log of its own: both boots, from the boot loader to the login prompt.
    assert console.count("U-Boot SPL 2024.01") == 2, console
    assert console.count("Booting Linux on physical CPU") == 2, console
    assert "kerrigan-board login:" in console
    # A job that passed: its check run shows none of its console.
    assert CONSOLE_HEADING not in text
    assert "Booting Linux" not in text


# -- a board that hangs at boot ----------------------------------------------------------------------------


async def hung_job_passes_on_the_peer(rig: Rig, sha: str) -> str:
    """Push ``sha`` with both agents running and board-b in maintenance, so that board-a takes the job;
    board-b is made available once board-a has it, so that the retry after its boot failure goes there
    (a retry whose every match failed may take its old device again). The check runs' text once the
    session passed."""
    lab = rig.lab

    async def board_b_state(state: DeviceState) -> None:
        async with lab.database.sessions() as session, session.begin():
            change = Change("octocat", datetime.now(UTC))
            await set_state(session, "board-b", state, "keeping it for the retry", until=None, change=change)

    async def on_board_a() -> bool:
        return any(row.device_id == "board-a" for row in await jobs_of(lab))

    await board_b_state(DeviceState.MAINTENANCE)
    async with rig.agent("board-b"):
        await push(lab, sha)
        await wait_until(on_board_a, timeout=60, interval=0.1, what="board-a leased the job")
        await board_b_state(DeviceState.AVAILABLE)
        session = await session_at(lab, sha, timeout=60)
        text = await check_run_text(lab, sha)
    assert session.conclusion == "success", text
    jobs = [row for row in await jobs_of(lab) if row.task_id == "hil"]
    assert [(row.device_id, row.reason, row.attempt) for row in jobs] == [
        ("board-a", "boot_failed", 1),
        ("board-b", None, 2),
    ]
    assert [row.state for row in jobs] == ["retried", "succeeded"]
    # The first attempt's boot log, in its check run: the board's last words before it hung.
    assert CONSOLE_HEADING in text
    assert HUNG_LAST_LINE in text
    assert "Starting kernel ..." in text
    return text


async def test_a_board_that_keeps_hanging_fails_its_job_the_peer_passes_and_three_recoveries_set_it_bad(
    tmp_path: Path,
) -> None:
    async with wired_rig(tmp_path, PASS) as rig:
        lab, hung = rig.lab, rig.boards["board-a"]
        hung.mode = Mode.HANG_AT_BOOT
        async with rig.agent("board-a"):
            await hung_job_passes_on_the_peer(rig, "2b" * 20)

            async def bad() -> tuple[Health, str] | None:
                found = await health_of(lab, "board-a")
                return found if found[0] is Health.BAD else None

            _, reason = await wait_until(bad, timeout=90, interval=0.3, what="board-a set bad")
        tried = await recoveries(lab)
        peer_health = await health_of(lab, "board-b")

    assert reason.startswith(
        "3 recoveries failed in a row (the last boot_failed); the console's last lines: "
    )
    assert HUNG_LAST_LINE in reason
    assert [(row.device_id, row.state, row.reason) for row in tried] == [
        ("board-a", "failed", "boot_failed")
    ] * 3
    assert hung.boots == 4  # the job's boot and each recovery's: all hung
    assert not hung.powered
    assert peer_health[0] is not Health.BAD  # the peer that passed the retry is not blamed


async def test_a_board_that_hung_once_is_recovered_and_good(tmp_path: Path) -> None:
    async with wired_rig(tmp_path, PASS) as rig:
        lab, board = rig.lab, rig.boards["board-a"]
        board.mode = Mode.HANG_AT_BOOT

        def hung_once(on: bool) -> None:
            # Switched off after its first (hung) boot: whatever hung it has passed by the next power-on.
            if not on and board.boots:
                board.mode = Mode.BOOTS

        rig.pdu.on_switch(OUTLETS["board-a"], hung_once)
        async with rig.agent("board-a"):
            await hung_job_passes_on_the_peer(rig, "3c" * 20)

            async def recovered() -> tuple[Health, str] | None:
                found = await health_of(lab, "board-a")
                return found if found[0] is Health.GOOD else None

            health = await wait_until(recovered, timeout=60, interval=0.3, what="board-a recovered")
        tried = await recoveries(lab)

    assert health == (Health.GOOD, "recovered: it booted")
    assert [(row.device_id, row.state) for row in tried] == [("board-a", "succeeded")]
    assert board.boots == 2  # the job's hung boot and the recovery's
    # The job's cycle and its off after; the recovery's cycle and its off after.
    assert rig.switches("board-a") == [False, True, False, False, True, False]


# -- a cancelled job -------------------------------------------------------------------------------------

LONG: Final = '#!/bin/sh\necho "running on $KERRIGAN_DEVICE_ID"\nsleep 300\n'


async def test_a_cancelled_jobs_board_is_switched_off_and_cycled_before_the_next_job(tmp_path: Path) -> None:
    async with wired_rig(tmp_path, LONG) as rig:
        lab, board = rig.lab, rig.boards["board-a"]
        token = await api_token(lab)
        sha = "4d" * 20
        async with rig.agent("board-a"):
            await push(lab, sha)
            session = await session_at(lab, sha, timeout=60, done=False)

            async def running() -> bool:
                [row] = await jobs_of(lab)
                return row.state == "running" and "running on board-a" in await api_text(
                    lab, f"/jobs/{row.pk}/output", token
                )

            await wait_until(running, timeout=60, interval=0.3, what="the job running on board-a")
            assert board.state is State.LOGIN
            before = len(rig.switches("board-a"))
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                aiohttp.ClientSession() as http,
                http.post(f"{lab.base}/api/v1/sessions/{session.id}/cancel", headers=headers) as answer,
            ):
                assert answer.status == 200, await answer.text()

            async def recovered() -> JobRow | None:
                done = [row for row in await recoveries(lab) if row.state == "succeeded"]
                return done[0] if done else None

            recovery = await wait_until(recovered, timeout=60, interval=0.3, what="board-a's recovery")
            after_cancel = rig.switches("board-a")[before:]
            boots_after_recovery = board.boots
            # The device's next job runs after the recovery.
            next_sha = "5e" * 20
            await push(lab, next_sha)
            await session_at(lab, next_sha, timeout=60, done=False)

            async def next_running() -> JobRow | None:
                found = [row for row in await jobs_of(lab) if row.task_id == "hil" and row.pk > recovery.pk]
                if not found or found[0].state != "running":
                    return None
                output = await api_text(lab, f"/jobs/{found[0].pk}/output", token)
                return found[0] if "running on board-a" in output else None  # booted, its command runs

            following = await wait_until(next_running, timeout=60, interval=0.3, what="the next job running")
        cancelled = await session_at(lab, sha, timeout=10)
        jobs = {row.pk: row for row in await jobs_of(lab)}

    assert cancelled.conclusion == "cancelled"
    [first] = [row for row in jobs.values() if row.task_id == "hil" and row.pk < recovery.pk]
    assert first.state == "cancelled"
    # After the cancel: the agent's off; then the recovery's cycle (off, on) and its off after.
    assert after_cancel == [False, False, True, False], after_cancel
    assert boots_after_recovery == 2  # the job's boot and the recovery's
    recovered_row = jobs[recovery.pk]
    assert recovered_row.device_id == "board-a"
    assert first.finished_at is not None
    assert recovered_row.started_at is not None
    assert first.finished_at <= recovered_row.started_at
    assert recovered_row.finished_at is not None
    assert following.started_at is not None
    assert recovered_row.finished_at <= following.started_at
    assert following.device_id == "board-a"
    assert board.boots == 3  # and the next job's own cycle booted it again


# -- the PDU's credentials -----------------------------------------------------------------------------------

SNOOP: Final = """\
print("env:", sorted(os.environ.items()))
print("console:", until(b"login:", b"\\n"))
sys.exit(1)
"""


async def test_the_pdus_credentials_reach_no_job_log_or_page(tmp_path: Path) -> None:
    password = f"pdu-{secrets.token_hex(12)}"
    async with wired_rig(tmp_path, job(SNOOP), credentials=("admin", password)) as rig:
        lab = rig.lab
        token = await api_token(lab)
        sha = "6f" * 20
        async with rig.agent("board-a"):
            await push(lab, sha)
            session = await session_at(lab, sha, timeout=60)
            text = await check_run_text(lab, sha)
            page = await session_page(lab, sha)
        [row] = [row for row in await jobs_of(lab) if row.task_id == "hil"]
        output = await api_text(lab, f"/jobs/{row.pk}/output", token)
        console = await api_text(lab, f"/jobs/{row.pk}/console", token)
        agent_log = (lab.folder / "rig-01.log").read_text(errors="replace")

    assert (session.conclusion, row.state, row.exit_status) == ("failure", "failed", 1), output
    # The PDU was switched with the credentials (labgrid sends them as HTTP basic auth).
    assert rig.pdu.requests
    assert all(request.authorization and request.status == 200 for request in rig.pdu.requests)
    assert rig.switches("board-a")[:2] == [False, True]
    # What the job saw and what its pages show: its environment, its console, the check run.
    assert "KERRIGAN_CONSOLE" in output
    assert "kerrigan-board login:" in output
    assert "Booting Linux on physical CPU" in console
    assert CONSOLE_HEADING in text  # a failed job's check run shows its console's last lines
    assert "kerrigan-board login:" in text
    assert "KERRIGAN_CONSOLE" in page  # the page shows the job's output, its environment dump
    for where, shown in {
        "output": output,
        "console": console,
        "check run": text,
        "session page": page,
        "agent log": agent_log,
    }.items():
        assert password not in shown, where
        if where != "agent log":  # the agent may name the PDU it switches; never to a job
            assert f"127.0.0.1:{rig.pdu.port}" not in shown, where


# -- a runner host restarted while its job runs ------------------------------------------------------------

CONSOLE_UNTIL_GONE: Final = """#!/usr/bin/env python3
import os, time
console = os.open(os.environ["KERRIGAN_CONSOLE"], os.O_RDWR | os.O_NOCTTY)
print("logged in", flush=True)
for _ in range(300):  # until its console goes away (an OSError: the job fails as a test would)
    os.write(console, b"\\r")
    time.sleep(0.1)
"""


async def test_a_job_whose_agent_is_restarted_while_it_runs_fails_for_the_lab_not_the_test(
    tmp_path: Path,
) -> None:
    # A host restart takes the agent that bridges the job's console with it: whatever the job does next
    # fails for the lab (found by benchmarks/soak_lab_week.py: such jobs failed their check runs).
    async with wired_rig(tmp_path, CONSOLE_UNTIL_GONE) as rig:
        lab, sha = rig.lab, "4d" * 20
        devices = ("--devices-file", str(rig.devices_file("board-a")))

        async def running() -> JobRow | None:
            """The job, once it runs and has printed (it has its console open)."""
            rows = [row for row in await jobs_of(lab) if row.task_id == "hil" and row.state == "running"]
            return rows[0] if rows and rows[0].log_bytes > 0 else None

        async with runner_agent(lab, HOSTS["board-a"], *devices):  # killed on the way out, as a crash
            await push(lab, sha)
            job = await wait_until(running, timeout=60, interval=0.1, what="the job running, logged in")
        async with runner_agent(lab, HOSTS["board-a"], *devices):

            async def ended() -> JobRow | None:
                row = next(row for row in await jobs_of(lab) if row.pk == job.pk)
                return None if row.state in ("leased", "accepted", "running") else row

            row = await wait_until(ended, timeout=60, interval=0.2, what="the job ended")
    # Its console went with the killed agent; the job failed on it, and is retried (its peer has no agent).
    assert (row.state, row.reason, row.exit_status) == ("retried", "console_lost", 75)
    assert row.failure_class == "infrastructure"
