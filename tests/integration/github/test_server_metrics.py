"""``GET /metrics`` of the server, scraped over HTTP and parsed as Prometheus parses it, while a push runs
on real agents: every figure of docs/operations.md is there and moves with what happened."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from kerrigan.app import METRICS
from kerrigan.store.database import Database
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import Harness, StartApp, settings_for
from tests.integration.runner.agents import (
    AgentFactory,
    completed,
    job_rows,
    smoke_commit,
    start_both,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

DOCUMENTED = (
    "kerrigan_webhook_deliveries_total",
    "kerrigan_webhook_ack_seconds",
    "kerrigan_sessions_total",
    "kerrigan_jobs_total",
    "kerrigan_queue_jobs",
    "kerrigan_queue_wait_seconds",
    "kerrigan_devices",
    "kerrigan_device_busy_seconds_total",
    "kerrigan_runner_hosts",
    "kerrigan_runner_heartbeat_age_seconds",
    "kerrigan_github_requests_total",
    "kerrigan_github_rate_remaining",
    "kerrigan_github_rate_limit",
    "kerrigan_checkrun_pending",
    "kerrigan_checkrun_lag_seconds",
    "kerrigan_reservations",
)


async def scrape(harness: Harness, **headers: str) -> tuple[Samples, set[str]]:
    """Every sample of ``/metrics`` by (name, labels), and the metric families' types and names."""
    await harness.client.app[METRICS].refresh()  # the figures a background pass would read next
    response = await harness.client.get("/metrics", headers=headers)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(await response.text()):
        names.add(family.name)  # a family with no series yet (nothing queued) is declared all the same
        for sample in family.samples:
            names.add(sample.name)
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples, names


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every series of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(found for (each, series), found in samples.items() if each == name and wanted <= series)


