"""A device's wiring in the devices file (``power``, ``console``, ``boot``, ``after_job``): read into typed
data, its defaults, and every mistake one line naming the file, line, column and field."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

import pytest

from kerrigan.runner.devices_file import (
    AfterJob,
    BootWiring,
    CommandCheck,
    CommandConsole,
    CommandPower,
    DevicePresence,
    DevicesFileError,
    HostView,
    PathCheck,
    PduPower,
    PowerWiring,
    SerialConsole,
    UrlConsole,
    UsbPower,
    Wiring,
    load_devices_file,
    parse_devices_file,
)
from kerrigan.runner.devices_file.host_view import labgrid_power_backend
from kerrigan.runner.devices_file.wiring_reading import STANDARD_BAUDS

SERIAL = "/dev/serial/by-id/usb-FTDI_FT232R_A50285BI-if00-port0"


def host(
    paths: Collection[str] = (SERIAL,),
    programs: Collection[str] = ("uhubctl",),
    models: Collection[str] | None = ("gude", "shelly_gen2", "rest"),
) -> HostView:
    """A host that has ``paths``, ``programs`` on its PATH and labgrid with ``models`` (None: no labgrid)."""
    return HostView(
        lambda path: path in paths,
        lambda name: name in programs,
        lambda model: None if models is None else model in models,
    )


GOOD = f"""\
devices:
  modalix-bluebox:
    present_if: {SERIAL}
    power:
      pdu: {{model: gude, host: pdu-3.lab, index: 7}}
      off_s: 5
      timeout_s: 30
    console:
      serial: {{port: {SERIAL}, baud: 921600}}
    boot: {{ready: "login:", fail: ["Kernel panic", "^BUG: "], timeout_s: 300}}
    after_job: keep
  modalix-redbox:
    power:
      usb: {{hub: "1-1.4", port: 2}}
    console:
      url: "rfc2217://ser2net.lab:3001"
    boot: {{ready: "login:"}}
  qemu-01:
    present_if: {{command: [/opt/lab/bin/probe, qemu-01]}}
    power:
      command:
        {{on: [/opt/lab/bin/qemu, start], off: [/opt/lab/bin/qemu, stop], status: [/opt/lab/bin/qemu, up]}}
    console:
      url: "socket://127.0.0.1:4555"
  relay-01:
    power:
      command:
        on: [relay, "1", on]
        off: [relay, "1", off]
    console:
      command: [/usr/local/bin/console-of, relay-01]
    after_job: off
  plain-01:
    env: {{KERRIGAN_SERIAL: {SERIAL}}}
"""


def test_a_full_file_reads_every_kind_of_wiring() -> None:
    devices = parse_devices_file(GOOD, "devices.yml", host()).devices
    assert devices["modalix-bluebox"].wiring == Wiring(
        PowerWiring(PduPower("gude", "pdu-3.lab", 7), off_s=5, timeout_s=30),
        SerialConsole(SERIAL, 921600),
        BootWiring(re.compile("login:"), (re.compile("Kernel panic"), re.compile("^BUG: ")), 300),
        AfterJob.KEEP,
    )
    assert devices["modalix-redbox"].wiring == Wiring(
        PowerWiring(UsbPower("1-1.4", 2)),
        UrlConsole("rfc2217://ser2net.lab:3001"),
        BootWiring(re.compile("login:")),
        AfterJob.OFF,
    )
    assert devices["qemu-01"].present_if == CommandCheck(("/opt/lab/bin/probe", "qemu-01"))
    assert devices["qemu-01"].wiring == Wiring(
        PowerWiring(
            CommandPower(
                ("/opt/lab/bin/qemu", "start"), ("/opt/lab/bin/qemu", "stop"), ("/opt/lab/bin/qemu", "up")
            )
        ),
        UrlConsole("socket://127.0.0.1:4555"),
        None,
        AfterJob.OFF,
    )
    assert devices["relay-01"].wiring == Wiring(
        PowerWiring(CommandPower(("relay", "1", "on"), ("relay", "1", "off"))),
        CommandConsole(("/usr/local/bin/console-of", "relay-01")),
        None,
        AfterJob.OFF,
    )
    assert devices["plain-01"].wiring == Wiring()
    assert devices["plain-01"].env == {"KERRIGAN_SERIAL": SERIAL}


def test_the_defaults() -> None:
    text = f"""\
devices:
  a:
    power: {{pdu: {{model: gude, host: pdu-3.lab, index: 0}}}}
    console: {{serial: {{port: {SERIAL}}}}}
    boot: {{ready: "login:"}}
  b:
    console: {{url: "loop://"}}
  c: {{}}
