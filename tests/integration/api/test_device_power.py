"""A board's power in the hands of the person holding it (issue 30): ``POST /api/v1/devices/{id}/power``
through the real server to a real agent, whose devices file wires ``dev-a1`` (lab-a-01's) to an outlet of
the PDU stand-in (labgrid's Gude backend) and a simulated board's console. The holder cycles it (the PDU
sees off then on, the board boots) and reads its state; a stranger is refused before the PDU sees anything;
an admin may; a device a job holds is a 409; hostile bodies are 400s naming the field; an agent that never
answers ends the call 504 and the request expired; every use is in the audit log."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest
from sqlalchemy import select, update

from kerrigan.core.device_power import MAX_PENDING_PER_PERSON
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.lifecycle import JobState
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.boards.figures import SwitchReason
from kerrigan.runner.devices_file import load_devices_file
from kerrigan.store.audit import list_audit
from kerrigan.store.models import DeviceLeaseRow, DeviceRequestRow, JobRow, RunnerHostRow
from kerrigan.store.runners import create_runner_token, host_report
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.board import SimulatedBoard, State
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.waiting import wait_until
from kerrigan.web.api import power
from tests.integration.api.conftest import ADMIN, OWNER_A, OWNER_B, READER, Api
from tests.integration.api.test_cli_reservations import kerrigan
from tests.integration.api.test_cli_sessions import _lab
from tests.integration.api.test_reservation_settings import poll, runner
from tests.integration.github.conftest import REPO

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

OUTLET: Final = 3
BOOT_S: Final = 0.3
SESSION: Final = "30303030-0000-0000-0000-000000000001"


@pytest.fixture
async def pdu() -> AsyncIterator[GudePdu]:
    async with GudePdu(outlets=8) as stand_in:
        yield stand_in


@pytest.fixture
async def board(pdu: GudePdu) -> AsyncIterator[SimulatedBoard]:
    async with SimulatedBoard(boot_s=BOOT_S) as simulated:
        simulated.attach(pdu, OUTLET)
        yield simulated


@pytest.fixture
async def agent(api: Api, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard) -> AsyncIterator[Agent]:
    """lab-a-01's agent, dev-a1 wired to the PDU's outlet and the board's console, registered."""
    devices = tmp_path / "devices.yml"
    devices.write_text(
        "devices:\n"
        "  dev-a1:\n"
        f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
        "off_s: 1, timeout_s: 2}\n"
        f"    console: {{serial: {{port: {board.path}}}}}\n"
        "    boot: {ready: 'login:', timeout_s: 2}\n",
        encoding="utf-8",
    )
    async with api.db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", api.db.clock())
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(
            server_url=str(api.client.make_url("")),
            token=token,
            host_id="lab-a-01",
            work_dir=tmp_path / "lab-a-01",
            disk=DiskPolicy(0),
            heartbeat_s=0.2,
            systemd_scope="never",
            job_users=spare_job_users(),
            devices_file=load_devices_file(devices),
        )
        started = Agent(settings, http)
        task = asyncio.create_task(started.run())

        async def registered() -> bool:
            async with api.db.sessions() as session:
                report = await host_report(session, "lab-a-01")
            return report is not None and "device_power" in report.capabilities

        await wait_until(registered, timeout=15)
        yield started
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def reserve(api: Api, device: str, who: str = READER) -> str:
    made = await api.call("POST", "/reservations", who=who, json={"device": device, "duration_s": 600})
    assert made.body["state"] == "active", made.body
    return str(made.body["id"])


async def switch(api: Api, device: str, action: object, who: str | None = READER) -> tuple[int, Any]:
    reply = await api.call("POST", f"/devices/{device}/power", who=who, json={"action": action})
    return reply.status, reply.body


