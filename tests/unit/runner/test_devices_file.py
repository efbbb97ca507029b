"""The devices file (``kerrigan runner --devices-file``): reading it, and checking presence with real files
and real subprocesses."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from pathlib import Path

import pytest

from kerrigan.runner.devices_file import (
    DEFAULT_TIMEOUT_S,
    CommandCheck,
    DeviceEntry,
    DevicePresence,
    DevicesFile,
    DevicesFileError,
    PathCheck,
    check,
    env_name_problem,
    load_devices_file,
    parse_devices_file,
)
from kerrigan.runner.processes import gang_environment, job_environment, process_start_time
from kerrigan.testing.waiting import wait_until

SERIAL = "/dev/serial/by-id/usb-FTDI_FT232R_A50285BI-if00-port0"
GOOD = f"""\
devices:
  modalix-bluebox:
    present_if: {SERIAL}   # a path that exists when it is there
    env:
      KERRIGAN_SERIAL: {SERIAL}
      POWER_OUTLET: pdu-3:7
      BAUD: 115200
      EMPTY: ""
  modalix-redbox:
    present_if: {{command: ["/opt/lab/bin/probe", "redbox"], timeout_s: 30}}
  modalix-greenbox:
    present_if:
      command: [/opt/lab/bin/probe, greenbox]
  modalix-old-01:
    env: {{POWER_OUTLET: "pdu-1:2"}}
