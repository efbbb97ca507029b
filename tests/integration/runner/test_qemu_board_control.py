"""The runner's board control on a real board: a devices file wires the QEMU board
(``kerrigan.testing.qemu_board``) to an outlet of the PDU stand-in (through labgrid's Gude backend) and to its
``socket://`` console; :class:`BoardControl` power-cycles it, waits for its ``login:`` and powers it off
after, as the agent does around a job."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import pytest

from kerrigan.runner.boards.control import BoardControl, GivenBack
from kerrigan.runner.devices_file import parse_devices_file
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.qemu_board import BANNER, LOGIN, QemuBoard
from kerrigan.testing.waiting import wait_until

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

DEVICE: Final = "qemu-x86"
OUTLET: Final = 5


@pytest.fixture
async def pdu(qemu_board: QemuBoard) -> AsyncIterator[GudePdu]:
    async with GudePdu(outlets=8) as stand_in:
        qemu_board.attach(stand_in, OUTLET)
        yield stand_in


def control(pdu: GudePdu, board: QemuBoard, heard: list[bytes] | None = None) -> BoardControl:
    """The board control of one job on the device, its wiring read from a devices file; what its console
    reads is added to ``heard``."""
    devices = parse_devices_file(
        "devices:\n"
        f"  {DEVICE}:\n"
        f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
        "off_s: 1, timeout_s: 10}\n"
        f"    console: {{url: '{board.socket_url}'}}\n"
        "    boot: {ready: 'login:', fail: ['Kernel panic'], timeout_s: 300}\n",
        "devices.yml",
    )
    sink = None if heard is None else (lambda at, data: heard.append(data))
    return BoardControl.of([(DEVICE, None, devices.devices[DEVICE].wiring)], lambda board: sink)


async def test_the_board_is_cycled_booted_to_login_over_its_socket_console_and_off_after(
    pdu: GudePdu, qemu_board: QemuBoard
) -> None:
    pdu.switch(OUTLET, True)  # left on by the last job
    await wait_until(lambda: qemu_board.running, timeout=10, what="the machine's start")
    first = qemu_board.pid
    boards = control(pdu, qemu_board)
    await boards.take()
    [board] = boards.boards
    assert board.boot_s is not None
    assert 0 < board.boot_s < 300
    assert boards.environment() == {"KERRIGAN_BOOT_SECONDS": f"{board.boot_s:.3f}"}
    assert board.console is not None
    lines = [line.text for line in board.console.lines]
    assert BANNER in lines
    assert board.console.last_lines(1) == [LOGIN]  # the prompt, unfinished, is the last line
    assert qemu_board.running
    assert qemu_board.pid != first  # the cycle killed the machine that was on and started another
    assert qemu_board.exits == [-9]
    assert qemu_board.starts == 2

    assert await boards.give_back() == GivenBack(powered_off=["qemu-x86"], power_unknown=[], problems=[])
    await wait_until(lambda: not qemu_board.running, timeout=10, what="the machine's end")
    assert pdu.switches == [(OUTLET, True), (OUTLET, False), (OUTLET, True), (OUTLET, False)]
    assert qemu_board.exits == [-9, -9]


async def test_the_console_taken_before_power_on_hears_the_kernel_from_its_first_line(
    pdu: GudePdu, qemu_board: QemuBoard
) -> None:
    heard: list[bytes] = []
    boards = control(pdu, qemu_board, heard)
    try:
        await boards.take()
    finally:
        await boards.give_back()
    lines = b"".join(heard).decode(errors="replace").split("\r\n")
    assert "] Linux version " in lines[0]  # the kernel's first line, replayed when its console comes up
    assert lines.index(BANNER) > 0
    assert lines[-1] == LOGIN
    assert not pdu.is_on(OUTLET)  # after_job: off, the default
    await wait_until(lambda: not qemu_board.running, timeout=10, what="the machine's end")
