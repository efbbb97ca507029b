"""``/runners``: every runner host as its agent last reported it over the runner protocol: online or not,
last heartbeat, protocol and capabilities, resources by name, vCPU claims and CPU sets of its running jobs,
its devices, and its health report."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import aiohttp
import pytest

from kerrigan.core.accounting import FinishedJob, health_report
from kerrigan.store.database import Database
from kerrigan.store.leases import Grant, grant_leases, take_queued_jobs
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock
from kerrigan.web.pages.runners import health_view, isolation_line, resource_values, vcpu_seconds
from tests.integration.github.conftest import INSTALLATION
from tests.integration.pages.conftest import ADMIN, OWNER, READER, Site, needs_chromium, on_sqlite_only

GIB = 1 << 30
RESOURCES = {
    "vcpus": 46,
    "max_weight": 28,
    "max_queue_depth": 64,
    "free_disk_bytes": 200 * GIB,
    "floor_bytes": 128 * GIB,
    "memory_bytes": 256 * GIB,
    "gpu_count": 2,  # unknown to the server: skipped, not shown
}


async def runner(
    site: Site, http: aiohttp.ClientSession, host: str, devices: dict[str, str] | None = None
) -> dict[str, str]:
    """A token for ``host``, and the agent registered with it."""
    async with site.database.sessions() as session, session.begin():
        token = await create_runner_token(session, host, site.database.clock())
    headers = {"Authorization": f"Bearer {token}"}
    body = {
        "protocol": [1],
        "capabilities": ["gate_jobs", "withdraw", "teleport"],
        "resources": RESOURCES,
        "devices": devices or {},
    }
    async with http.post(f"{site.base}/api/runner/v1/register", json=body, headers=headers) as response:
        assert response.status == 200, await response.text()
    return headers


async def running_job(site: Site, http: aiohttp.ClientSession, headers: dict[str, str], cpus: str) -> int:
    """A job offered on modalix-bluebox (lab-a-01), accepted and started on ``cpus``; its id."""
    db: Database = site.database
    async with db.sessions() as session, session.begin():
        # Queued and leased in one transaction: the site's own dispatcher never sees it queued.
        await create_session(
            session, builders.session("12121212-0000-0000-0000-000000000000", vcpus=4), db.clock()
        )
        [queued] = await take_queued_jobs(session)
        grant = Grant(queued.pk, "modalix-bluebox", "lab-a-01", queued.session_id)
        assert await grant_leases(session, [grant], db.clock(), timedelta(seconds=60)) == [grant]
    for call, body in (("accept", {}), ("start", {"cpus": cpus})):
        async with http.post(
            f"{site.base}/api/runner/v1/jobs/{queued.pk}/{call}", json=body, headers=headers
        ) as response:
            assert response.status == 200, await response.text()
    return queued.pk


def health(clock: FakeClock) -> dict[str, Any]:
    """A health report as the agent builds it."""
    now = clock().timestamp()
    report = health_report(
        [
            FinishedJob("77", "octo/firmware", "soak", 8, now - 60, 1800.0, 120_000),  # 12% of 8 vCPUs
            FinishedJob("78", "octo/firmware", "smoke", 2, now - 30, 100.0, 900_000),
            FinishedJob("79", "octo/sdk", "build", 4, now - 20, None, None, "queue_wait_exceeded"),
        ],
        now,
        {"runner_disk_full": 3, "runner_full": 1},
    )
    isolation = {"users": True, "tmp": True, "cgroup": "cgroup-v1", "memory_cap": True, "missing": []}
    return report | {"running": 1, "waiting": 0, "isolation": isolation}


def section(page: str, host: str) -> str:
    """The text of a host's section of the page."""
    found = re.search(rf'<section class="host" id="host-{host}".*?</section>', page, re.DOTALL)
    assert found, f"no section for {host}"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found[0])).split())


