"""``POST /api/v1/sessions/{id}/cancel``: cancel a session (queued jobs end at once, running ones are
stopped by their runners, the check run completes ``cancelled`` naming who).

Who may cancel from the web (the API and the session page): System Admins; the repository's writers (write,
maintain or admin there, as GitHub says: :mod:`kerrigan.web.writers`), as GitHub Actions lets them cancel
their workflow runs; and the owners of a pool the session uses, that is a pool one of its jobs' devices is
in or one its tasks were eligible on when it was resolved (as LAVA lets device owners cancel). A session of
a repository the caller may not read (:mod:`kerrigan.web.reading`) is not there for them: 404.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.roles import Principal
from kerrigan.core.sessions import Session, SessionState
from kerrigan.store.cancel import Cancelled, cancel_session
from kerrigan.store.inventory import NotFoundError, get_device, get_pool
from kerrigan.store.sessions import get_session
from kerrigan.web import short_ids
from kerrigan.web.auth import forbidden, signed_in
from kerrigan.web.errors import ApiError
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE, writing
from kerrigan.web.writers import WritersUnknownError, github_unavailable, writes_to

routes = web.RouteTableDef()


async def session_owners(db: AsyncSession, session: Session) -> set[str]:
    """The owners (lowercase logins) of the pools ``session`` uses: its jobs' devices' pools and the pools
    its tasks were eligible on. Pools or devices deleted since are passed over."""
    pool_ids = {pool for match in session.resolution.matches() for pool in match.eligible_pools}
    for device_id in {job.device_id for job in session.jobs if job.device_id}:
        try:
            pool_ids.add((await get_device(db, device_id)).device.pool_id)
        except NotFoundError:
            continue
    owners: set[str] = set()
    for pool_id in sorted(pool_ids):
        try:
            owners.update(owner.lower() for owner in (await get_pool(db, pool_id)).pool.owners)
        except NotFoundError:
            continue
    return owners


def may_cancel(principal: Principal, owners: Iterable[str]) -> bool:
    """Whether ``principal`` may cancel a session whose pools have ``owners`` (lowercase logins)."""
    return principal.admin or principal.login.lower() in set(owners)


async def web_may_cancel(
    request: web.Request, db: AsyncSession, principal: Principal | None, session: Session
) -> bool:
    """Whether the signed-in ``principal`` (None: nobody is) may cancel ``session`` from the web: an admin,
    an owner of a pool it uses, or a writer of its repository on GitHub. :class:`WritersUnknownError` when
    only GitHub could say yes and it did not answer."""
    if principal is None:
        return False
    if principal.admin or may_cancel(principal, await session_owners(db, session)):
        return True
    if not session.repository:  # the lab's own (a health check): its admins' and owners'
        return False
    answer = await writes_to(request, principal, session.installation_id, session.repository)
    return answer is not None and answer[0]


async def cancel_from_web(request: web.Request, principal: Principal, session_id: str) -> Cancelled:
    """Cancel ``session_id`` as ``principal``: 404 when there is no such session, 403 when they may not,
    else what :func:`~kerrigan.store.cancel.cancel_session` did (an ended session is left alone)."""
    database = request.config_dict[DATABASE]
    missing = ApiError(404, "not_found", f"there is no session {session_id!r}")
    async with database.sessions() as db:
        try:
            repository = (await get_session(db, session_id)).repository
        except NotFoundError:
            raise missing from None
    # Asked before the write (GitHub may take a while): a session of a repository they cannot read is
    # not there for them.
    await read_access(request, principal).check(repository, missing)
    async with writing(request) as db:
        try:
            session = await get_session(db, session_id)
        except NotFoundError:
            raise missing from None
        try:
            allowed = await web_may_cancel(request, db, principal, session)
        except WritersUnknownError:
            raise github_unavailable(principal, session.repository) from None
        if not allowed:
            raise forbidden(
                principal,
                f"cancel session {session_id}: System Admins, the writers of {session.repository or 'its'} "
                "repository and the owners of its pools may",
            )
        done = await cancel_session(
            db, session_id, database.clock(), by=principal.login, reason=f"cancelled by {principal.login}"
        )
    if done is None:  # it went between the read and the cancel
        raise missing
    return done


@routes.post("/sessions/{session_id}/cancel")
async def cancel(request: web.Request) -> web.Response:
    """Cancel a session: 200 with what it is now and whether this call changed it; 409 when it had ended."""
    principal = await signed_in(request)
    session_id = await short_ids.session_id(request, request.match_info["session_id"])
    done = await cancel_from_web(request, principal, session_id)
    conclusion = done.conclusion
    if done.state is SessionState.COMPLETED and not done.changed:
        raise ApiError(
            409,
            "session_ended",
            f"session {session_id} has ended: completed {conclusion or 'without a conclusion'}",
        )
    return web.json_response(
        {"session": session_id, "state": done.state.value, "conclusion": conclusion, "changed": done.changed}
    )
