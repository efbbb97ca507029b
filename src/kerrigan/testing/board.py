"""A simulated board behind a pseudo-terminal: a serial console that boots, logs in, hangs or panics.

The board's console is the master side of ``os.openpty()``; ``path`` is the slave's (``/dev/pts/N``), which a
console reader opens as it would ``/dev/ttyUSB0`` (pyserial's ``serial.Serial(path)``), from any process.
With ``serve_socket`` the same console is also ``socket://127.0.0.1:PORT`` (``socket_url``), as ser2net
offers one: each connection hears what the board prints from then on, and what it sends is typed in.

Powered on (``power(True)``, or by a PDU stand-in's outlet through ``attach``) it prints a boot log line by
line, spread over ``boot_s`` seconds: U-Boot, the kernel with timestamps, init, then ``<hostname> login:``.
``root`` logs in without a password (as a Buildroot image does) and the shell answers ``uname``, ``echo``,
``cat /proc/version``, ``hostname``, ``reboot`` and ``poweroff``; anything else is ``not found``. What the
board is sent is echoed as a terminal does. Powered off, halted or still booting it says nothing and drops
what it is sent. Like a UART, it never waits for a reader: what the terminal's buffer cannot take is lost
(``dropped_bytes`` counts it).

``mode`` (read at each power-on) tells it how to boot: ``BOOTS``; ``HANG_AT_BOOT`` (stops midway through the
kernel, never reaches ``login:``); ``PANIC`` (``Kernel panic - not syncing: ...``, then silence); ``FLOOD``
(after the kernel's first lines, one numbered line after another until powered off, paced at ``baud``).
A slow boot is a larger ``boot_s``.

The board is an asyncio task on the loop that starts it, not a process: a PDU stand-in on that loop powers it
with a plain call, the test sets its modes and reads its state directly, and the pty still makes its console
a real terminal device that another process (a runner agent) can open. That loop must keep running for the
board to print, as any loop serving a stand-in must.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import os
import shlex
import tty
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from kerrigan.testing.console_socket import ConsoleSocket

HOSTNAME = "kerrigan-board"
RELEASE = "6.1.0-kerrigan-arm64"
MODEL = "Kerrigan Simulated Board (RK3588)"
VERSION = (
    f"Linux version {RELEASE} (builder@kerrigan) (aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0, "
    "GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT Debian 6.1.0-1"
)
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(179,2)"
PROMPT = f"root@{HOSTNAME}:~# "
TRANSCRIPT_LINES = 2000

# The boot log. A line starting with "K " is the kernel's and gets a timestamp; "<mode>" marks where that
# mode leaves the script.
BOOT_LOG = (
    "",
    "U-Boot SPL 2024.01 (Jan 08 2024 - 12:00:00 +0000)",
    "DRAM:  2 GiB",
    "Trying to boot from MMC1",
    "",
    "U-Boot 2024.01 (Jan 08 2024 - 12:00:00 +0000)",
    "",
    f"Model: {MODEL}",
    "DRAM:  2 GiB",
    "MMC:   mmc@fe2c0000: 0",
    "Hit any key to stop autoboot:  0",
    "switch to partitions #0, OK",
    "mmc0 is current device",
    "Loading kernel from mmc 0:1 to 0x02080000 ... 23456789 bytes read in 312 ms (71.7 MiB/s)",
    "## Flattened Device Tree blob at 0a100000",
    "Starting kernel ...",
    "",
    "K Booting Linux on physical CPU 0x0000000000 [0x412fd050]",
    f"K {VERSION}",
    f"K Machine model: {MODEL}",
    "K Memory: 2009172K/2097152K available (14336K kernel code, 2304K rwdata, 4096K rodata)",
    "K smp: Brought up 1 node, 4 CPUs",
    "<flood>",
    "K Serial: 8250/16550 driver, 4 ports, IRQ sharing disabled",
    "K printk: console [ttyS2] enabled",
    "<hang_at_boot>",
    "K mmc0: new HS200 MMC card at address 0001",
    "K mmcblk0: mmc0:0001 8GTF4R 7.28 GiB",
    "K  mmcblk0: p1 p2",
    "<panic>",
    "K EXT4-fs (mmcblk0p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "K VFS: Mounted root (ext4 filesystem) readonly on device 179:2.",
    "K Freeing unused kernel memory: 4096K",
    "K Run /sbin/init as init process",
    "Starting syslogd: OK",
    "Starting klogd: OK",
    "Running sysctl: OK",
    "Starting network: OK",
    "",
    "Welcome to Buildroot",
)
PANIC_LOG = (
    'K VFS: Cannot open root device "mmcblk0p2" or unknown-block(179,2): error -6',
    'K Please append a correct "root=" boot option; here are the available partitions:',
    f"K {PANIC}",
    f"K CPU: 0 PID: 1 Comm: swapper/0 Not tainted {RELEASE} #1",
    "K Hardware name: " + MODEL,
    f"K ---[ end {PANIC} ]---",
)
FLOOD_LINE = "K usb 1-1: device descriptor read/64, error -71 ({number})"


class Mode(enum.Enum):
    """How the board boots at its next power-on."""

    BOOTS = "boots"
    HANG_AT_BOOT = "hang_at_boot"
    PANIC = "panic"
    FLOOD = "flood"


class State(enum.Enum):
    """Where the board is."""

    OFF = "off"
    BOOTING = "booting"
    LOGIN = "login"  # at the login prompt
    SHELL = "shell"  # logged in, at the shell's prompt
    HALTED = "halted"  # powered but silent: hung, panicked or after ``poweroff``
    FLOODING = "flooding"  # printing one line after another


class Outlet(Protocol):
    """What ``attach`` needs of a PDU: ``kerrigan.testing.pdu.GudePdu`` is one."""

    def on_switch(self, index: int, listener: Callable[[bool], None]) -> None: ...

    def is_on(self, index: int) -> bool: ...


class SimulatedBoard:
    """A board whose serial console is a pseudo-terminal: ``start`` it on a running loop, then power it."""

    def __init__(self, *, boot_s: float = 0.5, mode: Mode = Mode.BOOTS, baud: int = 115_200) -> None:
        self.boot_s = boot_s
        self.mode = mode
        self.baud = baud  # paces a flood; the boot log is paced by boot_s
        self.state = State.OFF
        self.boots = 0  # how many times it started booting (power-ons and reboots)
        self.transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_LINES)
        self.lines_printed = 0
        self.dropped_bytes = 0
        self.path = ""
        self.socket_url: str | None = None
        self._master = -1
        self._slave = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._kernel_started = 0.0
        self._typed = bytearray()
        self._last_byte = b""
        self._line = bytearray()  # what has been printed since the last line end, for the transcript
        self._socket: ConsoleSocket | None = None
        self._command_listeners: list[Callable[[str], str | None]] = []

    @property
    def powered(self) -> bool:
        return self.state is not State.OFF

    @property
    def connections(self) -> int:
        """How many are connected to the console's socket (``serve_socket``) now."""
        return self._socket.connections if self._socket is not None else 0

    # -- life ------------------------------------------------------------------------------------

    async def start(self, *, serve_socket: bool = False) -> None:
        """Open the pseudo-terminal (and with ``serve_socket`` a TCP port on loopback); the board is off."""
        self._loop = asyncio.get_running_loop()
        self._master, self._slave = os.openpty()
        # Raw, so that what the board prints is not read back as typed input, nor cooked, before a
        # reader opens the port and sets it as it likes. The slave stays open here so that a reader's
        # close does not hang the terminal up, as a serial port stays when its reader goes.
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self.path = os.ttyname(self._slave)
        self._loop.add_reader(self._master, self._read_console)
        if serve_socket:
            self._socket = ConsoleSocket(self._hear)
            self.socket_url = await self._socket.start()

    async def close(self) -> None:
        """Power off and close the terminal and the port."""
        self.power(False)
        if self._socket is not None:
            await self._socket.close()
            self._socket = None
        if self._loop is not None and self._master >= 0:
            self._loop.remove_reader(self._master)
            os.close(self._master)
            os.close(self._slave)
            self._master = self._slave = -1

    async def __aenter__(self) -> SimulatedBoard:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    # -- power -----------------------------------------------------------------------------------

    def power(self, on: bool) -> None:
        """Switch the board's supply; on while on (or off while off) changes nothing."""
        if on and self.state is State.OFF:
            self._boot()
        elif not on and self.state is not State.OFF:
            self._stop()
            self.state = State.OFF
            self._typed.clear()

    def hang(self) -> None:
        """Hang now, as a kernel that locks up mid-run does: powered, silent and deaf until its supply is
        cycled (a board that is off or already silent is left as it is)."""
        if self.state in (State.BOOTING, State.LOGIN, State.SHELL, State.FLOODING):
            self._stop()
            self.state = State.HALTED
            self._typed.clear()

    def on_command(self, listener: Callable[[str], str | None]) -> None:
        """Call ``listener`` with each line the board's shell is given to run (after a login), before it
        answers: what the jobs on it did, as the board saw it. A listener that returns text answers the
        line with it instead of the shell (a board whose peripheral misbehaves: a flaky board)."""
        self._command_listeners.append(listener)

    def attach(self, pdu: Outlet, index: int) -> None:
        """Power the board from outlet ``index`` of ``pdu``: on when it is on, off when it goes off."""
        pdu.on_switch(index, self.power)
        self.power(pdu.is_on(index))

    def _boot(self) -> None:
        if self._loop is None:
            raise RuntimeError("start the board before powering it")
        self._stop()
        self.state = State.BOOTING
        self.boots += 1
        self._typed.clear()
        self._task = self._loop.create_task(self._run_boot(self.mode, self.boot_s))

    def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run_boot(self, mode: Mode, boot_s: float) -> None:
        loop = asyncio.get_running_loop()
        self._kernel_started = 0.0
        step = boot_s / sum(1 for line in BOOT_LOG if not line.startswith("<"))
        started = loop.time()
        printed = 0
        for line in BOOT_LOG:
            if line.startswith("<"):
                if line == f"<{mode.value}>":
                    break
                continue
            printed += 1
            await asyncio.sleep(max(0.0, started + printed * step - loop.time()))
            if line.startswith("K ") and self._kernel_started == 0.0:
                self._kernel_started = loop.time()
            self._print_line(line)
        else:
            self.state = State.LOGIN
            self._print(f"\r\n{HOSTNAME} login: ")
            return
        if mode is Mode.PANIC:
            for line in PANIC_LOG:
                self._print_line(line)
        elif mode is Mode.FLOOD:
            self.state = State.FLOODING
            await self._flood()
        self.state = State.HALTED

    async def _flood(self) -> None:
        loop = asyncio.get_running_loop()
        started, sent, number = loop.time(), 0, 0
        while True:
            number += 1
            sent += self._print_line(FLOOD_LINE.format(number=number))
            ahead = started + sent * 10 / self.baud - loop.time()  # ten bits a byte on the wire
            if ahead > 0.005 or number % 64 == 0:
                await asyncio.sleep(max(0.0, ahead))

    # -- the console -----------------------------------------------------------------------------

    def _print_line(self, line: str) -> int:
        if line.startswith("K "):
            assert self._loop is not None
            elapsed = self._loop.time() - self._kernel_started
            line = f"[{elapsed:12.6f}] {line[2:]}"
        return self._print(line + "\r\n")

    def _print(self, text: str) -> int:
        data = text.encode()
        self._record(data)
        written = 0
        with contextlib.suppress(BlockingIOError):
            written = os.write(self._master, data)
        self.dropped_bytes += len(data) - written
        if self._socket is not None:
            self._socket.print(data)
        return len(data)

    def _record(self, data: bytes) -> None:
        self._line.extend(data)
        while (end := self._line.find(b"\r\n")) >= 0:
            self.transcript.append(self._line[:end].decode(errors="replace"))
            self.lines_printed += 1
            del self._line[: end + 2]

    def _read_console(self) -> None:
        try:
            data = os.read(self._master, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # no reader has the terminal open: nothing was typed
            return
        self._hear(data)

    def _hear(self, data: bytes) -> None:
        """What was typed at the console: a terminal's echo and line editing, then the line's answer."""
        for value in data:
            byte = bytes((value,))
            if self.state not in (State.LOGIN, State.SHELL):
                return  # off, booting, halted: nobody is reading the UART
            previous, self._last_byte = self._last_byte, byte
            if byte == b"\n" and previous == b"\r":
                continue  # the rest of a CR LF
            if byte in b"\r\n":
                self._print("\r\n")
                line = self._typed.decode(errors="replace")
                self._typed.clear()
                self._answer(line)
            elif byte in (b"\x7f", b"\x08"):
                if self._typed:
                    del self._typed[-1]
                    self._print("\b \b")
            elif byte == b"\x03":
                self._typed.clear()
                self._print("^C\r\n" + self._prompt())
            elif value >= 0x20:
                self._typed.extend(byte)
                self._print(byte.decode(errors="replace"))

    def _prompt(self) -> str:
        return PROMPT if self.state is State.SHELL else f"{HOSTNAME} login: "

    def _answer(self, line: str) -> None:
        if self.state is State.LOGIN:
            if line.strip() == "root":
                self.state = State.SHELL
            elif line.strip():
                self._print("\r\nLogin incorrect\r\n")
            self._print(self._prompt())
            return
        try:
            words = shlex.split(line)
        except ValueError:
            self._print("-sh: syntax error: unterminated quoted string\r\n" + PROMPT)
            return
        if not words:
            self._print(PROMPT)
            return
        answers = [answer for listener in self._command_listeners if (answer := listener(line)) is not None]
        if self.state is not State.SHELL:  # a listener hung it: the command is never answered
            return
        if answers:
            self._print("".join(f"{out}\r\n" for out in answers) + PROMPT)
            return
        command, arguments = words[0], words[1:]
        if command == "reboot":
            self._print("The system is going down NOW!\r\nSent SIGTERM to all processes\r\n")
            self._print("reboot: Restarting system\r\n")
            self._boot()
            return
        if command == "poweroff":
            self._print("The system is going down NOW!\r\nSent SIGTERM to all processes\r\n")
            self._print("reboot: Power down\r\n")
            self.state = State.HALTED  # powered, silent, until its supply is cycled
            return
        if command in ("exit", "logout"):
            self.state = State.LOGIN
            self._print(f"\r\n{HOSTNAME} login: ")
            return
        self._print("".join(f"{out}\r\n" for out in _run(command, arguments)) + PROMPT)


def _run(command: str, arguments: list[str]) -> list[str]:
    """What the board's shell prints for a command that leaves it at its prompt."""
    if command == "echo":
        return [" ".join(arguments)]
    if command == "hostname":
        return [HOSTNAME]
    if command == "uname":
        if arguments == ["-a"]:
            return [f"Linux {HOSTNAME} {RELEASE} #1 SMP PREEMPT Debian 6.1.0-1 aarch64 GNU/Linux"]
        if arguments == ["-r"]:
            return [RELEASE]
        return ["Linux"]
    if command == "cat":
        return [
            VERSION if path == "/proc/version" else f"cat: {path}: No such file or directory"
            for path in arguments
        ]
    return [f"-sh: {command}: not found"]
