"""Telling the rest of the server, in the background, that a job started or ended."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

log = logging.getLogger(__name__)


class JobChanges:
    """Calls ``listener`` (the check-run reporter, wired by the app) for each changed job, in the background.

    A failed report is logged; the job's next change reports its whole state again.
    """

    def __init__(self) -> None:
        self.listener: Callable[[int], Awaitable[None]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def changed(self, job_pks: Iterable[int]) -> None:
        """These jobs changed: report each."""
        if self.listener is None:
            return
        for job_pk in job_pks:
            task = asyncio.create_task(self._report(self.listener, job_pk))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait for the reports under way (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    @staticmethod
    async def _report(listener: Callable[[int], Awaitable[None]], job_pk: int) -> None:
        try:
            await listener(job_pk)
        except Exception:
            log.exception("reporting the progress of job %s failed; the next change reports it again", job_pk)
