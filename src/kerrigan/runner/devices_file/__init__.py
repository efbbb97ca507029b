"""Which of its devices a runner host really has: ``kerrigan runner --devices-file devices.yml``.

The file maps device ids to how the agent finds each one (``present_if``: a path that exists while the
device is there, or a command that exits 0) and to private settings its jobs get as environment:
``env``, which every job on the device gets (a fork's approved without secrets too) and the person holding
a reservation of the device is shown, unless ``holder_sees`` lists fewer; and ``secret_env``, which only a
job that may have secrets gets (a push's, a same-repository pull request's, a fork's approved with
``/kerrigan approve secrets``), masked in its output and results like a repository's secrets, and never
shown to a holder::

    devices:
      modalix-bluebox:
        present_if: /dev/serial/by-id/usb-FTDI_FT232R_A50285BI-if00-port0
        env: {KERRIGAN_SERIAL: /dev/serial/by-id/usb-FTDI_FT232R_A50285BI-if00-port0, POWER_OUTLET: pdu-3:7}
        secret_env: {PDU_PASSWORD: "correct horse battery"}
        holder_sees: [KERRIGAN_SERIAL, POWER_OUTLET]
      modalix-redbox:
        present_if: {command: [/opt/lab/bin/probe, redbox], timeout_s: 10}
        power: {pdu: {model: gude, host: pdu-3.lab, index: 7}, off_s: 3, timeout_s: 20}
        console: {url: "rfc2217://ser2net.lab:3001"}
        boot: {ready: "login:", fail: ["Kernel panic"], timeout_s: 120}
        after_job: off

A device's wiring (``power``, ``console``, ``boot``, ``after_job``:
:mod:`~kerrigan.runner.devices_file.wiring`) is how the agent reaches its board; it is the agent's alone,
never in a job's environment.

:func:`load_devices_file` reads it (:mod:`~kerrigan.runner.devices_file.reading`: a mistake raises
:class:`DevicesFileError`, one line naming the file, line and field); :class:`DevicePresence`
(:mod:`~kerrigan.runner.devices_file.presence`) checks the devices, all at once and off the event loop, and
says what each is: ``present``, ``missing`` (the path does not exist, the command exited non-zero) or
``error`` (the check itself failed: it timed out and was killed, could not be started, the path could not be
looked at). The server takes ``missing`` and ``error`` alike as *absent*: the device gets no jobs.
"""

from __future__ import annotations

from kerrigan.runner.devices_file.host_view import THIS_HOST, HostView
from kerrigan.runner.devices_file.presence import DevicePresence, Presence, State, check
from kerrigan.runner.devices_file.reading import (
    AGENT_ENV,
    AGENT_ENV_PREFIXES,
    DEFAULT_TIMEOUT_S,
    CommandCheck,
    DeviceEntry,
    DevicesFile,
    DevicesFileError,
    PathCheck,
    PresentIf,
    env_name_problem,
    load_devices_file,
    parse_devices_file,
)
from kerrigan.runner.devices_file.wiring import (
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

__all__ = [
    "AGENT_ENV",
    "AGENT_ENV_PREFIXES",
    "DEFAULT_TIMEOUT_S",
    "THIS_HOST",
    "AfterJob",
    "BootWiring",
    "CommandCheck",
    "CommandConsole",
    "CommandPower",
    "ConsoleWiring",
    "DeviceEntry",
    "DevicePresence",
    "DevicesFile",
    "DevicesFileError",
    "HostView",
    "PathCheck",
    "PduPower",
    "PowerSwitch",
    "PowerWiring",
    "Presence",
    "PresentIf",
    "SerialConsole",
    "State",
    "UrlConsole",
    "UsbPower",
    "Wiring",
    "check",
    "env_name_problem",
    "load_devices_file",
    "parse_devices_file",
]
