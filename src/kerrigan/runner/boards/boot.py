"""Waiting for a board to boot: its console's lines searched for ``boot.ready`` and ``boot.fail``.

The wait starts listening before the board is powered on (:func:`watch_boot`), so no line is missed
between the power call and the wait; the unfinished last line is searched too, since a login prompt has no
line end. A ``fail`` line or no ``ready`` within ``timeout_s`` raises :class:`BootFailed` with the
console's last lines; the console going away meanwhile raises
:class:`~kerrigan.runner.boards.console.ConsoleLost`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

from kerrigan.runner.boards.console import Console, ConsoleLost
from kerrigan.runner.devices_file.wiring import BootWiring

LAST_LINES: Final = 20  # what a failed boot reports of its console (the check run shows as many)
SHOWN_LINE: Final = 200  # characters of the line that matched ``fail``, in the reason


class BootFailed(Exception):  # noqa: N818 -- the board's fault, named as the job's end reason says it
    """The board did not boot: why (one line), and the console's last lines."""

    def __init__(self, reason: str, last_lines: list[str]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.last_lines = last_lines


class BootWatch:
    """A boot being watched on one console, from before its power-on: :meth:`wait` for its end."""

    def __init__(self, console: Console, boot: BootWiring) -> None:
        self.console = console
        self.boot = boot
        self.started = time.monotonic()
        self._outcome: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._stop = console.listen(self._heard)

    def _heard(self, text: str, finished: bool) -> None:
        if self._outcome.done():
            return
        for fail in self.boot.fail:
            if fail.search(text) is not None:
                self._outcome.set_result(text)
                return
        if self.boot.ready.search(text) is not None:
            self._outcome.set_result(None)

    async def wait(self) -> float:
        """Seconds the boot took, once ``ready`` was seen; :class:`BootFailed` otherwise."""
        gone: asyncio.Future[Any] = asyncio.ensure_future(self.console.gone.wait())
        try:
            left = self.boot.timeout_s - (time.monotonic() - self.started)
            waited: set[asyncio.Future[Any]] = {self._outcome, gone}
            done, _ = await asyncio.wait(waited, timeout=max(left, 0.0), return_when=asyncio.FIRST_COMPLETED)
            if self._outcome in done:
                failed = self._outcome.result()
                if failed is None:
                    return time.monotonic() - self.started
                shown = failed[:SHOWN_LINE]
                raise BootFailed(f"the console printed {shown!r}, a boot.fail line", self._last())
            if gone in done:  # the console's fault, not the board's boot
                raise ConsoleLost(f"{self.console.lost} while the board booted")
            raise BootFailed(
                f"no line matched boot.ready ({self.boot.ready.pattern!r}) within {self.boot.timeout_s} s",
                self._last(),
            )
        finally:
            gone.cancel()
            self._stop()

    def cancel(self) -> None:
        """Stop listening (the boot is no longer waited for)."""
        self._stop()

    def _last(self) -> list[str]:
        return self.console.last_lines(LAST_LINES)


def watch_boot(console: Console, boot: BootWiring) -> BootWatch:
    """Start watching ``console`` for the end of a boot (before the board is powered on)."""
    return BootWatch(console, boot)
