"""The runner agent's own Prometheus metrics: ``GET /metrics`` with ``kerrigan runner --metrics-port``.

Every figure is read from the agent's live state when Prometheus scrapes (a collector, not gauges kept in
step with it): the jobs it holds by state, the vCPUs their claims hold against ``max_weight``, the CPUs it
can pin jobs to, the free space of its work dir and the offers it refused, by reason; and of the boards its
devices file wires, every power switch by why it was made and how long each boot took
(:mod:`kerrigan.runner.boards.figures`). Each agent has a registry of its own, so several agents in one
process (the tests) never share a figure.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from collections.abc import Iterator
from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from kerrigan.runner.boards.figures import BOOT_BUCKETS, BootTimes, SwitchReason
from kerrigan.runner.host_state import HostState

# A job the agent holds, by its record's state; an ended one's record is kept a day as history, not held.
HELD_STATES: Final = ("accepted", "waiting", "starting", "running")
# A claim counts against max_weight from the moment its start is chosen (as the scheduler counts it).
CLAIMING_STATES: Final = frozenset({"starting", "running"})
# The refusals admission sends (kerrigan.runner.admission), shown at 0 before the first so rate() sees it.
REFUSAL_REASONS: Final = ("invalid_claim", "runner_disk_full", "runner_full")


class MetricsAddressError(Exception):
    """The metrics server cannot listen where it was told; the message names the flag to change."""


class AgentCollector:
    """The agent's figures, read at each scrape from the state the agent works with."""

    def __init__(self, state: HostState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        """One family per figure. Runs on the event loop, which alone changes the state it reads."""
        state = self._state
        records = list(state.jobs.values())
        jobs = GaugeMetricFamily("kerrigan_runner_jobs", "Jobs the agent holds, by state.", labels=["state"])
        held = Counter(record.state for record in records)
        for name in HELD_STATES:
            jobs.add_metric([name], held[name])
        yield jobs
        yield GaugeMetricFamily(
            "kerrigan_runner_vcpus_claimed",
            "vCPUs claimed by the jobs starting or running (counted against max_weight).",
            value=sum(record.claim for record in records if record.state in CLAIMING_STATES),
        )
        yield GaugeMetricFamily(
            "kerrigan_runner_vcpus_max",
            "The most vCPUs jobs may claim at once (max_weight).",
            value=state.settings.limits.max_weight,
        )
        yield GaugeMetricFamily(
            "kerrigan_runner_vcpus_allocatable",
            "CPUs the host can pin jobs to: the largest claim it accepts.",
            value=state.allocator.limit,
        )
        try:
            free = state.workspaces.free_bytes()
        except OSError:
            free = None  # the work dir is gone or unreadable: no sample, rather than a failed scrape
        if free is not None:
            yield GaugeMetricFamily(
                "kerrigan_runner_disk_free_bytes",
                "Free space on the work dir's filesystem an unprivileged process may use.",
                value=free,
                unit="bytes",
            )
        refusals = CounterMetricFamily(
            "kerrigan_runner_admission_refusals",
            "Offers the agent refused since it started, by the reason it gave the server.",
            labels=["reason"],
        )
        for reason, count in sorted((dict.fromkeys(REFUSAL_REASONS, 0) | state.refusals).items()):
            refusals.add_metric([reason], count)
        yield refusals
        yield from self._boards()

    def _boards(self) -> Iterator[Metric]:
        """The boards' figures: every device with power (booting: with power, console and boot) shown
        from the start, at 0, and any other the agent switched or booted."""
        figures = self._state.board_figures
        entries = self._state.presence.entries
        powered = {device for device, entry in entries.items() if entry.wiring.power is not None}
        powered |= {device for device, _ in figures.switches}
        switches = CounterMetricFamily(
            "kerrigan_device_power_cycles",
            "Switches of a board's power (a cycle, an on or an off) since the agent started, by why.",
            labels=["device", "reason"],
        )
        for device in sorted(powered):
            for reason in SwitchReason:
                switches.add_metric([device, reason.value], figures.switches[device, reason])
        yield switches
        booting = {
            device
            for device, entry in entries.items()
            if None not in (entry.wiring.power, entry.wiring.console, entry.wiring.boot)
        }
        boots = HistogramMetricFamily(
            "kerrigan_device_boot_seconds",
            "Seconds from a board's power-on to its boot.ready line, when the agent powered it on.",
            labels=["device"],
        )
        for device in sorted(booting | set(figures.boots)):
            times = figures.boots.get(device, BootTimes())
            within = zip(BOOT_BUCKETS, times.within, strict=True)
            buckets = [(f"{bound:g}", float(count)) for bound, count in within] + [("+Inf", times.count)]
            boots.add_metric([device], buckets, times.total_s)
        yield boots


def agent_registry(state: HostState) -> CollectorRegistry:
    """A registry of the agent's own (not the process-wide default one) holding its collector."""
    registry = CollectorRegistry()
    registry.register(AgentCollector(state))
    return registry


class MetricsServer:
    """``GET /metrics`` of one registry on a small aiohttp server of its own, beside the agent's work."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)  # a scrape every few seconds is not news

    async def _metrics(self, request: web.Request) -> web.Response:
        # The text exposition, or OpenMetrics to a scraper whose Accept asks for it (Prometheus does).
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(self._registry), headers={"Content-Type": content_type})

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host``:``port`` (0: any free port); the port bound, or :class:`MetricsAddressError`."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        try:
            await site.start()
        except OSError as err:
            await self._runner.cleanup()
            raise MetricsAddressError(_address_problem(host, port, err)) from None
        bound: int = self._runner.addresses[0][1]
        return bound

    async def stop(self) -> None:
        """Stop listening and close the connections of scrapes under way."""
        await self._runner.cleanup()


def _address_problem(host: str, port: int, err: OSError) -> str:
    """Why listening failed, naming the flag that chose what failed."""
    if err.errno == errno.EADDRINUSE:
        return f"--metrics-port {port}: {host}:{port} is already in use (another agent or exporter?)"
    if err.errno == errno.EACCES:
        return f"--metrics-port {port}: not allowed to listen on it (ports under 1024 need privileges)"
    # asyncio words a bind failure at length; the system's own words for the errno are enough here.
    reason = os.strerror(err.errno) if err.errno and err.errno > 0 else (err.strerror or str(err))
    return f"--metrics-host {host}: cannot listen on {host}:{port}: {reason}"
