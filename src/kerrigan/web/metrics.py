"""``GET /metrics``: the process's counters and the lab's state, in Prometheus's text format.

A scrape reads nothing from the database. :class:`LabMetrics` reads the lab's figures
(:func:`kerrigan.store.lab_figures.read_figures`) in the background: soon after a commit in this process
that changes the queue, a device or a check run (at most once per :data:`MIN_GAP_S`), and every
:data:`REFRESH_S` for what other processes change. The facts committed transactions note (a job started
or ended, a session concluded) are counted as they commit (:func:`count_fact`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Final

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from kerrigan.core.reservations import ReservationState
from kerrigan.metrics import DEVICE_BUSY, DEVICE_RECOVERIES, JOBS, QUEUE_WAIT, SESSIONS, TESTS
from kerrigan.store.database import Database
from kerrigan.store.lab_figures import LabFigures, PoolsOfRequirements, read_figures
from kerrigan.store.signals import (
    Fact,
    JobEnded,
    JobStarted,
    RecoveryEnded,
    ResultsReceived,
    SessionConcluded,
    Topic,
)
from kerrigan.web.errors import Handler, error_response

log = logging.getLogger(__name__)

REFRESH_S: Final = 10.0  # other processes' changes show within this (a scrape interval is 15 s or more)
MIN_GAP_S: Final = 1.0  # a busy lab's commits refresh the figures at most this often
HOST_STATES: Final = ("online", "offline", "paused")


def count_fact(fact: Fact) -> None:
    """Count what a committed transaction noted."""
    match fact:
        case JobStarted(waited_s):
            QUEUE_WAIT.observe(waited_s)
        case JobEnded(state, failure_class, devices, ran_s):
            JOBS.labels(state, failure_class or "").inc()
            for device in devices:  # a device's series starts with its first job, even one that never ran
                DEVICE_BUSY.inc(device, ran_s)
        case SessionConcluded(conclusion):
            SESSIONS.labels(conclusion).inc()
        case ResultsReceived(passed, failed, errors, skipped):
            TESTS.labels("passed").inc(passed)
            TESTS.labels("failed").inc(failed)
            TESTS.labels("error").inc(errors)
            TESTS.labels("skipped").inc(skipped)
        case RecoveryEnded(device, outcome):
            DEVICE_RECOVERIES.labels(device, outcome).inc()


class LabFiguresCollector(Collector):
    """The lab's gauges from the figures last read, at the time of the scrape."""

    def __init__(self, metrics: LabMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        figures = self.metrics.figures
        if figures is None:
            return
        now = self.metrics.database.clock()
        age = GaugeMetricFamily(
            "kerrigan_lab_figures_age_seconds", "How long ago the lab's figures below were read."
        )
        age.add_metric([], _seconds(now, figures.read_at))
        yield age
        queue = GaugeMetricFamily(
            "kerrigan_queue_jobs",
            "Queued jobs by the pools they wait on: those with a device that can take them now or once free, "
            'online or out of maintenance (a job counts in each such pool; pool="" holds those none can).',
            labels=["pool"],
        )
        for pool, count in sorted(figures.queue.items()):
            queue.add_metric([pool], count)
        yield queue
        devices = GaugeMetricFamily(
            "kerrigan_devices", "Devices by pool, state and health.", labels=["pool", "state", "health"]
        )
        for (pool, device_state, health), count in sorted(figures.devices.items()):
            devices.add_metric([pool, device_state.value, health.value], count)
        yield devices
        hosts = GaugeMetricFamily("kerrigan_runner_hosts", "Runner hosts by state.", labels=["state"])
        by_state = dict.fromkeys(HOST_STATES, 0)
        for host in figures.hosts:
            by_state[host.state] = by_state.get(host.state, 0) + 1
        for state, count in by_state.items():
            hosts.add_metric([state], count)
        yield hosts
        beats = GaugeMetricFamily(
            "kerrigan_runner_heartbeat_age_seconds",
            "Seconds since each runner host's last heartbeat (hosts that have sent one and are not paused).",
            labels=["host"],
        )
        for host in figures.hosts:
            # A paused host may be down on purpose (it takes no work): its silence is nobody's alert.
            if host.last_heartbeat_at is not None and host.state != "paused":
                beats.add_metric([host.id], _seconds(now, host.last_heartbeat_at))
        yield beats
        reservations = GaugeMetricFamily(
            "kerrigan_reservations",
            "People's reservations: waiting for a device, or active (holding one).",
            labels=["state"],
        )
        for held in (ReservationState.WAITING, ReservationState.ACTIVE):
            reservations.add_metric([held.value], figures.reservations.get(held, 0))
        yield reservations
        pending = GaugeMetricFamily(
            "kerrigan_checkrun_pending", "Sessions whose newest state GitHub's check run does not show yet."
        )
        pending.add_metric([], figures.checkruns_pending)
        yield pending
        lag = GaugeMetricFamily(
            "kerrigan_checkrun_lag_seconds",
            "Seconds the longest-waiting check run has not shown its session's newest state (0: none waits).",
        )
        since = figures.checkruns_unshown_since
        lag.add_metric([], _seconds(now, since) if since is not None else 0.0)
        yield lag


def _seconds(now: datetime, then: datetime) -> float:
    return max(0.0, (now - then).total_seconds())


class _ProcessFigures(Collector):
    """The process's own registry (counters, histograms, and the client library's process figures)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


Exposition = Callable[[str], tuple[bytes, str]]


_EOF: Final = b"# EOF\n"


def _exposition(registry: CollectorRegistry) -> Exposition:
    def expose(accept: str) -> tuple[bytes, str]:
        # The format the scraper asks for: OpenMetrics for Prometheus, text 0.0.4 for anyone else.
        encoder, content_type = choose_encoder(accept)
        body = encoder(registry)
        openmetrics = content_type.startswith("application/openmetrics-text")
        busy = DEVICE_BUSY.render(openmetrics=openmetrics).encode()
        if openmetrics and body.endswith(_EOF):  # OpenMetrics ends with its EOF line, after every family
            return body[: -len(_EOF)] + busy + _EOF, content_type
        return body + busy, content_type

    return expose


def process_registry() -> CollectorRegistry:
    """A registry of the process's own figures only (a ``kerrigan worker``'s metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ProcessFigures())
    return registry


