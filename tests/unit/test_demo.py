"""``kerrigan demo``'s GitHub stand-in (a newcomer's checkout has no ``../shared``; nothing says so) and its
boards (simulated, wired through devices files that need neither labgrid nor pyserial; one hangs once)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import stat
import sys
from pathlib import Path

import pytest

from kerrigan import demo
from kerrigan.demo import demo_github
from kerrigan.runner.boards.console import console_support_problem
from kerrigan.runner.devices_file import CommandConsole, CommandPower
from kerrigan.testing.board import State
from kerrigan.testing.github import schema
from kerrigan.testing.waiting import wait_until


def test_without_github_s_description_the_demo_says_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(schema.ENVIRONMENT_VARIABLE, str(tmp_path / "missing.json"))
    schema._missing.cache_clear()  # another test may have had the stand-in warn already
    with caplog.at_level(logging.DEBUG):
        github = demo_github()
    assert github.description is None
    assert caplog.records == []


def test_with_github_s_description_the_demo_checks_kerrigan_s_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = schema.find_description()
    if found is None:
        pytest.skip("../shared/github-openapi is not beside this checkout")
    monkeypatch.setenv(schema.ENVIRONMENT_VARIABLE, str(found))
    assert demo_github().description is not None


def test_without_the_test_extras_the_demo_says_nothing_of_its_validator(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # `pip install -e .` (the README's first command) installs no jsonschema, even beside ../shared.
    found = schema.find_description()
    if found is None:
        pytest.skip("../shared/github-openapi is not beside this checkout")
    monkeypatch.setenv(schema.ENVIRONMENT_VARIABLE, str(found))
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # what an import finds when it is not installed
    with caplog.at_level(logging.DEBUG):
        github = demo_github()
    assert github.description is None
    assert caplog.records == []


async def test_the_demo_wires_each_online_host_s_boards_with_commands_alone(tmp_path: Path) -> None:
    # `pip install -e .` has neither labgrid nor pyserial: the demo's wiring is commands, which need neither.
    async with contextlib.AsyncExitStack() as boards:
        files, hung = await demo._wire_boards(boards, tmp_path)
        assert sorted(files) == sorted(demo.HOSTS)
        lab = demo._lab()
        for host, file in files.items():
            assert sorted(file.devices) == sorted(d.id for d in lab.devices if d.host == host)
            assert stat.S_IMODE(Path(file.path).stat().st_mode) == 0o600
            assert console_support_problem(file) is None
            for entry in file.devices.values():
                assert entry.wiring.power is not None
                assert isinstance(entry.wiring.power.switch, CommandPower)
                assert isinstance(entry.wiring.console, CommandConsole)
                assert entry.wiring.boot is not None
                assert entry.wiring.boot.timeout_s == demo.BOOT_TIMEOUT_S
        assert demo.HUNG in files["lab-a-02"].devices
        assert hung.state is State.OFF


async def test_the_demo_s_hung_board_hangs_at_its_first_boot_alone(tmp_path: Path) -> None:
    """Switched on and off through its devices file's own commands, as the agent does."""
    async with contextlib.AsyncExitStack() as boards:
        files, hung = await demo._wire_boards(boards, tmp_path)
        power = files["lab-a-02"].devices[demo.HUNG].wiring.power
        assert power is not None
        assert isinstance(power.switch, CommandPower)
        switch = power.switch

        async def run(argv: tuple[str, ...]) -> None:
            process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL)
            assert await process.wait() == 0

        await run(switch.on)
        await wait_until(lambda: hung.state is State.HALTED, timeout=10, what="the first boot to hang")
        assert "printk: console [ttyS2] enabled" in hung.transcript[-1]
        await run(switch.off)
        await run(switch.on)
        await wait_until(lambda: hung.state is State.LOGIN, timeout=10, what="the second boot to come up")
        assert hung.boots == 2