async def test_the_holder_cycles_the_board_and_reads_its_state_a_stranger_is_refused_an_admin_may(
    api: Api, agent: Agent, pdu: GudePdu, board: SimulatedBoard
) -> None:
    await reserve(api, "dev-a1")
    for stranger in (OWNER_B, OWNER_A):  # even the board's pool owner holds no reservation of it
        status, body = await switch(api, "dev-a1", "cycle", who=stranger)
        assert status == 403, body
        assert "you do not hold a reservation of dev-a1" in body["error"]["message"]
    assert pdu.switches == []  # nothing reached the agent

    assert await switch(api, "dev-a1", "cycle") == (
        200,
        {"device": "dev-a1", "action": "cycle", "state": "on"},
    )
    assert pdu.switches == [(OUTLET, False), (OUTLET, True)]
    await wait_until(lambda: board.state is State.LOGIN, timeout=15)  # it booted
    assert await switch(api, "dev-a1", "status") == (
        200,
        {"device": "dev-a1", "action": "status", "state": "on"},
    )
    assert len(pdu.switches) == 2  # a status switches nothing

    assert await switch(api, "dev-a1", "off", who=ADMIN) == (
        200,
        {"device": "dev-a1", "action": "off", "state": "off"},
    )
    assert not board.powered
    assert await switch(api, "dev-a1", "on") == (200, {"device": "dev-a1", "action": "on", "state": "on"})
    assert board.powered
    # Counted in the agent's figures as a person's: the cycle, the off and the on.
    assert agent.board_figures.switches["dev-a1", SwitchReason.PERSON] == 3

    async with api.db.sessions() as session:
        audited = await list_audit(session, device_id="dev-a1")
    uses = [
        (entry.actor, entry.field, entry.before, entry.after) for entry in audited if entry.field == "power"
    ]
    assert uses[::-1] == [
        (READER, "power", "cycle", "on"),
        (READER, "power", "status", "on"),
        (ADMIN, "power", "off", "off"),
        (READER, "power", "on", "on"),
    ]
    assert all(entry.pool_id == "pool-a" for entry in audited if entry.field == "power")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_kerrigan_power_prints_the_state_and_a_refusal_the_servers_message(
    api: Api, agent: Agent, pdu: GudePdu, board: SimulatedBoard
) -> None:
    holder = _lab(api)  # rita's token
    stranger = holder | {"KERRIGAN_TOKEN": api.tokens[OWNER_B]}
    status, out, err = await kerrigan("power", "dev-a1", "cycle", env=holder)
    assert (status, out) == (1, ""), err
    assert err == (
        "kerrigan power: rita may not switch the power of dev-a1: you do not hold a reservation of dev-a1 "
        "(the person holding its reservation and System Admins may) (HTTP 403)\n"
    )
    await reserve(api, "dev-a1")
    status, out, err = await kerrigan("power", "dev-a1", "cycle", env=holder)
    assert (status, out, err) == (0, "dev-a1: on\n", "")
    assert pdu.switches == [(OUTLET, False), (OUTLET, True)]
    assert await kerrigan("power", "dev-a1", "status", env=holder) == (0, "dev-a1: on\n", "")
    status, out, err = await kerrigan("power", "dev-a1", "off", env=stranger)
    assert (status, out) == (1, ""), err
    assert "bob may not switch the power of dev-a1: you do not hold a reservation of dev-a1" in err
    assert "Traceback" not in err
    assert board.powered
    status, _, err = await kerrigan("power", "dev-a1", "reboot", env=holder)
    assert status == 2, err  # usage


async def test_hostile_bodies_are_400s_naming_the_field_before_anything_is_asked(
    api: Api, agent: Agent, pdu: GudePdu
) -> None:
    await reserve(api, "dev-a1")
    path = "/devices/dev-a1/power"
    for body, field in [
        ({"action": "reboot"}, "action"),
        ({"action": 1}, "action"),
        ({"action": None}, "action"),
        ({"action": ["cycle"]}, "action"),
        ({"action": "on" * 5000}, "action"),
        ({}, "action"),
        ({"action": "on", "outlet": 3}, "outlet"),
    ]:
        reply = await api.call("POST", path, who=READER, json=body)
        assert (reply.status, reply.body["error"]["field"]) == (400, field), (body, reply.body)
    for data in ("[]", "not json", ""):
        reply = await api.call("POST", path, who=READER, data=data)
        assert reply.status == 400, reply.body
    huge = io.BytesIO(b'{"action": "' + b"x" * (1024 * 1024) + b'"}')
    reply = await api.call("POST", path, who=READER, data=huge, headers={"Content-Type": "application/json"})
    assert (reply.status, reply.body["error"]["code"]) == (413, "too_large")
    assert (await api.call("POST", path, who=None, json={"action": "on"})).status == 401
    assert (await api.call("POST", "/devices/no-such/power", who=ADMIN, json={"action": "on"})).status == 404
    assert pdu.switches == []
    async with api.db.sessions() as session:
        assert (await session.scalars(select(DeviceRequestRow))).all() == []


