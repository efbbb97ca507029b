"""A runner host is offline until its agent's first heartbeat (issue 28): a host an inventory names, or one
``kerrigan runners create`` makes, is never leased before its agent has spoken. Before, a host the inventory
named was ``online`` with heartbeat ``never``: the first push was leased there and ended ``runner_lost``."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.inventory import apply_diff
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token, host_report, host_reports, record_report
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_dispatcher import ROOT, SOM_UART, queue

SESSION = "12121212-1212-1212-1212-121212121212"


async def store_lab(db: Database) -> None:
    """The fixture lab as an inventory import stores it: no agent has spoken for any of its hosts."""
    inventory = parse_inventory(
        (ROOT / "fixtures/inventory/lab.yml").read_text(encoding="utf-8"), "lab"
    ).inventory
    assert inventory is not None
    async with db.sessions() as session, session.begin():
        await apply_diff(
            session, inventory, diff_inventories(Inventory(), inventory), Change("t", db.clock())
        )


async def test_an_inventorys_host_is_offline_and_never_leased_until_its_agent_speaks(
    db: Database, clock: FakeClock
) -> None:
    await store_lab(db)
    async with db.sessions() as session:
        reports = {report.host: report for report in await host_reports(session)}
    assert reports["lab-a-01"].last_heartbeat_at is None
    assert not any(report.online for report in reports.values())
    await queue(db, SESSION, {"smoke": SOM_UART}, max_devkits=1)
    dispatcher = Dispatcher(db)
    assert (await dispatcher.dispatch_once()).granted == ()
    clock.advance(61)  # a lease's time: before, the job ended runner_lost here
    await dispatcher.expire()
    result = await dispatcher.dispatch_once()
    assert result.granted == ()
    assert result.plan is not None
    [waiting] = result.plan.waiting.values()
    assert waiting.kind.value == "device"  # it waits for a device (its host to come online)
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow))
        assert job is not None
        assert (job.state, job.reason) == ("queued", None)  # no retry spent
    async with db.sessions() as session, session.begin():
        await record_report(session, "lab-a-01", db.clock(), resources={}, device_states={})
    (grant,) = (await dispatcher.dispatch_once()).granted
    assert grant.host == "lab-a-01"
    async with db.sessions() as session:
        assert (await host_report(session, "lab-a-01")).online  # type: ignore[union-attr]
        audit = await list_audit(session, actor="kerrigan")
    assert [(e.subject_id, e.field, e.before, e.after) for e in audit if e.field == "online"] == [
        ("lab-a-01", "online", "offline", "online: its runner spoke")
    ]


async def test_a_host_runners_create_makes_is_offline_until_its_agent_speaks(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await create_runner_token(session, "lab-z-09", db.clock())
    async with db.sessions() as session:
        report = await host_report(session, "lab-z-09")
    assert report is not None
    assert (report.online, report.last_heartbeat_at) == (False, None)
