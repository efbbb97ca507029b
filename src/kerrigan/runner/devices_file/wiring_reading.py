"""Reading a device's wiring from its devices file entry (``power``, ``console``, ``boot``, ``after_job``):
each mistake recorded with its line and field, and what the host must have (a console's serial port,
labgrid's backend of a PDU's model, uhubctl) looked for, so bad wiring stops the agent at start."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

import yaml

from kerrigan.core.quoting import quote
from kerrigan.core.yamlsource import SourceReader, join_field
from kerrigan.runner.devices_file.argv import read_argv
from kerrigan.runner.devices_file.host_view import HostView
from kerrigan.runner.devices_file.wiring import (
    DEFAULT_BAUD,
    DEFAULT_BOOT_TIMEOUT_S,
    DEFAULT_OFF_S,
    DEFAULT_POWER_TIMEOUT_S,
    AfterJob,
    BootWiring,
    CommandConsole,
    CommandPower,
    ConsoleWiring,
    PduPower,
    PowerSwitch,
    PowerWiring,
    SerialConsole,
    UrlConsole,
    UsbPower,
    Wiring,
)

WIRING_KEYS: Final = ("power", "console", "boot", "after_job")
POWER_KINDS: Final = ("pdu", "usb", "command")
CONSOLE_KINDS: Final = ("serial", "url", "command")

# Bounds, in whole seconds. A board off for more than 5 minutes, or a power call still going after 5, is a
# mistake of the file; a boot may take up to an hour (a board that flashes itself from the network first).
MAX_OFF_S: Final = 300
MAX_POWER_TIMEOUT_S: Final = 300
MAX_BOOT_TIMEOUT_S: Final = 3600
MAX_PDU_INDEX: Final = 999  # an outlet's number (0 for a PDU of one outlet: a Shelly plug)
MAX_USB_PORT: Final = 255  # a USB hub has at most 255 downstream ports
# pyserial's own list (serial.SerialBase.BAUDRATES, 50 to 4,000,000): any other rate is a typo.
STANDARD_BAUDS: Final = (
    *(50, 75, 110, 134, 150, 200, 300, 600, 1200, 1800, 2400, 4800, 9600, 19200, 38400, 57600, 115200),
    *(230400, 460800, 500000, 576000, 921600, 1000000, 1152000, 1500000, 2000000, 2500000, 3000000),
    *(3500000, 4000000),
)
# What pyserial's serial_for_url opens that a console can be: not hwgrep:// (a search of this host's ports:
# name the port) nor spy:// or alt:// (wrappers around another).
URL_SCHEMES: Final = ("rfc2217", "socket", "loop")
PATH_SHOWN: Final = 200  # characters of a port's path quoted whole: /dev/serial/by-id/ names are long
_MODEL: Final = re.compile(r"[a-z][a-z0-9_]*")
_USB_HUB: Final = re.compile(r"[0-9]+(-[0-9]+(\.[0-9]+)*)?")
_CONTROL: Final = re.compile(r"[\x00-\x20\x7f]")


def read_wiring(
    r: SourceReader,
    entries: Mapping[str, tuple[yaml.Node, yaml.Node]],
    where: str,
    there: str | None,
    host: HostView,
) -> Wiring:
    """The wiring in a device's ``entries`` (the keys of :data:`WIRING_KEYS`). ``there`` says why the
    device is there now (its ``present_if`` path exists, or it has none), None when it is not or cannot be
    known at start (a command, not run here). A mistake is recorded and its part left out."""
    power = None
    if "power" in entries:
        power = _power(r, entries["power"][1], join_field(where, "power"), host)
    console = None
    if "console" in entries:
        console = _console(r, entries["console"][1], join_field(where, "console"), there, host)
    boot = None
    if "boot" in entries:
        boot_field = join_field(where, "boot")
        boot = _boot(r, entries["boot"][1], boot_field)
        if "console" not in entries:
            r.error(entries["boot"][0], boot_field, "needs a console: its expressions are on console lines")
    after_job = AfterJob.OFF if "power" in entries else AfterJob.KEEP
    if "after_job" in entries:
        after_field = join_field(where, "after_job")
        node = entries["after_job"][1]
        chosen = r.choice(node, after_field, [choice.value for choice in AfterJob])
        if chosen is not None:
            after_job = AfterJob(chosen)
            if after_job is AfterJob.OFF and "power" not in entries:
                r.error(node, after_field, "off needs power: this device has nothing to switch it off")
    return Wiring(power, console, boot, after_job)


def _one_kind(
    r: SourceReader,
    entries: Mapping[str, tuple[yaml.Node, yaml.Node]],
    node: yaml.Node,
    where: str,
    kinds: tuple[str, ...],
) -> str | None:
    """Which one of ``kinds`` the mapping sets (None, recorded, for none or several)."""
    given = [kind for kind in kinds if kind in entries]
    if len(given) == 1:
        return given[0]
    choices = ", ".join(kinds)
    if not given:
        if isinstance(node, yaml.MappingNode) and len(node.value) > len(entries):
            return None  # a key not known (a misspelt kind): that is the mistake, already recorded
        r.error(node, where, f"needs exactly one of {choices}")
    else:
        second = entries[given[1]][0]
        r.error(second, where, f"takes exactly one of {choices}, not both {given[0]} and {given[1]}")
    return None


# -- power -----------------------------------------------------------------------------------------------


def _power(r: SourceReader, node: yaml.Node, where: str, host: HostView) -> PowerWiring | None:
    entries = r.mapping(node, where, (*POWER_KINDS, "off_s", "timeout_s"))
    if entries is None:
        return None
    kind = _one_kind(r, entries, node, where, POWER_KINDS)
    off_s = DEFAULT_OFF_S
    if "off_s" in entries:
        off_s = r.integer(entries["off_s"][1], join_field(where, "off_s"), minimum=1, maximum=MAX_OFF_S) or 0
    timeout_s = DEFAULT_POWER_TIMEOUT_S
    if "timeout_s" in entries:
        timeout_field = join_field(where, "timeout_s")
        found = r.integer(entries["timeout_s"][1], timeout_field, minimum=1, maximum=MAX_POWER_TIMEOUT_S)
        timeout_s = found or 0
    if kind is None:
        return None
    kind_field = join_field(where, kind)
    switch: PowerSwitch | None
    if kind == "pdu":
        switch = _pdu(r, entries[kind][1], kind_field, host)
    elif kind == "usb":
        switch = _usb(r, entries[kind][1], kind_field, host)
    else:
        switch = _power_commands(r, entries[kind][1], kind_field)
    if switch is None or not off_s or not timeout_s:
        return None
    return PowerWiring(switch, off_s, timeout_s)


def _pdu(r: SourceReader, node: yaml.Node, where: str, host: HostView) -> PduPower | None:
    entries = r.mapping(node, where, ("model", "host", "index"))
    if entries is None:
        return None
    missing = [key for key in ("model", "host", "index") if key not in entries]
    if missing:
        r.error(node, join_field(where, missing[0]), "is required: a PDU is {model: M, host: H, index: N}")
        return None
    model_field = join_field(where, "model")
    model_node = entries["model"][1]
    model = r.string(model_node, model_field)
    if model is not None and _MODEL.fullmatch(model) is None:
        r.error(
            model_node, model_field, f"{quote(model)} is not the name of a labgrid power model (gude, ...)"
        )
        model = None
    if model is not None:
        found = host.power_backend(model)
        if found is None:
            r.error(
                model_node,
                model_field,
                "a PDU is switched through labgrid, which is not installed: "
                "pip install 'kerrigan[labgrid]' on this host",
            )
            model = None
        elif not found:
            r.error(
                model_node,
                model_field,
                f"labgrid has no power backend {quote(model)} (labgrid.driver.power.{model}); "
                "see labgrid's NetworkPowerPort for the models",
            )
            model = None
    host_field = join_field(where, "host")
    address = r.string(entries["host"][1], host_field)
    # What was written is never quoted: a host may hold the PDU's user and password.
    if address is not None and _CONTROL.search(address):
        r.error(entries["host"][1], host_field, "must not hold spaces or control characters")
        address = None
    index = r.integer(entries["index"][1], join_field(where, "index"), minimum=0, maximum=MAX_PDU_INDEX)
    if model is None or address is None or index is None:
        return None
    return PduPower(model, address, index)


def _usb(r: SourceReader, node: yaml.Node, where: str, host: HostView) -> UsbPower | None:
    entries = r.mapping(node, where, ("hub", "port"))
    if entries is None:
        return None
    missing = [key for key in ("hub", "port") if key not in entries]
    if missing:
        r.error(node, join_field(where, missing[0]), 'is required: a USB hub port is {hub: "1-1.4", port: N}')
        return None
    hub_field = join_field(where, "hub")
    hub = r.string(entries["hub"][1], hub_field)
    if hub is not None and _USB_HUB.fullmatch(hub) is None:
        r.error(
            entries["hub"][1],
            hub_field,
            f"{quote(hub)} is not a USB hub's location as uhubctl names it (the bus, then the ports: 1-1.4)",
        )
        hub = None
    port = r.integer(entries["port"][1], join_field(where, "port"), minimum=1, maximum=MAX_USB_PORT)
    if hub is None or port is None:
        return None
    if not host.has_program("uhubctl"):
        r.error(node, where, "a USB hub port is switched with uhubctl, which is not on this host's PATH")
        return None
    return UsbPower(hub, port)


def _power_commands(r: SourceReader, node: yaml.Node, where: str) -> CommandPower | None:
    entries = r.mapping(node, where, ("on", "off", "status"))
    if entries is None:
        return None
    missing = [key for key in ("on", "off") if key not in entries]
    if missing:
        r.error(node, join_field(where, missing[0]), "is required: the commands are {on: [...], off: [...]}")
        return None
    found = {key: read_argv(r, value, join_field(where, key)) for key, (_, value) in entries.items()}
    on, off = found["on"], found["off"]
    if on is None or off is None or ("status" in found and found["status"] is None):
        return None
    return CommandPower(on, off, found.get("status"))


# -- console ---------------------------------------------------------------------------------------------


def _console(
    r: SourceReader, node: yaml.Node, where: str, there: str | None, host: HostView
) -> ConsoleWiring | None:
    entries = r.mapping(node, where, CONSOLE_KINDS)
    if entries is None:
        return None
    kind = _one_kind(r, entries, node, where, CONSOLE_KINDS)
    if kind is None:
        return None
    kind_field = join_field(where, kind)
    if kind == "serial":
        return _serial(r, entries[kind][1], kind_field, there, host)
    if kind == "url":
        return _url(r, entries[kind][1], kind_field)
    argv = read_argv(r, entries[kind][1], kind_field)
    return CommandConsole(argv) if argv is not None else None


def _serial(
    r: SourceReader, node: yaml.Node, where: str, there: str | None, host: HostView
) -> SerialConsole | None:
    entries = r.mapping(node, where, ("port", "baud"))
    if entries is None:
        return None
    if "port" not in entries:
        r.error(
            node, join_field(where, "port"), "is required: the serial port's path (/dev/serial/by-id/...)"
        )
        return None
    port_field = join_field(where, "port")
    port_node = entries["port"][1]
    port = r.string(port_node, port_field)
    if port is not None and not port.startswith("/"):
        r.error(port_node, port_field, f"must be an absolute path, not {quote(port)}")
        port = None
    elif port is not None and "\0" in port:
        r.error(port_node, port_field, "must not hold a NUL character")
        port = None
    # Only of a device there now: one its present_if finds absent (or may: a command, not run at start)
    # may well have no port yet, and gets no jobs while it is absent.
    elif port is not None and there is not None and not host.exists(port):
        r.error(port_node, port_field, f"{quote(port, PATH_SHOWN)} does not exist on this host, {there}")
        port = None
    baud = DEFAULT_BAUD
    if "baud" in entries:
        baud_node = entries["baud"][1]
        baud_field = join_field(where, "baud")
        found = r.integer(baud_node, baud_field, minimum=1, maximum=STANDARD_BAUDS[-1])
        if found is not None and found not in STANDARD_BAUDS:
            r.error(
                baud_node,
                baud_field,
                f"{found} is not a standard baud rate: one of {', '.join(map(str, STANDARD_BAUDS))}",
            )
            found = None
        baud = found or 0
    if port is None or not baud:
        return None
    return SerialConsole(port, baud)


def _url(r: SourceReader, node: yaml.Node, where: str) -> UrlConsole | None:
    url = r.string(node, where)
    if url is None:
        return None
    scheme, separator, _ = url.partition("://")
    if not separator or scheme not in URL_SCHEMES:
        shown = quote(f"{scheme}://") if separator else quote(url)
        r.error(
            node, where, f"a console URL is rfc2217://HOST:PORT, socket://HOST:PORT or loop://, not {shown}"
        )
        return None
    if _CONTROL.search(url):
        r.error(node, where, "must not hold spaces or control characters")
        return None
    if scheme == "loop":
        return UrlConsole(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port = None
        parts = None
    if parts is None or not parts.hostname or port is None or port == 0:
        r.error(node, where, f"{quote(url)} needs a host and a port 1 to 65535: {scheme}://HOST:PORT")
        return None
    return UrlConsole(url)


# -- boot ------------------------------------------------------------------------------------------------


def _boot(r: SourceReader, node: yaml.Node, where: str) -> BootWiring | None:
    entries = r.mapping(node, where, ("ready", "fail", "timeout_s"))
    if entries is None:
        return None
    if "ready" not in entries:
        r.error(node, join_field(where, "ready"), "is required: what the console says when the board is up")
        return None
    ready_field = join_field(where, "ready")
    ready_text = r.string(entries["ready"][1], ready_field)
    ready = _expression(r, entries["ready"][1], ready_field, ready_text) if ready_text is not None else None
    fail = []
    fail_ok = True
    if "fail" in entries:
        for item, item_field, text in r.strings(entries["fail"][1], join_field(where, "fail")):
            expression = _expression(r, item, item_field, text)
            if expression is None:
                fail_ok = False
            else:
                fail.append(expression)
    timeout_s = DEFAULT_BOOT_TIMEOUT_S
    if "timeout_s" in entries:
        found = r.integer(
            entries["timeout_s"][1], join_field(where, "timeout_s"), minimum=1, maximum=MAX_BOOT_TIMEOUT_S
        )
        timeout_s = found or 0
    if ready is None or not fail_ok or not timeout_s:
        return None
    return BootWiring(ready, tuple(fail), timeout_s)


def _expression(r: SourceReader, node: yaml.Node, where: str, text: str) -> re.Pattern[str] | None:
    try:
        return re.compile(text)
    except re.error as exc:
        r.error(node, where, f"{quote(text)} is not a regular expression: {exc}")
        return None
