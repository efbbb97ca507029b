"""The power drivers against switches that behave like the real ones: labgrid's own Gude backend against the
PDU stand-in, and the operator's commands (and uhubctl) as real scripts run as subprocesses."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kerrigan.runner.boards.control import BoardControl, BoardFault
from kerrigan.runner.boards.power import (
    CommandSwitch,
    PduSwitch,
    PowerFailed,
    UsbSwitch,
    backend_address,
    power_driver,
)
from kerrigan.runner.devices_file.wiring import (
    AfterJob,
    CommandPower,
    PduPower,
    PowerWiring,
    UsbPower,
    Wiring,
)
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.waiting import wait_until

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")


@pytest.fixture
async def pdu() -> AsyncIterator[GudePdu]:
    async with GudePdu(outlets=8) as stand_in:
        yield stand_in


def pdu_switch(pdu: GudePdu, index: int = 3, timeout_s: float = 5.0) -> PduSwitch:
    driver = power_driver(PowerWiring(PduPower(MODEL, f"{pdu.host}:{pdu.port}", index), 1, 5))
    assert isinstance(driver, PduSwitch)
    driver.timeout_s = timeout_s
    return driver


async def test_a_pdu_outlet_is_switched_and_read_through_labgrid(pdu: GudePdu) -> None:
    switch = pdu_switch(pdu)
    await switch.on()
    assert pdu.is_on(3)
    assert await switch.status() is True
    await switch.off()
    assert not pdu.is_on(3)
    assert await switch.status() is False
    assert [index for index in range(1, 9) if pdu.is_on(index)] == []


async def test_a_pdu_cycle_is_off_then_on_with_the_outlet_off_for_off_s(pdu: GudePdu) -> None:
    switch = pdu_switch(pdu)
    await switch.on()
    heard: list[tuple[bool, float]] = []
    pdu.on_switch(3, lambda on: heard.append((on, time.monotonic())))
    await switch.cycle(0.3)
    assert [on for on, _ in heard] == [False, True]
    assert heard[1][1] - heard[0][1] >= 0.3
    assert pdu.is_on(3)


async def test_a_pdu_that_answers_an_error_is_power_failed_naming_the_outlet(pdu: GudePdu) -> None:
    pdu.fail(503)
    with pytest.raises(PowerFailed, match=r"PDU gude at 127\.0\.0\.1:\d+ outlet 3: switching it on: 503"):
        await pdu_switch(pdu).on()
    assert not pdu.is_on(3)


async def test_a_pdu_that_hangs_is_power_failed_after_timeout_s_not_a_hung_call(pdu: GudePdu) -> None:
    pdu.hang()
    started = time.monotonic()
    with pytest.raises(PowerFailed, match=r"outlet 3: switching it off: no answer within 0\.5 s"):
        await pdu_switch(pdu, timeout_s=0.5).off()
    assert time.monotonic() - started < 2.0
    pdu.behave()  # the request left hanging in its own thread ends too


async def test_a_pdu_that_never_answers_is_not_asked_again_until_it_answers(pdu: GudePdu) -> None:
    pdu.hang()
    switch = pdu_switch(pdu, timeout_s=0.5)
    with pytest.raises(PowerFailed, match=r"no answer within 0\.5 s"):
        await switch.status()
    threads = threading.active_count()
    for _ in range(5):  # a job asking again and again: refused at once, no thread more for each
        with pytest.raises(PowerFailed, match=r"reading its state: an earlier call still waits"):
            await switch.status()
    assert threading.active_count() <= threads
    pdu.behave()  # the hanging request is answered at last: the PDU is asked again
    await wait_until(lambda: threading.active_count() < threads, timeout=10)
    await switch.on()
    assert pdu.is_on(3)


async def test_a_pdus_credentials_reach_the_pdu_but_never_a_reason() -> None:
    async with GudePdu(outlets=8, credentials=("admin", "s3cret-pdu")) as pdu:
        driver = power_driver(PowerWiring(PduPower(MODEL, f"{pdu.host}:{pdu.port}", 2), 1, 5))
        await driver.on()
        assert pdu.is_on(2)
        pdu.fail(500)
        with pytest.raises(PowerFailed) as failed:
            await driver.off()
        assert "s3cret-pdu" not in str(failed.value)
        assert "admin" not in str(failed.value)
        assert "***@127.0.0.1" in str(failed.value)


def test_the_backend_address_keeps_credentials_and_takes_the_written_port_or_the_backends() -> None:
    assert backend_address("pdu-3.lab", 80) == ("pdu-3.lab", 80)
    assert backend_address("admin:pw@pdu-3.lab:8080", 80) == ("admin:pw@pdu-3.lab", 8080)
    assert backend_address("http://admin:pw@pdu-3.lab", 80) == ("admin:pw@pdu-3.lab", 80)
    assert backend_address("http://pdu-3.lab/api", None) == ("http://pdu-3.lab/api", None)


# -- commands ------------------------------------------------------------------------------------------


def script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def state_commands(tmp_path: Path) -> CommandPower:
    state = tmp_path / "state"
    return CommandPower(
        on=(script(tmp_path, "on", f'echo on > "{state}"\n'),),
        off=(script(tmp_path, "off", f'echo off > "{state}"\n'),),
        status=(script(tmp_path, "status", f'grep -q on "{state}"\n'),),
    )


async def test_command_power_switches_and_reads_through_the_operators_scripts(tmp_path: Path) -> None:
    switch = CommandSwitch(state_commands(tmp_path), 5)
    await switch.on()
    assert (tmp_path / "state").read_text() == "on\n"
    assert await switch.status() is True
    await switch.cycle(0.1)
    assert await switch.status() is True
    await switch.off()
    assert await switch.status() is False


async def test_command_power_without_status_does_not_know_the_state(tmp_path: Path) -> None:
    commands = state_commands(tmp_path)
    switch = CommandSwitch(CommandPower(commands.on, commands.off), 5)
    assert await switch.status() is None


async def test_a_failing_command_is_power_failed_with_its_last_line(tmp_path: Path) -> None:
    failing = script(tmp_path, "on", "echo 'relay 7: no such outlet' >&2\nexit 3\n")
    switch = CommandSwitch(CommandPower((failing, "--outlet", "7"), ("true",)), 5)
    with pytest.raises(PowerFailed, match=r"on --outlet 7 exited 3: relay 7: no such outlet$"):
        await switch.on()


async def test_a_hanging_command_is_killed_with_its_group_after_timeout_s(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    hanging = script(tmp_path, "on", f'(sleep 2; touch "{marker}") &\nsleep 30\n')
    started = time.monotonic()
    with pytest.raises(PowerFailed, match=r"did not finish within 0\.5 s; killed"):
        await CommandSwitch(CommandPower((hanging,), ("true",)), 0.5).on()
    assert time.monotonic() - started < 2.0
    await asyncio.sleep(2.5)
    assert not marker.exists()  # its child went with it


async def test_a_command_that_is_not_there_is_power_failed(tmp_path: Path) -> None:
    with pytest.raises(PowerFailed, match="could not be started"):
        await CommandSwitch(CommandPower((str(tmp_path / "nope"),), ("true",)), 5).on()


UHUBCTL = """\
echo "$@" >> "{log}"
case "$*" in
  *"-a on"*) echo on > "{state}" ;;
  *"-a off"*) echo off > "{state}" ;;
