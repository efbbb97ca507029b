"""A board's console, read all the while a job holds the board: a serial port or a URL through pyserial
(``serial.serial_for_url``: a tty path, ``rfc2217://``, ``socket://``), or a command whose stdin and stdout
are the console.

Bytes are read in large blocks off the event loop (a tty by the one thread that reads every tty of the
agent, :mod:`~kerrigan.runner.boards.tty_readers`, which lets its bytes gather for a moment and takes them
all; a URL's by a daemon thread of its own through pyserial's timed read; a command's stdout by the loop's
own non-blocking pipe), so that one agent keeps up with many boards and a flooding one. Each block is
handed as it came to a sink (the agent sends it to the server as the job's console log), then split into
lines with the time they arrived; the last lines are kept (a ring, as bytes, decoded when asked for) for a
failed boot's report, and listeners (the boot wait) hear every line. A console that goes away while open
(the port unplugged, the connection closed, the command ended) is noticed: :attr:`Console.lost` says why
and :class:`ConsoleLost` is raised to whoever waits on it.

pyserial was chosen because its URL handlers already speak RFC 2217 (ser2net, terminal servers) and raw
TCP (QEMU's ``-serial tcp:``); labgrid's ``kerrigan[labgrid]`` extra brings it (as ``pyserial-labgrid``,
which installs the same ``serial`` module: the two must not be installed side by side). A host whose
devices file names a serial or URL console without it is refused at start
(:func:`console_support_problem`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib.util
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kerrigan.runner.boards.threads import in_own_thread
from kerrigan.runner.boards.tty_readers import READ_BLOCK, TtyReader, tty_readers
from kerrigan.runner.devices_file.reading import DevicesFile
from kerrigan.runner.devices_file.wiring import (
    DEFAULT_BAUD,
    CommandConsole,
    ConsoleWiring,
    SerialConsole,
    UrlConsole,
)

log = logging.getLogger(__name__)

# A URL's read returns what came within this, so lines reach listeners promptly; a tty's bytes gather for
# at most this long before one read takes them all (a read per line the board writes is what costs).
READ_WAIT_S: Final = 0.05
INTERACTIVE_GATHER_S: Final = 0.002  # a person's console: an echo is read within this of its arrival
OPEN_TIMEOUT_S: Final = 10.0  # a console that does not open within this (a terminal server away) is lost
KEEP_LINES: Final = 200
LONGEST_LINE: Final = 16 * 1024  # a line that never ends (a flood with no line ends) is cut here
CLOSE_WAIT_S: Final = 2.0

Sink = Callable[[float, bytes], None]
Tap = Callable[[bytes], None]  # a console's bytes as they came (the job's terminal on it)
LineListener = Callable[[str, bool], None]  # a line's text; False while it is the unfinished last one


class ConsoleLost(Exception):  # noqa: N818 -- the board's fault, named as the job's end reason says it
    """The console could not be opened, or went away while open: one line saying why."""


@dataclass(frozen=True, slots=True)
class ConsoleLine:
    """One line the console printed (its line end and any carriage return taken off), and when its last
    bytes arrived (seconds since the epoch)."""

    at: float
    text: str


def console_support_problem(file: DevicesFile | None) -> str | None:
    """Why this host cannot read the consoles ``file`` names (None when it can): serial and URL consoles
    need pyserial's ``serial`` module."""
    if file is None or importlib.util.find_spec("serial") is not None:
        return None
    for device_id, entry in file.devices.items():
        console = entry.wiring.console
        if isinstance(console, SerialConsole | UrlConsole):
            kind = "serial" if isinstance(console, SerialConsole) else "url"
            return (
                f"devices file {file.path}: devices.{device_id}.console.{kind} is read with pyserial, which "
                "is not installed: pip install 'kerrigan[labgrid]' on this host"
            )
    return None


