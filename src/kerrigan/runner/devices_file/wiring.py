"""How the agent reaches a device's board, as the devices file says: its power switch (``power``), its
console (``console``), how its boot is told apart from a failed one (``boot``) and what becomes of it after
a job (``after_job``).

Pure data, read and checked by :mod:`~kerrigan.runner.devices_file.wiring_reading`. None of it is ever a
job's: a PDU's host may carry its credentials (``http://admin:secret@pdu-3.lab``), and a job drives its
board only through the agent.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

DEFAULT_OFF_S: Final = 3
DEFAULT_POWER_TIMEOUT_S: Final = 20
DEFAULT_BOOT_TIMEOUT_S: Final = 120
DEFAULT_BAUD: Final = 115_200


@dataclass(frozen=True, slots=True)
class PduPower:
    """An outlet of a network PDU, switched through labgrid's power backend ``model``
    (``labgrid.driver.power.<model>``'s ``power_set`` / ``power_get``), as labgrid's ``NetworkPowerPort``."""

    model: str
    # A bare host name or a URL, as the backend takes it; it may hold a user and password, so never in a repr.
    host: str = field(repr=False)
    index: int

    @property
    def shown_host(self) -> str:
        """``host`` fit for a log line: a user and password in it are ``***``."""
        if "//" not in self.host:  # a bare host (admin:secret@pdu-3.lab): no URL to take apart
            _, at, rest = self.host.rpartition("@")
            return f"***@{rest}" if at else self.host
        parts = urlsplit(self.host)
        if "@" not in parts.netloc:
            return self.host
        return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


@dataclass(frozen=True, slots=True)
class UsbPower:
    """A port of a USB hub with per-port power switching, switched through uhubctl
    (``uhubctl -l HUB -p PORT -a on|off``)."""

    hub: str  # uhubctl's location: the bus, then the ports on the way to the hub (1-1.4)
    port: int


@dataclass(frozen=True, slots=True)
class CommandPower:
    """Commands the operator provides (argv lists, run without a shell): ``status`` exits 0 when the board
    is on; without it the board's power state is not known."""

    on: tuple[str, ...]
    off: tuple[str, ...]
    status: tuple[str, ...] | None = None


PowerSwitch = PduPower | UsbPower | CommandPower


@dataclass(frozen=True, slots=True)
class PowerWiring:
    """The board's power: what switches it, how long a cycle keeps it off, and how long a power call may
    take before it has failed."""

    switch: PowerSwitch
    off_s: int = DEFAULT_OFF_S
    timeout_s: int = DEFAULT_POWER_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class SerialConsole:
    """A serial port of this host (``/dev/serial/by-id/...``) at ``baud``, 8N1."""

    port: str
    baud: int = DEFAULT_BAUD


@dataclass(frozen=True, slots=True)
class UrlConsole:
    """A console pyserial opens by URL: ``rfc2217://HOST:PORT`` (ser2net, a terminal server),
    ``socket://HOST:PORT`` (a raw TCP port: QEMU's ``-serial tcp:``), ``loop://`` (a loopback, for tests)."""

    url: str


@dataclass(frozen=True, slots=True)
class CommandConsole:
    """A command (argv, run without a shell) whose stdin and stdout are the console."""

    argv: tuple[str, ...]


ConsoleWiring = SerialConsole | UrlConsole | CommandConsole


@dataclass(frozen=True, slots=True)
class BootWiring:
    """What the console says when the board has booted (``ready``) or failed to (any of ``fail``), each a
    regular expression searched for in every console line, and how long a boot may take."""

    ready: re.Pattern[str]
    fail: tuple[re.Pattern[str], ...] = ()
    timeout_s: int = DEFAULT_BOOT_TIMEOUT_S


class AfterJob(enum.StrEnum):
    """What the agent does with the board when a job on it ends."""

    OFF = "off"  # power it off (the default for a device with power)
    KEEP = "keep"  # leave it as the job left it


@dataclass(frozen=True, slots=True)
class Wiring:
    """A device's wiring: each part None where the file does not give it (nothing to drive)."""

    power: PowerWiring | None = None
    console: ConsoleWiring | None = None
    boot: BootWiring | None = None
    after_job: AfterJob = AfterJob.KEEP


NO_WIRING: Final = Wiring()