async def test_a_push_run_on_agents_moves_every_figure(harness: Harness, agents: AgentFactory) -> None:
    harness.github.limits.enabled = True  # its answers carry x-ratelimit-* headers, as GitHub's do
    before, _ = await scrape(harness)
    await start_both(harness, agents)
    [run] = await harness.push_commit(smoke_commit())
    await completed(harness, run)
    await harness.settle()

    after, names = await scrape(harness)
    missing = [name for name in DOCUMENTED if name not in names and name.removesuffix("_total") not in names]
    assert missing == []

    def grew(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert grew("kerrigan_webhook_deliveries_total", event="push", outcome="processed") == 1
    assert grew("kerrigan_webhook_ack_seconds_count") >= 1
    assert grew("kerrigan_sessions_total", conclusion="success") == 1
    assert grew("kerrigan_jobs_total", state="succeeded", failure_class="") == 2
    assert grew("kerrigan_queue_wait_seconds_count") == 2
    # The test's clock stands still: the jobs ran for 0 s, but each device they ran on has its series.
    busy = {dict(series)["device"] for name, series in after if name == "kerrigan_device_busy_seconds_total"}
    ran_on = {row.device_id for row in await job_rows(harness)}
    assert ran_on <= busy
    check_runs = "POST /repos/{owner}/{repo}/check-runs"
    assert grew("kerrigan_github_requests_total", operation=check_runs, status="201") == 1
    assert (
        grew(
            "kerrigan_github_requests_total",
            operation="PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
        )
        >= 1
    )
    # No series carries an id of a check run, a commit or a repository.
    operations = {
        dict(series)["operation"] for name, series in after if name == "kerrigan_github_requests_total"
    }
    assert all(
        "octo" not in operation and not any(char.isdigit() for char in operation) for operation in operations
    )
    remaining = {
        dict(series)["installation"]: found
        for (name, series), found in after.items()
        if name == "kerrigan_github_rate_remaining"
    }
    limits = {
        dict(series)["installation"]: found
        for (name, series), found in after.items()
        if name == "kerrigan_github_rate_limit"
    }
    assert remaining
    assert set(remaining) == set(limits)
    assert all(0 <= remaining[account] <= limits[account] for account in remaining), (remaining, limits)

    hosts = await _count(harness.database, "runner_hosts")
    assert value(after, "kerrigan_runner_hosts", state="online") >= 2  # the two agents' hosts at least
    assert total(after, "kerrigan_runner_hosts") == hosts
    ages = {
        dict(series)["host"]: found
        for (name, series), found in after.items()
        if name == "kerrigan_runner_heartbeat_age_seconds"
    }
    assert set(ages) >= {"lab-a-01", "lab-a-02"}
    assert all(0 <= age < 60 for age in ages.values())
    assert total(after, "kerrigan_devices") == await _count(harness.database, "devices")
    assert total(after, "kerrigan_devices", health="bad") == 0
    assert value(after, "kerrigan_checkrun_pending") == 0
    assert value(after, "kerrigan_checkrun_lag_seconds") == 0
    assert total(after, "kerrigan_queue_jobs") == 0


async def test_queued_jobs_count_in_the_pools_that_can_take_them_and_check_runs_behind_show_their_lag(
    harness: Harness,
) -> None:
    async with harness.database.engine.begin() as connection:
        await connection.execute(text("UPDATE runner_hosts SET online = false"))
    await harness.push_commit(smoke_commit())  # no runner host is online: both jobs wait in the queue
    await harness.settle()
    samples, _ = await scrape(harness)
    by_pool = {
        dict(series)["pool"]: found
        for (name, series), found in samples.items()
        if name == "kerrigan_queue_jobs"
    }
    assert set(by_pool) <= await _pools(harness.database)
    assert by_pool
    assert all(count >= 1 for count in by_pool.values())
    assert max(by_pool.values()) <= 2

    # A newer state of the session is recorded and GitHub does not show it yet: the lag grows with the clock.
    async with harness.database.engine.begin() as connection:
        await connection.execute(
            text("UPDATE sessions SET version = version + 1, unshown_since = :at"),
            {"at": harness.database.clock()},
        )
    harness.database.clock.advance(42)  # type: ignore[attr-defined]
    samples, _ = await scrape(harness)
    assert value(samples, "kerrigan_checkrun_pending") == 1
    assert value(samples, "kerrigan_checkrun_lag_seconds") >= 42


async def test_metrics_may_ask_for_a_bearer_token(
    db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    settings = settings_for(db, github)
    client = await start_app(type(settings)(**{**settings.__dict__, "metrics_token": "scrape-me-please"}))
    refused = await client.get("/metrics")
    assert refused.status == 401
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(await refused.text())["error"]["code"] == "unauthenticated"
    wrong = await client.get("/metrics", headers={"Authorization": "Bearer scrape-me-not"})
    assert wrong.status == 401
    allowed = await client.get("/metrics", headers={"Authorization": "Bearer scrape-me-please"})
    assert allowed.status == 200
    assert "kerrigan_webhook_ack_seconds" in await allowed.text()


async def test_readyz_answers_only_while_the_schema_is_the_code_s(harness: Harness) -> None:
    ready = await harness.client.get("/readyz")
    assert ready.status == 200
    assert (await ready.json())["status"] == "ok"
    async with harness.database.engine.begin() as connection:
        head = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
        await connection.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    try:
        behind = await harness.client.get("/readyz")
        assert behind.status == 503
        reason = (await behind.json())["reason"]
        assert "revision 0001" in reason
        assert "kerrigan db upgrade" in reason
        alive = await harness.client.get("/healthz")
        assert alive.status == 200  # the process answers; it is only not ready
    finally:
        async with harness.database.engine.begin() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = :head"), {"head": head})


async def _count(database: Database, table: str) -> int:
    async with database.engine.connect() as connection:
        return int((await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def _pools(database: Database) -> set[str]:
    async with database.engine.connect() as connection:
        return {row[0] for row in await connection.execute(text("SELECT id FROM pools"))}


async def test_readyz_stays_ready_on_a_newer_release_s_schema(harness: Harness) -> None:
    async with harness.database.engine.begin() as connection:
        head = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
        await connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    try:
        answer = await harness.client.get("/readyz")
        assert answer.status == 200
        assert await answer.json() == {"status": "ok", "schema": "9999", "code_schema": head}
    finally:
        async with harness.database.engine.begin() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = :head"), {"head": head})
