"""The aiohttp application factory: configuration in, application out; nothing happens at import time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import aiohttp
from aiohttp import web

from kerrigan.config import Settings
from kerrigan.dispatch.artifacts import ArtifactUpload
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.dispatch.protocol import RunnerProtocol
from kerrigan.dispatch.results import ResultsUpload
from kerrigan.github.client import answer_of
from kerrigan.github.delivery_worker import DeliveryWorker
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.installations import RepositoryDiscovery
from kerrigan.github.people import GitHubPeople
from kerrigan.github.reconciler import Reconciler
from kerrigan.github.routes import router
from kerrigan.github.routes.comments import may_cancel
from kerrigan.github.webhooks import MAX_BODY, WebhookReceiver
from kerrigan.github.worker_processes import supervise_workers
from kerrigan.logs import fresh_log_context
from kerrigan.store.database import (
    Clock,
    Database,
    check_schema,
    current_revision,
    head_revision,
    schema_ahead,
    utc_now,
)
from kerrigan.store.retention import Pruned, prune_history
from kerrigan.store.transition_log import log_transition
from kerrigan.web.api import create_api
from kerrigan.web.api.secrets import (
    REPOSITORY_FINDER,
    RepositoryFinder,
)
from kerrigan.web.errors import client_gone
from kerrigan.web.headers import install_security_headers
from kerrigan.web.membership import PEOPLE, GitHubAnswers
from kerrigan.web.metrics import LabMetrics, count_fact, metrics_handler, process_exposition
from kerrigan.web.pages import setup_pages
from kerrigan.web.state import DATABASE, SETTINGS
from kerrigan.web.writers import REPOSITORY_WRITERS, RepositoryWriters

log = logging.getLogger(__name__)

WORKER = web.AppKey("worker", DeliveryWorker)
RECONCILER = web.AppKey("reconciler", Reconciler)
PROTOCOL = web.AppKey("protocol", RunnerProtocol)
METRICS = web.AppKey("metrics", LabMetrics)
SCHEMA_HEAD = web.AppKey("schema_head", str)


def create_app(settings: Settings, *, clock: Clock = utc_now, worker_processes: int = 0) -> web.Application:
    """The whole Kerrigan server for ``settings``.

    On start-up the database is checked (a schema that is behind stops it with one line), and, when the
    GitHub App is configured, deliveries are processed: by a task in this process (``worker_processes=0``)
    or by that many ``kerrigan worker`` processes, which leave this one free to answer webhooks at once.
    Everything stops with the application.
    """
    app = web.Application(client_max_size=MAX_BODY, middlewares=[fresh_log_context, client_gone])
    install_security_headers(app)
    app[SETTINGS] = settings
    database = Database.connect(settings.database_url, clock, lab_conclusion=settings.lab_conclusion)
    app[DATABASE] = database
    deliveries_waiting = asyncio.Event()
    receiver = WebhookReceiver(database, settings.webhook_secret, deliveries_waiting.set)
    protocol = RunnerProtocol(
        database,
        lease_ttl_s=settings.runner_lease_s,
        output_max_bytes=settings.output_max_bytes,
        secrets_keys=settings.secrets_keys,
        admins=settings.admins,
    )
    app[PROTOCOL] = protocol
    metrics = LabMetrics(database)
    app[METRICS] = metrics
    app[REPOSITORY_WRITERS] = RepositoryWriters()  # asks GitHub once the App is connected
    app[REPOSITORY_FINDER] = RepositoryFinder()  # so does this
    # So does who may sign in, and read which repository; answers are kept on the database's clock.
    app[PEOPLE] = GitHubAnswers(clock=lambda: database.clock().timestamp())
    app[SCHEMA_HEAD] = head_revision()
    database.signals.listen_facts(count_fact)
    database.signals.listen_facts(log_transition)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        try:
            await check_schema(database.engine)
            async with (
                aiohttp.ClientSession() as http,
                _background(app, http, protocol, receiver, deliveries_waiting, workers=worker_processes),
            ):
                yield
        finally:
            await database.close()

    app.cleanup_ctx.append(lifecycle)
    app.on_shutdown.append(protocol.stop_polls)  # before aiohttp waits for the handlers to finish
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", metrics_handler(metrics.exposition, settings.metrics_token))
    app.router.add_post("/webhooks/github", receiver.handle)
    app.router.add_routes(protocol.routes())
    app.router.add_routes(ResultsUpload(protocol).routes())
    app.router.add_routes(ArtifactUpload(protocol).routes())
    app.add_subapp("/api/v1", create_api())
    setup_pages(app, settings)
    return app


@contextlib.asynccontextmanager
async def _background(
    app: web.Application,
    http: aiohttp.ClientSession,
    protocol: RunnerProtocol,
    receiver: WebhookReceiver,
    deliveries_waiting: asyncio.Event,
    *,
    workers: int,
) -> AsyncIterator[None]:
    """The dispatcher, the check-run reconciler and the delivery worker(s), for as long as the application
    runs."""
    settings, database = app[SETTINGS], app[DATABASE]
    worker_task = reconciler_task = supervisor_task = None
    if not (settings.github_app_id and settings.github_private_key):
        log.warning(
            "the GitHub App is not configured (KERRIGAN_GITHUB_APP_ID and a private key): "
            "deliveries are stored but not processed"
        )
    else:
        github = GitHubApp.connect(database, settings, http)
        # Who writes to a repository (and so may manage its secrets), as GitHub says, cached as cancel's is.
        app[REPOSITORY_WRITERS].ask = functools.partial(_may_write, github)
        # A repository of an installation no event told of (installed before the database existed).
        app[REPOSITORY_FINDER].discover = RepositoryDiscovery(github.client, github.tokens)
        # Who may sign in and who may read which repository, as GitHub says (kept on the database's clock).
        app[PEOPLE].people = GitHubPeople(github, clock=lambda: database.clock().timestamp())
        protocol.credentials = github.job_credentials
        protocol.answer_of = answer_of
        protocol.revoking = functools.partial(_count_revoke, github)
        reconciler = Reconciler(github)
        app[RECONCILER] = reconciler
        if not settings.process_deliveries:
            log.info(
                "KERRIGAN_WORKERS=none: deliveries and check runs are left to `kerrigan worker` processes"
            )
        elif workers:
            reconciler_task = asyncio.create_task(reconciler.run(), name="kerrigan-check-runs")
            supervisor_task = asyncio.create_task(
                supervise_workers(workers, settings), name="kerrigan-workers"
            )
        else:
            reconciler_task = asyncio.create_task(reconciler.run(), name="kerrigan-check-runs")
            worker = DeliveryWorker(
                github,
                router,
                wake=deliveries_waiting,
                receiver=receiver,
                lease_s=settings.delivery_lease_s,
            )
            app[WORKER] = worker
            worker_task = asyncio.create_task(worker.run(), name="kerrigan-deliveries")
    dispatcher = Dispatcher(
        database, lease_ttl_s=settings.runner_lease_s, quarantine_suspects=settings.quarantine == "suspect"
    )
    dispatcher_task = asyncio.create_task(dispatcher.run(), name="kerrigan-dispatch")
    retention_task = asyncio.create_task(_retention(database, settings), name="kerrigan-retention")
    metrics_task = asyncio.create_task(app[METRICS].run(), name="kerrigan-metrics")
    try:
        yield
    finally:
        dispatcher.stop()  # its round ends with its transaction, not in the middle of a query
        app[METRICS].stop()  # so does the read of the lab's figures
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(dispatcher_task), DISPATCHER_STOP_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(metrics_task), DISPATCHER_STOP_S)
        for task in (
            dispatcher_task,
            worker_task,
            reconciler_task,
            retention_task,
            metrics_task,
            supervisor_task,
        ):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


DISPATCHER_STOP_S = 10.0  # how long a stopping server waits for the dispatch round under way
RETENTION_EVERY_S = 3600.0
"""How often history past ``KERRIGAN_HISTORY_DAYS`` and output past ``KERRIGAN_OUTPUT_DAYS`` are deleted."""


async def prune_once(database: Database, settings: Settings, *, batch: int = 500) -> Pruned:
    """Delete what retention says is too old, one batch per transaction until none is left."""
    now = database.clock()
    sessions_before = now - timedelta(days=settings.history_days) if settings.history_days else None
    output_before = now - timedelta(days=settings.output_days) if settings.output_days else None
    total = Pruned()
    while True:
        # One batch per write: on SQLite the hot paths' writes wait for a short batch, not the backlog.
        async with database.writing(), database.sessions() as session, session.begin():
            done = await prune_history(
                session, sessions_before=sessions_before, output_before=output_before, batch=batch
            )
        total = Pruned(total.sessions + done.sessions, total.output_jobs + done.output_jobs)
        if not (done.sessions or done.output_jobs):
            return total
        await asyncio.sleep(0)


async def _retention(database: Database, settings: Settings) -> None:
    """Apply retention now and every :data:`RETENTION_EVERY_S`; a failed pass is logged and tried again."""
    while True:
        try:
            pruned = await prune_once(database, settings)
            if pruned.sessions or pruned.output_jobs:
                log.info(
                    "retention: deleted %d sessions older than %d days and the output of %d jobs older than "
                    "%d days",
                    pruned.sessions,
                    settings.history_days,
                    pruned.output_jobs,
                    settings.output_days,
                )
        except Exception:  # the next pass tries again; the server goes on
            log.exception("retention pass failed")
        await asyncio.sleep(RETENTION_EVERY_S)


async def _may_write(github: GitHubApp, installation_id: int, full_name: str, login: str) -> tuple[bool, str]:
    """Whether ``login`` has write, maintain or admin on the repository (or is an admin), and its role."""
    return await may_cancel(github, github.repository(installation_id, full_name), login)


def _count_revoke(github: GitHubApp, installation_id: int) -> None:
    """A runner revokes a job's token with a request GitHub counts in the installation's hourly allowance
    (not among its content-creating ones): count it in the budget the reconciler paces check runs by."""
    github.client.budget.spend(installation_id, creating=False, now=time.time())


async def tune_collector(app: web.Application | None = None) -> None:
    """For a long-running server process, once it has started.

    Everything made while starting lives as long as the process: freezing it keeps it out of the
    collector's full passes, which otherwise stall the loop for tens of milliseconds at a time. Fewer,
    larger young-generation passes suit a server that allocates in bursts per request (the default, 700
    objects, runs the collector several times within one webhook). Measured in benchmarks/bench_webhooks.py:
    p99 to the 202 from 130 ms to under 30 ms at 200 deliveries/s.
    """
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


async def run_worker(
    settings: Settings, *, metrics_port: int | None = None, metrics_host: str = "127.0.0.1"
) -> None:
    """The body of ``kerrigan worker``: process stored deliveries, and send the check runs they make, until
    cancelled. With ``metrics_port`` it serves its own counters at ``http://metrics_host:port/metrics``
    (the lab's gauges are the servers'; they read the same database).

    It looks for new deliveries every quarter second when idle; the web process stores them.
    """
    database = Database.connect(settings.database_url, lab_conclusion=settings.lab_conclusion)
    database.signals.listen_facts(count_fact)
    database.signals.listen_facts(log_transition)
    try:
        await check_schema(database.engine)
        async with aiohttp.ClientSession() as http, _metrics_server(metrics_host, metrics_port, settings):
            github = GitHubApp.connect(database, settings, http)
            worker = DeliveryWorker(github, router, idle_poll_s=0.25, lease_s=settings.delivery_lease_s)
            reconciler = Reconciler(github)
            await tune_collector()
            async with asyncio.TaskGroup() as group:
                group.create_task(worker.run())
                group.create_task(reconciler.run())
    finally:
        await database.close()


@contextlib.asynccontextmanager
async def _metrics_server(host: str, port: int | None, settings: Settings) -> AsyncIterator[None]:
    """A worker's ``/metrics`` and ``/healthz`` on ``host:port`` while the block runs (no port: none)."""
    if port is None:
        yield
        return
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler(process_exposition(), settings.metrics_token))
    app.router.add_get("/healthz", _healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise MetricsPortError(
            f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror})"
        ) from None
    try:
        yield
    finally:
        await runner.cleanup()


