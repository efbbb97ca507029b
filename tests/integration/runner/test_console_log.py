"""A job's console log sent as the runner protocol's chunks to ``POST /jobs/{id}/console``, against an
endpoint on loopback that answers as the server's ``/output`` does (``next_seq``, 409 ``gap``,
``output_cut``) and records what it got; the bytes come from a simulated board's console."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kerrigan.core.masking import Masker
from kerrigan.runner.boards.boot import watch_boot
from kerrigan.runner.boards.console import Console
from kerrigan.runner.boards.console_log import CHUNK_BYTES, ConsoleLog, RoleLines
from kerrigan.runner.devices_file.wiring import BootWiring, SerialConsole
from kerrigan.runner.server import ServerClient
from kerrigan.testing.board import SimulatedBoard

pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")


@dataclass
class ConsoleEndpoint:
    """The server's side of the contract: chunks kept in order, a gap answered 409, a cap."""

    cap_bytes: int = 1 << 30
    lose_answer_at: int | None = None  # store this seq, the first time, but answer 503 (the answer is lost)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    posts: int = 0

    async def post(self, request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer runner-token"
        body = await request.json()
        self.posts += 1
        expected = len(self.chunks)
        if body["seq"] < expected:
            return web.json_response({"next_seq": expected})
        if body["seq"] > expected:
            return web.json_response(
                {"error": {"code": "gap", "message": "a chunk is missing"}, "next_seq": expected}, status=409
            )
        self.chunks.append(body)
        if self.lose_answer_at == body["seq"]:
            self.lose_answer_at = None
            return web.json_response({"error": {"code": "unavailable", "message": "restarting"}}, status=503)
        stored = sum(len(chunk["data"].encode()) for chunk in self.chunks)
        return web.json_response(
            {"next_seq": expected + 1} | ({"output_cut": True} if stored >= self.cap_bytes else {})
        )

    @property
    def text(self) -> str:
        offset = 0
        for chunk in self.chunks:
            assert chunk["offset"] == offset
            offset += len(chunk["data"].encode())
        return "".join(chunk["data"] for chunk in self.chunks)


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[ConsoleEndpoint, ServerClient]]:
    recorded = ConsoleEndpoint()
    app = web.Application()
    app.router.add_post("/api/runner/v1/jobs/{job}/console", recorded.post)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as http:
        yield recorded, ServerClient(http, f"http://127.0.0.1:{port}", "runner-token")
    await runner.cleanup()


async def test_a_boards_console_reaches_the_endpoint_whole_in_numbered_chunks(
    endpoint: tuple[ConsoleEndpoint, ServerClient],
) -> None:
    recorded, server = endpoint
    log = ConsoleLog(None, 1 << 20)
    async with SimulatedBoard(boot_s=0.2) as board:
        console = Console(SerialConsole(board.path), sink=lambda at, data: log.feed(data))
        await console.open()
        watch = watch_boot(console, BootWiring(re.compile("login:")))
        board.power(True)
        await watch.wait()
        assert await log.send(server, "7")
        await console.close()
    log.finish()
    assert await log.send(server, "7")
    printed = "".join(f"{line}\r\n" for line in board.transcript) + "kerrigan-board login: "
    assert recorded.text == printed
    assert [chunk["seq"] for chunk in recorded.chunks] == list(range(len(recorded.chunks)))


async def test_large_output_is_cut_in_chunks_a_lost_answer_is_sent_again_and_secrets_are_masked(
    endpoint: tuple[ConsoleEndpoint, ServerClient],
) -> None:
    recorded, server = endpoint
    recorded.lose_answer_at = 2
    log = ConsoleLog(Masker.for_secrets({"secret PDU": "hunter2-pdu"}), 1 << 22)
    line = "é" * 40 + " password hunter2-pdu\r\n"
    text = line * 4000
    data = text.encode()
    for start in range(0, len(data), 1000):  # characters and the secret split across feeds
        log.feed(data[start : start + 1000])
    log.finish()
    assert await log.send(server, "7")
    assert len(recorded.chunks) > 3
    assert recorded.posts == len(recorded.chunks) + 1  # the chunk whose answer was lost, sent again
    assert all(len(chunk["data"].encode()) <= CHUNK_BYTES for chunk in recorded.chunks)
    assert recorded.text == text.replace("hunter2-pdu", "***")


async def test_the_server_cutting_the_log_stops_it_and_a_server_without_the_endpoint_is_not_asked_again(
    endpoint: tuple[ConsoleEndpoint, ServerClient],
) -> None:
    recorded, server = endpoint
    recorded.cap_bytes = 1
    log = ConsoleLog(None, 1 << 20)
    log.feed(b"first\r\n")
    assert await log.send(server, "7")
    log.feed(b"second\r\n")
    assert await log.send(server, "7")
    assert recorded.text == "first\r\n"
    assert log.done

    missing = ConsoleLog(None, 1 << 20)
    missing.feed(b"a line\r\n")
    assert await missing.send(server, "7/nested")  # 404: no such route
    missing.feed(b"another\r\n")
    posts = recorded.posts
    assert await missing.send(server, "7")
    assert recorded.posts == posts


def test_a_gang_roles_lines_are_whole_and_named() -> None:
    log = ConsoleLog(None, 1 << 20)
    dut, helper = RoleLines("dut", log), RoleLines("helper", log)
    dut.feed(b"U-Boot 20")
    helper.feed(b"ready\r\n")
    dut.feed(b"24.01\r\nStarting")
    dut.finish()
    log.finish()
    assert "".join(text for _, _, text in log.pending) == (
        "[helper] ready\r\n[dut] U-Boot 2024.01\r\n[dut] Starting\n"
    )