def process_exposition() -> Exposition:
    """The process's own figures, in the format asked for."""
    return _exposition(process_registry())


class LabMetrics:
    """The lab's figures, kept fresh for the scrapes, and the exposition of everything."""

    def __init__(
        self, database: Database, *, refresh_s: float = REFRESH_S, min_gap_s: float = MIN_GAP_S
    ) -> None:
        self.database = database
        self.refresh_s = refresh_s
        self.min_gap_s = min_gap_s
        self.figures: LabFigures | None = None
        self.registry = process_registry()
        self.registry.register(LabFiguresCollector(self))
        self.exposition = _exposition(self.registry)
        self._pools = PoolsOfRequirements()
        self._changed = asyncio.Event()
        self._stopped = asyncio.Event()
        self._stopping = False
        self._stops = [
            database.signals.listen(Topic.DISPATCH, self._changed.set),
            database.signals.listen(Topic.CHECK_RUNS, self._changed.set),
        ]

    async def refresh(self) -> LabFigures:
        """Read the figures now."""
        async with self.database.sessions() as session:
            self.figures = await read_figures(session, self.database.clock(), self._pools)
        return self.figures

    def stop(self) -> None:
        """Finish the read under way and return from :meth:`run` (a read cut off by a cancel would leave its
        database connection to the garbage collector)."""
        self._stopping = True
        self._stopped.set()
        self._changed.set()  # and the wait for the next change: else a stopping server waits out its refresh

    async def run(self) -> None:
        """Refresh after changes and every :attr:`refresh_s`, until stopped (:meth:`stop`) or cancelled."""
        try:
            while not self._stopping:
                self._changed.clear()
                # A failed read keeps the figures as last read (their age says so); the next pass tries again.
                try:
                    await self.refresh()
                except Exception:
                    log.exception("reading the lab's figures for /metrics failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), self.min_gap_s)
                if self._stopped.is_set():
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), max(0.0, self.refresh_s - self.min_gap_s))
        finally:
            for stop in self._stops:
                stop()


def metrics_handler(exposition: Exposition, token: str | None) -> Handler:
    """``GET /metrics`` answering ``exposition``; with ``token`` (``KERRIGAN_METRICS_TOKEN``) only to
    ``Authorization: Bearer <token>``."""
    expected = f"Bearer {token}".encode() if token else None

    async def handle(request: web.Request) -> web.StreamResponse:
        if expected is not None:
            given = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(given, expected):
                return error_response(
                    401,
                    "unauthenticated",
                    "/metrics needs Authorization: Bearer <KERRIGAN_METRICS_TOKEN>",
                    headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
                )
        body, content_type = exposition(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    return handle
