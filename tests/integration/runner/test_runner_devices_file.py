"""``kerrigan runner --devices-file`` with a real agent against the real server on loopback: what the file
finds is what the server records of the host's devices, and a device's env reaches its jobs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kerrigan.runner.devices_file import load_devices_file
from kerrigan.store.runners import HostReport, host_report
from tests.integration.github.conftest import Harness, manifest_files
from tests.integration.runner.agents import (
    AgentFactory,
    completed,
    tokens,
)


async def report_of(harness: Harness, host: str) -> HostReport | None:
    async with harness.database.sessions() as session:
        return await host_report(session, host)


def devices_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "devices.yml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_device_whose_path_is_absent_is_missing_and_takes_no_job_until_the_path_appears(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
) -> None:
    tty = tmp_path / "ttyUSB-bluebox"
    path = devices_file(tmp_path, f"devices:\n  modalix-bluebox:\n    present_if: {tty}\n")
    hosts = await tokens(harness, "lab-a-01")
    agents("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(path))

    async def bluebox(state: str) -> bool:  # in a heartbeat
        report = await report_of(harness, "lab-a-01")
        return (
            report is not None
            and report.health is not None
            and report.device_states.get("modalix-bluebox") == state
        )

    await harness.wait_until(lambda: bluebox("missing"))
    report = await report_of(harness, "lab-a-01")
    assert report is not None
    # The host's other devices are not in the file: present, as ever.
    others = {device: state for device, state in report.device_states.items() if device != "modalix-bluebox"}
    assert others
    assert set(others.values()) == {"present"}

    # The server shows it absent: a job that needs it waits, saying why.
    bring_up = '#!/bin/sh\necho "bring-up on $KERRIGAN_DEVICE_ID"\n'
    [run] = await harness.push_commit(manifest_files("select-device.yml") | {"scripts/bring-up.sh": bring_up})
    queued = harness.github.check_runs[run["id"]]
    assert queued["status"] == "queued"
    assert (
        "`modalix-bluebox` (`sdk-2-2-som`): device absent from runner host lab-a-01"
        in (queued["output"]["summary"])
    )

    tty.touch()  # plugged in
    await harness.wait_until(lambda: bluebox("present"))
    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert "bring-up on modalix-bluebox" in final["output"]["summary"]


async def test_a_device_the_server_does_not_list_for_the_host_is_a_warning_and_never_reported(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # modalix-redbox is lab-a-02's: named in lab-a-01's file by mistake, it must not become absent.
    path = devices_file(tmp_path, f"devices:\n  modalix-redbox:\n    present_if: {tmp_path / 'none'}\n")
    hosts = await tokens(harness, "lab-a-01")
    with caplog.at_level(logging.WARNING, logger="kerrigan.runner.devices_file"):
        agents("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(path))

        async def heartbeats() -> bool:
            report = await report_of(harness, "lab-a-01")
            return report is not None and report.health is not None

        await harness.wait_until(heartbeats)
    report = await report_of(harness, "lab-a-01")
    assert report is not None
    assert "modalix-bluebox" in report.device_states  # the host's own devices are reported
    assert "modalix-redbox" not in report.device_states
    assert set(report.device_states.values()) == {"present"}
    assert f"devices file {path}: the server does not list device modalix-redbox for this host; skipped" in (
        caplog.messages
    )


async def test_a_job_on_a_device_gets_the_devices_env_from_the_file(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
) -> None:
    tty = tmp_path / "ttyUSB-bluebox"
    tty.touch()
    path = devices_file(
        tmp_path,
        "devices:\n"
        "  modalix-bluebox:\n"
        f"    present_if: {tty}\n"
        "    env:\n"
        f"      KERRIGAN_SERIAL: {tty}\n"
        "      POWER_OUTLET: pdu-3:7\n",
    )
    hosts = await tokens(harness, "lab-a-01")
    agents("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(path))
    bring_up = '#!/bin/sh\necho "on $KERRIGAN_DEVICE_ID serial $KERRIGAN_SERIAL outlet $POWER_OUTLET"\n'
    [run] = await harness.push_commit(manifest_files("select-device.yml") | {"scripts/bring-up.sh": bring_up})

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert f"on modalix-bluebox serial {tty} outlet pdu-3:7" in final["output"]["summary"]
