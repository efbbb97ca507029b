"""``/health``: per pool its devices by state and health, utilisation over 7 days and the idle devices; the
devices bad for their health and why; the suspect devices with their numbers."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from kerrigan.store.models import DeviceRow
from tests.conftest import FakeClock
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
    # 52 jobs of 50 s on 4 devices over 7 days.
    assert f"{52 * 50 / (4 * 7 * 86400) * 100:.1f} %" in som
    pcie = row(page, "sdk-2-2-pcie")
    assert "1 bad" in pcie
    assert "pcie-card-01: 3 infrastructure failures in a row (the last runner_lost)" in html.unescape(
        re.sub(r"<[^>]+>", "", page.split('id="bad-devices"')[1].split("</ul>")[0])
    )
    suspects = html.unescape(re.sub(r"<[^>]+>", "", page.split('id="suspect-devices"')[1].split("</ul>")[0]))
    assert (
        "modalix-redbox failed 10 of 12 runs of this task in 7 days; its 2 peers failed 0 of 40" in suspects
    )
