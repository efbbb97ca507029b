"""Runner hosts whose agents have spoken, for tests that dispatch without running any agent.

A runner host is offline until its agent's first heartbeat (:class:`kerrigan.core.inventory.RunnerHost`
``heard``). A test of dispatching, of pages or of check runs that stores a lab and plays the runners' part
itself marks the hosts heard, as a lab whose agents run would be.
"""

from __future__ import annotations

from sqlalchemy import update

from kerrigan.store.database import Database
from kerrigan.store.models import RunnerHostRow


async def hear_hosts(database: Database) -> None:
    """Every online runner host no agent has spoken for yet gets a heartbeat at the clock's time: the lab's
    agents run on the hosts its inventory calls online (one it calls offline has none)."""
    async with database.sessions() as session, session.begin():
        await session.execute(
            update(RunnerHostRow)
            .where(RunnerHostRow.last_heartbeat_at.is_(None), RunnerHostRow.online.is_(True))
            .values(last_heartbeat_at=database.clock())
        )
