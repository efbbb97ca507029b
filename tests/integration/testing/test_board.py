"""The simulated board read through its pseudo-terminal with pyserial, as a console reader reads a board.

pyserial blocks, so every read runs in a thread while the board prints from the test's event loop."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator

import pytest

from kerrigan.testing.board import PANIC, PROMPT, RELEASE, VERSION, Mode, SimulatedBoard, State
from kerrigan.testing.pdu import MODEL, GudePdu

serial = pytest.importorskip(
    "serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)"
)

BOOT_S = 0.3
LOGIN = b"kerrigan-board login: "
# Long enough for a loaded machine to finish what a board prints within BOOT_S; never waited out by a test
# that passes, except where a test shows that something does not come.
GRACE_S = 3.0


@pytest.fixture
async def board() -> AsyncIterator[SimulatedBoard]:
    async with SimulatedBoard(boot_s=BOOT_S) as simulated:
        yield simulated


@pytest.fixture
def console(board: SimulatedBoard) -> Iterator[serial.Serial]:
    port = serial.Serial(board.path, 115_200, timeout=GRACE_S)
    yield port
    port.close()


async def read_until(port: serial.Serial, expected: bytes, timeout: float = GRACE_S) -> bytes:
    port.timeout = timeout
    data: bytes = await asyncio.to_thread(port.read_until, expected)
    return data


async def read_for(port: serial.Serial, seconds: float) -> bytes:
    """Everything the console says within ``seconds``."""
    port.timeout = seconds
    data: bytes = await asyncio.to_thread(port.read, 1 << 20)
    return data


async def log_in(port: serial.Serial) -> None:
    port.write(b"root\n")
    assert (await read_until(port, PROMPT.encode())).endswith(PROMPT.encode())


async def run(port: serial.Serial, command: str) -> list[str]:
    """The lines the board's shell prints for ``command``, without its echo and the next prompt."""
    port.write(command.encode() + b"\r\n")
    said = (await read_until(port, PROMPT.encode())).decode()
    assert said.endswith(PROMPT), said
    echo, *lines = said.removesuffix(PROMPT).split("\r\n")
    assert echo == command
    return lines[:-1]


async def test_a_powered_board_prints_its_boot_log_and_reaches_login_within_its_boot_time(
    board: SimulatedBoard, console: serial.Serial
) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    board.power(True)
    said = await read_until(console, LOGIN)
    took = loop.time() - started
    assert said.endswith(b"\r\n" + LOGIN)
    assert BOOT_S * 0.9 <= took < BOOT_S + 1.0
    lines = said.decode().split("\r\n")
    assert lines.index("Starting kernel ...") < lines.index("Welcome to Buildroot")
    assert any(re.fullmatch(r"\[ +\d+\.\d{6}\] " + re.escape(VERSION), line) for line in lines)
    assert any(line.endswith("] Run /sbin/init as init process") for line in lines)
    assert board.state is State.LOGIN
    assert board.boots == 1


async def test_after_login_it_answers_commands(board: SimulatedBoard, console: serial.Serial) -> None:
    board.power(True)
    await read_until(console, LOGIN)
    await log_in(console)
    assert await run(console, "uname -a") == [
        f"Linux kerrigan-board {RELEASE} #1 SMP PREEMPT Debian 6.1.0-1 aarch64 GNU/Linux"
    ]
    assert await run(console, "echo 'hello  board' 42") == ["hello  board 42"]
    assert await run(console, "cat /proc/version") == [VERSION]
    assert await run(console, "flash-firmware") == ["-sh: flash-firmware: not found"]
    assert board.state is State.SHELL


async def test_only_root_logs_in(board: SimulatedBoard, console: serial.Serial) -> None:
    board.power(True)
    await read_until(console, LOGIN)
    console.write(b"admin\r")
    assert (await read_until(console, LOGIN)) == b"admin\r\n\r\nLogin incorrect\r\n" + LOGIN
    assert board.state is State.LOGIN


async def test_a_board_told_to_hang_at_boot_never_prints_login(
    board: SimulatedBoard, console: serial.Serial
) -> None:
    board.mode = Mode.HANG_AT_BOOT
    board.power(True)
    said = await read_for(console, BOOT_S + 0.5)
    assert b"Starting kernel ..." in said
    assert b"login:" not in said
    assert said.endswith(b"] printk: console [ttyS2] enabled\r\n")
    assert board.state is State.HALTED
    console.write(b"root\n")  # a hung board does not answer
    assert await read_for(console, 0.2) == b""


async def test_a_board_hung_mid_run_answers_nothing_until_its_power_is_cycled_and_listeners_hear_its_commands(
    board: SimulatedBoard, console: serial.Serial
) -> None:
    heard: list[str] = []

    def listener(line: str) -> str | None:
        heard.append(line)
        if line == "echo hang now":
            board.hang()
        return "i2c: transfer timed out" if line == "echo flaky" else None

    board.on_command(listener)
    board.power(True)
    await read_until(console, LOGIN)
    await log_in(console)
    assert await run(console, "echo before") == ["before"]
    assert await run(console, "echo flaky") == ["i2c: transfer timed out"]  # the listener answered
    console.write(b"echo hang now\r\n")
    assert PROMPT.encode() not in await read_for(console, 0.5)  # the command is never answered
    console.write(b"uname\r\n")
    assert await read_for(console, 0.5) == b""  # deaf: not even an echo
    assert board.state is State.HALTED
    assert heard == ["echo before", "echo flaky", "echo hang now"]
    board.power(False)
    board.power(True)
    assert (await read_until(console, LOGIN)).endswith(LOGIN)