async def _held_by_job(api: Api, clock: FakeClock, device: str, host: str) -> int:
    async with api.db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, ("flash",), repository=REPO), clock())
        await session.execute(
            update(JobRow)
            .where(JobRow.task_id == "flash")
            .values(state=JobState.RUNNING, device_id=device, host=host, started_at=clock())
        )
        job = await session.scalar(select(JobRow.pk))
        assert job is not None
        session.add(
            DeviceLeaseRow(
                device_id=device,
                job_pk=job,
                session_id=SESSION,
                host=host,
                granted_at=clock(),
                expires_at=clock() + timedelta(minutes=5),
            )
        )
    return int(job)


async def test_a_device_a_job_holds_is_409_to_an_admin_and_403_to_anyone_else(
    api: Api, clock: FakeClock
) -> None:
    await runner(api, "lab-a-02", ["device_power"])
    job = await _held_by_job(api, clock, "dev-a2", "lab-a-02")
    status, body = await switch(api, "dev-a2", "cycle", who=ADMIN)
    assert (status, body["error"]["code"]) == (409, "device_busy"), body
    assert f"job {job} holds dev-a2" in body["error"]["message"]
    status, body = await switch(api, "dev-a2", "cycle", who=READER)
    assert status == 403, body
    assert "you do not hold a reservation of dev-a2" in body["error"]["message"]


