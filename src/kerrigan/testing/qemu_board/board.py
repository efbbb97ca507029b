"""The QEMU board itself: power by a PDU outlet, a console served as ``socket://``."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Final, Protocol

from kerrigan.testing.console_socket import ConsoleSocket
from kerrigan.testing.qemu_board.host import MEMORY_MB, QEMU, kvm_boots

TRANSCRIPT_LINES: Final = 2000


class Outlet(Protocol):
    """What ``attach`` needs of a PDU: ``kerrigan.testing.pdu.GudePdu`` is one."""

    def on_switch(self, index: int, listener: Callable[[bool], None]) -> None: ...

    def is_on(self, index: int) -> bool: ...


class QemuBoard:
    """A QEMU machine booting ``kernel`` with ``initramfs`` (:func:`build_initramfs`) whose serial console
    is ``socket_url``: ``start`` it on a running loop (which picks KVM when it boots, else TCG), then power
    it (``power`` or an outlet, ``attach``)."""

    def __init__(
        self, kernel: Path, initramfs: Path, *, accelerator: str | None = None, memory_mb: int = MEMORY_MB
    ) -> None:
        self.kernel = kernel
        self.initramfs = initramfs
        self.accelerator = accelerator or ""  # "kvm" or "tcg"; chosen at ``start`` when not given
        self.memory_mb = memory_mb
        self.powered = False  # the supply, as last switched; the machine may have powered itself off
        self.starts = 0  # how many times a machine was started (power-ons; a guest reboot is not one)
        self.exits: list[int] = []  # each machine's exit status: -9 when the power went, 0 after poweroff
        self.transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_LINES)
        self.socket_url = ""
        self.qemu_errors = ""  # what the last machine wrote to stderr (or why it did not start)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._switching: asyncio.Task[None] | None = None
        self._output: asyncio.Task[None] | None = None
        self._line = bytearray()
        self._socket = ConsoleSocket(self._type)

    @property
    def running(self) -> bool:
        """Whether a machine process is alive."""
        return self._process is not None and self._process.returncode is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.running and self._process is not None else None

    def command(self) -> list[str]:
        """The ``qemu-system-x86_64`` command line of one power-on."""
        return [
            QEMU,
            "-nodefaults",
            "-no-user-config",
            "-accel",
            self.accelerator,
            "-m",
            str(self.memory_mb),
            "-smp",
            "1",
            "-display",
            "none",
            "-monitor",
            "none",
            "-chardev",
            "stdio,id=console,signal=off",
            "-serial",
            "chardev:console",
            "-kernel",
            str(self.kernel),
            "-initrd",
            str(self.initramfs),
            "-append",
            "console=ttyS0,115200 rdinit=/init panic=0",
        ]

    # -- life ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve the console on a free port of ``127.0.0.1``; the board is off."""
        self._loop = asyncio.get_running_loop()
        if not self.accelerator:
            self.accelerator = "kvm" if await kvm_boots(self.kernel) else "tcg"
        self.socket_url = await self._socket.start()

    async def close(self) -> None:
        """Power off (the machine is killed) and stop serving the console."""
        self.power(False)
        await self.settled()
        await self._socket.close()

    async def __aenter__(self) -> QemuBoard:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    # -- power -----------------------------------------------------------------------------------

    def power(self, on: bool) -> None:
        """Switch the board's supply: on starts a machine (unless one runs), off kills it. Switches are
        applied in order; :meth:`settled` waits until they have been."""
        if self._loop is None:
            raise RuntimeError("start the board before powering it")
        self.powered = on
        self._switching = self._loop.create_task(self._switch(on, self._switching))

    def attach(self, pdu: Outlet, index: int) -> None:
        """Power the board from outlet ``index`` of ``pdu``: on when it is on, off when it goes off."""
        pdu.on_switch(index, self.power)
        if pdu.is_on(index):
            self.power(True)

    async def settled(self) -> None:
        """Wait until every switch so far is applied: a machine started, or killed and reaped."""
        if self._switching is not None:
            await asyncio.shield(self._switching)

    async def _switch(self, on: bool, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await previous
        if on and not self.running:
            await self._launch()
        elif not on and self._process is not None:
            await self._kill(self._process)

    async def _launch(self) -> None:
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as err:  # no qemu: a board that does not come on, as one with a blown fuse
            self.qemu_errors = f"{QEMU} could not be started: {err}"
            return
        self._process = process
        self.starts += 1
        self._output = asyncio.create_task(self._relay(process))

    async def _kill(self, process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        if self._output is not None:
            await self._output  # what it printed before it died reaches the readers
            self._output = None

    async def _relay(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        errors = asyncio.create_task(process.stderr.read())
        while data := await process.stdout.read(1 << 16):
            self._print(data)
        self.exits.append(await process.wait())
        self.qemu_errors = (await errors).decode(errors="replace")

    # -- the console -----------------------------------------------------------------------------

    def _print(self, data: bytes) -> None:
        self._line.extend(data)
        while (end := self._line.find(b"\n")) >= 0:
            self.transcript.append(self._line[:end].rstrip(b"\r").decode(errors="replace"))
            del self._line[: end + 1]
        self._socket.print(data)

    def _type(self, data: bytes) -> None:
        process = self._process
        if process is None or process.returncode is not None or process.stdin is None:
            return  # off: nobody reads the UART
        with contextlib.suppress(ConnectionError, OSError):
            process.stdin.write(data)