async def test_a_board_told_to_panic_prints_the_panic_and_stops(
    board: SimulatedBoard, console: serial.Serial
) -> None:
    board.mode = Mode.PANIC
    board.power(True)
    said = (await read_for(console, BOOT_S + 0.5)).decode()
    assert f"] {PANIC}\r\n" in said
    assert said.endswith(f"] ---[ end {PANIC} ]---\r\n")
    assert "login:" not in said
    assert board.state is State.HALTED


async def test_a_slow_board_takes_its_boot_time(board: SimulatedBoard, console: serial.Serial) -> None:
    board.boot_s = 1.0
    board.power(True)
    early = await read_until(console, LOGIN, timeout=0.6)
    assert b"Starting kernel ..." in early
    assert LOGIN not in early
    assert (await read_until(console, LOGIN)).endswith(LOGIN)


async def test_an_unpowered_board_says_nothing_and_drops_what_it_is_sent(
    board: SimulatedBoard, console: serial.Serial
) -> None:
    console.write(b"root\n")
    assert await read_for(console, 0.3) == b""
    assert board.state is State.OFF
    assert board.lines_printed == 0


async def test_powered_off_midway_it_stops_printing(board: SimulatedBoard, console: serial.Serial) -> None:
    board.power(True)
    await read_until(console, b"Starting kernel ...")
    board.power(False)
    await read_for(console, 0.05)  # a line on its way when the power went
    assert await read_for(console, BOOT_S) == b""
    assert board.state is State.OFF


async def test_reboot_boots_again_and_poweroff_halts(board: SimulatedBoard, console: serial.Serial) -> None:
    board.power(True)
    await read_until(console, LOGIN)
    await log_in(console)
    console.write(b"reboot\n")
    said = await read_until(console, LOGIN)
    assert b"reboot: Restarting system\r\n" in said
    assert b"U-Boot SPL" in said
    assert board.boots == 2
    await log_in(console)
    console.write(b"poweroff\n")
    assert (await read_until(console, b"reboot: Power down\r\n")).endswith(b"reboot: Power down\r\n")
    console.write(b"echo still there\n")
    assert await read_for(console, 0.2) == b""
    assert board.state is State.HALTED
    board.power(False)
    board.power(True)  # a power cycle brings a halted board back
    assert (await read_until(console, LOGIN)).endswith(LOGIN)


async def test_a_flooding_board_prints_numbered_lines_at_its_baud_rate(
    board: SimulatedBoard, console: serial.Serial
) -> None:
    board.mode = Mode.FLOOD
    board.power(True)
    await read_until(console, b"smp: Brought up 1 node, 4 CPUs\r\n")
    said = await read_for(console, 0.5)
    numbers = [int(found) for found in re.findall(rb"error -71 \((\d+)\)\r\n", said)]
    assert numbers == list(range(1, len(numbers) + 1))  # none lost: the reader keeps up
    # 115,200 baud is about 11,520 bytes a second: in half a second, some 5,800 bytes.
    assert 3_000 < len(said) < 8_000
    assert board.state is State.FLOODING
    board.power(False)
    await read_for(console, 0.05)
    assert await read_for(console, 0.2) == b""


async def test_the_pdu_outlet_powers_the_board_through_labgrid(
    console: serial.Serial, board: SimulatedBoard
) -> None:
    gude = pytest.importorskip(f"labgrid.driver.power.{MODEL}")
    async with GudePdu(outlets=4) as pdu:
        board.attach(pdu, 3)
        assert board.state is State.OFF
        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, 3, True)
        assert (await read_until(console, LOGIN)).endswith(LOGIN)
        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, 3, False)
        assert board.state is State.OFF
        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, 2, True)  # another board's outlet
        assert await read_for(console, BOOT_S) == b""
        await asyncio.to_thread(gude.power_set, pdu.host, pdu.port, 3, True)
        assert (await read_until(console, LOGIN)).endswith(LOGIN)
        assert board.boots == 2


async def test_a_board_attached_to_an_outlet_already_on_is_powered() -> None:
    async with GudePdu(outlets=2) as pdu, SimulatedBoard(boot_s=BOOT_S) as board:
        pdu.switch(1, True)
        board.attach(pdu, 1)
        assert board.state is State.BOOTING


async def test_the_console_is_also_a_socket_url() -> None:
    async with SimulatedBoard(boot_s=BOOT_S) as board:
        await board.close()
        await board.start(serve_socket=True)
        assert board.socket_url is not None
        assert re.fullmatch(r"socket://127\.0\.0\.1:\d+", board.socket_url)
        port = serial.serial_for_url(board.socket_url, timeout=GRACE_S)
        try:
            board.power(True)
            assert (await read_until(port, LOGIN)).endswith(LOGIN)
            await log_in(port)
            assert await run(port, "echo over tcp") == ["over tcp"]
        finally:
            port.close()
