"""A runner host that sends what no agent would: every field out of range is a 400 naming it, a body past
the limit a 413, output past ``KERRIGAN_OUTPUT_MAX_BYTES`` cut and marked; never a 500, and the job stays as
it was. Over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select

from kerrigan.app import PROTOCOL, create_app
from kerrigan.config import Settings
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES, MAX_BODY_BYTES
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.models import JobLogRow, JobRow
from kerrigan.store.runners import create_runner_token
from tests.integration.dispatch.test_job_lifecycle import offer_one

Client = TestClient  # type: ignore[type-arg]
HOST = "lab-a-01"


async def runner_app(db: Database, aiohttp_client: Callable[..., Any], **overrides: Any) -> Client:
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False), **overrides)
    app = create_app(settings, clock=db.clock)
    assert app[PROTOCOL].output_max_bytes == settings.output_max_bytes
    client: Client = await aiohttp_client(app)
    return client


class Host:
    """One runner host's calls, answered with status and JSON."""

    def __init__(self, client: Client, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def post(
        self, path: str, body: Any = None, *, raw: bytes | io.BytesIO | None = None
    ) -> tuple[int, Any]:
        if raw is not None:
            headers = self.headers | {"Content-Type": "application/json"}
            response = await self.client.post(f"/api/runner/v1{path}", data=raw, headers=headers)
        else:
            response = await self.client.post(f"/api/runner/v1{path}", json=body or {}, headers=self.headers)
        return response.status, await response.json()

    async def running_job(self, db: Database) -> int:
        """A job offered to this host, accepted and started."""
        job = await offer_one(db, HOST)
        assert (await self.post(f"/jobs/{job}/accept"))[0] == 200
        assert (await self.post(f"/jobs/{job}/start", {"cpus": "2-3"}))[1]["state"] == "running"
        return job


async def host_on(db: Database, client: Client, capabilities: tuple[str, ...] = ()) -> Host:
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, HOST, db.clock())
    host = Host(client, token)
    registration = {"protocol": [1], "capabilities": list(capabilities), "resources": {}, "devices": {}}
    assert (await host.post("/register", registration))[0] == 200
    return host


@pytest.fixture
async def host(db: Database, aiohttp_client: Callable[..., Any]) -> Host:
    return await host_on(db, await runner_app(db, aiohttp_client))


async def job_row(db: Database, job: int) -> JobRow:
    async with db.sessions() as session:
        row = await session.get(JobRow, job)
    assert row is not None
    return row


def refused(answer: tuple[int, Any], field: str | None, status: int = 400) -> str:
    code, body = answer
    assert (code, body["error"]["field"]) == (status, field), body
    message: str = body["error"]["message"]
    return message


async def test_an_exit_status_of_2_to_the_70_is_a_400_and_the_job_stays_running(
    db: Database, host: Host
) -> None:
    job = await host.running_job(db)
    message = refused(await host.post(f"/jobs/{job}/finish", {"exit_status": 2**70}), "exit_status")
    assert "-64 to 255" in message
    row = await job_row(db, job)
    assert (row.state, row.exit_status, row.finished_at) == ("running", None, None)
    # The agent's later valid report ends it.
    assert (await host.post(f"/jobs/{job}/finish", {"exit_status": -9}))[1]["state"] == "failed"


@pytest.mark.parametrize(
    ("accounting", "field"),
    [
        ({"reservation_use": {"cpu_s": -5}}, "accounting.reservation_use.cpu_s"),
        ({"reservation_use": {"wall_s": 2**70}}, "accounting.reservation_use.wall_s"),
    ],
)
async def test_accounting_figures_out_of_range_are_a_400_and_the_job_stays_running(
    db: Database, host: Host, accounting: dict[str, Any], field: str
) -> None:
    job = await host.running_job(db)
    answer = await host.post(f"/jobs/{job}/finish", {"exit_status": 0, "accounting": accounting})
    assert "finite number" in refused(answer, field)
    assert (await job_row(db, job)).state == "running"


@pytest.mark.parametrize("field", ["powered_off", "power_unknown"])
@pytest.mark.parametrize(
    "devices", ["modalix-bluebox", {"modalix-bluebox": True}, [7], ["x" * 256], ["board"] * 65]
)
async def test_a_board_list_that_is_not_a_short_list_of_names_is_a_400_and_the_job_stays_running(
    db: Database, host: Host, field: str, devices: object
) -> None:
    job = await host.running_job(db)
    answer = await host.post(f"/jobs/{job}/finish", {"exit_status": 75, field: devices})
    refused(answer, field)
    assert (await job_row(db, job)).state == "running"


async def test_a_nan_in_accounting_is_a_400_naming_it(db: Database, host: Host) -> None:
    job = await host.running_job(db)
    raw = b'{"exit_status": 0, "accounting": {"reservation_use": {"cpu_s": NaN}}}'
    refused(await host.post(f"/jobs/{job}/finish", raw=raw), "accounting.reservation_use.cpu_s")
    assert (await job_row(db, job)).state == "running"


