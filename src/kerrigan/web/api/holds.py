"""``POST /api/v1/jobs/{job_id}/hold``: Hold board from the API and ``kerrigan reserve --job ID``
(:mod:`kerrigan.core.holds`, as the check run's *Hold board* and ``/kerrigan hold``).

A path of the job's own rather than a second shape of ``POST /reservations``: a hold answers every board of
the job (a gang's: several reservations), lasts ``KERRIGAN_HOLD_S`` rather than what the caller asks, and
answers the hold there is (200) to the person who asks again while it lasts.

Who may: System Admins and the writers of the job's repository (write, maintain or admin there, as GitHub
says: :mod:`kerrigan.web.writers`); a job of a repository the caller may not read is a 404, as if there
were none. A job that did not fail, or whose board is retired or gone, is a 409; a person holding or
waiting for ``KERRIGAN_RESERVATIONS_PER_USER`` already a 409; a board no request can match a 422.
"""

from __future__ import annotations

import asyncio
import re
from typing import Final

from aiohttp import web

from kerrigan.core.reservations import RequestError
from kerrigan.core.roles import Principal
from kerrigan.store.holds import HoldRefusedError, JobToHold, job_to_hold, place_hold
from kerrigan.store.inventory import load_inventory
from kerrigan.store.reservations import UnmatchableError
from kerrigan.web.api.reservations import decided, reservations_json
from kerrigan.web.auth import forbidden, signed_in
from kerrigan.web.errors import ApiError
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE, SETTINGS, writing
from kerrigan.web.writers import WritersUnknownError, github_unavailable, writes_to

routes = web.RouteTableDef()

_JOB_ID: Final = re.compile(r"[0-9]{1,18}")


async def _may_hold(request: web.Request, principal: Principal, target: JobToHold) -> None:
    """Nothing when ``principal`` may hold the job's boards; else the 404 of a job they may not read, the
    403 naming what they lack, or the 503 of GitHub not saying."""
    if principal.admin:
        return
    repository = target.repository
    if not repository:  # the lab's own job (a health check): its admins'
        what = f"hold job {target.job.pk}'s board: a job of the lab's own; System Admins may"
        raise forbidden(principal, what)
    try:
        answer = await writes_to(request, principal, target.installation_id, repository)
    except WritersUnknownError:
        raise github_unavailable(principal, repository) from None
    if answer is not None and answer[0]:
        return
    # Not a writer: one who may not even read the repository is told there is no such job.
    missing = ApiError(404, "not_found", f"no job {target.job.pk}")
    await read_access(request, principal).check(repository, missing)
    if answer is None:  # this server cannot ask GitHub
        raise forbidden(principal, f"hold job {target.job.pk}'s board: only System Admins may on this server")
    raise forbidden(
        principal,
        f"hold job {target.job.pk}'s board: Hold board needs write, maintain or admin permission on "
        f"{repository} (you have {answer[1] or 'none'})",
    )


@routes.post("/jobs/{job_id}/hold")
async def job_hold(request: web.Request) -> web.Response:
    """Hold the failed job's board(s) for the caller: 201 with its reservations once the dispatcher has
    decided (or after 2 s), or 200 with the caller's hold of it that lasts still."""
    principal = await signed_in(request)
    text = request.match_info["job_id"]
    if _JOB_ID.fullmatch(text) is None:
        raise ApiError(404, "not_found", f"no job {text[:40]!r}: job ids are whole numbers")
    database = request.config_dict[DATABASE]
    async with database.sessions() as session:
        target = await job_to_hold(session, int(text))
    if target is None:
        raise ApiError(404, "not_found", f"no job {int(text)}")
    await _may_hold(request, principal, target)  # before the write: GitHub may take a while
    settings = request.config_dict[SETTINGS]
    try:
        async with writing(request) as session:
            held, made = await place_hold(
                session,
                principal,
                target.job,
                database.clock(),
                duration_s=settings.hold_s,
                inventory=await load_inventory(session),
                per_user=settings.reservations_per_user,
            )
    except HoldRefusedError as exc:
        raise ApiError(409, "not_holdable", str(exc)) from None
    except RequestError as exc:  # over KERRIGAN_RESERVATIONS_PER_USER
        raise ApiError(409, "too_many", exc.message, exc.field) from None
    except UnmatchableError as exc:
        raise ApiError(422, "unschedulable", f"no request can ever have its board: {exc}") from None
    if made:
        held = list(await asyncio.gather(*(decided(request, reservation) for reservation in held)))
    body = {"job": target.job.pk, "reservations": await reservations_json(request, held, principal.login)}
    return web.json_response(body, status=201 if made else 200)
