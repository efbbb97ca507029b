"""Blocking calls of the board drivers (labgrid's PDU backends, pyserial's opens) run off the event loop,
each in a daemon thread of its own rather than the loop's shared executor: a call that never returns (a PDU
that never answers: labgrid calls ``requests`` without a timeout) then holds only its own thread, never the
executor the agent's other work shares, nor the agent's exit."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_own_thread(call: Callable[[], T], name: str = "kerrigan-board") -> T:
    """``call()`` in a daemon thread of its own; cancelling the wait (``asyncio.wait_for``) leaves the
    thread to end when it does, its result dropped."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as err:
            error = err
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await done
