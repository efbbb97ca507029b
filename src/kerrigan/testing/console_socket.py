"""A board's console served on a TCP port of loopback, as ser2net serves a UART (``socket://HOST:PORT``):
what the board prints goes to every connection, what a connection sends is typed at the board.

Shared by the simulated board (:mod:`kerrigan.testing.board`, with ``serve_socket``) and the QEMU board
(:mod:`kerrigan.testing.qemu_board`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

SOCKET_BACKLOG: Final = 1 << 16  # a connection this far behind loses what the board prints, as a slow UART


class ConsoleSocket:
    """The port: :meth:`start` it, :meth:`print` to every connection, :meth:`close` it (connections too).
    ``typed`` hears every block a connection sends."""

    def __init__(self, typed: Callable[[bytes], None]) -> None:
        self.url = ""  # socket://127.0.0.1:PORT once started
        self._typed = typed
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._client_tasks: set[asyncio.Task[None]] = set()

    @property
    def connections(self) -> int:
        """How many are connected now."""
        return len(self._clients)

    async def start(self) -> str:
        """Listen on a free port of ``127.0.0.1``; its ``socket://`` URL."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"socket://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self.url

    def print(self, data: bytes) -> None:
        """What the board printed, to every connection not too far behind."""
        for writer in list(self._clients):
            if writer.transport.get_write_buffer_size() < SOCKET_BACKLOG:
                writer.write(data)

    async def close(self) -> None:
        """Stop listening and close every connection."""
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._clients):
            writer.close()
        for task in list(self._client_tasks):
            task.cancel()
        await asyncio.gather(*self._client_tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(writer)
        self._client_tasks.add(task)
        try:
            while data := await reader.read(4096):
                self._typed(data)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._clients.discard(writer)
            self._client_tasks.discard(task)
            writer.close()
