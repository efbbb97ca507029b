"""A function's calls held in whichever thread makes them, so that a test can ask the server something while
one is in progress, and then see which thread each call ran on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

HOLD_S = 60.0  # a call is let go by itself after this, should the test fail before letting it go


class HeldCalls:
    """Wraps ``function``: each call records its thread and, off the event loop's thread, waits until
    :meth:`release` (a call on the loop's thread is not held: it would hold the whole server)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.loop_thread = threading.get_ident()  # made by the test, on the loop's thread
        self.threads: list[int] = []
        self._entered = threading.Event()
        self._released = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        thread = threading.get_ident()
        self.threads.append(thread)
        self._entered.set()
        if thread != self.loop_thread:
            self._released.wait(HOLD_S)
        return self.function(*args, **kwargs)

    async def entered(self, timeout: float = 30.0) -> None:
        """Wait, without holding the loop, until a call has begun."""
        if not await asyncio.to_thread(self._entered.wait, timeout):
            raise AssertionError(f"{self.function.__name__} was not called within {timeout:g} s")

    def release(self) -> None:
        """Let every call go on, now and from now on."""
        self._released.set()

    @property
    def on_the_loop(self) -> bool:
        """Whether any call ran on the event loop's thread."""
        return self.loop_thread in self.threads
