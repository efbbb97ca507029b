"""A real board end to end: the GitHub stand-in, ``kerrigan serve`` and a ``kerrigan runner`` agent as
processes; the agent's devices file wires its device to an outlet of the PDU stand-in (labgrid's Gude
backend) and to the QEMU board's ``socket://`` console (Debian's kernel and a busybox initramfs in
``qemu-system-x86_64``). A push's job runs on the board the agent power-cycled and booted to ``login:``:
the job logs in through ``KERRIGAN_CONSOLE`` and reads the kernel's version; the console log holds the
real kernel's boot; after the job the machine is off (its qemu killed). Skipped, naming what is missing,
where QEMU, the kernel or a static busybox is not installed (.ci/install-qemu-board installs them)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import pytest

from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.process_lab import jobs_of, process_lab, push, runner_agent, session_at
from kerrigan.testing.qemu_board import HOSTNAME, QemuBoard, build_initramfs, find_kernel, qemu_board_problem
from kerrigan.testing.waiting import wait_until
from tests.e2e.test_boards_processes import api_text, api_token, check_run_text, manifest
from tests.integration.runner.test_board_access import job
from tests.integration.runner.test_qemu_wired_job import JOB_BOUND_S, LOGIN_AND_READ

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

OUTLET: Final = 3
INVENTORY: Final = """
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    devices:
      - {id: qemu-x86, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
"""


@pytest.fixture(scope="module")
def initramfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    problem = qemu_board_problem()
    if problem is not None:
        pytest.skip(f"no QEMU board: {problem}")
    return build_initramfs(tmp_path_factory.mktemp("qemu-board") / "initramfs.cpio")


@contextlib.asynccontextmanager
async def qemu_on_pdu(initramfs: Path) -> AsyncIterator[tuple[GudePdu, QemuBoard]]:
    kernel = find_kernel()
    assert kernel is not None  # the initramfs fixture skipped the test otherwise
    async with GudePdu(outlets=4) as pdu, QemuBoard(kernel, initramfs) as board:
        board.attach(pdu, OUTLET)
        yield pdu, board


async def test_a_push_boots_the_qemu_board_and_its_job_logs_in_on_its_console(
    tmp_path: Path, initramfs: Path
) -> None:
    async with (
        qemu_on_pdu(initramfs) as (pdu, board),
        process_lab(
            tmp_path,
            inventory=INVENTORY,
            files={".kerrigan/workflows/hil.yml": manifest(), "scripts/hil.sh": job(LOGIN_AND_READ)},
            environment={"KERRIGAN_PUBLIC_READ": "1"},  # its job's logs read as the pool's owner
            github_arguments=["--public"],
        ) as lab,
    ):
        devices = lab.folder / "devices-rig-01.yml"
        devices.write_text(
            "devices:\n"
            "  qemu-x86:\n"
            f"    power: {{pdu: {{model: {MODEL}, host: '{pdu.host}:{pdu.port}', index: {OUTLET}}}, "
            "off_s: 1, timeout_s: 10}\n"
            f"    console: {{url: '{board.socket_url}'}}\n"
            f"    boot: {{ready: 'login:', fail: ['Kernel panic'], timeout_s: {int(JOB_BOUND_S)}}}\n",
            encoding="utf-8",
        )
        token = await api_token(lab)
        sha = "9e" * 20
        async with runner_agent(lab, "rig-01", "--devices-file", str(devices), graceful=True):
            await push(lab, sha)
            session = await session_at(lab, sha, timeout=JOB_BOUND_S)
            await check_run_text(lab, sha)
        [row] = await jobs_of(lab)
        output = await api_text(lab, f"/jobs/{row.pk}/output", token)
        console = await api_text(lab, f"/jobs/{row.pk}/console", token)
        await wait_until(lambda: not board.running, timeout=10, what="the machine's end")

    assert (session.conclusion, row.state, row.device_id) == ("success", "succeeded", "qemu-x86"), output
    lines = output.splitlines()
    assert any(line.startswith("version: Linux version ") and "Debian" in line for line in lines), output
    assert f"hostname: {HOSTNAME}" in lines
    # The console log is the real kernel's boot, to busybox's login prompt.
    assert "Linux version" in console
    assert "login:" in console
    # The agent's cycle (off, on), then after_job's off: the machine it started was killed.
    assert pdu.switches == [(OUTLET, False), (OUTLET, True), (OUTLET, False)]
    assert board.starts == 1
    assert board.exits == [-9]
