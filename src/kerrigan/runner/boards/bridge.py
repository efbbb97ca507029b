"""A job's terminal on its board's console: a pseudo-terminal whose slave is the job's and whose master the
agent bridges to the console it holds (:class:`~kerrigan.runner.boards.console.Console`).

The job gets the console without the agent's rights: it opens ``/dev/pts/N`` (its ``KERRIGAN_CONSOLE``),
owned by the job's uid, mode 0600, so no other job's uid may open it. The job's mount namespace
(:mod:`kerrigan.runner.isolation.mounts`) covers ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/proc`` but
keeps the host's ``/dev/pts``, and its user namespace maps every id to itself, so that path and its owner
mean the same inside and out: no bind mount or inherited descriptor is needed. The terminal is raw
(no echo, no line editing, no CR/LF rewriting) so the board's bytes reach the job as the board printed them
and the job's reach the board as it wrote them; the job may set it as it likes, it is its own.

What the board prints goes to the terminal as it comes (beside the console log, which is unchanged);
what the terminal cannot take (the job does not read) is dropped, as a UART drops what nobody reads, so a
job that never reads holds no memory of the agent's. What the job writes is read in blocks of at most
:data:`JOB_BLOCK` bytes and typed at the console one block at a time: the agent reads no more until the
console took the last one, so a job that floods its terminal is slowed to the console's speed and costs a
block. The agent keeps a descriptor of the slave too, so reading the master never fails while no process
of the job has the terminal open. At the job's end both sides are closed: the terminal is gone (a
later ``openpty`` makes a new one, never this one) and nothing the job left can reach the console.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tty
from collections.abc import Callable
from typing import Final

from kerrigan.runner.boards.console import Console, ConsoleLost

log = logging.getLogger(__name__)

JOB_BLOCK: Final = 4096  # bytes of the job's read from its terminal at once


class ConsoleBridge:
    """One board's console as a terminal of a job's: :meth:`open` it, then :meth:`close` at the job's end."""

    def __init__(self, console: Console, uid: int | None) -> None:
        self.console = console
        self.uid = uid  # the job's user; None: the job runs as the agent's own
        self.path = ""  # the terminal the job opens (its KERRIGAN_CONSOLE)
        self.dropped_bytes = 0  # the board's bytes the job's terminal could not take
        self._master = -1
        self._slave = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._untap: Callable[[], None] | None = None
        self._typing: asyncio.Task[None] | None = None

    def open(self) -> str:
        """Make the terminal, the job's own, and start bridging; its path."""
        self._loop = asyncio.get_running_loop()
        master, slave = os.openpty()
        try:
            tty.setraw(slave)
            if self.uid is not None:
                os.fchown(slave, self.uid, self.uid)  # the descriptor: no path the job could swap
            os.fchmod(slave, 0o600)
            os.set_blocking(master, False)
            self.path = os.ttyname(slave)
        except OSError:
            os.close(master)
            os.close(slave)
            raise
        self._master, self._slave = master, slave
        self._loop.add_reader(master, self._from_job)
        self._untap = self.console.tap(self._to_job)
        return self.path

    async def close(self) -> None:
        """Stop bridging and close both sides of the terminal."""
        if self._untap is not None:
            self._untap()
            self._untap = None
        if self._master >= 0 and self._loop is not None:
            self._loop.remove_reader(self._master)
        if self._typing is not None:
            self._typing.cancel()
            await asyncio.gather(self._typing, return_exceptions=True)
            self._typing = None
        for fd in (self._master, self._slave):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master = self._slave = -1

    def _to_job(self, data: bytes) -> None:
        """The board printed ``data``: into the terminal, as much as it takes now."""
        if self._master < 0:
            return
        written = 0
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while written < len(data):
                written += os.write(self._master, data[written:])
        if written < len(data):
            self.dropped_bytes += len(data) - written

    def _from_job(self) -> None:
        """The job wrote to its terminal: a block typed at the console, and no more read until it is."""
        try:
            data = os.read(self._master, JOB_BLOCK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # not expected while the agent holds the slave: stop listening
            data = b""
        assert self._loop is not None
        self._loop.remove_reader(self._master)
        if data:
            self._typing = self._loop.create_task(self._type(data))

    async def _type(self, data: bytes) -> None:
        try:
            await self.console.write(data)
        except ConsoleLost as err:  # the console's watch ends the job; what the job typed is lost
            log.debug("console %s: the job's input dropped: %s", self.console.named, err)
        if self._master >= 0 and self._loop is not None:
            self._loop.add_reader(self._master, self._from_job)