class Console:
    """One board's console: :meth:`open` it, then it reads until :meth:`close` or until it goes away."""

    def __init__(
        self,
        wiring: ConsoleWiring,
        *,
        sink: Sink | None = None,
        keep_lines: int = KEEP_LINES,
        gather_s: float = READ_WAIT_S,
    ) -> None:
        self.wiring = wiring
        # How long a tty's bytes may gather before a read: a person typing at it wants each echo at once
        # (INTERACTIVE_GATHER_S), a job's log wants few large reads.
        self._gather_s = gather_s
        self.sink = sink
        # The last lines as they came (arrival time, bytes): decoded only when asked for, since a board
        # printing thousands of lines a second is asked for its last few once.
        self._kept: collections.deque[tuple[float, bytes]] = collections.deque(maxlen=keep_lines)
        self.bytes_read = 0
        self.lines_read = 0
        self.lost: str | None = None  # why it went away, once it has
        self.gone = asyncio.Event()  # set when it went away (not when it was closed)
        self._keep = keep_lines
        self._partial = bytearray()
        self._partial_at = 0.0
        self._listeners: list[LineListener] = []
        self._taps: list[Tap] = []
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port: Any = None  # a pyserial port
        self._thread: threading.Thread | None = None  # a URL's reader
        self._tty: TtyReader | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def lines(self) -> list[ConsoleLine]:
        """The last lines kept, oldest first (the unfinished one not among them)."""
        return [ConsoleLine(at, _text(raw)) for at, raw in self._kept]

    @property
    def named(self) -> str:
        """The console as its wiring names it (a port's path, a URL, a command), for a reason's words."""
        wiring = self.wiring
        if isinstance(wiring, SerialConsole):
            return wiring.port
        if isinstance(wiring, UrlConsole):
            return wiring.url
        return " ".join(wiring.argv)

    # -- opening and closing -----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the console and start reading it; :class:`ConsoleLost` when it cannot be opened."""
        self._loop = asyncio.get_running_loop()
        if isinstance(self.wiring, CommandConsole):
            await self._start_command(self.wiring)
        else:
            self._port = await self._open_port()
            fd = getattr(self._port, "fd", None)  # a tty opened by pyserial's POSIX port, non-blocking
            if isinstance(fd, int):
                baud = self.wiring.baud if isinstance(self.wiring, SerialConsole) else DEFAULT_BAUD
                self._tty = TtyReader(fd, self._gather_s, baud, self._loop, self._arrived, self._went_away)
                tty_readers().add(self._tty)
            else:
                self._thread = threading.Thread(
                    target=self._read_url, args=(self._port,), name="kerrigan-console", daemon=True
                )
                self._thread.start()

    async def _open_port(self) -> Any:
        import serial  # type: ignore[import-untyped]  # noqa: PLC0415 -- optional: checked for at start

        wiring = self.wiring
        target = wiring.port if isinstance(wiring, SerialConsole) else wiring.url  # type: ignore[union-attr]
        baud = wiring.baud if isinstance(wiring, SerialConsole) else DEFAULT_BAUD
        abandoned = threading.Event()

        def open_port() -> Any:
            port = serial.serial_for_url(target, baudrate=baud, timeout=READ_WAIT_S)
            if abandoned.is_set():  # opened after its wait was given up: nobody will read it
                port.close()
            return port

        try:
            return await asyncio.wait_for(in_own_thread(open_port, "kerrigan-console"), OPEN_TIMEOUT_S)
        except TimeoutError:
            abandoned.set()
            raise ConsoleLost(f"console {self.named} did not open within {OPEN_TIMEOUT_S:g} s") from None
        except (OSError, ValueError, serial.SerialException) as err:
            raise ConsoleLost(f"console {self.named} could not be opened: {_said(err)}") from None

    async def _start_command(self, wiring: CommandConsole) -> None:
        env = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
        try:
            self._process = await asyncio.create_subprocess_exec(
                *wiring.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as err:
            raise ConsoleLost(f"console {self.named} could not be started: {err.strerror or err}") from None
        self._reader = asyncio.create_task(self._read_command(self._process), name="kerrigan-console")

    async def close(self) -> None:
        """Stop reading and close the console (a command's is killed with its process group)."""
        self._closing = True
        port, self._port = self._port, None
        if port is not None:
            if self._tty is not None:
                await tty_readers().remove(self._tty)
            with contextlib.suppress(Exception):
                port.cancel_read()  # wakes a read waiting at once (not every handler has it)
            if self._thread is not None:
                await asyncio.to_thread(self._thread.join, CLOSE_WAIT_S)
            with contextlib.suppress(Exception):
                port.close()
        process, self._process = self._process, None
        if process is not None:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        self._end_partial()

    # -- reading -------------------------------------------------------------------------------------

    def _read_url(self, port: Any) -> None:
        """A URL's reading thread: pyserial's timed reads, each block handed to the loop as it came."""
        loop = self._loop
        assert loop is not None
        try:
            while not self._closing:
                if data := port.read(READ_BLOCK):
                    loop.call_soon_threadsafe(self._arrived, time.time(), bytes(data))
        except Exception as err:
            if not self._closing:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._went_away, _said(err))

    async def _read_command(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while data := await process.stdout.read(READ_BLOCK):
            self._arrived(time.time(), data)
        if not self._closing:
            status = await process.wait()
            self._went_away(f"its command ended (exit status {status})")

    def _went_away(self, why: str) -> None:
        if self._closing or self.lost is not None:
            return
        self.lost = f"console {self.named} went away: {why}"
        log.warning("%s", self.lost)
        self._end_partial()
        self.gone.set()

    def _arrived(self, at: float, data: bytes) -> None:
        if self._closing and self._port is None and self._process is None:
            return  # closed: what the thread read last is not wanted
        self.bytes_read += len(data)
        if self.sink is not None:
            self.sink(at, data)
        for tap in list(self._taps):
            tap(data)
        partial = self._partial
        # Split and kept by C code: Python touches each line only for a listener (the boot wait).
        *complete, rest = data.split(b"\n")
        if complete:
            if partial:
                complete[0] = bytes(partial + complete[0])
                partial.clear()
            self._kept.extend(zip(itertools.repeat(at), complete[-self._keep :], strict=False))
            self.lines_read += len(complete)
            for raw in complete if self._listeners else ():
                text = _text(raw)
                for listener in list(self._listeners):
                    listener(text, True)
        if rest:
            partial += rest
            self._partial_at = at
            if len(partial) >= LONGEST_LINE:
                self._line(at, bytes(partial))
                partial.clear()
            elif self._listeners:
                text = _text(partial)
                for listener in list(self._listeners):
                    listener(text, False)

    def _line(self, at: float, raw: bytes) -> None:
        text = _text(raw)
        self._kept.append((at, raw))
        self.lines_read += 1
        for listener in list(self._listeners):
            listener(text, True)

    def _end_partial(self) -> None:
        if self._partial:
            self._line(self._partial_at, bytes(self._partial))
            self._partial.clear()

    # -- what others see and do ------------------------------------------------------------------------

    def listen(self, listener: LineListener) -> Callable[[], None]:
        """Call ``listener(text, True)`` for every line from now on, and ``listener(text, False)`` with the
        unfinished last line each time it grows (a login prompt has no line end); what stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return stop

    def tap(self, tap: Tap) -> Callable[[], None]:
        """Call ``tap(data)`` with every block of bytes from now on, as it came; what stops it."""
        self._taps.append(tap)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._taps.remove(tap)

        return stop

    def last_lines(self, count: int = 20) -> list[str]:
        """The last ``count`` lines, the unfinished one last."""
        found = [_text(raw) for _, raw in list(self._kept)[-count:]]
        if self._partial:
            found.append(_text(self._partial))
        return found[-count:]

    async def write(self, data: bytes) -> None:
        """Type ``data`` at the console; :class:`ConsoleLost` when it is gone."""
        if self.lost is not None:
            raise ConsoleLost(self.lost)
        if self._process is not None and self._process.stdin is not None:
            try:
                self._process.stdin.write(data)
                await self._process.stdin.drain()
            except (ConnectionError, OSError) as err:
                raise ConsoleLost(f"console {self.named} cannot be written: {_said(err)}") from None
            return
        port = self._port
        if port is None:
            raise ConsoleLost(f"console {self.named} is not open")
        try:
            # A thread of its own, never the loop's shared executor: a write waits for the console to take
            # it (a slow baud rate, a terminal server that stopped reading), maybe for ever.
            await in_own_thread(lambda: port.write(data), "kerrigan-console")
        except Exception as err:
            raise ConsoleLost(f"console {self.named} cannot be written: {_said(err)}") from None


def _text(raw: bytes | bytearray) -> str:
    """A console line as text: its carriage returns (of CR LF, or a line redrawn) taken off its ends."""
    return bytes(raw).strip(b"\r").decode("utf-8", "replace")


def _said(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__
