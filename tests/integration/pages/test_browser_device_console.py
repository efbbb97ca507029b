"""In Chromium: the person holding a board opens its device page, sees its power state (read from its
runner host as the page opens), powers it on from the page, connects to its live console and logs in, the
keystrokes echoed back by the board, then power-cycles it and watches it boot; the pool's owner watches the
same console read-only, his keystrokes not sent. Through the real server, a real agent whose devices file
wires ``modalix-redbox`` to an outlet of the PDU stand-in and a simulated board's console."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page, expect

from kerrigan.core.disk import DiskPolicy
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.devices_file import load_devices_file
from kerrigan.store.runners import create_runner_token, host_report
from kerrigan.testing.board import HOSTNAME, PROMPT, SimulatedBoard, State
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.waiting import wait_until
from tests.integration.api.test_device_power import OUTLET, board, pdu
from tests.integration.pages.conftest import BROWSER, OWNER, READER, Site

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

pytestmark = list(BROWSER)
__all__ = ["board", "pdu"]  # the fixtures, shared with the API's power tests

DEVICE = "modalix-redbox"  # in octocat's pool sdk-2-2-som, on lab-a-02
PAGE = f"/devices/{DEVICE}"


@pytest.fixture
async def agent(site: Site, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard) -> AsyncIterator[Agent]:
    """lab-a-02's agent, modalix-redbox wired to the PDU's outlet and the board's console, registered."""
    devices = tmp_path / "devices.yml"
    devices.write_text(
        "devices:\n"
        f"  {DEVICE}:\n"
        f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
        "off_s: 1, timeout_s: 2}\n"
        f"    console: {{serial: {{port: {board.path}}}}}\n"
        "    boot: {ready: 'login:', timeout_s: 2}\n",
        encoding="utf-8",
    )
    async with site.database.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-02", site.database.clock())
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(
            server_url=site.base,
            token=token,
            host_id="lab-a-02",
            work_dir=tmp_path / "lab-a-02",
            disk=DiskPolicy(0),
            heartbeat_s=0.2,
            systemd_scope="never",
            job_users=spare_job_users(),
            devices_file=load_devices_file(devices),
        )
        started = Agent(settings, http)
        task = asyncio.create_task(started.run())

        async def registered() -> bool:
            async with site.database.sessions() as session:
                report = await host_report(session, "lab-a-02")
            return report is not None and {"device_power", "device_console"} <= set(report.capabilities)

        await wait_until(registered, timeout=15)
        yield started
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def reserve(page: Page) -> None:
    """The signed-in person reserves the board from its page; the dispatcher grants it."""
    await page.locator("#reserve-for").fill("1h")
    await page.get_by_role("button", name="Reserve").click()
    for _ in range(100):
        if await page.locator("#reserved").count():
            return
        await asyncio.sleep(0.1)
        await page.reload()
    raise AssertionError("the reservation was not granted")


async def test_the_holder_sees_the_power_state_powers_the_board_and_types_on_its_live_console(
    site: Site, tab: Callable[..., Any], agent: Agent, pdu: GudePdu, board: SimulatedBoard
) -> None:
    holder = await tab(READER)
    page = await holder.open(PAGE)
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text) if message.type == "error" else None)
    await reserve(page)

    # The page rendered what the store knew; its script read the board's power from its host.
    state = page.locator("#power-state")
    await expect(state).to_have_text("off")
    await expect(page.locator("#power-words")).to_have_text("(as its switch read it just now, after status)")

    await page.get_by_role("button", name="Power on").click()
    await expect(state).to_have_text("on")
    assert pdu.switches == [(OUTLET, True)]
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)

    await page.get_by_role("button", name="Connect").click()
    status = page.locator("#console-status")
    await expect(status).to_have_text("Connected: click the console and type.")
    screen = page.locator("#console-screen")
    await screen.click()
    await page.keyboard.press("Enter")
    await expect(screen).to_contain_text(f"{HOSTNAME} login:")
    await page.keyboard.type("root")
    await expect(screen).to_contain_text(f"{HOSTNAME} login: root")  # the board echoed each key
    await page.keyboard.press("Enter")
    await expect(screen).to_contain_text(PROMPT)
    await page.keyboard.type("hostname")
    await page.keyboard.press("Enter")
    await expect(screen).to_contain_text(f"{PROMPT}hostname\n{HOSTNAME}\n")

    # The pool's owner watches the same session read-only: what he types is not sent.
    owner = await tab(OWNER)
    watching = await owner.open(PAGE)
    await expect(watching.locator("#console-mode")).to_contain_text("Read-only")
    await watching.get_by_role("button", name="Connect").click()
    await expect(watching.locator("#console-status")).to_have_text("Connected, read-only.")
    await watching.locator("#console-screen").click()
    await watching.keyboard.type("poweroff")
    await watching.keyboard.press("Enter")

    # The holder power-cycles the board from the page and both watch it boot.
    await page.get_by_role("button", name="Power cycle").click()
    for shown in (screen, watching.locator("#console-screen")):
        await expect(shown).to_contain_text("Starting kernel ...", timeout=15_000)
        await expect(shown).to_contain_text("Welcome to Buildroot", timeout=15_000)
    await expect(state).to_have_text("on")
    assert "poweroff" not in (await screen.text_content() or "")  # the owner's keystrokes never went
    assert board.state in (State.BOOTING, State.LOGIN)
    await holder.shoot("device-console")
    await owner.shoot("device-console-read-only")

    await page.get_by_role("button", name="Disconnect").click()
    await expect(status).to_have_text("Disconnected.")
    await expect(page.get_by_role("button", name="Connect")).to_be_visible()
    assert refused == []  # no script error, no refusal by the Content-Security-Policy