"""


def python(code: str) -> tuple[str, ...]:
    """A command line running ``code`` in this Python."""
    return (sys.executable, "-c", code)


def gone(pid: int) -> bool:
    """Whether a process no longer runs (reaped, or only its zombie left)."""
    return process_start_time(pid) is None


# -- reading ---------------------------------------------------------------------------------------------


def test_a_good_file_reads_paths_commands_and_env_as_written() -> None:
    found = parse_devices_file(GOOD, "devices.yml")
    assert found == DevicesFile(
        "devices.yml",
        {
            "modalix-bluebox": DeviceEntry(
                PathCheck(SERIAL),
                {"KERRIGAN_SERIAL": SERIAL, "POWER_OUTLET": "pdu-3:7", "BAUD": "115200", "EMPTY": ""},
            ),
            "modalix-redbox": DeviceEntry(CommandCheck(("/opt/lab/bin/probe", "redbox"), 30)),
            "modalix-greenbox": DeviceEntry(
                CommandCheck(("/opt/lab/bin/probe", "greenbox"), DEFAULT_TIMEOUT_S)
            ),
            "modalix-old-01": DeviceEntry(None, {"POWER_OUTLET": "pdu-1:2"}),
        },
    )
    assert DEFAULT_TIMEOUT_S == 10


def test_a_file_with_no_devices_reads_as_none() -> None:
    assert parse_devices_file("devices: {}\n", "devices.yml").devices == {}


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("devices: [\n", "devices.yml:2:1: ", "not valid YAML"),
        ("# nothing yet\n", "devices.yml:1:1: ", "the devices file is empty"),
        ("hosts: {}\n", "devices.yml:1:1: hosts: ", "unknown key 'hosts'"),
        ("devices: [a, b]\n", "devices.yml:1:10: devices: ", "must be a mapping, not a list"),
        ("devices:\n  a: /dev/ttyUSB0\n", "devices.yml:2:6: devices.a: ", "must be a mapping"),
        (
            "devices:\n  a:\n    present_iff: /dev/x\n",
            "devices.yml:3:5: devices.a.present_iff: ",
            "did you mean 'present_if'?",
        ),
        (
            "devices:\n  a: {}\n  a: {}\n",
            "devices.yml:3:3: devices.a: ",
            "duplicate key 'a' (first set on line 2)",
        ),
        (
            "devices:\n  a:\n    present_if: dev/ttyUSB0\n",
            "devices.yml:3:17: devices.a.present_if: ",
            "must be an absolute path, not 'dev/ttyUSB0'",
        ),
        (
            "devices:\n  a:\n    present_if: [/dev/x]\n",
            "devices.yml:3:17: devices.a.present_if: ",
            "must be a path or {command: [...], timeout_s: N}, not a list",
        ),
        (
            "devices:\n  a:\n    present_if:\n",
            "devices.yml:3:16: devices.a.present_if: ",
            "must be a path or {command: [...], timeout_s: N}, not nothing (null)",
        ),
        (
            "devices:\n  a:\n    present_if: {timeout_s: 5}\n",
            "devices.yml:3:17: devices.a.present_if.command: ",
            "is required",
        ),
        (
            "devices:\n  a:\n    present_if: {command: /opt/probe a}\n",
            "devices.yml:3:27: devices.a.present_if.command: ",
            "must be a list of the command and its arguments (run without a shell)",
        ),
        (
            "devices:\n  a:\n    present_if: {command: []}\n",
            "devices.yml:3:27: devices.a.present_if.command: ",
            "must name the command to run",
        ),
        (
            "devices:\n  a:\n    present_if: {command: ['', x]}\n",
            "devices.yml:3:27: devices.a.present_if.command[0]: ",
            "must name the command to run",
        ),
        (
            "devices:\n  a:\n    present_if: {command: [probe, {x: 1}]}\n",
            "devices.yml:3:35: devices.a.present_if.command[1]: ",
            "must be a string, not a mapping",
        ),
        (
            "devices:\n  a:\n    present_if: {command: [probe], timeout_s: 121}\n",
            "devices.yml:3:47: devices.a.present_if.timeout_s: ",
            "must be 1 to 120, not 121",
        ),
        (
            "devices:\n  a:\n    present_if: {command: [probe], timeout_s: 0}\n",
            "devices.yml:3:47: devices.a.present_if.timeout_s: ",
            "must be 1 to 120, not 0",
        ),
        (
            "devices:\n  a:\n    present_if: {command: [probe], timeout_s: ten}\n",
            "devices.yml:3:47: devices.a.present_if.timeout_s: ",
            "must be a whole number, not 'ten'",
        ),
        (
            "devices:\n  a:\n    present_if: {command: [probe], shell: true}\n",
            "devices.yml:3:36: devices.a.present_if.shell: ",
            "unknown key 'shell'",
        ),
        ("devices:\n  a:\n    env: [A=1]\n", "devices.yml:3:10: devices.a.env: ", "must be a mapping"),
        (
            "devices:\n  a:\n    env:\n      OUTLET: {pdu: 3}\n",
            "devices.yml:4:15: devices.a.env.OUTLET: ",
            "must be a string, not a mapping",
        ),
        (
            "devices:\n  a:\n    env:\n      OUTLET:\n",
            "devices.yml:4:14: devices.a.env.OUTLET: ",
            "must not be empty",
        ),
        (
            'devices:\n  a:\n    env:\n      OUTLET: "pdu\\0"\n',
            "devices.yml:4:15: devices.a.env.OUTLET: ",
            "must not hold a NUL character",
        ),
        (
            f"devices:\n  a:\n    env:\n      OK: x\n      CERT: {'c' * 2001}\n",
            "devices.yml:5:13: devices.a.env.CERT: ",
            "is shown to a reservation's holder, who is shown at most 2000 characters a setting; leave it",
        ),
        (
            "devices:\n  a:\n    env:\n" + "".join(f"      V{n}: x\n" for n in range(257)),
            "devices.yml:4:7: devices.a.env: ",
            "a reservation's holder is shown at most 256 settings, not 257; list those to show in",
        ),
        (
            "devices:\n  a:\n    env:\n"
            + "".join(f"      V{n}: x\n" for n in range(257))
            + f"    holder_sees: [{', '.join(f'V{n}' for n in range(257))}]\n",
            "devices.yml:261:18: devices.a.holder_sees: ",
            "a reservation's holder is shown at most 256 settings, not 257; list those to show in",
        ),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_line_and_field(text: str, where: str, message: str) -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(text, "devices.yml")
    said = str(raised.value)
    assert said.startswith(where), said
    assert message in said
    assert "\n" not in said


def test_a_file_with_several_mistakes_names_the_first_and_counts_the_others() -> None:
    text = "devices:\n  a:\n    present_if: relative\n  b:\n    env: {GITHUB_TOKEN: x}\n  c: 7\n"
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(text, "devices.yml")
    said = str(raised.value)
    assert said.startswith("devices.yml:3:17: devices.a.present_if: must be an absolute path")
    assert said.endswith(" (and 2 more)")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("GITHUB_TOKEN", "names starting GITHUB_ are the agent's own"),
        ("GITHUB_WORKSPACE", "names starting GITHUB_ are the agent's own"),
        ("KERRIGAN_JOB_ID", "names starting KERRIGAN_JOB_ are the agent's own"),
        ("KERRIGAN_JOB_SERIAL", "names starting KERRIGAN_JOB_ are the agent's own"),
        ("KERRIGAN_DEVICE_ID", "the agent sets KERRIGAN_DEVICE_ID itself"),
        ("KERRIGAN_CPUS", "the agent sets KERRIGAN_CPUS itself"),
        ("KERRIGAN_SESSION_ID", "the agent sets KERRIGAN_SESSION_ID itself"),
        ("CI", "the agent sets CI itself"),
        ("HOME", "the agent sets HOME itself"),
        ("TMPDIR", "the agent sets TMPDIR itself"),
        ("POWER-OUTLET", "'POWER-OUTLET' is not an environment variable name"),
        ("1WIRE", "'1WIRE' is not an environment variable name"),
        ("A=B", "'A=B' is not an environment variable name"),
    ],
)
def test_a_device_env_may_not_set_what_the_agent_sets_nor_a_bad_name(name: str, message: str) -> None:
    text = f"devices:\n  modalix-bluebox:\n    env:\n      {name}: x\n"
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(text, "devices.yml")
    assert str(raised.value).startswith(f"devices.yml:4:7: devices.modalix-bluebox.env.{name}: {message}")


@pytest.mark.parametrize("name", ["KERRIGAN_SERIAL", "POWER_OUTLET", "lab_pdu", "_X1"])
def test_a_device_env_may_set_other_names(name: str) -> None:
    assert env_name_problem(name) is None


def test_every_variable_the_agent_sets_for_a_job_is_refused_in_a_device_env() -> None:
    # Guards the list against job_environment growing: a device's setting never overrides the agent's.
    offer = {
        "id": "7",
        "session": "s",
        "task": "t",
        "repository": "octo/firmware",
        "sha": "a" * 40,
        "device": "d",
        "board": "b",
        "labels": {},
        "workflow_run_id": 9,
        "github": {"token": "ghs_x", "api_url": "http://github.test"},
        "devices": [{"role": "dut", "id": "d", "board": "b", "labels": {}}, {"role": "peer", "id": "p"}],
    }
    agents = job_environment(offer, (1,), {})
    assert {"KERRIGAN_DEVICE_PEER_ID", "KERRIGAN_DEVICES_JSON"} <= set(agents)  # a gang's, by role
    assert {name for name in agents if env_name_problem(name) is None} == set()
    for name in ("HOME", "USER", "LOGNAME", "TMPDIR"):  # set for a job run as its own user
        assert env_name_problem(name) is not None


HOLDER_ENV = "devices:\n  blue:\n    env: {POWER_OUTLET: pdu-3:7, LAB_TOKEN: s3cret}\n"


def test_a_holder_is_shown_all_of_a_devices_env_unless_holder_sees_lists_fewer() -> None:
    env = {"POWER_OUTLET": "pdu-3:7", "LAB_TOKEN": "s3cret"}
    everything = parse_devices_file(HOLDER_ENV, "devices.yml").devices["blue"]
    assert everything == DeviceEntry(None, env, None)
    assert everything.holder_settings == env
    some = parse_devices_file(HOLDER_ENV + "    holder_sees: [POWER_OUTLET]\n", "devices.yml")
    assert some.devices["blue"] == DeviceEntry(None, env, ("POWER_OUTLET",))
    assert some.devices["blue"].holder_settings == {"POWER_OUTLET": "pdu-3:7"}
    assert some.devices["blue"].env == env  # the job still gets all of it
    block = parse_devices_file(
        HOLDER_ENV + "    holder_sees:\n      - LAB_TOKEN\n      - POWER_OUTLET\n", "x"
    )
    assert block.devices["blue"].holder_sees == ("LAB_TOKEN", "POWER_OUTLET")
    assert block.devices["blue"].holder_settings == env


def test_holder_sees_empty_shows_the_holder_nothing() -> None:
    found = parse_devices_file(HOLDER_ENV + "    holder_sees: []\n", "devices.yml").devices["blue"]
    assert found.holder_sees == ()
    assert found.holder_settings == {}
    assert found.env == {"POWER_OUTLET": "pdu-3:7", "LAB_TOKEN": "s3cret"}


def test_a_device_without_env_shows_its_holder_nothing() -> None:
    assert parse_devices_file("devices:\n  blue: {}\n", "devices.yml").devices["blue"].holder_settings == {}
    listed_none = parse_devices_file("devices:\n  blue: {holder_sees: []}\n", "devices.yml")
    assert listed_none.devices["blue"] == DeviceEntry(None, {}, ())


@pytest.mark.parametrize(
    ("holder_sees", "said"),
    [
        (
            "[POWER_OUTLET, SERIAL]",
            "devices.yml:4:33: devices.blue.holder_sees[1]: 'SERIAL' is not one of this device's env names",
        ),
        (
            "[LAB_TOKEN, POWER_OUTLET, LAB_TOKEN]",
            "devices.yml:4:44: devices.blue.holder_sees[2]: 'LAB_TOKEN' is listed twice",
        ),
        ("POWER_OUTLET", "devices.yml:4:18: devices.blue.holder_sees: must be a list, not 'POWER_OUTLET'"),
        ("", "devices.yml:4:17: devices.blue.holder_sees: must be a list, not nothing (null)"),
        (
            "{POWER_OUTLET: true}",
            "devices.yml:4:18: devices.blue.holder_sees: must be a list, not a mapping",
        ),
        (
            "[POWER_OUTLET, [LAB_TOKEN]]",
            "devices.yml:4:33: devices.blue.holder_sees[1]: must be a string, not a list",
        ),
        ("['']", "devices.yml:4:19: devices.blue.holder_sees[0]: must not be empty"),
        (
            "[power_outlet]",
            "devices.yml:4:19: devices.blue.holder_sees[0]: "
            "'power_outlet' is not one of this device's env names",
        ),
    ],
)
def test_a_bad_holder_sees_is_one_line_naming_the_file_line_and_field(holder_sees: str, said: str) -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(f"{HOLDER_ENV}    holder_sees: {holder_sees}\n", "devices.yml")
    assert str(raised.value) == said


def test_holder_sees_names_only_the_devices_own_env() -> None:
    text = (
        "devices:\n"
        "  blue:\n    env: {POWER_OUTLET: pdu-3:7}\n"
        "  red:\n    env: {LAB_TOKEN: s3cret}\n    holder_sees: [LAB_TOKEN, POWER_OUTLET]\n"
    )
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(text, "devices.yml")
    assert str(raised.value) == (
        "devices.yml:6:30: devices.red.holder_sees[1]: 'POWER_OUTLET' is not one of this device's env names"
    )
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file("devices:\n  blue:\n    holder_sees: [POWER_OUTLET]\n", "devices.yml")
    assert str(raised.value) == (
        "devices.yml:3:19: devices.blue.holder_sees[0]: 'POWER_OUTLET' is not one of this device's env names"
    )


def test_every_bad_holder_sees_name_is_counted() -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(f"{HOLDER_ENV}    holder_sees: [SERIAL, LAB_TOKEN, LAB_TOKEN, X]\n", "devices.yml")
    assert str(raised.value) == (
        "devices.yml:4:19: devices.blue.holder_sees[0]: 'SERIAL' is not one of this device's env names"
        " (and 2 more)"
    )


def test_a_misspelt_holder_sees_is_an_unknown_key() -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(f"{HOLDER_ENV}    holder_see: [POWER_OUTLET]\n", "devices.yml")
    assert str(raised.value) == (
        "devices.yml:4:5: devices.blue.holder_see: unknown key 'holder_see'; did you mean 'holder_sees'?"
    )


def test_loading_names_the_file_when_it_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(DevicesFileError, match=r"^devices file .*/none\.yml: no such file$"):
        load_devices_file(tmp_path / "none.yml")
    with pytest.raises(DevicesFileError, match="is a directory, not a file"):
        load_devices_file(tmp_path)
    bad = tmp_path / "bad.yml"
    bad.write_bytes(b"devices: {a: {env: {X: \xff}}}\n")
    with pytest.raises(DevicesFileError, match="not UTF-8 text"):
        load_devices_file(bad)


def test_loading_a_file_places_problems_under_its_path(tmp_path: Path) -> None:
    path = tmp_path / "devices.yml"
    path.write_text(GOOD, encoding="utf-8")
    assert load_devices_file(path).path == str(path)
    path.write_text("devices:\n  a: {present_if: x}\n", encoding="utf-8")
    with pytest.raises(DevicesFileError, match=rf"^{re.escape(str(path))}:2:19: devices\.a\.present_if: "):
        load_devices_file(path)


# -- checking one device ---------------------------------------------------------------------------------


async def test_a_path_that_exists_is_present_and_one_that_does_not_is_missing(tmp_path: Path) -> None:
    tty = tmp_path / "ttyUSB0"
    assert (await check(PathCheck(str(tty)))).state == "missing"
    tty.touch()
    found = await check(PathCheck(str(tty)))
    assert found.state == "present"
    assert found.detail == f"{tty} exists"


async def test_a_link_to_nothing_and_a_path_under_a_file_are_missing(tmp_path: Path) -> None:
    link = tmp_path / "usb-FTDI-port0"
    link.symlink_to(tmp_path / "ttyUSB9")  # udev's link, the device gone
    (tmp_path / "plain").touch()
    assert (await check(PathCheck(str(link)))).state == "missing"
    assert (await check(PathCheck(str(tmp_path / "plain" / "below")))).state == "missing"


async def test_a_command_exiting_0_is_present_and_non_zero_is_missing() -> None:
    assert (await check(CommandCheck(python("raise SystemExit(0)")))).state == "present"
    found = await check(CommandCheck(python("raise SystemExit(1)")))
    assert found.state == "missing"
    assert found.detail.endswith("exited 1")


async def test_a_command_running_past_its_timeout_is_an_error_and_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    found = await check(CommandCheck(python(code), timeout_s=1))
    assert found.state == "error"
    assert found.detail.endswith("did not finish within 1 s; killed")
    assert gone(int(pid_file.read_text()))


async def test_what_a_timed_out_command_started_is_killed_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    found = await check(CommandCheck(("/bin/sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"), 1))
    assert found.state == "error"
    child = int(pid_file.read_text())
    await wait_until(lambda: gone(child), timeout=10, what="the command's child to be killed")


async def test_a_command_that_cannot_be_started_is_an_error(tmp_path: Path) -> None:
    found = await check(CommandCheck((str(tmp_path / "no-such-probe"),)))
    assert found.state == "error"
    assert "could not be started: No such file or directory" in found.detail
    script = tmp_path / "probe"
    script.write_text("#!/bin/sh\nexit 0\n")  # not executable
    assert (await check(CommandCheck((str(script),)))).state == "error"


async def test_a_command_killed_by_a_signal_is_an_error() -> None:
    found = await check(CommandCheck(python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")))
    assert found.state == "error"
    assert found.detail.endswith("was killed by signal 11")


async def test_a_command_does_not_get_the_agents_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERRIGAN_RUNNER_TOKEN", "kgr_secret")
    monkeypatch.setenv("LAB_SITE", "a")
    seen = tmp_path / "env"
    code = f"import os, json; open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))"
    assert (await check(CommandCheck(python(code)))).state == "present"
    text = seen.read_text()
    assert "kgr_secret" not in text
    assert '"LAB_SITE": "a"' in text


# -- checking the devices of a file ----------------------------------------------------------------------


def presence_of(**devices: DeviceEntry) -> DevicePresence:
    return DevicePresence(DevicesFile("devices.yml", devices))


def wait_for_each_other(mine: Path, theirs: Path) -> tuple[str, ...]:
    """A command that says it started, then waits (up to its timeout) until the other one has."""
    return python(
        "import pathlib, time\n"
        f"pathlib.Path({str(mine)!r}).touch()\n"
        f"while not pathlib.Path({str(theirs)!r}).exists(): time.sleep(0.01)\n"
    )


async def test_devices_are_checked_at_once(tmp_path: Path) -> None:
    # Each command waits for the other to start: checked one after the other, the first would time out.
    a, b = tmp_path / "a", tmp_path / "b"
    presence = presence_of(
        blue=DeviceEntry(CommandCheck(wait_for_each_other(a, b), 10)),
        red=DeviceEntry(CommandCheck(wait_for_each_other(b, a), 10)),
    )
    assert await presence.check() == {"blue": "present", "red": "present"}


async def test_a_check_does_not_hold_up_the_event_loop(tmp_path: Path) -> None:
    # The command waits for a file only a coroutine of this event loop makes while the check runs.
    ready, made = tmp_path / "ready", tmp_path / "made"
    presence = presence_of(blue=DeviceEntry(CommandCheck(wait_for_each_other(ready, made), 10)))

    async def make_when_ready() -> None:
        await wait_until(ready.exists, timeout=10)
        made.touch()

    helper = asyncio.create_task(make_when_ready())
    assert await presence.check() == {"blue": "present"}
    await helper


async def test_a_slow_check_is_not_waited_for_nor_started_twice(tmp_path: Path) -> None:
    starts, release = tmp_path / "starts", tmp_path / "release"
    code = (
        "import pathlib, time\n"
        f"with open({str(starts)!r}, 'a') as f: f.write('started\\n')\n"
        f"while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.01)\n"
    )
    presence = presence_of(blue=DeviceEntry(CommandCheck(python(code), 30)), old=DeviceEntry())
    assert await presence.check(wait_s=0) == {"old": "present"}  # blue: not checked yet
    await wait_until(starts.exists, timeout=10)
    assert await presence.check(wait_s=0) == {"old": "present"}
    release.touch()
    assert await presence.check() == {"blue": "present", "old": "present"}
    assert starts.read_text() == "started\n"


async def test_a_change_of_presence_is_logged_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tty = tmp_path / "ttyUSB0"
    presence = presence_of(blue=DeviceEntry(PathCheck(str(tty))))
    with caplog.at_level(logging.INFO, logger="kerrigan.runner.devices_file"):
        assert await presence.check() == {"blue": "missing"}
        assert await presence.check() == {"blue": "missing"}
        assert caplog.messages == []  # no change yet
        tty.touch()
        assert await presence.check() == {"blue": "present"}
        tty.unlink()
        assert await presence.check() == {"blue": "missing"}
    assert caplog.messages == [
        f"device blue: missing, now present: {tty} exists",
        f"device blue: present, now missing: {tty} does not exist",
    ]
    assert [record.levelname for record in caplog.records] == ["INFO", "WARNING"]


async def test_devices_the_server_does_not_list_are_a_warning_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    presence = presence_of(
        blue=DeviceEntry(PathCheck(str(tmp_path / "tty")), {"OUTLET": "1"}),
        ghost=DeviceEntry(PathCheck(str(tmp_path / "tty")), {"OUTLET": "2"}),
    )
    await presence.check()
    with caplog.at_level(logging.INFO, logger="kerrigan.runner.devices_file"):
        assert presence.keep(["blue", "red"]) == ["ghost"]
    assert caplog.messages == [
        "devices file devices.yml: the server does not list device ghost for this host; skipped",
        f"device blue: missing ({tmp_path / 'tty'} does not exist)",
    ]
    assert presence.states == {"blue": "missing"}
    assert await presence.check() == {"blue": "missing"}
    assert presence.env("ghost") == {}


def test_a_job_gets_its_devices_env_and_no_other() -> None:
    presence = presence_of(blue=DeviceEntry(None, {"POWER_OUTLET": "pdu-3:7"}), red=DeviceEntry())
    assert presence.env("blue") == {"POWER_OUTLET": "pdu-3:7"}
    assert presence.env("red") == {}
    assert presence.env("not-in-the-file") == {}
    assert DevicePresence(None).env("blue") == {}


def test_a_holder_is_shown_the_settings_holder_sees_lists_and_none_of_a_device_not_in_the_file() -> None:
    env = {"POWER_OUTLET": "pdu-3:7", "LAB_TOKEN": "s3cret"}
    presence = presence_of(
        blue=DeviceEntry(None, env),
        red=DeviceEntry(None, env, ("POWER_OUTLET",)),
        green=DeviceEntry(None, env, ()),
        old=DeviceEntry(),
    )
    assert presence.holder_settings("blue") == env
    assert presence.holder_settings("red") == {"POWER_OUTLET": "pdu-3:7"}
    assert presence.holder_settings("green") == {}
    assert presence.holder_settings("old") == {}
    assert presence.holder_settings("not-in-the-file") == {}
    assert DevicePresence(None).holder_settings("blue") == {}
    assert presence.env("red") == env  # the job still gets all of it


def test_a_holder_is_shown_nothing_of_a_device_the_server_does_not_list() -> None:
    presence = presence_of(blue=DeviceEntry(None, {"OUTLET": "1"}), ghost=DeviceEntry(None, {"OUTLET": "2"}))
    presence.keep(["blue"])
    assert presence.holder_settings("blue") == {"OUTLET": "1"}
    assert presence.holder_settings("ghost") == {}


def test_the_settings_a_holder_is_shown_are_a_copy() -> None:
    entry = DeviceEntry(None, {"OUTLET": "1"})
    entry.holder_settings["OUTLET"] = "changed"
    assert entry.env == {"OUTLET": "1"}
    assert entry.holder_settings == {"OUTLET": "1"}


async def test_without_a_file_nothing_is_checked() -> None:
    assert await DevicePresence(None).check() == {}


async def test_closing_kills_the_checks_under_way(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    presence = presence_of(blue=DeviceEntry(CommandCheck(python(code), 60)))
    assert await presence.check(wait_s=0) == {}
    await wait_until(lambda: pid_file.exists() and pid_file.read_text(), timeout=10)
    await presence.close()
    assert gone(int(pid_file.read_text()))


async def test_a_cancelled_check_kills_its_commands(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    presence = presence_of(blue=DeviceEntry(CommandCheck(python(code), 60)))
    waiting = asyncio.create_task(presence.check())
    await wait_until(lambda: pid_file.exists() and pid_file.read_text(), timeout=10)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert gone(int(pid_file.read_text()))


def test_a_gang_offers_roles_become_variables_only_when_they_are_role_names() -> None:
    offer = {
        "devices": [
            {"role": "dut", "id": "modalix-01", "board": "modalix", "labels": {"sdk": "2.2.0"}},
            {"role": "peer=1\nX", "id": "evil"},
            {"role": 7, "id": "other"},
            "peer",
        ]
    }
    env = gang_environment(offer)
    assert env == {
        "KERRIGAN_DEVICE_DUT_ID": "modalix-01",
        "KERRIGAN_DEVICE_DUT_BOARD": "modalix",
        "KERRIGAN_DEVICE_DUT_LABELS": '{"sdk": "2.2.0"}',
        "KERRIGAN_DEVICES_JSON": (
            '[{"board": "modalix", "id": "modalix-01", "labels": {"sdk": "2.2.0"}, "role": "dut"}]'
        ),
    }
    assert gang_environment({"devices": []}) == {}
    assert gang_environment({}) == {}


def test_a_long_or_many_env_a_holder_is_not_shown_is_kept_for_jobs() -> None:
    many = "".join(f"      V{n}: x\n" for n in range(300))
    text = f"devices:\n  a:\n    env:\n      CERT: {'c' * 5000}\n{many}    holder_sees: [V1]\n"
    [(device_id, entry)] = parse_devices_file(text, "devices.yml").devices.items()
    assert (device_id, len(entry.env), entry.env["CERT"]) == ("a", 301, "c" * 5000)
    assert entry.holder_settings == {"V1": "x"}


# -- secret_env: settings only for jobs that may have secrets ----------------------------------------------

PDU_PASSWORD = "correct horse battery"
SECRET_ENV = f"""\
devices:
  blue:
    env: {{POWER_OUTLET: pdu-3:7}}
    secret_env: {{PDU_PASSWORD: "{PDU_PASSWORD}", PDU_USER: lab-admin}}
