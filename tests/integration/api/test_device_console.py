"""A board's console in the hands of the person holding it (issue 30): ``GET /api/v1/devices/{id}/console``
through the real server to a real agent, whose devices file wires ``dev-a1`` to an outlet of the PDU
stand-in and a simulated board's console. The holder types at the login prompt, logs in and runs a command,
power-cycles the board through the power API and watches it boot on the console; the pool's owner watches
read-only; a stranger is refused before anything reaches the agent; a watcher that never reads is cut off
while the writer keeps typing; every session is in the audit log."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp
import pytest
from sqlalchemy import update

from kerrigan.core import device_console
from kerrigan.runner.agent import Agent
from kerrigan.store.audit import list_audit
from kerrigan.store.models import PoolRow
from kerrigan.testing.board import HOSTNAME, PROMPT, Mode, SimulatedBoard, State
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.waiting import wait_until
from kerrigan.web.api import console
from tests.integration.api.conftest import ADMIN, OWNER_A, OWNER_B, READER, Api
from tests.integration.api.person_sockets import Screen, idle_api, started
from tests.integration.api.test_cli_reservations import kerrigan
from tests.integration.api.test_cli_sessions import _lab
from tests.integration.api.test_device_power import _held_by_job, agent, board, pdu, reserve, switch
from tests.integration.api.test_reservation_settings import poll, runner

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

__all__ = ["agent", "board", "idle_api", "pdu"]  # the fixtures, shared with the power tests

PATH = "/api/v1/devices/dev-a1/console"


async def open_console(api: Api, who: str) -> Screen:
    socket = await api.client.ws_connect(PATH, headers={"Authorization": f"Bearer {api.tokens[who]}"})
    return Screen(socket)


async def console_uses(api: Api, device: str = "dev-a1", count: int = 1) -> list[Any]:
    """The audit log's console sessions of ``device``, once there are ``count`` (each is written as its
    person's WebSocket closes, after the session ended)."""
    found: list[Any] = []

    async def written() -> bool:
        async with api.db.sessions() as session:
            audited = await list_audit(session, device_id=device)
        found[:] = [entry for entry in audited if entry.field == "console"]
        return len(found) >= count

    await wait_until(written, timeout=15)
    return found


async def test_the_holder_logs_in_and_watches_a_power_cycle_an_owner_watches_a_stranger_is_refused(
    api: Api, agent: Agent, pdu: GudePdu, board: SimulatedBoard
) -> None:
    await reserve(api, "dev-a1")
    assert (await switch(api, "dev-a1", "on"))[0] == 200  # through its outlet, as a person would
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)

    for stranger in (OWNER_B,):  # holds no reservation and owns no pool of dev-a1
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await api.client.ws_connect(PATH, headers={"Authorization": f"Bearer {api.tokens[stranger]}"})
        assert refused.value.status == 403
    reply = await api.call("GET", "/devices/dev-a1/console", who=OWNER_B)
    assert reply.status == 403, reply.body
    assert (
        "you do not hold a reservation of dev-a1 and are not an owner of its pool"
        in (reply.body["error"]["message"])
    )
    assert api.db.consoles.sessions() == []  # nothing was asked of the agent

    holder = await open_console(api, READER)
    assert await holder.frame("open") == {"type": "open", "device": "dev-a1", "read_only": False}
    await holder.socket.send_bytes(b"\n")
    await holder.until(f"{HOSTNAME} login:")
    await holder.socket.send_bytes(b"root\n")
    await holder.until(PROMPT)
    await holder.socket.send_bytes(b"uname -a\n")
    await holder.until("Linux kerrigan-board")

    owner = await open_console(api, OWNER_A)
    assert await owner.frame("open") == {"type": "open", "device": "dev-a1", "read_only": True}
    await owner.socket.send_bytes(b"poweroff\n")
    notice = await owner.frame("notice")
    assert "read-only for you" in notice["message"]
    assert board.state is State.SHELL  # the owner's keystrokes never reached it

    # An admin joins while the holder types: one writer, so the admin watches.
    admin = await open_console(api, ADMIN)
    assert (await admin.frame("open"))["read_only"] is True
    assert "someone else types" in (await admin.frame("notice"))["message"]
    await admin.socket.close()

    assert await switch(api, "dev-a1", "cycle") == (
        200,
        {"device": "dev-a1", "action": "cycle", "state": "on"},
    )
    for screen in (holder, owner):
        await screen.until("Starting kernel ...")
        await screen.until("Welcome to Buildroot")
    await holder.socket.send_bytes(b"\n")
    await holder.until(f"{HOSTNAME} login: \r\n{HOSTNAME} login:")

    await owner.socket.close()
    await holder.socket.close()  # the last watcher leaves: the session ends, the agent closes the console
    await wait_until(lambda: api.db.consoles.sessions() == [], timeout=15)

    audited = await console_uses(api, count=3)
    uses = sorted((entry.actor, entry.before["access"]) for entry in audited)
    assert uses == [(ADMIN, "read-only"), (OWNER_A, "read-only"), (READER, "read-write")]
    for entry in audited:
        assert entry.pool_id == "pool-a"
        assert entry.after["seconds"] >= 0
        assert entry.after["reason"]


