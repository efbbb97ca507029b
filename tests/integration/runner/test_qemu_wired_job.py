"""A job on a real board through the real agent and the real server: the devices file wires lab-a-01's
``modalix-bluebox`` to an outlet of the PDU stand-in and to the QEMU board's
``socket://`` console; the agent power-cycles the board, waits for its kernel and busybox to reach
``login:``, and the job logs in through ``KERRIGAN_CONSOLE`` and reads the kernel's version; after it the
board is powered off (its qemu process killed)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from kerrigan.runner.devices_file import load_devices_file
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.qemu_board import HOSTNAME, PROMPT, QemuBoard
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory, job_output, job_rows, tokens
from tests.integration.runner.test_board_access import job
from tests.integration.runner.test_wired_jobs import MANIFEST

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

OUTLET: Final = 6
JOB_BOUND_S: Final = 300.0  # a TCG boot on a busy two-core host, the job, and the server's round trips
LOGIN_AND_READ: Final = """\
print("boot seconds:", os.environ["KERRIGAN_BOOT_SECONDS"])
until(b"login:", b"\\n")  # the prompt was printed before the job opened its terminal: ask again
until(b"# ", b"root\\n")
said = until(b"# ", b"cat /proc/version\\n").replace("\\x1b[6n", "").split("\\r\\n")
print("version:", said[1])
print("hostname:", until(b"# ", b"hostname\\n").split("\\r\\n")[1])
"""


async def test_a_job_boots_the_qemu_board_logs_in_on_its_console_and_it_is_off_after(
    harness: Harness, agents: AgentFactory, tmp_path: Path, qemu_board: QemuBoard
) -> None:
    async with GudePdu(outlets=8) as pdu:
        qemu_board.attach(pdu, OUTLET)
        devices = tmp_path / "devices.yml"
        devices.write_text(
            "devices:\n"
            "  modalix-bluebox:\n"
            f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
            "off_s: 1, timeout_s: 10}\n"
            f"    console: {{url: '{qemu_board.socket_url}'}}\n"
            f"    boot: {{ready: 'login:', fail: ['Kernel panic'], timeout_s: {int(JOB_BOUND_S)}}}\n",
            encoding="utf-8",
        )
        hosts = await tokens(harness, "lab-a-01")
        agents("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(devices))
        files = {".kerrigan/workflows/board.yml": MANIFEST, "scripts/hil.sh": job(LOGIN_AND_READ)}
        [run] = await harness.push_commit(files)

        async def ended() -> bool:
            return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

        await harness.wait_until(ended, timeout=JOB_BOUND_S)
        [row] = await job_rows(harness)
        output = await job_output(harness, row.pk)
        assert (row.state, row.reason, row.exit_status) == ("succeeded", None, 0), output
        lines = output.splitlines()
        boot_s = float(next(line for line in lines if line.startswith("boot seconds: ")).split()[-1])
        assert 0 < boot_s < JOB_BOUND_S
        assert any(line.startswith("version: Linux version ") and "Debian" in line for line in lines), output
        assert f"hostname: {HOSTNAME}" in lines
        assert f"{PROMPT}hostname" in [line.replace("\x1b[6n", "") for line in qemu_board.transcript]
        # The agent's cycle (off, on), then after_job's off: the machine it started is killed.
        assert pdu.switches == [(OUTLET, False), (OUTLET, True), (OUTLET, False)]
        await wait_until(lambda: not qemu_board.running, timeout=10, what="the machine's end")
        assert qemu_board.starts == 1
        assert qemu_board.exits == [-9]
