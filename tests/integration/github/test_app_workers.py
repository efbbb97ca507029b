"""Who processes deliveries: the server itself (``KERRIGAN_WORKERS=0``), worker processes it starts and
restarts, or workers run apart (``KERRIGAN_WORKERS=none``, the Helm chart's servers)."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kerrigan import app as application
from kerrigan.app import RECONCILER, WORKER
from kerrigan.config import ConfigError, Settings
from kerrigan.github import worker_processes
from kerrigan.github.delivery_worker import DeliveryWorker
from kerrigan.github.routes import router
from kerrigan.store.database import Database
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness, StartApp, push_payload, settings_for, stored_deliveries


async def test_with_workers_none_the_server_stores_deliveries_and_leaves_them_to_a_worker(
    db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    client = await start_app(settings_for(db, github, process_deliveries=False))
    assert WORKER not in client.app
    assert await Harness(client, github, db).deliver("push", push_payload()) == 202
    await asyncio.sleep(0.5)  # time the server's own worker would have needed
    [stored] = await stored_deliveries(db)
    assert not stored.processed

    # What `kerrigan worker` runs: it takes the delivery up.
    worker = DeliveryWorker(client.app[RECONCILER].app, router, idle_poll_s=0.05)
    assert await worker.process_one()
    [stored] = await stored_deliveries(db)
    assert stored.processed


async def test_a_worker_process_that_exits_is_logged_and_replaced(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    started: list[asyncio.subprocess.Process] = []

    async def spawn(number: int, settings: Settings) -> asyncio.subprocess.Process:
        # The first worker dies at once (status 3); the one started in its place keeps running.
        code = "import sys; sys.exit(3)" if not started else "import time; time.sleep(60)"
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
        started.append(process)
        return process

    monkeypatch.setattr(worker_processes, "_spawn_worker", spawn)
    monkeypatch.setattr(worker_processes, "WORKER_RESTART_S", 0.01)
    caplog.set_level(logging.ERROR, "kerrigan.github.worker_processes")
    supervisor = asyncio.create_task(worker_processes.supervise_workers(1, Settings()))
    await wait_until(lambda: len(started) == 2, timeout=10)
    assert "worker process 1 exited with status 3; starting another" in caplog.text
    supervisor.cancel()
    with pytest.raises(asyncio.CancelledError):
        await supervisor
    # Stopping the server stops its workers: the running one was terminated and waited for.
    assert started[1].returncode is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_worker_serves_its_own_counters_on_its_metrics_port() -> None:
    port = _free_port()
    settings = Settings(metrics_token="worker-scrape-token")
    async with application._metrics_server("127.0.0.1", port, settings), aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/metrics") as refused:
            assert refused.status == 401
        auth = {"Authorization": "Bearer worker-scrape-token"}
        async with http.get(f"http://127.0.0.1:{port}/metrics", headers=auth) as answer:
            assert answer.status == 200
            families = {family.name for family in text_string_to_metric_families(await answer.text())}
        assert {"kerrigan_webhook_deliveries", "kerrigan_github_requests", "kerrigan_jobs"} <= families
        assert "kerrigan_queue_jobs" not in families  # the lab's gauges are the servers'
        async with http.get(f"http://127.0.0.1:{port}/healthz") as alive:
            assert alive.status == 200


async def test_a_metrics_port_in_use_is_one_line_naming_the_flag() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(application.MetricsPortError, match=f"--metrics-port {port}: cannot listen on"):
            async with application._metrics_server("127.0.0.1", port, Settings()):
                pass


def test_the_workers_a_server_starts_serve_their_counters_on_consecutive_ports() -> None:
    settings = Settings.from_env({"KERRIGAN_WORKER_METRICS_PORT": "9102", "KERRIGAN_HOST": "0.0.0.0"})
    assert worker_processes.worker_argv(1, settings)[-5:] == [
        "worker",
        "--metrics-host",
        "0.0.0.0",
        "--metrics-port",
        "9102",
    ]
    assert worker_processes.worker_argv(2, settings)[-1] == "9103"
    assert worker_processes.worker_argv(1, Settings())[-1] == "worker"  # no setting: no metrics port
    with pytest.raises(ConfigError, match="KERRIGAN_WORKER_METRICS_PORT must be a port number"):
        Settings.from_env({"KERRIGAN_WORKER_METRICS_PORT": "99999"})
