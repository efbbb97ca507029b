"""``POST /api/v1/jobs/{id}/hold`` (Hold board from the API, ``kerrigan reserve --job``) through the whole
application: a writer of the repository (as GitHub says) or a System Admin holds a failed job's board(s),
asked again while the hold lasts answers the same hold (200); a reader is a 403 naming what they lack, a
job of a repository the caller cannot read or no job at all a 404, a job that did not fail a 409; each
answer is one the API document describes. While the hold lasts the heartbeat answer of the job's runner
host names the job in ``held_workspaces`` (to an agent that speaks it), and not once it ends."""

from __future__ import annotations

from typing import Any, Final

import pytest
from sqlalchemy import select, update

from kerrigan.core.lifecycle import JobState
from kerrigan.core.runner_protocol import HELD_WORKSPACES
from kerrigan.store.audit import list_audit
from kerrigan.store.models import JobRow, ReservationRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.github import GitHubStandIn
from tests.integration.api.conftest import ADMIN, ANONYMOUS, OWNER_A, OWNER_B, READER, Api
from tests.integration.api.test_cli_reservations import kerrigan
from tests.integration.api.test_cli_sessions import _lab
from tests.integration.api.test_errors_and_openapi import openapi, validate
from tests.integration.api.test_reservation_settings import runner
from tests.integration.github.conftest import REPO

SESSION: Final = "30303030-3030-3030-3030-303030303030"
HOLD: Final = "/jobs/{job_id}/hold"
WRITER: Final = READER  # rita: GitHub says write in the tests that need a writer


async def _jobs(api: Api) -> dict[str, int]:
    """A completed session of octo/firmware: boot failed on dev-b1 (lab-b-01), pair (a gang) timed out on
    dev-a1 and dev-a2 (lab-a-01), smoke passed on dev-a2. Their job ids by task."""
    clock = api.db.clock
    async with api.db.sessions() as session, session.begin():
        await create_session(
            session, builders.session(SESSION, ("boot", "pair", "smoke"), repository=REPO), clock()
        )
        ended = {"started_at": clock(), "finished_at": clock()}
        for task, state, device, host, devices in (
            ("boot", JobState.FAILED, "dev-b1", "lab-b-01", []),
            (
                "pair",
                JobState.TIMED_OUT,
                "dev-a1",
                "lab-a-01",
                [{"role": "dut", "device": "dev-a1"}, {"role": "peer", "device": "dev-a2"}],
            ),
            ("smoke", JobState.SUCCEEDED, "dev-a2", "lab-a-02", []),
        ):
            await session.execute(
                update(JobRow)
                .where(JobRow.task_id == task)
                .values(state=state, device_id=device, host=host, devices=devices, **ended)
            )
        rows = await session.execute(select(JobRow.task_id, JobRow.pk))
        return {task: int(pk) for task, pk in rows}


@pytest.fixture
async def jobs(api: Api) -> dict[str, int]:
    return await _jobs(api)


async def hold(api: Api, job: int | str, who: str | None) -> Any:
    return await api.call("POST", f"/jobs/{job}/hold", who=who)


async def test_a_writer_holds_the_failed_board_and_asking_again_answers_the_same_hold(
    api: Api, jobs: dict[str, int], github: GitHubStandIn
) -> None:
    github.set_permission(REPO, WRITER, "write")
    document = await openapi(api)

    made = await hold(api, jobs["boot"], WRITER)

    assert made.status == 201, made.body
    validate(document, HOLD, "post", made)
    assert made.body["job"] == jobs["boot"]
    [reservation] = made.body["reservations"]
    assert (reservation["login"], reservation["device_requested"], reservation["held_job"]) == (
        WRITER,
        "dev-b1",
        jobs["boot"],
    )
    assert (reservation["state"], reservation["device"]["id"], reservation["duration_s"]) == (
        "active",
        "dev-b1",
        1800,
    )
    shown = await api.get(f"/reservations/{reservation['id']}", who=WRITER)
    assert shown.body["held_job"] == jobs["boot"]

    again = await hold(api, jobs["boot"], WRITER)  # a second ask while it lasts: the same hold
    assert again.status == 200, again.body
    validate(document, HOLD, "post", again)
    assert [r["id"] for r in again.body["reservations"]] == [reservation["id"]]
    async with api.db.sessions() as session:
        assert len((await session.scalars(select(ReservationRow))).all()) == 1
        audited = [
            e.field for e in await list_audit(session, actor=WRITER) if e.subject_id == reservation["id"]
        ]
    assert "hold:dev-b1" in audited


async def test_an_admin_holds_a_gangs_every_board_without_asking_github(
    api: Api, jobs: dict[str, int]
) -> None:
    made = await hold(api, jobs["pair"], ADMIN)

    assert made.status == 201, made.body
    validate(await openapi(api), HOLD, "post", made)
    assert [(r["device_requested"], r["held_job"]) for r in made.body["reservations"]] == [
        ("dev-a1", jobs["pair"]),
        ("dev-a2", jobs["pair"]),
    ]


async def test_a_reader_is_403_naming_what_they_lack_and_nothing_is_held(
    api: Api, jobs: dict[str, int], github: GitHubStandIn
) -> None:
    github.set_permission(REPO, OWNER_A, "triage")
    document = await openapi(api)
    for who, role in ((READER, "read"), (OWNER_A, "triage")):
        refused = await hold(api, jobs["boot"], who)
        assert (refused.status, refused.body["error"]["code"]) == (403, "forbidden"), refused.body
        validate(document, HOLD, "post", refused)
        assert refused.body["error"]["message"] == (
            f"{who} may not hold job {jobs['boot']}'s board: Hold board needs write, maintain or admin "
            f"permission on {REPO} (you have {role})"
        )
    async with api.db.sessions() as session:
        assert (await session.scalars(select(ReservationRow))).all() == []