"""


def test_secret_env_is_read_apart_from_env_and_never_shown_in_a_repr() -> None:
    entry = parse_devices_file(SECRET_ENV, "devices.yml").devices["blue"]
    assert entry.env == {"POWER_OUTLET": "pdu-3:7"}
    assert entry.secret_env == {"PDU_PASSWORD": PDU_PASSWORD, "PDU_USER": "lab-admin"}
    assert entry.holder_settings == {"POWER_OUTLET": "pdu-3:7"}  # a holder is never shown them
    assert PDU_PASSWORD not in repr(entry)
    presence = presence_of(blue=entry)
    assert presence.secret_env("blue") == entry.secret_env
    assert presence.secret_env("not-in-the-file") == {}
    assert DevicePresence(None).secret_env("blue") == {}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "devices:\n  a:\n    secret_env: {PDU_PASSWORD: hunter2}\n",
            "devices.yml:3:32: devices.a.secret_env.PDU_PASSWORD: is 7 bytes long; a secret setting needs at "
            "least 8, or it could not be masked in a job's output",
        ),
        (
            "devices:\n  a:\n    secret_env: {PDU_PASSWORD: ''}\n",
            "devices.yml:3:32: devices.a.secret_env.PDU_PASSWORD: must not be empty",
        ),
        (
            "devices:\n  a:\n    env: {PDU_PASSWORD: x}\n    secret_env: {PDU_PASSWORD: long-enough}\n",
            "devices.yml:4:18: devices.a.secret_env.PDU_PASSWORD: 'PDU_PASSWORD' is in env too: a setting is "
            "either for every job (env) or secret",
        ),
        (
            "devices:\n  a:\n    secret_env: {GITHUB_TOKEN: long-enough}\n",
            "devices.yml:3:18: devices.a.secret_env.GITHUB_TOKEN: names starting GITHUB_ are the agent's "
            "own, for every job; choose another name",
        ),
        (
            "devices:\n  a:\n    secret_env: [PDU_PASSWORD=long-enough]\n",
            "devices.yml:3:17: devices.a.secret_env: must be a mapping, not a list",
        ),
        (
            'devices:\n  a:\n    secret_env: {PDU_PASSWORD: "long\\0enough"}\n',
            "devices.yml:3:32: devices.a.secret_env.PDU_PASSWORD: must not hold a NUL character",
        ),
        (
            f"{SECRET_ENV}    holder_sees: [POWER_OUTLET, PDU_PASSWORD]\n",
            "devices.yml:5:33: devices.blue.holder_sees[1]: 'PDU_PASSWORD' is a secret_env name: a "
            "reservation's holder is never shown those",
        ),
    ],
    ids=["short", "empty", "in env too", "agent's name", "not a mapping", "NUL", "holder_sees"],
)
def test_a_bad_secret_env_is_one_line_naming_the_file_line_and_field_never_the_value(
    text: str, said: str
) -> None:
    with pytest.raises(DevicesFileError) as raised:
        parse_devices_file(text, "devices.yml")
    assert str(raised.value) == said
    for value in ("hunter2", "long-enough", PDU_PASSWORD):
        assert value not in str(raised.value)
