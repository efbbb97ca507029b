"""One lock per board on an agent, shared by whoever acts on the board: a job taking it (its power-cycle and
boot, :mod:`kerrigan.runner.wired_jobs`) and a person's power request and keystrokes
(:mod:`kerrigan.runner.person_power`, :mod:`kerrigan.runner.person_console`).

What it means: a job takes a board only once a person's action under way on it ended (a cycle is finished,
not cut in half by the job's own off); a person's action that comes while a job takes or holds the board
waits for the lock, then finds the board the job's and is refused (the server says 409 ``device_busy``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable


class BoardLocks:
    """The agent's per-device locks, made on first use."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def of(self, device_id: str) -> asyncio.Lock:
        """``device_id``'s lock."""
        return self._locks.setdefault(device_id, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def holding(self, device_ids: Iterable[str]) -> AsyncIterator[None]:
        """Hold the locks of all of ``device_ids`` (a gang's boards), taken in order of their ids: two jobs
        sharing boards never wait on each other in a ring."""
        async with contextlib.AsyncExitStack() as stack:
            for device_id in sorted(set(device_ids)):
                await stack.enter_async_context(self.of(device_id))
            yield