async def test_no_job_or_one_the_caller_cannot_read_is_404_and_no_token_401(
    api: Api, jobs: dict[str, int], github: GitHubStandIn
) -> None:
    github.set_permission(REPO, OWNER_B, "none")
    document = await openapi(api)
    for job, who in ((jobs["boot"], OWNER_B), (999_999, ADMIN), ("twelve", ADMIN), ("9" * 40, ADMIN)):
        missing = await hold(api, job, who)
        assert (missing.status, missing.body["error"]["code"]) == (404, "not_found"), (job, missing.body)
        validate(document, HOLD, "post", missing)
    assert str(jobs["boot"]) in (await hold(api, jobs["boot"], OWNER_B)).body["error"]["message"]
    unsigned = await hold(api, jobs["boot"], ANONYMOUS)
    assert unsigned.status == 401


async def test_a_job_that_did_not_fail_is_409_saying_so(api: Api, jobs: dict[str, int]) -> None:
    refused = await hold(api, jobs["smoke"], ADMIN)

    assert (refused.status, refused.body["error"]["code"]) == (409, "not_holdable"), refused.body
    validate(await openapi(api), HOLD, "post", refused)
    assert "did not fail (it is succeeded)" in refused.body["error"]["message"]


async def test_a_person_over_the_reservation_limit_is_409_too_many(
    api: Api, jobs: dict[str, int], github: GitHubStandIn
) -> None:
    github.set_permission(REPO, WRITER, "write")
    for device in ("dev-a1", "dev-a2"):  # the per-person limit (2) held already
        made = await api.call("POST", "/reservations", who=WRITER, json={"device": device, "duration_s": 600})
        assert made.status == 201, made.body

    refused = await hold(api, jobs["boot"], WRITER)

    assert (refused.status, refused.body["error"]["code"]) == (409, "too_many"), refused.body
    assert "KERRIGAN_RESERVATIONS_PER_USER" in refused.body["error"]["message"]


async def heartbeat(api: Api, headers: dict[str, str]) -> dict[str, Any]:
    body = {"resources": {}, "devices": {}, "waiting": {}}
    async with api.client.post("/api/runner/v1/heartbeat", json=body, headers=headers) as answer:
        assert answer.status == 200, await answer.text()
        return dict(await answer.json())


async def test_the_heartbeat_answer_names_the_held_job_while_the_hold_lasts_and_not_after(
    api: Api, jobs: dict[str, int]
) -> None:
    speaks = await runner(api, "lab-b-01", [HELD_WORKSPACES])  # the failed boot job's host
    other = await runner(api, "lab-a-01", [HELD_WORKSPACES])
    assert (await heartbeat(api, speaks))["held_workspaces"] == []

    made = await hold(api, jobs["boot"], ADMIN)
    assert made.status == 201, made.body

    assert (await heartbeat(api, speaks))["held_workspaces"] == [str(jobs["boot"])]
    assert (await heartbeat(api, other))["held_workspaces"] == []  # another host's job, not its own
    older = await runner(api, "lab-b-01", [])  # an agent that does not keep workspaces is not told
    assert "held_workspaces" not in await heartbeat(api, older)

    speaks = await runner(api, "lab-b-01", [HELD_WORKSPACES])
    [reservation] = made.body["reservations"]
    released = await api.call("DELETE", f"/reservations/{reservation['id']}", who=ADMIN)
    assert released.status == 200, released.body
    assert (await heartbeat(api, speaks))["held_workspaces"] == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_kerrigan_reserve_job_holds_the_board_says_until_when_and_refuses_a_reader(
    api: Api, jobs: dict[str, int], github: GitHubStandIn
) -> None:
    lab = _lab(api)  # rita's token: a writer here
    github.set_permission(REPO, WRITER, "write")
    reader = lab | {"KERRIGAN_TOKEN": api.tokens[OWNER_A]}  # olga reads octo/firmware
    status, out, err = await kerrigan("reserve", "--job", str(jobs["boot"]), env=reader)
    assert status == 1, out
    assert "Hold board needs write, maintain or admin permission on octo/firmware (you have read)" in err
    assert "(HTTP 403)" in err

    status, out, err = await kerrigan("reserve", "--job", str(jobs["boot"]), env=lab)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"holding the board(s) of failed job {jobs['boot']}"
    assert lines[1].startswith("reserved dev-b1 on runner host lab-b-01 until ")
    status, out, err = await kerrigan("reserve", "--job", str(jobs["boot"]), env=lab)
    assert (status, out.splitlines()[0]) == (
        0,
        f"holding the board(s) of failed job {jobs['boot']} (held already)",
    )

    status, _, err = await kerrigan("reserve", "--job", str(jobs["smoke"]), env=lab)
    assert status == 1
    assert "did not fail (it is succeeded)" in err
    for extra in (("--for", "1h"), ("--device", "dev-b1"), ("--wait", "5m")):
        status, _, err = await kerrigan("reserve", "--job", str(jobs["boot"]), *extra, env=lab)
        assert status == 2, (extra, err)
    status, _, err = await kerrigan("reserve", "--job", "boot", env=lab)
    assert (status, "--job takes a job id" in err) == (2, True)