async def test_an_agent_without_the_capability_or_offline_or_silent_or_unwired_is_named(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await reserve(api, "dev-b1")
    await runner(api, "lab-b-01", [])  # an older agent
    status, body = await switch(api, "dev-b1", "cycle")
    assert (status, body["error"]["code"]) == (409, "not_supported"), body
    assert "does not speak device_power" in body["error"]["message"]

    headers = await runner(api, "lab-b-01", ["device_power"])
    # Its agent is handed the request and answers that the devices file gives dev-b1 no power.
    asked = asyncio.create_task(switch(api, "dev-b1", "on"))
    handed = await poll(api, headers)
    [request] = handed["device_requests"]
    assert (request["device"], request["action"]) == ("dev-b1", "on")
    assert (await poll(api, headers, wait=0))["device_requests"] == []  # handed once
    for bad, field in [
        ({"state": "lit"}, "state"),
        ({"failure": "fire"}, "failure"),
        ({"failure": "not_holder"}, "failure"),  # the server's own refusal, never an agent's
        ({}, "state"),
    ]:
        async with api.client.post(
            f"/api/runner/v1/device-requests/{request['id']}", json=bad, headers=headers
        ) as reply:
            assert (reply.status, (await reply.json())["error"]["field"]) == (400, field)
    answer = {"failure": "no_power", "message": "dev-b1 has no power wiring in this host's devices file"}
    async with api.client.post(
        f"/api/runner/v1/device-requests/{request['id']}", json=answer, headers=headers
    ) as reply:
        assert await reply.json() == {"recorded": True}
    status, body = await asked
    assert (status, body["error"]["code"]) == (409, "no_power"), body
    assert "no power wiring" in body["error"]["message"]

    # An agent that never answers: the call ends 504, the request expired, audited.
    monkeypatch.setattr(power, "ANSWER_WITHIN_S", 0.3)
    status, body = await switch(api, "dev-b1", "cycle")
    assert (status, body["error"]["code"]) == (504, "no_answer"), body
    async with api.db.sessions() as session:
        states = [row.state.value for row in await session.scalars(select(DeviceRequestRow))]
        audited = await list_audit(session, device_id="dev-b1")
    assert states == ["failed", "expired"]
    assert [(entry.before, entry.after) for entry in audited if entry.field == "power"] == [
        ("cycle", "expired"),
        ("on", "failed: dev-b1 has no power wiring in this host's devices file"),
    ]

    async with api.db.sessions() as session, session.begin():
        await session.execute(
            update(RunnerHostRow).where(RunnerHostRow.id == "lab-b-01").values(online=False)
        )
    status, body = await switch(api, "dev-b1", "cycle")
    assert (status, body["error"]["code"]) == (503, "host_offline"), body


async def test_a_reservation_past_its_end_gives_no_power_even_before_the_dispatcher_ends_it(
    api: Api, clock: FakeClock
) -> None:
    await runner(api, "lab-a-02", ["device_power"])
    await reserve(api, "dev-a2")
    clock.advance(601)  # its 600 s are over; no dispatcher round has ended it yet: its lease is still there
    async with api.db.sessions() as session:
        assert await session.scalar(
            select(DeviceLeaseRow.device_id).where(DeviceLeaseRow.device_id == "dev-a2")
        )
    status, body = await switch(api, "dev-a2", "cycle", who=READER)
    assert status == 403, body
    assert "you do not hold a reservation of dev-a2" in body["error"]["message"]


async def test_a_request_whose_person_no_longer_holds_the_device_when_its_host_takes_it_is_refused(
    api: Api, clock: FakeClock
) -> None:
    """Asked while the person held dev-b1, the request waits for lab-b-01's poll; by then their reservation
    ended (a 403 naming it) or a job took the device (a 409): refused there, audited, never handed over. An
    admin's request needs no reservation and is handed."""
    headers = await runner(api, "lab-b-01", ["device_power"])
    reservation = await reserve(api, "dev-b1")
    asked = asyncio.create_task(switch(api, "dev-b1", "off"))
    await wait_until(lambda: _waiting(api), timeout=15)
    released = await api.call("DELETE", f"/reservations/{reservation}", who=READER)
    assert released.status < 300, released.body
    assert (await poll(api, headers, wait=0))["device_requests"] == []  # refused as it was taken
    status, body = await asked
    assert (status, body["error"]["code"]) == (403, "forbidden"), body
    assert body["error"]["message"] == (
        "rita no longer holds dev-b1: the reservation ended before its agent got the request"
    )

    asked = asyncio.create_task(switch(api, "dev-b1", "on", who=ADMIN))
    await wait_until(lambda: _waiting(api), timeout=15)
    job = await _held_by_job(api, clock, "dev-b1", "lab-b-01")
    assert (await poll(api, headers, wait=0))["device_requests"] == []
    status, body = await asked
    assert (status, body["error"]["code"]) == (409, "device_busy"), body
    assert f"job {job} took dev-b1 before its agent got the request" in body["error"]["message"]

    async with api.db.sessions() as session:
        audited = await list_audit(session, device_id="dev-b1")
    assert [(entry.actor, entry.before, entry.after) for entry in audited if entry.field == "power"] == [
        (ADMIN, "on", f"failed: job {job} took dev-b1 before its agent got the request: its power is the "
         "job's"),
        (READER, "off", "failed: rita no longer holds dev-b1: the reservation ended before its agent got the "
         "request"),
    ]  # fmt: skip


async def test_an_admins_request_is_handed_without_a_reservation(api: Api) -> None:
    headers = await runner(api, "lab-b-01", ["device_power"])
    asked = asyncio.create_task(switch(api, "dev-b1", "status", who=ADMIN))
    [request] = (await poll(api, headers))["device_requests"]
    assert (request["device"], request["action"]) == ("dev-b1", "status")
    async with api.client.post(
        f"/api/runner/v1/device-requests/{request['id']}", json={"state": "on"}, headers=headers
    ) as reply:
        assert await reply.json() == {"recorded": True}
    assert await asked == (200, {"device": "dev-b1", "action": "status", "state": "on"})


async def _waiting(api: Api) -> bool:
    async with api.db.sessions() as session:
        found = await session.scalars(select(DeviceRequestRow.state))
        return [state.value for state in found][-1:] == ["waiting"]


async def test_a_person_with_the_most_requests_waiting_is_refused_one_more_naming_the_limit(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(power, "ANSWER_WITHIN_S", 3.0)  # nobody answers: they expire after 3 s
    await runner(api, "lab-b-01", ["device_power"])
    await reserve(api, "dev-b1")
    asked = [asyncio.create_task(switch(api, "dev-b1", "status")) for _ in range(MAX_PENDING_PER_PERSON)]

    async def all_waiting() -> bool:
        async with api.db.sessions() as session:
            return len((await session.scalars(select(DeviceRequestRow))).all()) == MAX_PENDING_PER_PERSON

    await wait_until(all_waiting, timeout=15)
    status, body = await switch(api, "dev-b1", "on")
    assert (status, body["error"]["code"]) == (409, "too_many"), body
    assert body["error"]["message"] == (
        f"rita has {MAX_PENDING_PER_PERSON} power requests waiting for their agents' answers, the most one "
        f"person may have at once ({MAX_PENDING_PER_PERSON}): wait for one to end"
    )
    assert [(await task)[0] for task in asked] == [504] * MAX_PENDING_PER_PERSON
    status, body = await switch(api, "dev-b1", "on")  # none waits now: asked (and expired, unanswered)
    assert (status, body["error"]["code"]) == (504, "no_answer"), body
