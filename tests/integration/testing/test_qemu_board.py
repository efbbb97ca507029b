"""The QEMU board: a real kernel and busybox booting to ``login:`` on its socket:// console, powered through
labgrid's Gude backend by an outlet of the PDU stand-in; and the initramfs it boots, built here.

pyserial blocks, so every read runs in a thread while the board's console is served from the test's loop.
A boot takes seconds (more under TCG on a loaded host): waits are bounded by BOOT_BOUND_S, and how long it
took is never asserted."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.qemu_board import BANNER, BUSYBOX, HOSTNAME, LOGIN, PROMPT, QemuBoard, build_initramfs
from kerrigan.testing.waiting import wait_until

serial = pytest.importorskip(
    "serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)"
)

OUTLET = 3
BOOT_BOUND_S = 120.0  # what a TCG boot on a busy two-core host stays well within
# busybox's line editing asks the terminal where its cursor is before it reads a command; a real one
# answers, this console does not, and the shell goes on.
CURSOR_QUERY = b"\x1b[6n"


@pytest.fixture
def console(qemu_board: QemuBoard) -> Iterator[serial.Serial]:
    port = serial.serial_for_url(qemu_board.socket_url, timeout=BOOT_BOUND_S)
    yield port
    port.close()


async def read_until(port: serial.Serial, expected: bytes, timeout: float = BOOT_BOUND_S) -> bytes:
    port.timeout = timeout
    data: bytes = await asyncio.to_thread(port.read_until, expected)
    return data


async def read_for(port: serial.Serial, seconds: float) -> bytes:
    """Everything the console says within ``seconds``."""
    port.timeout = seconds
    data: bytes = await asyncio.to_thread(port.read, 1 << 20)
    return data


async def run(port: serial.Serial, command: str) -> list[str]:
    """The lines the board's shell prints for ``command``, without its echo and the next prompt."""
    port.write(command.encode() + b"\n")
    said = (await read_until(port, PROMPT.encode(), timeout=30)).replace(CURSOR_QUERY, b"").decode()
    assert said.endswith(PROMPT), said
    echo, *lines = said.removesuffix(PROMPT).split("\r\n")
    assert echo == command
    return lines[:-1]


async def test_its_outlet_switched_through_labgrid_boots_it_to_login_and_off_kills_it(
    qemu_board: QemuBoard, console: serial.Serial
) -> None:
    gude = pytest.importorskip(f"labgrid.driver.power.{MODEL}")
    async with GudePdu(outlets=4) as pdu:
        qemu_board.attach(pdu, OUTLET)
        assert not qemu_board.running
        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, OUTLET, True)
        said = await read_until(console, LOGIN.encode())
        assert said.endswith(LOGIN.encode()), said[-2000:]
        lines = said.decode(errors="replace").split("\r\n")
        assert any("] Linux version " in line for line in lines)  # the kernel's own log
        assert BANNER in lines
        assert any(line.endswith("] Run /init as init process") for line in lines)
        pid = qemu_board.pid
        assert pid is not None

        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, OUTLET, False)
        await wait_until(lambda: not qemu_board.running, timeout=10, what="the machine's end")
        assert qemu_board.exits == [-9]  # killed, as a plug pulled
        assert not Path(f"/proc/{pid}").exists()
        console.write(b"root\n")  # nobody reads the UART of a board that is off
        assert await read_for(console, 1.0) == b""

        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, 2, True)  # another board's outlet
        assert not qemu_board.running
        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, OUTLET, True)
        assert (await read_until(console, LOGIN.encode())).endswith(LOGIN.encode())  # the same console
        assert qemu_board.starts == 2
        assert qemu_board.pid not in (None, pid)


async def test_root_logs_in_and_a_real_shell_answers_until_poweroff(
    qemu_board: QemuBoard, console: serial.Serial
) -> None:
    qemu_board.power(True)
    assert (await read_until(console, LOGIN.encode())).endswith(LOGIN.encode())
    console.write(b"root\n")
    assert (await read_until(console, PROMPT.encode(), timeout=30)).endswith(PROMPT.encode())
    assert await run(console, "hostname") == [HOSTNAME]
    assert await run(console, "echo 'hello  board' 42") == ["hello  board 42"]
    [version] = await run(console, "cat /proc/version")
    assert version.startswith("Linux version ")
    assert await run(console, "uname -m") == ["x86_64"]
    [failed] = await run(console, "flash-firmware")
    assert failed.endswith("flash-firmware: not found")

    console.write(b"poweroff\n")
    said = await read_until(console, b"reboot: Power down\r\n", timeout=30)
    assert said.endswith(b"reboot: Power down\r\n"), said
    await wait_until(lambda: not qemu_board.running, timeout=30, what="the machine's end")
    assert qemu_board.exits == [0]  # it powered itself off
    assert qemu_board.powered  # the supply is still on: only a cycle brings it back
    assert qemu_board.starts == 1


async def test_a_machine_that_cannot_start_says_why_and_stays_dark(
    qemu_initramfs: Path, tmp_path: Path
) -> None:
    async with QemuBoard(tmp_path / "no-such-vmlinuz", qemu_initramfs, accelerator="tcg") as board:
        board.power(True)
        await board.settled()
        await wait_until(lambda: bool(board.exits), timeout=30, what="qemu's exit")
        assert board.exits == [1]
        assert "no-such-vmlinuz" in board.qemu_errors
        assert not board.running
        assert list(board.transcript) == []


def test_the_initramfs_is_a_newc_archive_of_busybox_and_its_init(tmp_path: Path) -> None:
    if not BUSYBOX.exists():
        pytest.skip(f"no {BUSYBOX} (apt-get install busybox-static)")
    archive = build_initramfs(tmp_path / "initramfs.cpio")
    with archive.open("rb") as stdin:
        listed = subprocess.run(
            [str(BUSYBOX), "cpio", "-t", "-v"], stdin=stdin, capture_output=True, check=True
        )
    # busybox's listing: mode, owner, size, date, time, then the name (and a link's target).
    lines = [line for line in listed.stdout.decode().splitlines() if " 1970-01-01 " in line]
    entries = {line.split(maxsplit=5)[5].split(" -> ")[0]: line for line in lines}
    assert set(entries) >= {"init", "bin/busybox", "bin/sh", "dev/console", "etc/inittab", "etc/passwd"}
    assert entries["init"].startswith("-rwxr-xr-x")
    assert entries["dev/console"].startswith("crw-------")
    assert entries["bin/sh"].endswith("bin/sh -> busybox")
    assert archive.stat().st_size % 4 == 0
    assert build_initramfs(tmp_path / "again.cpio").read_bytes() == archive.read_bytes()  # reproducible


def test_a_busybox_linked_against_libraries_is_refused(tmp_path: Path) -> None:
    dynamic = Path("/bin/ls")  # any dynamically linked binary: the initramfs has no ld.so for it
    with pytest.raises(
        FileNotFoundError, match=r"/bin/ls is dynamically linked \(apt-get install busybox-static\)"
    ):
        build_initramfs(tmp_path / "initramfs.cpio", busybox=dynamic)
    with pytest.raises(FileNotFoundError, match=r"no /nonexistent/busybox"):
        build_initramfs(tmp_path / "initramfs.cpio", busybox=Path("/nonexistent/busybox"))
    assert not (tmp_path / "initramfs.cpio").exists()
