"""A client that goes away while the server reads its body (a runner agent stopped mid-call: ``kerrigan
demo``'s agents at its end) ends its request with one line in the log, never aiohttp's "Error handling
request" traceback, on a real server over a real socket."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web

from kerrigan.web.errors import client_gone


async def read_all(request: web.Request) -> web.Response:
    body = await request.read()
    return web.Response(text=f"{len(body)} bytes")


async def send_half_and_leave(port: int) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
    await writer.drain()
    await asyncio.sleep(0.2)  # the handler is reading the body
    writer.transport.abort()  # gone, as a process killed mid-call


@pytest.mark.parametrize("middlewares", [[client_gone], []], ids=["with", "without"])
async def test_a_client_gone_mid_body_is_one_line_not_a_traceback(
    caplog: pytest.LogCaptureFixture, middlewares: list[web._Middleware]
) -> None:
    app = web.Application(middlewares=middlewares)
    app.router.add_post("/upload", read_all)
    # As kerrigan serve runs it (aiohttp's test server cancels a handler whose client left instead).
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        with caplog.at_level(logging.INFO):
            await send_half_and_leave(runner.addresses[0][1])
            await asyncio.sleep(0.3)
    finally:
        await runner.cleanup()
    tracebacks = [record for record in caplog.records if record.exc_info is not None]
    quiet = [
        record for record in caplog.records if "went away before its request was read whole" in record.message
    ]
    if middlewares:
        assert tracebacks == []
        assert len(quiet) == 1
    else:  # what it guards against: aiohttp's own traceback
        assert [record.message for record in tracebacks] == ["Error handling request from 127.0.0.1"]