@pytest.mark.parametrize(
    "chunk",
    [
        {"seq": 2**70, "offset": 0, "data": "x"},
        {"seq": -1, "offset": 0, "data": "x"},
        {"seq": 2**31 - 1, "offset": 0, "data": "x", "truncated_before_seq": 2**31 - 1},
    ],
)
async def test_a_sequence_number_out_of_range_is_a_400_naming_seq(
    db: Database, aiohttp_client: Callable[..., Any], chunk: dict[str, Any]
) -> None:
    host = await host_on(db, await runner_app(db, aiohttp_client), ("log_pages",))
    job = await host.running_job(db)
    refused(await host.post(f"/jobs/{job}/output", chunk), "seq")
    row = await job_row(db, job)
    assert (row.next_seq, row.log_bytes) == (0, 0)


async def test_a_jump_of_2_to_the_70_over_evicted_chunks_is_a_400(
    db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    host = await host_on(db, await runner_app(db, aiohttp_client), ("log_pages",))
    job = await host.running_job(db)
    assert (await host.post(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "boot\n"}))[0] == 200
    jump = {"seq": 2**70, "offset": 5, "data": "x", "truncated_before_seq": 2**70}
    refused(await host.post(f"/jobs/{job}/output", jump), "seq")
    refused(await host.post(f"/jobs/{job}/output", jump | {"seq": 1}), "truncated_before_seq")
    refused(await host.post(f"/jobs/{job}/output", {"seq": 1, "offset": 2**70, "data": "x"}), "offset")
    row = await job_row(db, job)
    assert (row.next_seq, row.log_bytes) == (1, 5)


async def test_a_lone_surrogate_in_output_is_a_400_naming_data_and_nothing_is_stored(
    db: Database, host: Host
) -> None:
    job = await host.running_job(db)
    raw = b'{"seq": 0, "offset": 0, "data": "boot \\ud800 done"}'
    assert "UTF-8" in refused(await host.post(f"/jobs/{job}/output", raw=raw), "data")
    async with db.sessions() as session:
        assert await jobs.output(session, job) == []
    assert (await host.post(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "ok\n"}))[0] == 200


async def test_a_lone_surrogate_in_a_heartbeat_names_its_field(db: Database, host: Host) -> None:
    raw = b'{"health": {"note": "\\udfff"}}'
    refused(await host.post("/heartbeat", raw=raw), "health.note")


@pytest.mark.parametrize("action", ["accept", "refuse", "start", "output", "finish", "withdrawn"])
@pytest.mark.parametrize("job", ["²", "99999999999999999999", "0"])
async def test_a_job_id_that_is_not_one_is_a_400_never_a_500(host: Host, action: str, job: str) -> None:
    bodies = {
        "refuse": {"reason": "runner_full"},
        "output": {"seq": 0, "offset": 0, "data": "x"},
        "finish": {"exit_status": 0},
    }
    refused(await host.post(f"/jobs/{job}/{action}", bodies.get(action, {})), "job_id")


async def test_a_waiting_job_id_that_is_not_one_is_a_400(host: Host) -> None:
    refused(await host.post("/heartbeat", {"waiting": {"²": 5}}), "waiting")
    refused(await host.post("/heartbeat", {"waiting": {"1": 2**70}}), "waiting")


async def test_a_poll_wait_of_thousands_of_digits_is_a_400(host: Host) -> None:
    response = await host.client.get(f"/api/runner/v1/poll?wait={'9' * 5000}", headers=host.headers)
    assert (response.status, (await response.json())["error"]["field"]) == (400, "wait")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"protocol": [2**70]}, "protocol"),
        ({"protocol": [1], "resources": {"vcpus": 2**70}}, "resources.vcpus"),
        ({"protocol": [1], "resources": {"free_disk_bytes": 2**63}}, "resources.free_disk_bytes"),
        ({"protocol": [1], "devices": {f"d{n}": "present" for n in range(5000)}}, "devices"),
        ({"protocol": [1], "capabilities": ["x" * 1000]}, "capabilities"),
    ],
)
async def test_registrations_out_of_range_name_the_field(
    host: Host, body: dict[str, Any], field: str
) -> None:
    refused(await host.post("/register", body), field)


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("start", {"cpus": "not-a-list"}, "cpus"),
        ("refuse", {"reason": "runner_disk_full", "free_bytes": 2**70, "floor_bytes": 1}, "free_bytes"),
        ("refuse", {"reason": "invalid_claim", "detail": "x" * 5000}, "detail"),
    ],
)
async def test_other_job_fields_out_of_range_name_the_field(
    db: Database, host: Host, action: str, body: dict[str, Any], field: str
) -> None:
    job = await offer_one(db, HOST)
    await host.post(f"/jobs/{job}/accept")
    refused(await host.post(f"/jobs/{job}/{action}", body), field)
    assert (await job_row(db, job)).state == "accepted"