async def test_a_registered_host_shows_its_resources_claims_cpu_sets_and_health(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    site.github.add_repository("octo/sdk", INSTALLATION, private=False)  # its use is shown to all
    reader = await browser(READER)
    headers = await runner(
        site, reader.http, "lab-a-01", {"modalix-bluebox": "present", "usb-probe": "present"}
    )
    job = await running_job(site, reader.http, headers, "2-3,26-27")
    clock.advance(7)
    beat = {
        "resources": {"free_disk_bytes": 150 * GIB},
        "devices": {},
        "waiting": {},
        "health": health(clock),
    }
    async with reader.http.post(
        f"{site.base}/api/runner/v1/heartbeat", json=beat, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
    clock.advance(3)
    status, page = await reader.get("/runners")
    assert status == 200
    text = section(page, "lab-a-01")
    assert "lab-a-01 online" in text
    assert "last heartbeat 2026-11-29 12:00:07 UTC (3 s ago)" in text
    assert "Protocol 1" in text
    assert "Capabilities gate_jobs withdraw" in text  # as negotiated: "teleport" is not one
    # Resources by name, bytes as GiB; the heartbeat changed free disk and kept the rest.
    for name, shown in [
        ("vcpus", "46"),
        ("max_weight", "28"),
        ("max_queue_depth", "64"),
        ("free_disk_bytes", "150.0 GiB"),
        ("floor_bytes", "128.0 GiB"),
        ("memory_bytes", "256.0 GiB"),
    ]:
        assert f"{name} {shown}" in text
    assert "gpu_count" not in text
    assert "4 by running jobs of 46 allocatable (the CPUs its agent pins jobs to)" in text
    assert "of the 28 its max_weight lets the dispatcher hand it at once" in text
    table = " ".join(
        html.unescape(re.sub(r"<[^>]+>", " ", page.split("<tbody>")[1].split("</tbody>")[0])).split()
    )
    assert "lab-a-01 online 3 s ago 4 of 46 allocatable (claims up to 28)" in table
    assert " late" not in text
    assert f"{job} octo/firmware · smoke modalix-bluebox 4 2-3,26-27" in text  # its CPU set
    assert "modalix-bluebox sdk-2-2-som available present" in text
    assert "modalix-greenbox sdk-2-2-som maintenance reflashing the bootloader" in text
    assert "usb-probe not on this host in the inventory present" in text
    # Health: refusals, the underused reservation, and each repository's reserved vCPU-seconds.
    assert "1 running, 0 waiting on the host" in text
    assert "Isolation jobs isolated: users, private /tmp, cgroup v1, memory cap" in text
    assert "runner_disk_full 3, runner_full 1" in text
    assert "77 octo/firmware soak 8 1800 s 12.0%" in text
    assert "octo/firmware 14,600 2 2 vCPUs: 1, 8 vCPUs: 1 0" in text
    assert "octo/sdk 0 0 1" in text  # a queue-wait refusal


async def test_hosts_without_an_agent_are_shown_offline_or_unregistered(
    site: Site, browser: Callable[..., Any]
) -> None:
    status, page = await (await browser(READER)).get("/runners")
    assert status == 200
    assert "3 of 4 online" in page  # hosts without a token follow the inventory file: lab-b-02 is offline
    offline = section(page, "lab-b-02")
    assert "lab-b-02 offline" in offline
    assert "its agent has not registered" in offline
    assert "No health report yet." in offline
    assert 'class="state-offline"' in page


async def test_a_silent_host_goes_offline_on_the_page(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    reader = await browser(READER)
    await runner(site, reader.http, "lab-a-02")
    assert "lab-a-02 online" in section((await reader.get("/runners"))[1], "lab-a-02")
    clock.advance(61)  # a lease time without a heartbeat
    for _ in range(50):  # the site's dispatcher marks silent hosts offline within a second
        text = section((await reader.get("/runners"))[1], "lab-a-02")
        if "lab-a-02 offline" in text:
            break
        await asyncio.sleep(0.1)
    assert "lab-a-02 offline" in text
    assert "(1 min 01 s ago)" in text


async def test_a_host_whose_heartbeat_is_late_says_so_from_its_second_missed_beat(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    reader = await browser(READER)
    await runner(site, reader.http, "lab-a-02")
    clock.advance(30)  # two beats of 15 s (a quarter of the 60 s lease) are due: one missed, not yet late
    text = section((await reader.get("/runners"))[1], "lab-a-02")
    assert "lab-a-02 online" in text
    assert " late" not in text
    clock.advance(20)
    status, page = await reader.get("/runners")
    assert status == 200
    text = section(page, "lab-a-02")
    assert "lab-a-02 online last heartbeat 2026-11-29 12:00:00 UTC (50 s ago) late" in text
    assert (
        "Its heartbeat is late: its agent beats every 15 s and the last came 50 s ago. At 60 s without one "
        "the host goes offline and its running jobs end runner_lost : its runner host stopped answering"
    ) in text
    assert re.search(r'<td data-sort="[^"]*" class="late">50 s ago <strong>late</strong>', page)


def test_reserved_vcpu_seconds_are_never_rounded_away() -> None:
    assert [vcpu_seconds(value) for value in (14_600.0, 250.4, 2.06, 0.42, 0.004, 0.0)] == [
        "14,600",
        "250",
        "2.1",
        "0.42",
        "under 0.01",
        "0",
    ]


async def test_anonymous_users_are_sent_to_sign_in(site: Site, browser: Callable[..., Any]) -> None:
    async with (await browser()).http.get(site.base + "/runners", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == "/login?next=/runners"


def test_resource_values_follow_the_servers_catalog_and_show_bytes_as_gib() -> None:
    values = resource_values({"memory_bytes": 3 * GIB // 2, "vcpus": 8, "gpu_count": 1, "odd": "x"})
    assert [(value.name, value.shown, value.unit) for value in values] == [
        ("vcpus", "8", "count"),
        ("memory_bytes", "1.5 GiB", "bytes"),
        ("gpu_count", "1", ""),  # stored by an older server: shown, marked unknown
    ]


@pytest.mark.parametrize(
    ("report", "line", "isolated"),
    [
        (
            {"users": True, "tmp": True, "cgroup": "cgroup-v2", "memory_cap": True, "missing": []},
            "jobs isolated: users, private /tmp, cgroup v2, memory cap",
            True,
        ),
        (
            {
                "users": True,
                "tmp": True,
                "cgroup": "cgroup-v1",
                "memory_cap": False,
                "missing": ["no v1 memory"],
            },
            "jobs isolated: users, private /tmp, cgroup v1 (missing: no v1 memory)",
            True,
        ),
        (
            {"users": False, "tmp": False, "cgroup": None, "missing": ["not root"]},
            "jobs NOT isolated: not root",
            False,
        ),
        ({"users": "yes", "cgroup": 7, "missing": "nope"}, "jobs NOT isolated: isolation is off", False),
        ("not an object", None, False),
    ],
)
def test_the_agents_isolation_is_shown_in_one_line_read_defensively(
    report: Any, line: str | None, isolated: bool
) -> None:
    assert isolation_line(report) == (line, isolated)


def test_a_health_report_in_an_unexpected_shape_is_read_as_far_as_it_goes() -> None:
    view = health_view(
        {
            "underused_reservations": ["not an object", {"job": 5, "average_use_ppm": "lots"}],
            "repositories": [{"repository": "octo/a", "by_vcpus": {"16": 1, "2": 3, "²": 1}}],
            "admission_refusals": ["runner_full"],
            "running": True,
        }
    )
    assert view is not None
    [underused] = view.underused
    assert (underused.job, underused.use_percent) == ("5", 0.0)
    [repository] = view.repositories
    assert repository.by_vcpus == "2 vCPUs: 3, 16 vCPUs: 1, ² vCPUs: 1"
    assert view.admission_refusals == ()
    assert view.running is None
    assert health_view(None) is None


@needs_chromium
@on_sqlite_only
async def test_in_a_browser_a_hosts_row_leads_to_its_details(
    site: Site, browser: Callable[..., Any], tab: Callable[..., Any], clock: FakeClock
) -> None:
    agent = await browser(READER)  # only its HTTP client: the runner protocol
    headers = await runner(site, agent.http, "lab-a-01", {"modalix-bluebox": "present"})
    await running_job(site, agent.http, headers, "2-3,26-27")
    beat = {"resources": {}, "devices": {}, "waiting": {}, "health": health(clock)}
    async with agent.http.post(
        f"{site.base}/api/runner/v1/heartbeat", json=beat, headers=headers
    ) as response:
        assert response.status == 200
    reader = await tab(READER)
    page = await reader.open("/runners")
    row = page.locator("#hosts-table tbody tr").filter(has_text="lab-a-01")
    assert "online" in await row.inner_text()
    await reader.shoot("runners-health")
    await row.get_by_role("link", name="lab-a-01").click()
    await page.wait_for_url(f"{site.base}/runners#host-lab-a-01")
    details = page.locator("#host-lab-a-01")
    assert "2-3,26-27" in await details.inner_text()
    narrow = await tab(READER, width=390)
    await narrow.open("/runners")
    await narrow.shoot("runners-health-phone")


async def test_an_admin_pauses_a_host_from_the_page_and_resumes_it(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    owner = await browser(OWNER)
    _, page = await owner.get("/runners")
    assert 'action="/runners/lab-a-01/state"' not in page  # only System Admins pause hosts
    status, _ = await owner.post("/runners/lab-a-01/state", {"state": "paused"}, csrf_from="/runners")
    assert status == 403
    admin = await browser(ADMIN)
    _, page = await admin.get("/runners")
    assert 'action="/runners/lab-a-01/state"' in page
    status, page = await admin.post(
        "/runners/lab-a-01/state",
        {"state": "paused", "reason": "kernel upgrade", "until": ""},
        csrf_from="/runners",
    )
    assert status == 200
    paused = section(page, "lab-a-01")
    assert f"runner host lab-a-01 paused by {ADMIN}: kernel upgrade" in paused
    assert "its devices get no new jobs; those running finish" in paused
    status, page = await admin.post(
        "/runners/lab-a-01/state", {"state": "paused", "until": "yesterday"}, csrf_from="/runners"
    )
    assert status == 400  # already paused: the bad until is refused all the same, naming it
    assert "until" in page
    for reason in ("kernel\u202eupgrade", "x" * 501):  # the API's rule: printable, at most 500
        status, page = await admin.post(
            "/runners/lab-a-01/state", {"state": "paused", "reason": reason}, csrf_from="/runners"
        )
        assert status == 400
        assert "reason must be 1-500 printable characters" in page
    _, page = await admin.get("/runners")
    assert f"paused by {ADMIN}: kernel upgrade" in section(page, "lab-a-01")  # unchanged
    status, page = await admin.post("/runners/lab-a-01/state", {"state": "active"}, csrf_from="/runners")
    assert status == 200
    assert "paused by" not in section(page, "lab-a-01")


async def test_a_host_under_its_disk_floor_says_so_with_both_figures(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    reader = await browser(READER)
    headers = await runner(site, reader.http, "lab-a-01")
    beat = {"resources": {"free_disk_bytes": 76 * GIB}, "devices": {}, "waiting": {}}
    async with reader.http.post(
        f"{site.base}/api/runner/v1/heartbeat", json=beat, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
    status, page = await reader.get("/runners")
    assert status == 200
    assert (
        "Free disk 76.0 GiB is under the floor of 128.0 GiB (--free-space-floor-bytes): every job is refused "
        "runner_disk_full until space is freed or the floor lowered."
    ) in section(page, "lab-a-01")
    assert 'class="notice under-floor" id="host-lab-a-01-disk"' in page
