"""Every tty console of the agent read by one thread.

A thread a console costs more than the reading: 17 threads each waking for every few lines a board
prints, and each block handed to the event loop on its own (a write to the loop's self-pipe, a wake of
the loop). Here one daemon thread polls every tty at once. A tty that has bytes is let gather for a
moment (:meth:`TtyReader.gather_s`: a person's console 2 ms, a job's up to 50 ms, less for a fast
board), then read in one ``os.read``; the blocks of all the ttys read in one round go to each event loop
in one hand-over. A tty read early, when a round reads others anyway, is read with what it holds: that
groups the reads of boards that print at the same time into the same rounds.

The ttys are pyserial's POSIX ports, which open them non-blocking; their reads skip pyserial (its
``read`` waits with a ``select`` of its own and raises the same errors, which are reproduced here: a tty
ready with nothing to read has gone away).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import math
import os
import select
import struct
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

READ_BLOCK: Final = 64 * 1024  # bytes taken at once: at 3 Mbaud about 0.2 s of a flood
# A tty's bytes gather for up to this long before a read, but not past about GATHER_BYTES at the rate
# its board printed last or at its baud rate, whichever is faster: a pty holds about 19 KB, and a USB
# serial adapter ignores its baud rate (115,200 baud: 0.05 s; 3 Mbaud: 0.007 s). A board quiet until now
# may flood at once, so a long gather looks at how much came halfway, and is cut short at half of them.
GATHER_BYTES: Final = 2048
LOOK_HALFWAY_S: Final = 0.01  # a gather shorter than this is not looked at halfway
EARLY: Final = 0.3  # a tty due within this share of its gather is read with a round that reads others
REMOVE_WAIT_S: Final = 2.0

Arrived = Callable[[float, bytes], None]  # (epoch seconds, bytes), called on the reader's event loop
WentAway = Callable[[str], None]  # why, called on the reader's event loop


@dataclass(eq=False)
class TtyReader:
    """One tty to read: its file descriptor, how long its bytes may gather, and where they go."""

    fd: int
    longest_gather_s: float
    baud: int
    loop: asyncio.AbstractEventLoop
    arrived: Arrived
    went_away: WentAway
    rate: float = 0.0  # bytes a second the board printed at the last read
    last_read: float = field(default_factory=time.monotonic)
    due: float = 0.0  # when a tty with bytes waiting is read
    halfway: float = math.inf  # when a long gather looks at how much came
    dropped: asyncio.Future[None] | None = None

    def gather_s(self) -> float:
        """How long the bytes of this tty may gather before it is read."""
        fastest = max(self.rate, self.baud / 10)
        return min(self.longest_gather_s, GATHER_BYTES / fastest) if fastest > 0 else self.longest_gather_s


Delivery = tuple[TtyReader, float, bytes | str]  # bytes read, or why the tty went away


class TtyReaders:
    """The reading thread and the ttys it reads; :func:`tty_readers` is the agent's one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._added: list[TtyReader] = []
        self._removed: list[TtyReader] = []
        self._thread: threading.Thread | None = None
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def add(self, reader: TtyReader) -> None:
        """Start reading ``reader``'s tty."""
        with self._lock:
            self._added.append(reader)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kerrigan-consoles", daemon=True)
                self._thread.start()
        self._wake()

    async def remove(self, reader: TtyReader) -> None:
        """Stop reading ``reader``'s tty; returns once the thread no longer reads it (so that it may be
        closed), or after :data:`REMOVE_WAIT_S` should the thread be stuck."""
        reader.dropped = reader.loop.create_future()
        with self._lock:
            self._removed.append(reader)
        self._wake()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader.dropped), REMOVE_WAIT_S)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # full: it will wake anyway
            os.write(self._wake_write, b"\0")

    # -- the thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        reading: dict[int, TtyReader] = {}  # polled for bytes
        gathering: set[TtyReader] = set()  # have bytes, read when due
        while True:
            timeout = None
            if gathering:
                soonest = min(min(reader.due, reader.halfway) for reader in gathering)
                timeout = max(0, math.ceil((soonest - time.monotonic()) * 1000))
            events = poller.poll(timeout)
            now = time.monotonic()
            for fd, _ in events:
                if fd == self._wake_read:
                    self._take_changes(poller, reading, gathering)
                elif (reader := reading.pop(fd, None)) is not None:
                    poller.unregister(fd)
                    gather = reader.gather_s()
                    reader.due = now + gather
                    reader.halfway = now + gather / 2 if gather >= LOOK_HALFWAY_S else math.inf
                    gathering.add(reader)
            for reader in gathering:
                if reader.halfway <= now:
                    reader.halfway = math.inf
                    if _waiting(reader.fd) >= GATHER_BYTES // 2:
                        reader.due = now
            if not any(reader.due <= now for reader in gathering):
                continue
            due = [reader for reader in gathering if reader.due - now <= EARLY * reader.gather_s()]
            delivered: list[Delivery] = []
            at = time.time()
            for reader in due:
                gathering.discard(reader)
                found = _read(reader.fd)
                delivered.append((reader, at, found))
                if isinstance(found, bytes):
                    reader.rate = len(found) / max(now - reader.last_read, 0.001)
                    reader.last_read = now
                    reading[reader.fd] = reader
                    poller.register(reader.fd, select.POLLIN)
            self._hand_over(delivered)

    def _take_changes(
        self, poller: select.poll, reading: dict[int, TtyReader], gathering: set[TtyReader]
    ) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 4096):
                pass
        with self._lock:
            added, self._added = self._added, []
            removed, self._removed = self._removed, []
        for reader in added:
            reading[reader.fd] = reader
            poller.register(reader.fd, select.POLLIN)
        for reader in removed:
            if reading.get(reader.fd) is reader:
                del reading[reader.fd]
                poller.unregister(reader.fd)
            gathering.discard(reader)
            if reader.dropped is not None:
                with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits
                    reader.loop.call_soon_threadsafe(_settle, reader.dropped)

    @staticmethod
    def _hand_over(delivered: list[Delivery]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Delivery]] = {}
        for delivery in delivered:
            by_loop.setdefault(delivery[0].loop, []).append(delivery)
        for loop, deliveries in by_loop.items():
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody reads it any more
                loop.call_soon_threadsafe(_deliver, deliveries)


def _read(fd: int) -> bytes | str:
    """What the tty holds, or why it went away."""
    try:
        data = os.read(fd, READ_BLOCK)
    except BlockingIOError:
        return b""  # taken by another reader of the same tty meanwhile
    except OSError as err:
        return " ".join(str(err).split()) or type(err).__name__
    if not data:  # ready, yet nothing: pyserial says the same of a tty unplugged
        return "device reports readiness to read but returned no data (device disconnected?)"
    return data


def _waiting(fd: int) -> int:
    """How many bytes the tty holds (0 should it have gone away: its read says so)."""
    try:
        answer = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", answer)[0])


def _deliver(deliveries: list[Delivery]) -> None:
    for reader, at, found in deliveries:
        if reader.dropped is not None:
            continue  # removed: what it read last is not wanted
        if isinstance(found, str):
            reader.went_away(found)
        elif found:
            reader.arrived(at, found)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_readers: TtyReaders | None = None
_readers_lock = threading.Lock()


def tty_readers() -> TtyReaders:
    """The process's one reading thread (started with the first tty it reads)."""
    global _readers  # noqa: PLW0603 -- one a process, as the ttys are the process's
    with _readers_lock:
        if _readers is None:
            _readers = TtyReaders()
        return _readers
