"""Issue 28: the suspect statistics are updated by a job's end before its check run is rendered. A board
that fails a task its peers pass is named in the check run of the very failure that makes it suspect, not
up to 30 s later (the tracker's timer), on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.github.projection import progress_of
from kerrigan.github.reconciler import current_view
from kerrigan.store.check_runs import Claim
from kerrigan.store.database import Database
from kerrigan.store.models import SessionRow
from kerrigan.store.suspects import SuspectTracker, task_key, tracker_of
from kerrigan.testing.clock import FakeClock
from tests.integration.store.test_suspects import PEERS, ran

KEY = task_key("octo/firmware", "w", "boot")


async def _shown(db: Database, session_id: str) -> str:
    """The suspect sentence the reconciler would render in ``session_id``'s check run now."""
    async with db.sessions() as session:
        pk = await session.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
        assert pk is not None
        view = await current_view(session, db, Claim(pk, session_id, "token", db.clock(), 0))
    [job] = progress_of(view)
    return job.suspect


async def test_the_failure_that_makes_a_board_suspect_names_it(db: Database, clock: FakeClock) -> None:
    for n in range(52):
        await ran(db, PEERS[n % len(PEERS)], failed=n == 0)
    async with db.sessions() as session:
        assert await tracker_of(db.signals).suspects(session, db.clock()) == {}  # it has looked: none yet
    named_at = None
    for failures in range(1, 11):
        clock.advance(2)  # well within the tracker's 30 s
        failing = await ran(db, "redbox", failed=True, days_ago=0)
        async with db.sessions() as session:
            truth = (await SuspectTracker().suspects(session, db.clock())).get((KEY, "redbox"))
        shown = await _shown(db, failing)
        assert shown == (truth.sentence() if truth is not None else ""), f"failure {failures}"
        if truth is not None and named_at is None:
            named_at = failures
    assert named_at is not None
    assert named_at > 1  # the first failures alone make no suspect: the one that does is named at once
