"""A device's health, who put it in maintenance and why, a paused runner host and an absent device reach
the words of every diagnostic; each is *not yet*."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from kerrigan.core.device_status import DeviceHealth, Health, HostPause, StateNote, health_text, pause_text
from kerrigan.core.inventory import DeviceState, Inventory, RunnerHost
from kerrigan.core.matching import Outcome, ReasonKind, resolve
from kerrigan.core.requirements import Requirements
from kerrigan.testing.builders import device, pool

SINCE = datetime(2026, 12, 1, 9, 12, tzinfo=UTC)


def lab(*devices: object, hosts: tuple[RunnerHost, ...] = ()) -> Inventory:
    return Inventory((pool("bench"),), tuple(devices), hosts)  # type: ignore[arg-type]


def reasons(inventory: Inventory, device_id: str) -> list[tuple[str, str, bool]]:
    resolution = resolve(Requirements(), inventory)
    [verdict] = [v for v in resolution.rejected if v.id == device_id]
    return [(reason.text, reason.rule, reason.permanent) for reason in verdict.reasons]


def test_maintenance_says_since_when_by_whom_until_when_and_why() -> None:
    note = StateNote("reflashing the bootloader", "hubot", SINCE, SINCE + timedelta(hours=8))
    board = dataclasses.replace(device("redbox", "bench", state=DeviceState.MAINTENANCE), state_note=note)
    assert reasons(lab(board), "redbox") == [
        (
            "device in maintenance since 2026-12-01 09:12 by hubot until 2026-12-01 17:12: "
            "reflashing the bootloader",
            "device in maintenance",
            False,
        )
    ]


def test_a_bad_device_is_not_eligible_and_says_why_and_which_check() -> None:
    health = DeviceHealth(Health.BAD, "health check failed", SINCE, 812)
    sick = dataclasses.replace(device("redbox", "bench"), health=health)
    well = dataclasses.replace(
        device("bluebox", "bench"), health=DeviceHealth(Health.GOOD, "passed", SINCE, 9)
    )
    unknown = device("greenbox", "bench")
    resolution = resolve(Requirements(), lab(sick, well, unknown))
    assert [d.id for d in resolution.eligible] == ["bluebox", "greenbox"]
    assert reasons(lab(sick), "redbox") == [
        (
            "device health bad since 2026-12-01 09:12: health check failed (job 812)",
            "device health bad",
            False,
        )
    ]
    assert resolve(Requirements(), lab(sick)).outcome is Outcome.WAITING


def test_a_paused_host_and_an_absent_device_wait() -> None:
    pause = HostPause("kernel upgrade", "octocat", SINCE)
    on_paused = device("redbox", "bench", host="lab-a-01")
    absent = dataclasses.replace(device("bluebox", "bench", host="lab-a-02"), present=False)
    inventory = lab(on_paused, absent, hosts=(RunnerHost("lab-a-01", pause=pause), RunnerHost("lab-a-02")))
    assert reasons(inventory, "redbox") == [
        ("runner host lab-a-01 paused by octocat: kernel upgrade", "runner host lab-a-01 paused", False)
    ]
    assert reasons(inventory, "bluebox") == [
        ("device absent from runner host lab-a-02", "device absent from its runner host", False)
    ]
    resolution = resolve(Requirements(), inventory)
    assert resolution.outcome is Outcome.WAITING
    assert {count.kind for count in resolution.histogram} == {
        ReasonKind.HOST_PAUSED,
        ReasonKind.DEVICE_ABSENT,
    }


def test_the_sentences_leave_out_what_is_not_known() -> None:
    assert health_text(DeviceHealth(Health.BAD, "3 infrastructure failures in a row")) == (
        "device health bad: 3 infrastructure failures in a row"
    )
    assert pause_text("lab-a-01", HostPause("", "", SINCE, SINCE + timedelta(hours=1))) == (
        "runner host lab-a-01 paused until 2026-12-01 10:12"
    )
