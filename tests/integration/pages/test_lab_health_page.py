"""``/health``: per pool its devices by state and health, utilisation over 7 days and the idle devices; the
devices bad for their health and why; the suspect devices with their numbers."""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from kerrigan.store.lab_health import PoolHealth
from kerrigan.store.models import DeviceRow, JobRow
from kerrigan.testing.clock import FakeClock
from tests.integration.api.history_rows import Run, add_session
from tests.integration.pages.conftest import READER, Site


def row(page: str, pool: str) -> str:
    found = re.search(rf'<tr id="pool-{re.escape(pool)}">(.*?)</tr>', page, re.DOTALL)
    assert found, pool
    return html.unescape(re.sub(r"<[^>]+>", "", found[1]))


async def test_the_page_shows_each_pools_states_health_use_and_idle_devices(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    db = site.database
    at = db.clock() - timedelta(days=1)
    async with db.sessions() as session, session.begin():
        for n in range(12):  # modalix-redbox fails boot far more often than its peers
            await add_session(
                session,
                at,
                runs=(
                    Run(
                        "boot",
                        "modalix-redbox",
                        "failed" if n < 10 else "succeeded",
                        exit_status=1 if n < 10 else 0,
                    ),
                ),
            )
        for n in range(40):
            device = ("modalix-bluebox", "davinci-som-01")[n % 2]
            await add_session(session, at, runs=(Run("boot", device, "succeeded"),))
        await session.execute(
            update(DeviceRow)
            .where(DeviceRow.id == "pcie-card-01")
            .values(health="bad", health_reason="3 infrastructure failures in a row (the last runner_lost)")
        )
    clock.advance(31)  # the server's suspects are read again (it may have looked before the history was in)
    status, page = await (await browser(READER)).get("/health")
    assert status == 200
    som = row(page, "sdk-2-2-som")
    assert "4" in som.split()  # its four devices
    assert "1 maintenance" in som
    assert "3 available" in som
    assert "4 unknown" in som
    assert "modalix-greenbox" in som  # it ran nothing in the 7 days
    assert "modalix-bluebox" not in som.split("%", 1)[1]  # ran jobs: not idle
    # 52 jobs of 50 s, of the devices' time in the lab: the three that ran jobs since their first, a day ago
    # (history older than the devices' rows), modalix-greenbox since the lab was made, 31 s ago.
    assert f"{52 * 50 / (3 * (86400 - 10 + 31) + 31) * 100:.1f} %" in som
    pcie = row(page, "sdk-2-2-pcie")
    assert "1 bad" in pcie
    assert "pcie-card-01: 3 infrastructure failures in a row (the last runner_lost)" in html.unescape(
        re.sub(r"<[^>]+>", "", page.split('id="bad-devices"')[1].split("</ul>")[0])
    )
    suspects = html.unescape(re.sub(r"<[^>]+>", "", page.split('id="suspect-devices"')[1].split("</ul>")[0]))
    assert (
        "modalix-redbox failed 10 of 12 runs of this task in 7 days; its 2 peers failed 0 of 40" in suspects
    )


async def test_utilisation_is_the_busy_share_of_the_devices_time_in_the_lab(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    """A job run through the runner protocol on the fake clock: 30 s of modalix-bluebox's time, in a lab
    whose four sdk-2-2-som devices joined 60 s ago (not 7 days: a new lab's figure was 0.0 %)."""
    from tests.integration.pages.test_runners_page import runner, running_job

    reader = await browser(READER)
    headers = await runner(site, reader.http, "lab-a-01", {"modalix-bluebox": "present"})
    clock.advance(10)
    job = await running_job(site, reader.http, headers, "2-3")
    clock.advance(30)
    async with reader.http.post(
        f"{site.base}/api/runner/v1/jobs/{job}/finish", json={"exit_status": 0}, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
    clock.advance(20)
    status, page = await reader.get("/health")
    assert status == 200
    assert f"{30 / (4 * 60) * 100:.1f} %" in row(page, "sdk-2-2-som")  # 12.5 %
    assert "0.0 %" in row(page, "sdk-2-1-som")  # ran nothing


async def test_a_gang_job_s_time_counts_on_every_device_it_held(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    db = site.database
    clock.advance(100)
    async with db.sessions() as session, session.begin():
        _, [job] = await add_session(
            session, db.clock() - timedelta(seconds=80), runs=(Run("link", "modalix-bluebox"),)
        )
        roles = [{"role": "dut", "device": "modalix-bluebox"}, {"role": "peer", "device": "modalix-redbox"}]
        await session.execute(update(JobRow).where(JobRow.pk == job).values(devices=roles))
    status, page = await (await browser(READER)).get("/health")
    assert status == 200
    # 50 s on each of two devices, of four devices' 100 s in the lab.
    assert f"{2 * 50 / (4 * 100) * 100:.1f} %" in row(page, "sdk-2-2-som")  # 25.0 %


@pytest.mark.parametrize(
    ("utilisation", "shown"), [(0.0, "0.0 %"), (0.0001, "under 0.1 %"), (0.125, "12.5 %"), (1.0, "100.0 %")]
)
def test_a_little_use_is_never_shown_as_none(utilisation: float, shown: str) -> None:
    pool = PoolHealth("p", 1, Counter(), Counter(), 0.0, utilisation, ())
    assert pool.utilisation_shown == shown