async def test_a_body_past_the_limit_is_a_413_naming_it(db: Database, host: Host) -> None:
    job = await host.running_job(db)
    data = "x" * (MAX_BODY_BYTES + 1)
    raw = io.BytesIO(json.dumps({"seq": 0, "offset": 0, "data": data}).encode())
    status, body = await host.post(f"/jobs/{job}/output", raw=raw)
    assert (status, body["error"]["code"]) == (413, "too_large")
    assert "1 MiB (1048576 bytes)" in body["error"]["message"]

    async def chunked() -> Any:  # no Content-Length: the limit is counted as the body arrives
        yield b'{"seq": 0, "offset": 0, "data": "'
        for _ in range(20):
            yield b"y" * 64 * 1024
        yield b'"}'

    response = await host.client.post(
        f"/api/runner/v1/jobs/{job}/output", data=chunked(), headers=host.headers
    )
    assert response.status == 413
    async with db.sessions() as session:
        assert await jobs.output(session, job) == []


async def test_a_chunk_larger_than_the_agent_ever_sends_is_a_400_naming_data(
    db: Database, host: Host
) -> None:
    job = await host.running_job(db)
    status, body = await host.post(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "x" * 300_000})
    assert (status, body["error"]["field"]) == (400, "data")


async def stored(db: Database, job: int) -> tuple[int, str | None]:
    """Bytes of output stored, and the cut notice."""
    async with db.sessions() as session:
        chunks = await jobs.output(session, job)
        notice = await session.scalar(
            select(JobLogRow.data).where(JobLogRow.job_pk == job, JobLogRow.seq == jobs.CUT_SEQ)
        )
    return sum(len(data.encode()) for _, data in chunks), notice


async def test_output_past_the_cap_is_not_stored_and_the_cut_is_marked_and_answered(
    db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    cap = 640 * 1024
    host = await host_on(db, await runner_app(db, aiohttp_client, output_max_bytes=cap))
    job = await host.running_job(db)
    chunk = "y" * 64 * 1023 + "\n"  # 70 chunks: 70/64 of the cap, as 70 MiB is of the default
    answers = []
    for seq in range(70):
        status, answer = await host.post(
            f"/jobs/{job}/output", {"seq": seq, "offset": seq * len(chunk), "data": chunk}
        )
        assert status == 200
        answers.append(answer)
    crossing = cap // len(chunk)  # the chunk that crosses the cap
    assert answers[crossing - 1] == {"next_seq": crossing}
    assert answers[crossing:] == [{"next_seq": seq + 1, "output_cut": True} for seq in range(crossing, 70)]
    # Cut mid-line: the notice starts a line of its own.
    assert await stored(db, job) == (cap, "\n[output cut at 640 KiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n")
    # A repeat after the cut still says so; the end is reported as ever.
    assert (await host.post(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": chunk}))[1] == {
        "next_seq": 70,
        "output_cut": True,
    }
    assert (await host.post(f"/jobs/{job}/finish", {"exit_status": 0}))[1]["state"] == "succeeded"
    async with db.sessions() as session:
        tail = await jobs.output_tail(session, job)
        tails = await jobs.output_tails(session, [job, job + 1000])
    assert tail.endswith("y\n[output cut at 640 KiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n")
    assert tails == {job: tail}  # the check run's one query for all jobs, the notice last as well


async def test_the_check_runs_tails_are_each_jobs_last_twenty_chunks(
    db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    host = await host_on(db, await runner_app(db, aiohttp_client), ("log_pages",))
    job = await host.running_job(db)
    offset = 0
    for seq in range(25):
        data = f"line {seq}\n"
        chunk = {"seq": seq, "offset": offset, "data": data}
        assert (await host.post(f"/jobs/{job}/output", chunk))[0] == 200
        offset += len(data)
    async with db.sessions() as session:
        tails = await jobs.output_tails(session, [job])
        assert await jobs.output_tails(session, []) == {}
    assert tails == {job: "".join(f"line {seq}\n" for seq in range(5, 25))}
    async with db.sessions() as session:  # each chunk keeps when it arrived
        arrived = (await session.scalars(select(JobLogRow.received_at).where(JobLogRow.job_pk == job))).all()
    assert len(arrived) == 25
    assert None not in arrived


async def test_the_default_cap_is_64_mib(db: Database, aiohttp_client: Callable[..., Any]) -> None:
    host = await host_on(db, await runner_app(db, aiohttp_client), ("log_pages",))
    job = await host.running_job(db)
    assert DEFAULT_OUTPUT_MAX_BYTES == 64 * 1024 * 1024
    assert (await host.post(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "boot\n"}))[0] == 200
    # The runner evicted what came between, and says so: its offsets jump to 10 bytes short of the cap.
    near = DEFAULT_OUTPUT_MAX_BYTES - 10
    jump = {"seq": 5, "offset": near, "data": "0123456789" + "past the cap\n", "truncated_before_seq": 5}
    assert (await host.post(f"/jobs/{job}/output", jump))[1] == {"next_seq": 6, "output_cut": True}
    async with db.sessions() as session:
        chunks = await jobs.output(session, job)
    assert chunks[-1] == (5, "0123456789")
    assert (await stored(db, job))[1] == "\n[output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n"
