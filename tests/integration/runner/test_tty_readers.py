"""The one thread that reads every tty console of the agent (kerrigan.runner.boards.tty_readers), on real
pseudo-terminals."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import tty
from collections.abc import Iterator

import pytest

from kerrigan.runner.boards.tty_readers import TtyReader, tty_readers
from kerrigan.testing.waiting import wait_until


class Pty:
    """A pseudo-terminal: the board writes to ``master``, the reader reads ``slave``."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.slave, False)  # as pyserial opens a port
        self.received = bytearray()
        self.lost: list[str] = []

    def reader(self, loop: asyncio.AbstractEventLoop, gather_s: float = 0.05) -> TtyReader:
        return TtyReader(
            self.slave, gather_s, 115_200, loop, lambda at, data: self.received.extend(data), self.lost.append
        )

    def close(self) -> None:
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def ptys() -> Iterator[list[Pty]]:
    made = [Pty() for _ in range(8)]
    yield made
    for pty in made:
        pty.close()


def reading_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == "kerrigan-consoles")


async def test_one_thread_reads_every_tty_whole_and_in_order(ptys: list[Pty]) -> None:
    loop = asyncio.get_running_loop()
    readers = [pty.reader(loop) for pty in ptys]
    for reader in readers:
        tty_readers().add(reader)
    sent = [bytearray() for _ in ptys]
    for number in range(200):
        for index, pty in enumerate(ptys):
            line = f"console {index} line {number}\r\n".encode()
            os.write(pty.master, line)
            sent[index] += line
        if number % 20 == 0:
            await asyncio.sleep(0.01)
    await wait_until(
        lambda: all(pty.received == want for pty, want in zip(ptys, sent, strict=True)), timeout=5
    )
    assert reading_threads() == 1
    for reader in readers:
        await tty_readers().remove(reader)


async def test_a_removed_tty_is_read_no_more(ptys: list[Pty]) -> None:
    pty = ptys[0]
    reader = pty.reader(asyncio.get_running_loop())
    tty_readers().add(reader)
    os.write(pty.master, b"before\n")
    await wait_until(lambda: bytes(pty.received) == b"before\n", timeout=5)
    await tty_readers().remove(reader)
    os.write(pty.master, b"after\n")
    await asyncio.sleep(0.2)
    assert bytes(pty.received) == b"before\n"
    assert os.read(pty.slave, 100) == b"after\n"  # still there: nobody read it


async def test_a_reused_descriptor_is_read_for_its_new_reader(ptys: list[Pty]) -> None:
    loop = asyncio.get_running_loop()
    first = Pty()
    old = first.reader(loop)
    tty_readers().add(old)
    await tty_readers().remove(old)
    slave = first.slave
    first.close()
    second = Pty()  # the lowest free descriptors: the first's, again
    try:
        if slave not in (second.master, second.slave):
            pytest.skip("the first pty's descriptor was not reused")
        if second.slave != slave:
            second.master, second.slave = second.slave, second.master  # read what reused the number
            tty.setraw(second.slave)
            os.set_blocking(second.slave, False)
        tty_readers().add(new := second.reader(loop))
        os.write(second.master, b"hello\n")
        await wait_until(lambda: bytes(second.received) == b"hello\n", timeout=5)
        assert first.received == b""
        await tty_readers().remove(new)
    finally:
        second.close()


async def test_a_tty_whose_other_end_is_gone_is_said_to_have_gone_away(ptys: list[Pty]) -> None:
    pty = ptys[0]
    tty_readers().add(reader := pty.reader(asyncio.get_running_loop()))
    os.close(pty.master)
    await wait_until(lambda: pty.lost != [], timeout=5)
    assert pty.lost[0]  # one line saying why
    await tty_readers().remove(reader)


def test_a_tty_gathers_less_the_faster_its_board_prints() -> None:
    loop = asyncio.new_event_loop()
    try:

        def reader(gather_s: float, baud: int) -> TtyReader:
            return TtyReader(0, gather_s, baud, loop, lambda at, data: None, lambda why: None)

        assert reader(0.05, 115_200).gather_s() == 0.05  # 2 KB at 115,200 baud take longer than 50 ms
        assert reader(0.05, 3_000_000).gather_s() == pytest.approx(2048 / 300_000)
        assert reader(0.002, 115_200).gather_s() == 0.002  # a person's console: each echo at once
        fast = reader(0.05, 115_200)
        fast.rate = 1_000_000.0  # a USB adapter printing faster than its baud rate
        assert fast.gather_s() == pytest.approx(2048 / 1_000_000)
    finally:
        loop.close()
