"""Every page in a real browser (Debian's Chromium through Playwright), with a screenshot of each.

A push starts the example workflows; the tour opens the session page of the unschedulable one and finds the
seed's reasons, filters and sorts its rejected devices in place, resolves a manifest on /explain, and looks
at the queue, the runner hosts and the audit log, at desktop width and on a phone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp

from kerrigan.core.accounting import health_report
from kerrigan.store.runners import create_runner_token
from tests.integration.github.conftest import SHA, push_payload
from tests.integration.pages.conftest import ADMIN, BROWSER, Site
from tests.integration.pages.test_session_page import deliver, reported_session

pytestmark = list(BROWSER)

TYPO = """name: typo-check
on: [push]
scheduling:
  labels: {sdk: "2.2.0", form_facter: som}
tasks:
  - id: smoke
    run: ./smoke.sh
"""


async def register_runner(site: Site, host: str) -> None:
    """A runner host that registered and sent a heartbeat, as an agent does."""
    async with site.database.sessions() as session, session.begin():
        token = await create_runner_token(session, host, site.database.clock())
    headers = {"Authorization": f"Bearer {token}"}
    registration = {
        "protocol": [1],
        "capabilities": ["gate_jobs", "log_pages", "withdraw"],
        "resources": {"vcpus": 46, "max_weight": 28, "max_queue_depth": 64, "floor_bytes": 137438953472},
    }
    health = health_report([], 0.0, {"runner_full": 1})
    heartbeat = {
        "resources": {"free_disk_bytes": 412 << 30, "memory_bytes": 256 << 30},
        "devices": {"modalix-bluebox": "present", "modalix-greenbox": "present"},
        "health": {**health, "running": 0, "waiting": 0},
    }
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{site.base}/api/runner/v1/register", json=registration) as response:
            assert response.status == 200
        async with http.post(f"{site.base}/api/runner/v1/heartbeat", json=heartbeat) as response:
            assert response.status == 200


async def test_a_tour_of_every_page(site: Site, tab: Callable[..., Any]) -> None:
    await register_runner(site, "lab-a-01")
    await deliver(site, "push", push_payload(SHA))
    typo = await reported_session(site, "typo")
    admin = await tab(ADMIN)

    page = await admin.open("/pools")
    assert await page.get_by_role("heading", name="Pools").is_visible()
    await admin.shoot("pools")
    await admin.open("/pools/sdk-2-2-som")
    await admin.shoot("pool-editor")
    await admin.open("/devices/modalix-greenbox")
    await admin.shoot("device")

    # The session page of an unschedulable task: the seed's reasons, never and not yet, every device.
    page = await admin.open(f"/sessions/{typo.id}")
    text = await page.locator("main").inner_text()
    assert "form-factor missing" in text  # fixtures/manifests/typo.yml misspells the key and the tag
    assert "tag uart-debgu missing" in text
    assert "did you mean 'form_factor'?" in text
    assert "never" in text
    assert "not yet" in text
    await admin.shoot("session-unschedulable")
    table = page.locator("table[data-sortable]").filter(has_text="modalix-bluebox").first
    all_rows = await table.locator("tbody tr").count()
    assert all_rows == 12  # every device of the lab, each with every reason
    filter_box = page.locator("input[data-filter]").first
    await filter_box.fill("maintenance")
    visible = await table.locator("tbody tr:visible").count()
    assert 0 < visible < all_rows  # filtered in place, without a round trip
    await filter_box.fill("")
    await table.locator("thead th").first.click()  # sorts in place
    first = await table.locator("tbody tr").first.inner_text()
    await table.locator("thead th").first.click()
    assert await table.locator("tbody tr").first.inner_text() != first

    page = await admin.open("/explain")
    await page.locator("textarea").fill(TYPO)
    await page.get_by_role("button", name="Explain").click()
    assert "did you mean 'form_factor'?" in await page.locator("main").inner_text()
    await admin.shoot("explain")

    for path, name in (("/queue", "queue"), ("/runners", "runners"), ("/audit", "audit")):
        response = await page.goto(site.base + path)
        assert response is not None
        assert response.status == 200, path
        await admin.shoot(name)

    phone = await tab(ADMIN, width=390)
    await phone.open(f"/sessions/{typo.id}")
    await phone.shoot("session-phone")
    await phone.open("/pools/sdk-2-2-som")
    await phone.shoot("pool-editor-phone")
