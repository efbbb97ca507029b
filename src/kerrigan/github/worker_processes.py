"""The GitHub work in processes of its own: the ``kerrigan worker`` processes (each processing stored
deliveries and sending the check runs they make) that a server with ``KERRIGAN_WORKERS`` starts and keeps
running, each restarted when it exits, and stopped with the server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys

from kerrigan.config import Settings

log = logging.getLogger(__name__)


def worker_argv(number: int, settings: Settings) -> list[str]:
    """The command line of worker ``number`` (from 1) a server starts: ``kerrigan worker``, serving its
    counters on ``KERRIGAN_WORKER_METRICS_PORT`` + ``number`` - 1 when that is set."""
    argv = [sys.executable, "-m", "kerrigan.cli", "worker"]
    if settings.worker_metrics_port is not None:
        port = settings.worker_metrics_port + number - 1
        argv += ["--metrics-host", settings.host, "--metrics-port", str(port)]
    return argv


async def _spawn_worker(number: int, settings: Settings) -> asyncio.subprocess.Process:
    """Worker ``number``, with this process's environment (and so its settings)."""
    return await asyncio.create_subprocess_exec(*worker_argv(number, settings))


WORKER_RESTART_S = 1.0  # after a worker process died, before another is started in its place
WORKER_RESTART_MAX_S = 30.0  # a worker that keeps dying (a bad setting) is restarted this often at most
WORKER_STOP_S = 10.0  # a stopping server waits this long for a worker to exit, then kills it


async def supervise_workers(count: int, settings: Settings) -> None:
    """Keep ``count`` ``kerrigan worker`` processes running until cancelled: one that exits (or cannot be
    started) is logged and replaced, waiting longer each time it fails in a row, up to
    :data:`WORKER_RESTART_MAX_S`; on cancel each is terminated, and killed if it has not exited within
    :data:`WORKER_STOP_S`."""

    async def keep_one(number: int) -> None:
        delay = WORKER_RESTART_S
        while True:
            started = asyncio.get_running_loop().time()
            try:
                process = await _spawn_worker(number, settings)
            except OSError as exc:
                log.error(
                    "worker process %d could not be started (%s); trying again in %.0f s", number, exc, delay
                )
            else:
                try:
                    status = await process.wait()
                except asyncio.CancelledError:
                    await _stop_process(process)
                    raise
                log.error(
                    "worker process %d exited with status %s; starting another in %.0f s",
                    number,
                    status,
                    delay,
                )
            ran_s = asyncio.get_running_loop().time() - started
            await asyncio.sleep(delay)
            # One that ran a while had a reason of its own to stop: the next failure waits the least again.
            delay = (
                WORKER_RESTART_S if ran_s > WORKER_RESTART_MAX_S * 2 else min(delay * 2, WORKER_RESTART_MAX_S)
            )

    async with asyncio.TaskGroup() as group:
        for number in range(1, count + 1):
            group.create_task(keep_one(number), name=f"kerrigan-worker-{number}")


async def _stop_process(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), WORKER_STOP_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