class MetricsPortError(RuntimeError):
    """The worker's metrics port cannot be listened on; the message names the flag."""


async def _healthz(request: web.Request) -> web.Response:
    """The process is up."""
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    """The database answers (within :data:`READY_TIMEOUT_S`) and its schema is the one this code needs, or
    a newer release's (its migrations only add): during a rolling upgrade a pod of the new version is not
    sent traffic before the migration job has run, and the old ones keep serving until they are replaced."""
    head = request.app[SCHEMA_HEAD]
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            current = await current_revision(request.app[DATABASE].engine)
    except Exception as exc:  # any failure means not ready; the reason for the log, not for the caller
        log.warning(
            "/readyz: the database does not answer: %s", str(exc).splitlines()[0] if str(exc) else repr(exc)
        )
        return web.json_response(
            {"status": "unavailable", "reason": "the database does not answer"}, status=503
        )
    if schema_ahead(current, head):
        return web.json_response({"status": "ok", "schema": current, "code_schema": head})
    if current != head:
        at = f"at revision {current}" if current else "empty"
        reason = f"the database is {at}; this Kerrigan needs revision {head} (run `kerrigan db upgrade`)"
        return web.json_response({"status": "unavailable", "reason": reason}, status=503)
    return web.json_response({"status": "ok", "schema": head})


READY_TIMEOUT_S = 2.0  # a probe's own timeout is a few seconds: answer before it gives up
