"""Switching a board's power, as its wiring says: a network PDU's outlet through labgrid's power backend,
a USB hub port through uhubctl, or the operator's own commands.

Every call is bounded by the wiring's ``timeout_s`` and runs off the event loop; one that fails or takes
longer raises :class:`PowerFailed` with a one-line reason. labgrid was chosen for PDUs because it already
speaks some forty models (``labgrid.driver.power.<model>``: ``power_set`` / ``power_get``), and uhubctl
because it is what every distribution packages for per-port USB power. A PDU's address may hold its user
and password: no reason, log line or error names more than its masked form
(:attr:`~kerrigan.runner.devices_file.wiring.PduPower.shown_host`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import re
import shlex
import signal
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Final, Protocol, TypeVar
from urllib.parse import urlsplit

from kerrigan.runner.boards.threads import in_own_thread
from kerrigan.runner.devices_file.wiring import CommandPower, PduPower, PowerWiring, UsbPower

T = TypeVar("T")

SHOWN_OUTPUT: Final = 200  # characters of a failed command's last line kept in the reason


class PowerFailed(Exception):  # noqa: N818 -- the board's fault, named as the job's end reason says it
    """A power call failed or did not finish within ``timeout_s``: one line saying which and why (for the
    agent's log), and :attr:`shown`, the same for a job's output, which names a command by its program
    alone: its arguments and its output may hold a credential the devices file wrote (``snmpset -c
    private``, ``curl -u admin:secret``), and a job's output reaches its check run and pages."""

    def __init__(self, reason: str, shown: str | None = None) -> None:
        super().__init__(reason)
        self.shown = reason if shown is None else shown


class PowerDriver(Protocol):
    """What switches one board: ``status`` is True (on), False (off) or None (not known)."""

    async def on(self) -> None: ...

    async def off(self) -> None: ...

    async def cycle(self, off_s: float) -> None: ...

    async def status(self) -> bool | None: ...


class _Switch:
    """A switch of either state, with a cycle made of its own ``off``, a wait and ``on``."""

    async def set(self, on: bool) -> None:
        raise NotImplementedError

    async def on(self) -> None:
        await self.set(True)

    async def off(self) -> None:
        await self.set(False)

    async def cycle(self, off_s: float) -> None:
        await self.off()
        await asyncio.sleep(off_s)
        await self.on()


# -- a network PDU, through labgrid --------------------------------------------------------------------


class PduSwitch(_Switch):
    """An outlet of a network PDU, through labgrid's backend of its model.

    labgrid's backends are synchronous and some call ``requests`` without a timeout, so a PDU that never
    answers would hold its caller for ever: each call runs in a thread of its own (a daemon: one left
    hanging never holds up the agent's other work, nor its exit) and is given up after ``timeout_s``.
    """

    def __init__(self, pdu: PduPower, timeout_s: float) -> None:
        self.pdu = pdu
        self.timeout_s = timeout_s
        # Set when the last call given up is answered at last: until then no other call is made, so that
        # a job asking again and again of a PDU that never answers leaves one thread behind, not one a call.
        self._unanswered: threading.Event | None = None

    async def set(self, on: bool) -> None:
        word = "on" if on else "off"
        await self._call(f"switching it {word}", lambda backend: self._set(backend, on))

    async def status(self) -> bool | None:
        found = await self._call("reading its state", self._get)
        if not isinstance(found, bool):
            raise PowerFailed(f"{self._named}: reading its state: the PDU answered {found!r}, not on or off")
        return found

    @property
    def _named(self) -> str:
        return f"PDU {self.pdu.model} at {self.pdu.shown_host} outlet {self.pdu.index}"

    def _set(self, backend: ModuleType, on: bool) -> None:
        host, port = backend_address(self.pdu.host, getattr(backend, "PORT", None))
        backend.power_set(host, port, self.pdu.index, on)

    def _get(self, backend: ModuleType) -> object:
        host, port = backend_address(self.pdu.host, getattr(backend, "PORT", None))
        return backend.power_get(host, port, self.pdu.index)

    async def _call(self, doing: str, work: Callable[[ModuleType], T]) -> T:
        if self._unanswered is not None and not self._unanswered.is_set():
            raise PowerFailed(f"{self._named}: {doing}: an earlier call still waits for the PDU's answer")
        answered = threading.Event()

        def call() -> T:
            try:
                # The model was checked at start to be a plain name labgrid has a backend of: never a path.
                backend = importlib.import_module(f"labgrid.driver.power.{self.pdu.model}")
                return work(backend)
            finally:
                answered.set()

        try:
            return await asyncio.wait_for(in_own_thread(call), self.timeout_s)
        except TimeoutError:
            self._unanswered = answered
            raise PowerFailed(f"{self._named}: {doing}: no answer within {self.timeout_s:g} s") from None
        except Exception as err:  # whatever the backend raises: requests' errors, labgrid's, an assert
            raise PowerFailed(f"{self._named}: {doing}: {self._masked(err)}") from None

    def _masked(self, err: Exception) -> str:
        text = " ".join(str(err).split()) or type(err).__name__
        # requests names the URL it called, and with it the user and password written in the host.
        for secret in _userinfo(self.pdu.host):
            text = text.replace(secret, "***")
        return text[:SHOWN_OUTPUT]


def backend_address(host: str, default_port: int | None) -> tuple[str, int | None]:
    """The ``host`` and ``port`` labgrid's backend is called with, as labgrid's ``NetworkPowerDriver``
    makes them, without its proxies: a backend with a ``PORT`` (gude, netio, ...) gets the host name (with
    the user and password written before it, which ``requests`` sends) and the port written after it or
    its ``PORT``; any other takes the host as written (a URL: rest, simplerest, shelly)."""
    if default_port is None:
        return host, None
    parts = urlsplit(host if "//" in host else f"//{host}")
    name = parts.hostname or host
    if ":" in name:  # an IPv6 address
        name = f"[{name}]"
    if "@" in parts.netloc:
        name = parts.netloc.rpartition("@")[0] + "@" + name
    return name, parts.port or default_port


def _userinfo(host: str) -> list[str]:
    """What of ``host`` is a user and password (each, and both together), longest first."""
    netloc = urlsplit(host if "//" in host else f"//{host}").netloc
    if "@" not in netloc:
        return []
    userinfo = netloc.rpartition("@")[0]
    return sorted({userinfo, *(part for part in userinfo.split(":") if part)}, key=len, reverse=True)


# -- commands: uhubctl, or the operator's ------------------------------------------------------------


async def run_bounded(argv: tuple[str, ...], timeout_s: float) -> tuple[int, str]:
    """Run ``argv`` (no shell) in its own process group with nothing of the agent's settings in its
    environment; its exit status and output. Killed with its group when ``timeout_s`` runs out:
    :class:`PowerFailed`."""
    shown, program = shlex.join(argv), _program(argv)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except OSError as err:
        unstarted = f"{shown} could not be started: {err.strerror or err}"
        raise PowerFailed(unstarted, f"{program} could not be started") from None
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        late = f"did not finish within {timeout_s:g} s; killed"
        raise PowerFailed(f"{shown} {late}", f"{program} {late}") from None
    finally:
        if process.returncode is None:  # timed out, or the job was stopped meanwhile
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


def _failed(argv: tuple[str, ...], status: int, output: str) -> PowerFailed:
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    said = f": {last[:SHOWN_OUTPUT]}" if last else ""
    how = f"was killed by signal {-status}" if status < 0 else f"exited {status}"
    return PowerFailed(f"{shlex.join(argv)} {how}{said}", f"{_program(argv)} {how}")


def _program(argv: tuple[str, ...]) -> str:
    """A command as a job's output names it: its program, without its arguments."""
    return f"the power command {shlex.quote(argv[0])}"


class CommandSwitch(_Switch):
    """The operator's commands: ``on`` and ``off`` must exit 0; ``status`` exits 0 when the board is on
    (without one the state is not known)."""

    def __init__(self, commands: CommandPower, timeout_s: float) -> None:
        self.commands = commands
        self.timeout_s = timeout_s

    async def set(self, on: bool) -> None:
        argv = self.commands.on if on else self.commands.off
        status, output = await run_bounded(argv, self.timeout_s)
        if status != 0:
            raise _failed(argv, status, output)

    async def status(self) -> bool | None:
        if self.commands.status is None:
            return None
        status, _ = await run_bounded(self.commands.status, self.timeout_s)
        if status < 0:
            raise _failed(self.commands.status, status, "")
        return status == 0


# uhubctl's line of a port: "  Port 2: 0503 power highspeed enable connect [...]", "  Port 2: 0000 off".
_UHUBCTL_STATE: Final = re.compile(r"^\s*Port (\d+): [0-9a-f]{4} (power|off)\b")


class UsbSwitch(_Switch):
    """A port of a USB hub with per-port power switching, through uhubctl."""

    def __init__(self, usb: UsbPower, timeout_s: float, program: str = "uhubctl") -> None:
        self.usb = usb
        self.timeout_s = timeout_s
        self.program = program  # a test's stand-in for uhubctl

    def _argv(self, *action: str) -> tuple[str, ...]:
        return (self.program, "-l", self.usb.hub, "-p", str(self.usb.port), *action)

    async def set(self, on: bool) -> None:
        argv = self._argv("-a", "on" if on else "off")
        status, output = await run_bounded(argv, self.timeout_s)
        if status != 0:
            raise _failed(argv, status, output)

    async def status(self) -> bool:
        argv = self._argv()
        status, output = await run_bounded(argv, self.timeout_s)
        if status != 0:
            raise _failed(argv, status, output)
        states = [found for line in output.splitlines() if (found := _UHUBCTL_STATE.match(line))]
        # uhubctl prints the port as it was and, after an action, as it is: the last line says.
        mine = [found.group(2) for found in states if int(found.group(1)) == self.usb.port]
        if not mine:
            raise PowerFailed(f"{shlex.join(argv)} did not show port {self.usb.port} of hub {self.usb.hub}")
        return mine[-1] == "power"


def power_driver(wiring: PowerWiring) -> PowerDriver:
    """The driver of a board's power as its wiring says."""
    switch = wiring.switch
    if isinstance(switch, PduPower):
        return PduSwitch(switch, wiring.timeout_s)
    if isinstance(switch, UsbPower):
        return UsbSwitch(switch, wiring.timeout_s)
    return CommandSwitch(switch, wiring.timeout_s)
