"""Waiting for something to come true, for tests and the demo: one way, with a guard and a clear failure."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_until(
    condition: Callable[[], Awaitable[T] | T],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "the condition",
) -> T:
    """Call ``condition`` (a function or a coroutine function) until it returns something true; that value.

    Raises ``AssertionError`` naming ``what`` when ``timeout`` seconds pass first.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = condition()
        value = await found if inspect.isawaitable(found) else found
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not come true within {timeout:g} s")
        await asyncio.sleep(interval)