"""
    devices = parse_devices_file(text, "devices.yml", host()).devices
    a = devices["a"].wiring
    assert a.power == PowerWiring(PduPower("gude", "pdu-3.lab", 0), off_s=3, timeout_s=20)
    assert a.console == SerialConsole(SERIAL, 115200)
    assert a.boot == BootWiring(re.compile("login:"), (), 120)
    assert a.after_job is AfterJob.OFF  # a device with power is switched off after its jobs
    assert devices["b"].wiring == Wiring(None, UrlConsole("loop://"), None, AfterJob.KEEP)
    assert devices["c"].wiring == Wiring(None, None, None, AfterJob.KEEP)


def wired(lines: str) -> str:
    """A devices file of one device, ``a``, whose entry is ``lines`` (each indented by four)."""
    return "devices:\n  a:\n" + "".join(f"    {line}\n" for line in lines.splitlines())


PDU = "power: {pdu: {model: gude, host: pdu-3.lab, index: 7}}"


@pytest.mark.parametrize(
    ("lines", "where", "message"),
    [
        # power: exactly one kind, known keys, bounds
        ("power: {off_s: 3}", "3:12: devices.a.power: ", "needs exactly one of pdu, usb, command"),
        (
            'power:\n  pdu: {model: gude, host: pdu-3.lab, index: 7}\n  usb: {hub: "1-1", port: 1}',
            "5:7: devices.a.power: ",
            "takes exactly one of pdu, usb, command, not both pdu and usb",
        ),
        ("power: pdu-3:7", "3:12: devices.a.power: ", "must be a mapping, not 'pdu-3:7'"),
        (
            "power: {pdu: {model: gude, host: h, index: 7}, cycle_s: 3}",
            "3:52: devices.a.power.cycle_s: ",
            "unknown key 'cycle_s'",
        ),
        (
            "power: {pdu: {model: gude, host: h, index: 7, user: admin}}",
            "3:51: devices.a.power.pdu.user: ",
            "unknown key 'user'",
        ),
        (
            "power: {pdu: {model: gude, host: h, index: 7}, off_s: 0}",
            "3:59: devices.a.power.off_s: ",
            "must be 1 to 300, not 0",
        ),
        (
            "power: {pdu: {model: gude, host: h, index: 7}, off_s: 301}",
            "3:59: devices.a.power.off_s: ",
            "must be 1 to 300, not 301",
        ),
        (
            "power: {pdu: {model: gude, host: h, index: 7}, timeout_s: -1}",
            "3:63: devices.a.power.timeout_s: ",
            "must be 1 to 300, not -1",
        ),
        (
            "power: {pdu: {model: gude, host: h, index: 7}, timeout_s: 1.5}",
            "3:63: devices.a.power.timeout_s: ",
            "must be a whole number, not '1.5'",
        ),
        # pdu
        (
            "power: {pdu: {model: gude, host: h}}",
            "3:18: devices.a.power.pdu.index: ",
            "is required: a PDU is {model: M, host: H, index: N}",
        ),
        (
            "power: {pdu: {model: nosuch, host: h, index: 7}}",
            "3:26: devices.a.power.pdu.model: ",
            "labgrid has no power backend 'nosuch' (labgrid.driver.power.nosuch)",
        ),
        (
            "power: {pdu: {model: os.path, host: h, index: 7}}",
            "3:26: devices.a.power.pdu.model: ",
            "'os.path' is not the name of a labgrid power model",
        ),
        (
            "power: {pdu: {model: Gude, host: h, index: 7}}",
            "3:26: devices.a.power.pdu.model: ",
            "'Gude' is not the name of a labgrid power model",
        ),
        (
            "power: {pdu: {model: gude, host: h, index: 1000}}",
            "3:48: devices.a.power.pdu.index: ",
            "must be 0 to 999, not 1000",
        ),
        (
            "power: {pdu: {model: gude, host: '', index: 7}}",
            "3:38: devices.a.power.pdu.host: ",
            "must not be empty",
        ),
        # usb
        (
            'power: {usb: {hub: "1-1.4"}}',
            "3:18: devices.a.power.usb.port: ",
            'is required: a USB hub port is {hub: "1-1.4", port: N}',
        ),
        (
            "power: {usb: {hub: usb1, port: 2}}",
            "3:24: devices.a.power.usb.hub: ",
            "'usb1' is not a USB hub's location as uhubctl names it",
        ),
        (
            'power: {usb: {hub: "1-1", port: 0}}',
            "3:37: devices.a.power.usb.port: ",
            "must be 1 to 255, not 0",
        ),
        # command
        (
            "power: {command: {on: [relay, on]}}",
            "3:22: devices.a.power.command.off: ",
            "is required: the commands are {on: [...], off: [...]}",
        ),
        (
            "power: {command: {on: relay on, off: [relay, off]}}",
            "3:27: devices.a.power.command.on: ",
            "must be a list of the command and its arguments (run without a shell)",
        ),
        (
            "power: {command: {on: [relay, on], off: []}}",
            "3:45: devices.a.power.command.off: ",
            "must name the command to run",
        ),
        (
            "power: {command: {on: [relay, on], off: [relay, {x: 1}]}}",
            "3:53: devices.a.power.command.off[1]: ",
            "must be a string, not a mapping",
        ),
        (
            "power: {command: {on: [relay, on], off: [relay, off], status: ''}}",
            "3:67: devices.a.power.command.status: ",
            "must be a list of the command and its arguments (run without a shell)",
        ),
        (
            "power: {command: {on: [relay, on], off: [relay, off], reset: [relay, reset]}}",
            "3:59: devices.a.power.command.reset: ",
            "unknown key 'reset'",
        ),
        # console: exactly one kind
        ("console: {}", "3:14: devices.a.console: ", "needs exactly one of serial, url, command"),
        (
            f"console:\n  serial: {{port: {SERIAL}}}\n  url: 'socket://h:1'",
            "5:7: devices.a.console: ",
            "takes exactly one of serial, url, command, not both serial and url",
        ),
        (
            "console: {ssh: lab-a}",
            "3:15: devices.a.console.ssh: ",
            "unknown key 'ssh'",
        ),
        # serial
        (
            "console: {serial: {baud: 115200}}",
            "3:23: devices.a.console.serial.port: ",
            "is required: the serial port",
        ),
        (
            "console: {serial: {port: ttyUSB0}}",
            "3:30: devices.a.console.serial.port: ",
            "must be an absolute path, not 'ttyUSB0'",
        ),
        (
            "console: {serial: {port: /dev/ttyUSB9}}",
            "3:30: devices.a.console.serial.port: ",
            "'/dev/ttyUSB9' does not exist on this host, and the device has no present_if: it is taken to be",
        ),
        (
            f"console: {{serial: {{port: {SERIAL}, baud: 115201}}}}",
            "3:91: devices.a.console.serial.baud: ",
            "115201 is not a standard baud rate: one of 50, 75, 110,",
        ),
        (
            f"console: {{serial: {{port: {SERIAL}, baud: 0}}}}",
            "3:91: devices.a.console.serial.baud: ",
            "must be 1 to 4000000, not 0",
        ),
        (
            f"console: {{serial: {{port: {SERIAL}, baud: fast}}}}",
            "3:91: devices.a.console.serial.baud: ",
            "must be a whole number, not 'fast'",
        ),
        (
            f"console: {{serial: {{port: {SERIAL}, parity: even}}}}",
            "3:85: devices.a.console.serial.parity: ",
            "unknown key 'parity'",
        ),
        # url
        (
            "console: {url: 'telnet://ser2net.lab:3001'}",
            "3:20: devices.a.console.url: ",
            "a console URL is rfc2217://HOST:PORT, socket://HOST:PORT or loop://, not 'telnet://'",
        ),
        (
            "console: {url: 'hwgrep://FTDI'}",
            "3:20: devices.a.console.url: ",
            "not 'hwgrep://'",
        ),
        (
            "console: {url: /dev/ttyUSB0}",
            "3:20: devices.a.console.url: ",
            "not '/dev/ttyUSB0'",
        ),
        (
            "console: {url: 'rfc2217://ser2net.lab'}",
            "3:20: devices.a.console.url: ",
            "'rfc2217://ser2net.lab' needs a host and a port 1 to 65535: rfc2217://HOST:PORT",
        ),
        (
            "console: {url: 'socket://:4555'}",
            "3:20: devices.a.console.url: ",
            "needs a host and a port 1 to 65535: socket://HOST:PORT",
        ),
        (
            "console: {url: 'socket://qemu:70000'}",
            "3:20: devices.a.console.url: ",
            "needs a host and a port 1 to 65535",
        ),
        # command
        (
            "console: {command: console-of a}",
            "3:24: devices.a.console.command: ",
            "must be a list of the command and its arguments (run without a shell)",
        ),
        ("console: {command: []}", "3:24: devices.a.console.command: ", "must name the command to run"),
        (
            "console: {command: [console-of, 7, {a: 1}]}",
            "3:40: devices.a.console.command[2]: ",
            "must be a string, not a mapping",
        ),
        # boot
        (
            "console: {url: 'loop://'}\nboot: {fail: [panic]}",
            "4:11: devices.a.boot.ready: ",
            "is required: what the console says when the board is up",
        ),
        (
            "console: {url: 'loop://'}\nboot: {ready: 'login:('}",
            "4:19: devices.a.boot.ready: ",
            "'login:(' is not a regular expression: missing ), unterminated subpattern at position 6",
        ),
        (
            "console: {url: 'loop://'}\nboot: {ready: 'login:', fail: [panic, '[Oops']}",
            "4:43: devices.a.boot.fail[1]: ",
            "'[Oops' is not a regular expression: unterminated character set at position 0",
        ),
        (
            "console: {url: 'loop://'}\nboot: {ready: 'login:', fail: {panic: 1}}",
            "4:35: devices.a.boot.fail: ",
            "must be a list, not a mapping",
        ),
        (
            "console: {url: 'loop://'}\nboot: {ready: 'login:', timeout_s: 3601}",
            "4:40: devices.a.boot.timeout_s: ",
            "must be 1 to 3600, not 3601",
        ),
        (
            "console: {url: 'loop://'}\nboot: {ready: 'login:', timeout_s: 0}",
            "4:40: devices.a.boot.timeout_s: ",
            "must be 1 to 3600, not 0",
        ),
        (
            "boot: {ready: 'login:'}",
            "3:5: devices.a.boot: ",
            "needs a console: its expressions are on console lines",
        ),
        # after_job
        (
            f"{PDU}\nafter_job: reboot",
            "4:16: devices.a.after_job: ",
            "must be one of off, keep, not 'reboot'",
        ),
        (
            "after_job: off",
            "3:16: devices.a.after_job: ",
            "off needs power: this device has nothing to switch it off",
        ),
    ],
)
def test_bad_wiring_is_one_line_naming_the_file_line_and_field(lines: str, where: str, message: str) -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(wired(lines), "devices.yml", host())
    said = str(raised.value)
    assert said.startswith(f"devices.yml:{where}"), said
    assert message in said, said
    assert "\n" not in said
    assert "(and " not in said, said  # one mistake, reported once


def test_a_pdu_on_a_host_without_labgrid_says_what_to_install() -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(wired(PDU), "devices.yml", host(models=None))
    assert str(raised.value) == (
        "devices.yml:3:26: devices.a.power.pdu.model: a PDU is switched through labgrid, which is not "
        "installed: pip install 'kerrigan[labgrid]' on this host"
    )
    # A host without labgrid is fine for every other kind of power.
    found = parse_devices_file(wired('power: {usb: {hub: "1-1", port: 1}}'), "devices.yml", host(models=None))
    assert found.devices["a"].wiring.power == PowerWiring(UsbPower("1-1", 1))


def test_usb_power_needs_uhubctl_on_the_host() -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(wired('power: {usb: {hub: "1-1", port: 1}}'), "devices.yml", host(programs=()))
    assert str(raised.value) == (
        "devices.yml:3:18: devices.a.power.usb: a USB hub port is switched with uhubctl, which is not on "
        "this host's PATH"
    )


def test_a_pdu_host_with_credentials_is_never_shown() -> None:
    secret = "http://admin:correct-horse@pdu-3.lab:8080"
    found = parse_devices_file(
        wired(f"power: {{pdu: {{model: rest, host: '{secret}', index: 3}}}}"), "devices.yml", host()
    )
    entry = found.devices["a"]
    pdu = entry.wiring.power.switch if entry.wiring.power is not None else None
    assert pdu == PduPower("rest", secret, 3)
    assert isinstance(pdu, PduPower)
    assert pdu.shown_host == "http://***@pdu-3.lab:8080"
    assert PduPower("gude", "pdu-3.lab", 7).shown_host == "pdu-3.lab"
    assert PduPower("gude", "admin:correct-horse@pdu-3.lab:81", 7).shown_host == "***@pdu-3.lab:81"
    assert "correct-horse" not in repr(found)
    # Nor in what a job or a reservation's holder gets.
    presence = DevicePresence(found)
    assert presence.env("a") == {}
    assert presence.secret_env("a") == {}
    assert presence.holder_settings("a") == {}
    # Nor in a mistake about it.
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(
            wired("power: {pdu: {model: rest, host: 'http://admin:correct horse@pdu', index: 3}}"),
            "devices.yml",
            host(),
        )
    assert str(raised.value) == (
        "devices.yml:3:38: devices.a.power.pdu.host: must not hold spaces or control characters"
    )


CONSOLE_ON_MISSING_PORT = "console: {serial: {port: /dev/ttyUSB9}}"


def test_a_missing_serial_port_is_refused_only_when_the_device_is_there() -> None:
    # present_if's path exists: the device is there, so its console must be.
    there = wired(f"present_if: /dev/lab/blue\n{CONSOLE_ON_MISSING_PORT}")
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(there, "devices.yml", host(paths=("/dev/lab/blue",)))
    assert str(raised.value) == (
        "devices.yml:4:30: devices.a.console.serial.port: '/dev/ttyUSB9' does not exist on this host, though "
        "its present_if /dev/lab/blue exists"
    )
    # present_if's path does not exist: the device is absent (it gets no jobs), its port may come with it.
    absent = parse_devices_file(there, "devices.yml", host(paths=()))
    assert absent.devices["a"].present_if == PathCheck("/dev/lab/blue")
    assert absent.devices["a"].wiring.console == SerialConsole("/dev/ttyUSB9")
    # A present_if command is not run at start: the port is looked for when the device is used.
    probed = wired(f"present_if: {{command: [probe]}}\n{CONSOLE_ON_MISSING_PORT}")
    assert parse_devices_file(probed, "devices.yml", host(paths=())).devices["a"].wiring.console == (
        SerialConsole("/dev/ttyUSB9")
    )


def test_the_standard_baud_rates_are_pyserials() -> None:
    assert STANDARD_BAUDS[0] == 50
    assert 115200 in STANDARD_BAUDS
    assert 3000000 in STANDARD_BAUDS
    assert STANDARD_BAUDS[-1] == 4000000
    assert list(STANDARD_BAUDS) == sorted(set(STANDARD_BAUDS))
    for baud in (9600, 3000000):
        text = wired(f"console: {{serial: {{port: {SERIAL}, baud: {baud}}}}}")
        assert parse_devices_file(text, "devices.yml", host()).devices["a"].wiring.console == (
            SerialConsole(SERIAL, baud)
        )


def test_several_wiring_mistakes_name_the_first_and_count_the_others() -> None:
    text = wired("power: {pdu: {model: gude, host: h, index: 7}, off_s: 0}\nboot: {ready: '('}")
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(text, "devices.yml", host())
    said = str(raised.value)
    assert said.startswith("devices.yml:3:59: devices.a.power.off_s: must be 1 to 300, not 0")
    assert said.endswith(" (and 2 more)")  # the bad expression, and a boot without a console


def test_the_file_is_checked_against_this_host_by_default(tmp_path: Path) -> None:
    path = tmp_path / "devices.yml"
    path.write_text(wired("console: {serial: {port: /dev/null, baud: 9600}}"), encoding="utf-8")
    assert load_devices_file(path).devices["a"].wiring.console == SerialConsole("/dev/null", 9600)
    path.write_text(wired(f"console: {{serial: {{port: {tmp_path}/ttyUSB0}}}}"), encoding="utf-8")
    with pytest.raises(DevicesFileError) as raised:
        load_devices_file(path)
    assert str(raised.value) == (
        f"{path}:3:30: devices.a.console.serial.port: '{tmp_path}/ttyUSB0' does not exist on this host, "
        "and the device has no present_if: it is taken to be there"
    )


def test_labgrids_backends_are_found_by_their_files_without_importing_labgrid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for labgrid laid out as it is; importing any of it would fail the test.
    power = tmp_path / "fakelabgrid" / "driver" / "power"
    power.mkdir(parents=True)
    for folder in (tmp_path / "fakelabgrid", tmp_path / "fakelabgrid" / "driver", power):
        (folder / "__init__.py").write_text("raise AssertionError('imported')\n", encoding="utf-8")
    (power / "gude.py").write_text("raise AssertionError('imported')\n", encoding="utf-8")
    (power / "cache").mkdir()  # a folder is not a backend
    monkeypatch.syspath_prepend(str(tmp_path))
    assert labgrid_power_backend("gude", "fakelabgrid") is True
    assert labgrid_power_backend("apc", "fakelabgrid") is False
    assert labgrid_power_backend("cache", "fakelabgrid") is False
    assert labgrid_power_backend("gude", "fakelabgrid_not_installed") is None
