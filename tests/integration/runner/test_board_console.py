"""The console reader and the boot wait against the simulated board's pseudo-terminal (and its socket://
port, as ser2net offers one), and a command whose stdin and stdout are the console."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
import sys
import time
from collections.abc import AsyncIterator

import pytest

from kerrigan.runner.boards.boot import BootFailed, watch_boot
from kerrigan.runner.boards.console import Console, ConsoleLost, console_support_problem
from kerrigan.runner.devices_file import parse_devices_file
from kerrigan.runner.devices_file.host_view import HostView
from kerrigan.runner.devices_file.wiring import BootWiring, CommandConsole, SerialConsole, UrlConsole
from kerrigan.testing.board import FLOOD_LINE, Mode, SimulatedBoard
from kerrigan.testing.waiting import wait_until

pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

BOOT_S = 0.3
LOGIN = "kerrigan-board login: "
BOOT = BootWiring(re.compile("login:"), (re.compile("Kernel panic"),), timeout_s=3)


@pytest.fixture
async def board() -> AsyncIterator[SimulatedBoard]:
    async with SimulatedBoard(boot_s=BOOT_S) as simulated:
        yield simulated


@pytest.fixture
async def console(board: SimulatedBoard) -> AsyncIterator[Console]:
    reader = Console(SerialConsole(board.path))
    await reader.open()
    yield reader
    await reader.close()


async def test_lines_arrive_with_their_times_and_the_last_ones_are_kept(
    board: SimulatedBoard, console: Console
) -> None:
    chunks: list[bytes] = []
    console.sink = lambda at, data: chunks.append(data)
    before = time.time()
    board.power(True)
    await wait_until(lambda: console.last_lines(1) == [LOGIN], timeout=5)
    lines = list(console.lines)
    assert [line.text for line in lines] == list(board.transcript)
    assert all(before <= line.at <= time.time() for line in lines)
    assert [line.at for line in lines] == sorted(line.at for line in lines)
    assert lines[-1].at - lines[0].at >= BOOT_S / 2  # spread over the boot, as they came
    assert b"".join(chunks).decode().endswith(LOGIN)
    assert console.last_lines(3)[-1] == LOGIN  # the prompt, unfinished, is the last line


async def test_what_is_written_reaches_the_board(board: SimulatedBoard, console: Console) -> None:
    board.power(True)
    await wait_until(lambda: console.last_lines(1) == [LOGIN], timeout=5)
    await console.write(b"root\n")
    await console.write(b"uname -r\n")
    await wait_until(lambda: "6.1.0-kerrigan-arm64" in [line.text for line in console.lines], timeout=5)


async def test_a_flood_is_read_whole_in_large_blocks(board: SimulatedBoard, console: Console) -> None:
    board.mode = Mode.FLOOD
    board.baud = 3_000_000
    reads = 0

    def counted(at: float, data: bytes) -> None:
        nonlocal reads
        reads += 1

    console.sink = counted
    board.power(True)
    await asyncio.sleep(1.0)
    board.power(False)
    printed = board.lines_printed
    await wait_until(lambda: console.lines_read >= printed, timeout=5)
    assert board.dropped_bytes == 0
    assert console.lines_read == printed  # no line lost
    assert console.bytes_read > 100_000
    assert reads < console.bytes_read / 1000  # blocks, never byte by byte
    numbers = [
        int(m.group(1)) for line in console.lines if (m := re.search(r"error -71 \((\d+)\)", line.text))
    ]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # the last ones, in order
    assert console.lines[-1].text.endswith(FLOOD_LINE.format(number=numbers[-1]).removeprefix("K "))


async def test_a_board_that_goes_away_is_a_lost_console(board: SimulatedBoard, console: Console) -> None:
    board.power(True)
    await wait_until(lambda: console.last_lines(1) == [LOGIN], timeout=5)
    await board.close()  # unplugged: its terminal is gone
    await asyncio.wait_for(console.gone.wait(), 5)
    assert console.lost is not None
    assert console.lost.startswith(f"console {board.path} went away: ")
    with pytest.raises(ConsoleLost):
        await console.write(b"root\n")


async def test_a_port_that_is_not_there_cannot_be_opened() -> None:
    with pytest.raises(ConsoleLost, match="console /dev/ttyKERRIGAN9 could not be opened"):
        await Console(SerialConsole("/dev/ttyKERRIGAN9")).open()


async def test_a_socket_console_is_read_as_ser2net_offers_it() -> None:
    async with SimulatedBoard(boot_s=BOOT_S) as board:
        await board.close()
        await board.start(serve_socket=True)
        assert board.socket_url is not None
        console = Console(UrlConsole(board.socket_url))
        await console.open()
        try:
            watch = watch_boot(console, BOOT)
            board.power(True)
            assert 0 < await watch.wait() < 3
        finally:
            await console.close()


async def test_a_command_console_is_its_stdin_and_stdout() -> None:
    echo = "import sys\nfor line in sys.stdin: print('board says', line.strip(), flush=True)"
    console = Console(CommandConsole((sys.executable, "-u", "-c", echo)))
    await console.open()
    await console.write(b"hello\n")
    await wait_until(lambda: [line.text for line in console.lines] == ["board says hello"], timeout=5)
    assert console._process is not None
    console._process.stdin.close()  # type: ignore[union-attr]
    await asyncio.wait_for(console.gone.wait(), 5)
    assert console.lost is not None
    assert "its command ended (exit status 0)" in console.lost
    await console.close()


# -- the boot ----------------------------------------------------------------------------------------


async def test_a_boot_ends_at_the_ready_line_and_says_how_long_it_took(
    board: SimulatedBoard, console: Console
) -> None:
    watch = watch_boot(console, BOOT)
    board.power(True)
    seconds = await watch.wait()
    assert BOOT_S * 0.8 < seconds < 3


async def test_a_panic_is_a_failed_boot_with_the_consoles_last_lines(
    board: SimulatedBoard, console: Console
) -> None:
    board.mode = Mode.PANIC
    watch = watch_boot(console, BOOT)
    board.power(True)
    with pytest.raises(BootFailed) as failed:
        await watch.wait()
    assert "Kernel panic - not syncing" in failed.value.reason
    assert "a boot.fail line" in failed.value.reason
    assert any("Kernel panic" in line for line in failed.value.last_lines)
    assert len(failed.value.last_lines) <= 20


async def test_a_hung_boot_fails_after_its_timeout_with_the_last_lines(
    board: SimulatedBoard, console: Console
) -> None:
    board.mode = Mode.HANG_AT_BOOT
    watch = watch_boot(console, BootWiring(re.compile("login:"), (), timeout_s=1))
    board.power(True)
    started = time.monotonic()
    with pytest.raises(BootFailed, match=r"no line matched boot\.ready \('login:'\) within 1 s") as failed:
        await watch.wait()
    assert 0.9 < time.monotonic() - started < 2
    assert failed.value.last_lines[-1].endswith("printk: console [ttyS2] enabled")


def test_a_serial_console_without_pyserial_is_refused_at_start_in_one_line(tmp_path: object) -> None:
    host = HostView(lambda path: True, lambda name: True, lambda model: True)
    text = "devices:\n  bluebox:\n    console: {serial: {port: /dev/ttyUSB0}}\n"
    found = parse_devices_file(text, "devices.yml", host)
    assert console_support_problem(found) is None  # pyserial is here
    hidden = sys.modules.pop("serial", None)
    sys.modules["serial"] = None  # type: ignore[assignment]  # what an import finds where it is not installed
    try:
        problem = console_support_problem(found)
    finally:
        del sys.modules["serial"]
        if hidden is not None:
            sys.modules["serial"] = hidden
    assert problem == (
        "devices file devices.yml: devices.bluebox.console.serial is read with pyserial, which is not "
        "installed: pip install 'kerrigan[labgrid]' on this host"
    )


FLOOD_OF_LINE_ENDS = (
    "import sys\nsys.stdout.buffer.write(b'\\n' * 1_000_000 + b'last words\\n' + b'prompt')\n"
    "sys.stdout.flush()\nsys.stdin.read()\n"
)


async def read_flood_of_line_ends(heard: list[str] | None) -> Console:
    """A command console printing a million line ends, read until its prompt (``heard``: a listener's)."""
    console = Console(CommandConsole((sys.executable, "-c", FLOOD_OF_LINE_ENDS)))
    if heard is not None:
        console.listen(lambda text, whole: heard.append(text) if whole else None)
    await console.open()
    try:
        await wait_until(lambda: console.lines_read >= 1_000_001, timeout=30)
        await wait_until(lambda: console.last_lines(1) == ["prompt"], timeout=5)
    finally:
        await console.close()
    return console


async def test_a_flood_of_line_ends_is_counted_whole_and_its_last_lines_kept() -> None:
    # A hostile job's board printing nothing but line ends (`yes ''` at its shell, over a console with no
    # baud rate to slow it: a socket, USB's CDC ACM): every line is counted and the ring keeps the last ones,
    # but only those are made, so the agent's loop is not kept busy line by line; a listener (the boot wait)
    # still hears every one.
    heard: list[str] = []
    for console in (await read_flood_of_line_ends(None), await read_flood_of_line_ends(heard)):
        assert console.lines_read == 1_000_002  # the prompt, ended by the close
        assert len(console.lines) == 200
        assert [line.text for line in console.lines][-3:] == ["", "last words", "prompt"]
        assert console.bytes_read == 1_000_000 + len("last words\nprompt")
    assert len(heard) == 1_000_002
    assert heard[-2:] == ["last words", "prompt"]


async def test_typing_at_a_console_that_takes_nothing_holds_none_of_the_agents_shared_threads() -> None:
    # A terminal server that stopped reading: what a job types at its board waits there, maybe for ever.
    # That wait must not hold a thread of the loop's shared executor, which the agent's other work needs.
    accepted: list[asyncio.StreamWriter] = []

    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # its reader stops the socket's reading once 2 KiB wait in it

    server = await asyncio.start_server(never_reads, "127.0.0.1", 0, limit=1024)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    shared = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(shared)
    console = Console(UrlConsole(f"socket://127.0.0.1:{port}"))
    await console.open()
    try:
        typing = asyncio.create_task(console.write(b"y" * (64 << 20)))  # more than any socket buffer holds
        await asyncio.sleep(0.5)
        assert not typing.done()  # still waiting for the terminal server
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "the agent's work"), 10) == "the agent's work"
    finally:
        await asyncio.wait_for(console.close(), 10)  # its reader's join needs a shared thread too
        with contextlib.suppress(Exception):
            await asyncio.wait_for(typing, 10)
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
        shared.shutdown(wait=False)