esac
echo "Current status for hub 1-1.4 [2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]"
if grep -q on "{state}" 2>/dev/null; then
  echo "  Port 2: 0503 power highspeed enable connect [0bda:8153 Realtek USB 10/100/1000 LAN]"
else
  echo "  Port 2: 0000 off"
fi
"""


async def test_a_usb_hub_port_is_switched_and_read_with_uhubctls_arguments(tmp_path: Path) -> None:
    log, state = tmp_path / "calls", tmp_path / "state"
    program = script(tmp_path, "uhubctl", UHUBCTL.format(log=log, state=state))
    switch = UsbSwitch(UsbPower("1-1.4", 2), 5, program=program)
    await switch.on()
    assert await switch.status() is True
    await switch.off()
    assert await switch.status() is False
    assert log.read_text().splitlines() == [
        "-l 1-1.4 -p 2 -a on",
        "-l 1-1.4 -p 2",
        "-l 1-1.4 -p 2 -a off",
        "-l 1-1.4 -p 2",
    ]


async def test_a_failing_commands_arguments_and_output_stay_out_of_the_jobs_output(tmp_path: Path) -> None:
    # A command in the devices file may carry a credential (an SNMP community, curl -u): the job's output
    # (its check run, its pages) names the program and its exit status; the agent's log has the rest.
    failing = script(tmp_path, "pdu-ctl", 'echo "auth failed for $2" >&2\nexit 1\n')
    off = (failing, "--community", "hunter2-private", "7", "off")
    wiring = Wiring(PowerWiring(CommandPower(("true",), off), 1, 5), None, None, AfterJob.OFF)
    control = BoardControl.of([("modalix-bluebox", None, wiring)])
    with pytest.raises(BoardFault) as fault:
        await control.take()
    problems = (await control.give_back()).problems
    shown = f"the power command {failing} exited 1"
    assert fault.value.note() == f"kerrigan: power_failed: modalix-bluebox: {shown}\n"
    assert problems == [f"modalix-bluebox not powered off after the job: {shown}"]
    with pytest.raises(PowerFailed) as failed:
        await CommandSwitch(CommandPower(("true",), off), 5).off()
    said = "exited 1: auth failed for hunter2-private"
    assert str(failed.value) == f"{failing} --community hunter2-private 7 off {said}"  # the agent's log
    assert failed.value.shown == shown


async def test_a_board_whose_power_fails_at_the_end_is_named_for_the_servers_recovery(tmp_path: Path) -> None:
    # Ended in doubt: every board with power is switched off, and the server recovers those switched off
    # and those whose switch failed (power_unknown); a board left on by its after_job is named in neither.
    failing = script(tmp_path, "pdu-ctl", "exit 1\n")
    silent = Wiring(PowerWiring(CommandPower(("true",), (failing, "off")), 1, 5), None, None, AfterJob.KEEP)
    answers = Wiring(PowerWiring(CommandPower(("true",), ("true",)), 1, 5), None, None, AfterJob.KEEP)
    boards = [("modalix-redbox", "a", silent), ("modalix-bluebox", "b", answers)]
    given = await BoardControl.of(boards).give_back(off=True)
    assert (given.powered_off, given.power_unknown) == (["modalix-bluebox"], ["modalix-redbox"])
    assert given.problems == [
        f"modalix-redbox (a) not powered off after the job: the power command {failing} exited 1"
    ]
    left_on = await BoardControl.of(boards).give_back(off=False)
    assert (left_on.powered_off, left_on.power_unknown, left_on.problems) == ([], [], [])