async def test_a_watcher_that_never_reads_is_cut_off_while_the_writer_keeps_typing(
    api: Api, agent: Agent, board: SimulatedBoard
) -> None:
    api.db.consoles.watcher_limit = 64 * 1024
    await reserve(api, "dev-a1")
    holder = await open_console(api, READER)
    await holder.frame("open")

    # The owner's WebSocket, by hand: upgraded, then never read, its receive buffer as small as can be.
    port = api.client.port
    assert port is not None
    slow = socket.create_connection(("127.0.0.1", port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    slow.sendall(
        f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {api.tokens[OWNER_A]}\r\n\r\n".encode()
    )
    try:
        await wait_until(lambda: len(api.db.consoles.sessions()[0].watchers) == 2, timeout=15)
        slow_watcher = api.db.consoles.sessions()[0].watchers[1]
        assert slow_watcher.login == OWNER_A
        # The board floods its console, far faster than a UART: more than the slow watcher's socket holds.
        board.mode, board.baud = Mode.FLOOD, 100_000_000
        assert (await switch(api, "dev-a1", "on"))[0] == 200
        while slow_watcher.cut is None:
            await holder.read_one()  # the holder reads all the while
            holder.seen.clear()
        assert "too slow" in slow_watcher.cut
        await wait_until(lambda: len(api.db.consoles.sessions()[0].watchers) == 1, timeout=15)
        board.mode = Mode.BOOTS
        assert (await switch(api, "dev-a1", "cycle"))[0] == 200
        await holder.until(f"{HOSTNAME} login:")  # the writer works on
        await holder.socket.send_bytes(b"root\n")
        await holder.until(PROMPT)
    finally:
        slow.close()
    await holder.socket.close()
    await wait_until(lambda: api.db.consoles.sessions() == [], timeout=15)
    reasons = {entry.actor: entry.after["reason"] for entry in await console_uses(api, count=2)}
    assert "too slow" in reasons[OWNER_A]
    assert reasons[READER] == "you left"


async def test_kerrigan_console_reads_the_board_and_types_and_a_refusal_is_the_servers_message(
    api: Api, agent: Agent, board: SimulatedBoard
) -> None:
    holder = _lab(api)
    stranger = holder | {"KERRIGAN_TOKEN": api.tokens[OWNER_B]}
    status, out, err = await kerrigan("console", "dev-a1", env=stranger)
    assert (status, out) == (1, ""), err
    assert "bob may not use the console of dev-a1: you do not hold a reservation of dev-a1" in err
    assert "(HTTP 403)" in err
    assert "Traceback" not in err
    await reserve(api, "dev-a1")
    assert (await switch(api, "dev-a1", "on"))[0] == 200  # through its outlet, as a person would
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)

    process = await started("console", "dev-a1", env=holder, stdin=asyncio.subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    seen = bytearray()

    async def until(text: str) -> None:
        assert process.stdout is not None
        while text.encode() not in seen:
            data = await asyncio.wait_for(process.stdout.read(4096), 30)
            assert data, seen
            seen.extend(data)

    for typed, shown in [
        (b"\n", f"{HOSTNAME} login:"),
        (b"root\n", PROMPT),
        (b"hostname\n", f"{PROMPT}hostname\r\n{HOSTNAME}\r\n"),
    ]:
        process.stdin.write(typed)
        await process.stdin.drain()
        await until(shown)
    process.stdin.write(b"\x1d")  # Ctrl-] leaves
    await process.stdin.drain()
    _, err_bytes = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err_bytes
    assert b"connected to dev-a1; Ctrl-] leaves" in err_bytes
    await wait_until(lambda: api.db.consoles.sessions() == [], timeout=15)
    [use] = await console_uses(api)
    assert (use.actor, use.before["access"], use.after["reason"]) == (READER, "read-write", "you left")


async def agent_socket(api: Api, headers: dict[str, str], request_id: str) -> aiohttp.ClientWebSocketResponse:
    return await api.client.ws_connect(
        f"/api/runner/v1/device-requests/{request_id}/console", headers=headers
    )


async def test_the_protocol_hands_the_console_to_its_host_alone_and_the_reservations_end_ends_it(
    api: Api,
) -> None:
    """The agent's side by hand: lab-b-01's poll hands the request once, another host cannot take it, bytes
    go both ways, and releasing the reservation ends the session for the person and the agent."""
    reservation = await reserve(api, "dev-b1")
    headers = await runner(api, "lab-b-01", ["device_power", "device_console"])
    other = await runner(api, "lab-a-01", ["device_power", "device_console"])
    person = Screen(
        await api.client.ws_connect(
            "/api/v1/devices/dev-b1/console", headers={"Authorization": f"Bearer {api.tokens[READER]}"}
        )
    )
    assert (await person.frame("open"))["read_only"] is False
    [asked] = (await poll(api, headers))["device_requests"]
    assert (asked["device"], asked["action"]) == ("dev-b1", "console")
    assert (await poll(api, headers, wait=0))["device_requests"] == []  # handed once
    assert (await poll(api, other, wait=0))["device_requests"] == []
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await agent_socket(api, other, asked["id"])
    assert refused.value.status == 404
    board = await agent_socket(api, headers, asked["id"])
    await board.send_bytes(b"kerrigan-board login: ")
    await person.until("kerrigan-board login: ")
    await person.socket.send_bytes(b"root\n")
    assert (await board.receive(timeout=20)).data == b"root\n"

    async with api.client.delete(
        f"/api/v1/reservations/{reservation}", headers={"Authorization": f"Bearer {api.tokens[READER]}"}
    ) as released:
        assert released.status < 300, await released.text()
    end = await person.frame("end")
    assert end == {"type": "end", "reason": "the reservation of dev-b1 ended", "ok": True}
    closed = await person.socket.receive(timeout=20)
    assert (closed.type, person.socket.close_code) == (aiohttp.WSMsgType.CLOSE, 1000)
    closing = await board.receive(timeout=20)
    assert closing.type is aiohttp.WSMsgType.CLOSE
    assert closing.extra == "the reservation of dev-b1 ended"
    await board.close()
    await wait_until(lambda: api.db.consoles.sessions() == [], timeout=15)
    [use] = await console_uses(api, "dev-b1")
    assert (use.actor, use.before["access"], use.after["reason"]) == (
        READER,
        "read-write",
        "the reservation of dev-b1 ended",
    )


async def test_an_agent_that_never_connects_ends_the_session_saying_so_and_an_old_or_busy_one_is_named(
    api: Api, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console, "AGENT_WITHIN_S", 0.3)
    await reserve(api, "dev-b1")
    await runner(api, "lab-b-01", ["device_power"])  # an older agent
    reply = await api.call("GET", "/devices/dev-b1/console", who=READER)
    assert (reply.status, reply.body["error"]["code"]) == (409, "not_supported"), reply.body
    await runner(api, "lab-b-01", ["device_power", "device_console"])
    person = Screen(
        await api.client.ws_connect(
            "/api/v1/devices/dev-b1/console", headers={"Authorization": f"Bearer {api.tokens[READER]}"}
        )
    )
    end = await person.frame("end")
    assert end == {"type": "end", "reason": "the agent of lab-b-01 did not connect within 0.3 s", "ok": False}
    await person.socket.receive(timeout=20)
    assert person.socket.close_code == 1011
    reply = await api.call("GET", "/devices/dev-b1/console", who=READER)  # a plain request
    assert (reply.status, reply.body["error"]["code"]) == (400, "not_websocket"), reply.body

    await runner(api, "lab-a-02", ["device_power", "device_console"])
    job = await _held_by_job(api, clock, "dev-a2", "lab-a-02")
    reply = await api.call("GET", "/devices/dev-a2/console", who=ADMIN)
    assert (reply.status, reply.body["error"]["code"]) == (409, "device_busy"), reply.body
    assert f"job {job} holds dev-a2: the job has its console" in reply.body["error"]["message"]
    reply = await api.call("GET", "/devices/dev-a2/console", who=OWNER_B)
    assert reply.status == 403, reply.body


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_console_without_a_keystroke_for_the_idle_time_ends(idle_api: Api) -> None:
    api = idle_api
    await reserve(api, "dev-b1")
    headers = await runner(api, "lab-b-01", ["device_power", "device_console"])
    person = Screen(
        await api.client.ws_connect(
            "/api/v1/devices/dev-b1/console", headers={"Authorization": f"Bearer {api.tokens[READER]}"}
        )
    )
    [asked] = (await poll(api, headers))["device_requests"]
    board = await agent_socket(api, headers, asked["id"])
    await board.send_bytes(b"login: ")  # the board printing is no keystroke: the session still idles
    await person.until("login: ")
    end = await person.frame("end")
    assert end == {"type": "end", "reason": "no keystroke for 1 s: the console was idle", "ok": True}
    closing = await board.receive(timeout=20)
    assert closing.type is aiohttp.WSMsgType.CLOSE
    await board.close()
    [use] = await console_uses(api, "dev-b1")
    assert use.after["reason"] == "no keystroke for 1 s: the console was idle"


async def _by_hand(api: Api) -> tuple[Screen, aiohttp.ClientWebSocketResponse, dict[str, str]]:
    """dev-b1 reserved by rita, her console open, lab-b-01's agent played by hand: her screen, the agent's
    WebSocket and its headers."""
    await reserve(api, "dev-b1")
    headers = await runner(api, "lab-b-01", ["device_power", "device_console"])
    person = await open_console_of(api, "dev-b1", READER)
    assert (await person.frame("open"))["read_only"] is False
    [asked] = (await poll(api, headers))["device_requests"]
    return person, await agent_socket(api, headers, asked["id"]), headers


async def open_console_of(api: Api, device: str, who: str) -> Screen:
    return Screen(
        await api.client.ws_connect(
            f"/api/v1/devices/{device}/console", headers={"Authorization": f"Bearer {api.tokens[who]}"}
        )
    )


async def test_an_owner_removed_from_the_pool_is_cut_off_while_the_holder_watches_on(api: Api) -> None:
    person, board, _ = await _by_hand(api)
    owner = await open_console_of(api, "dev-b1", OWNER_B)  # pool-b's owner watches
    assert (await owner.frame("open"))["read_only"] is True
    await board.send_bytes(b"login: ")
    await owner.until("login: ")
    async with api.db.sessions() as session, session.begin():
        await session.execute(update(PoolRow).where(PoolRow.id == "pool-b").values(owners=[]))
    reason = (
        "you may no longer watch the console of dev-b1: you do not hold a reservation of dev-b1 and are not "
        "an owner of its pool"
    )
    assert await owner.frame("end") == {"type": "end", "reason": reason, "ok": False}
    await owner.socket.receive(timeout=20)
    assert owner.socket.close_code == 1008
    await board.send_bytes(b"root")  # the holder's session goes on
    await person.until("login: root")
    await person.socket.close()
    await board.close()
    uses = {entry.actor: entry.after["reason"] for entry in await console_uses(api, "dev-b1", count=2)}
    assert uses[OWNER_B] == reason


async def test_one_watcher_past_the_limit_is_refused_naming_it(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_console, "MAX_WATCHERS", 2)
    person, board, _ = await _by_hand(api)
    owner = await open_console_of(api, "dev-b1", OWNER_B)
    await owner.frame("open")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await open_console_of(api, "dev-b1", ADMIN)
    assert refused.value.status == 409
    reply = await api.call("GET", "/devices/dev-b1/console", who=ADMIN)  # where kerrigan console reads why
    assert (reply.status, reply.body["error"]["code"]) == (409, "too_many"), reply.body
    assert reply.body["error"]["message"] == (
        "the console of dev-b1 has 2 watchers, the most one console may have at once (2): try again once one "
        "has left"
    )
    await owner.socket.close()
    await wait_until(lambda: len(api.db.consoles.sessions()[0].watchers) == 1, timeout=15)
    admin = await open_console_of(api, "dev-b1", ADMIN)  # room again
    assert (await admin.frame("open"))["read_only"] is True
    for open_socket in (admin.socket, person.socket, board):
        await open_socket.close()


async def test_a_close_reason_cut_to_its_bytes_never_splits_a_character(api: Api) -> None:
    """The agent ends the console with a reason longer than a close frame holds, of two-byte characters:
    both WebSockets close cleanly with its first 119 bytes (a cut at 120 would split a character, and a
    close reason that is not UTF-8 fails the connection instead of closing it)."""
    person, board, _ = await _by_hand(api)
    said = "x" + "é" * 100  # 201 bytes: 120 end in the middle of the 60th é
    await board.send_str(json.dumps({"type": "end", "reason": said}))
    end = await person.frame("end")
    assert end == {"type": "end", "reason": said, "ok": False}
    closed = await person.socket.receive(timeout=20)
    assert closed.type is aiohttp.WSMsgType.CLOSE, closed
    assert (person.socket.close_code, closed.extra) == (1011, "x" + "é" * 59)
    closing = await board.receive(timeout=20)
    assert closing.type is aiohttp.WSMsgType.CLOSE, closing
    assert closing.extra == "x" + "é" * 59
    await board.close()


def test_close_reasons_are_cut_between_characters() -> None:
    assert device_console.close_reason("ok") == b"ok"
    assert device_console.close_reason("é" * 70) == ("é" * 60).encode()
    assert device_console.close_reason("x" + "€" * 50) == ("x" + "€" * 39).encode()  # 118 bytes, not 120
    assert len(device_console.close_reason("a" * 500)) == 120
