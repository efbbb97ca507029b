"""The dispatcher: leases free devices to queued jobs in queue order, and ends leases whose host went silent.

Each round reads the queue (on PostgreSQL once any other replica's round has ended), the inventory, the
leases and what runner hosts last reported, and lets :func:`kerrigan.core.dispatch_order.plan_dispatch`
decide, all through :func:`kerrigan.store.queue_view.read_queue` (the ``/queue`` page reads the same plan
without locking anything); then it writes the leases and the queue-wait clocks. The runner hosts find the
leases at once: a round that granted any tells the lease listeners of this process
(:func:`listen_for_leases`; the runner protocol's waiting long polls) which hosts got them. People's
reservations (:mod:`kerrigan.store.reservations`) wait in the same plan, after gate work; a granted one
leases its device to the person until it ends, and is offered to no runner. A job that holds no device
(``board: none``) is leased room on the runner host the plan placed it on, a host lease. A lease whose
host stopped sending heartbeats expires: a job that never started goes back to the queue once, any other
fails ``runner_lost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.dispatch_order import DispatchPlan
from kerrigan.core.inventory import Inventory
from kerrigan.core.lifecycle import HOLDING_A_DEVICE, QUEUE_WAIT_EXCEEDED, RUNNER_LOST, JobState
from kerrigan.core.matching import resolve, resolve_hosts
from kerrigan.core.queue_wait import WAIT_KIND_WORDS, blockers_of, host_blockers_of, waited_words
from kerrigan.core.runner_protocol import LEASE_TTL_S
from kerrigan.store.database import Database
from kerrigan.store.device_health import act_on_suspects
from kerrigan.store.health_checks.queueing import SCAN_INTERVAL, queue_due_checks
from kerrigan.store.inventory import end_due_maintenance, load_inventory
from kerrigan.store.leases import (
    Grant,
    HostGrant,
    QueuedJobRecord,
    expired_leases,
    extend_all_leases,
    grant_host_leases,
    grant_leases,
    release_lease,
)
from kerrigan.store.models import JobRow
from kerrigan.store.queue_view import (
    queue_wait_clock,
    queue_wait_since,
    read_queue,
    requirements_of_mapping,
)
from kerrigan.store.reservations import (
    RESERVATION_PREFIX,
    Reservation,
    ReservationGrant,
    end_due_reservations,
    grant_reservations,
)
from kerrigan.store.runners import end_due_pauses, mark_silent_hosts_offline
from kerrigan.store.signals import Signals, Topic, mark
from kerrigan.store.suspects import tracker_of
from kerrigan.store.transitions import move_job, settle_sessions

log = logging.getLogger(__name__)

LeaseListener = Callable[[frozenset[str]], None]
# Keyed by the database's signals (one per Database), so two databases in one process never hear each other.
_lease_listeners: weakref.WeakKeyDictionary[Signals, list[LeaseListener]] = weakref.WeakKeyDictionary()


def listen_for_leases(database: Database, callback: LeaseListener) -> Callable[[], None]:
    """Call ``callback`` with the runner hosts given leases (a job's or a reservation's), after each
    dispatch round in this process on ``database`` that granted any (once its transaction committed);
    returns what stops it."""
    listeners = _lease_listeners.setdefault(database.signals, [])
    listeners.append(callback)
    return lambda: listeners.remove(callback)


@dataclass(frozen=True, slots=True)
class Round:
    """What one dispatch round did."""

    granted: tuple[Grant, ...]
    plan: DispatchPlan | None
    lost: tuple[int, ...] = ()
    withdrawn: tuple[int, ...] = ()  # queued jobs whose queue-wait budget ran out
    reserved: tuple[Reservation, ...] = ()  # people's reservations granted a device
    placed: tuple[HostGrant, ...] = ()  # boardless jobs granted room on a runner host


class Dispatcher:
    """Runs dispatch rounds, every second and whenever woken: a commit in this process that queues work
    or frees a device or a runner host wakes it (:class:`kerrigan.store.signals.Topic.DISPATCH`)."""

    def __init__(
        self,
        database: Database,
        *,
        interval_s: float = 1.0,
        lease_ttl_s: float = LEASE_TTL_S,
        quarantine_suspects: bool = False,
    ) -> None:
        self.database = database
        self.quarantine_suspects = quarantine_suspects  # KERRIGAN_QUARANTINE=suspect
        self.interval_s = interval_s
        self.lease_ttl = timedelta(seconds=lease_ttl_s)
        self._wake = asyncio.Event()
        self._checks_scanned_at: datetime | None = None
        self._stopping = False
        database.signals.listen(Topic.DISPATCH, self.wake)

    def wake(self) -> None:
        """Something changed (a new session, a freed device): look now."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the round under way and return from :meth:`run` (a round cut off by a cancel would leave
        its database connection to the garbage collector)."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """Dispatch until stopped (:meth:`stop`) or cancelled.

        First every lease gets a full lease time again: while the server was down no heartbeat could
        arrive, and that must not count against the runner hosts.
        """
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            await extend_all_leases(session, self.database.clock(), self.lease_ttl)
        while not self._stopping:
            self._wake.clear()  # before the round: a wake during it means look again at once
            try:
                await self.expire()
                await self.dispatch_once()
            except Exception:
                log.exception("dispatch round failed; trying again")
            with contextlib.suppress(TimeoutError):  # stop() wakes it: the loop's test then ends it
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def expire(self) -> tuple[int, ...]:
        """End the leases of hosts that stopped sending heartbeats (the jobs they held), and the
        maintenances, host pauses and people's reservations whose time has passed (a reservation whose
        wait ran out leaves the queue); queue the health checks that are due
        (every 30 s at most: a check's ``every`` is 5 minutes or more)."""
        now = self.database.clock()
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            await mark_silent_hosts_offline(session, now, self.lease_ttl)
            # Maintenances and pauses set to end by now are over: their devices take work again.
            maintained, paused = await end_due_maintenance(session, now), await end_due_pauses(session, now)
            if maintained or paused:
                mark(session, Topic.DISPATCH)
            scanned = self._checks_scanned_at
            scan = scanned is None or now - scanned >= SCAN_INTERVAL or now < scanned
            if scan:
                await queue_due_checks(session, now)
                # Suspects get a health check, and with KERRIGAN_QUARANTINE=suspect no job until it passes;
                # their names are kept, so a suspect stays one while its evidence holds.
                found = await tracker_of(self.database.signals).keep_names(session, now)
                await act_on_suspects(session, found.values(), now, quarantine=self.quarantine_suspects)
            # Reservations whose time ran out free their devices for this round; those whose wait ran out
            # leave the queue.
            await end_due_reservations(session, now)
            lost = await expired_leases(session, now)
            settle = []
            for device_id, job_pk in lost:
                job = await session.get(JobRow, job_pk, with_for_update={"key_share": True})
                if job is None or job.state not in HOLDING_A_DEVICE:
                    await release_lease(session, device_id, job_pk)  # a lease its job no longer holds
                    continue
                if job.started_at is None and job.reason != RUNNER_LOST:
                    await move_job(session, job, JobState.QUEUED, now, reason=RUNNER_LOST)  # once more
                else:
                    await move_job(session, job, JobState.FAILED, now, reason=RUNNER_LOST)
                settle.append(job.session_pk)
                held = f"device {device_id}" if device_id is not None else f"no board, host {job.host}"
                log.warning("job %s lost its runner (%s); %s", job_pk, held, job.state)
            await settle_sessions(session, settle, now)
        if scan:  # committed: a scan rolled back is tried again in the next round, not 30 s later
            self._checks_scanned_at = now
        return tuple(dict.fromkeys(job for _, job in lost))  # a gang's job once, not once per device

    async def dispatch_once(self) -> Round:
        """One round: lease free devices to the queued jobs that come first."""
        now = self.database.clock()
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            snapshot = await read_queue(session, now, lock=True)
            if snapshot is None:
                return Round((), None)
            # Their queue-wait clocks start the first time they are dispatchable: one statement for all.
            new = [record.pk for record in snapshot.records if record.ready_at is None]
            if new:
                await session.execute(
                    update(JobRow).where(JobRow.pk.in_(new)).values(ready_at=now, queue_wait_observed_at=now)
                )
            plan = snapshot.plan
            hosts = snapshot.device_hosts
            grants = [
                Grant(int(job.id), device, hosts[device], job.session_id, role)
                for job, device, role in plan.roles_assigned()
                if not job.reservation
            ]
            granted = await grant_leases(session, grants, now, self.lease_ttl)
            placed = await grant_host_leases(
                session,
                [HostGrant(int(job.id), host, job.session_id) for job, host in plan.placed],
                now,
                self.lease_ttl,
            )
            # People's reservations: their devices are leased to them until they end, not offered.
            reserved = await grant_reservations(
                session,
                [
                    ReservationGrant(job.id.removeprefix(RESERVATION_PREFIX), device, hosts[device])
                    for job, device in plan.assignments
                    if job.reservation
                ],
                now,
            )
            leased = {grant.job_pk for grant in granted} | {grant.job_pk for grant in placed}
            busy = frozenset(hosts) - snapshot.free_devices | {grant.device_id for grant in granted}
            withdrawn = await _spend_queue_wait(session, snapshot.records, plan, leased, now, busy=busy)
        if granted or reserved or placed:  # a reserved device's host is asked for its settings for the person
            leased_hosts = (
                frozenset(grant.host for grant in granted)
                | frozenset(reservation.host for reservation in reserved if reservation.host is not None)
                | frozenset(grant.host for grant in placed)
            )
            for callback in list(_lease_listeners.get(self.database.signals, ())):
                callback(leased_hosts)
        return Round(
            tuple(granted), plan, withdrawn=tuple(withdrawn), reserved=tuple(reserved), placed=tuple(placed)
        )


async def _spend_queue_wait(
    session: AsyncSession,
    queued: Sequence[QueuedJobRecord],
    plan: DispatchPlan,
    leased: set[int],
    now: datetime,
    *,
    busy: frozenset[str] = frozenset(),
) -> list[int]:
    """Run or pause each waiting job's queue-wait clock for what it waits on; end those out of budget,
    each with what it waited on in the diagnostics' words (:func:`_waited_on`; ``busy``: the devices
    leased now).

    A job given a device (or room on a host) stops its clock: what it spent travels with its offer. Only
    changes are written, so a long queue costs a write per job only when its blocker changes.
    """
    ended: list[int] = []
    spent: dict[int, float] = {}
    changed: list[dict[str, Any]] = []
    at = now.timestamp()
    for record in queued:
        waiting = plan.waiting.get(str(record.pk))
        if waiting is None and record.pk not in leased:
            continue  # not planned for (no requirements): nothing to say about its wait
        observed = queue_wait_since(record, now)  # ``now`` for a job made ready this round
        counts = waiting is not None and waiting.counts_toward_queue_wait
        clock = queue_wait_clock(record, now).observe(at, counts=counts)
        if record.pk not in leased and clock.exceeded(at):
            ended.append(record.pk)
            spent[record.pk] = clock.spent(at)
            continue
        running_since = datetime.fromtimestamp(clock.since, UTC) if clock.since is not None else None
        if (clock.spent_s, running_since) != (record.queue_wait_s, observed):
            changed.append(
                {"pk": record.pk, "queue_wait_s": clock.spent_s, "queue_wait_observed_at": running_since}
            )
    if changed:  # one executemany, not a statement per job
        await session.execute(update(JobRow), changed)
    if ended:
        jobs = (
            await session.scalars(select(JobRow).where(JobRow.pk.in_(ended), JobRow.state == JobState.QUEUED))
        ).all()
        # What each waited on, now, before it ends: its check run keeps it (read only when one ends).
        inventory = await load_inventory(session) if jobs else Inventory()
        records = {record.pk: record for record in queued}
        for job in jobs:
            waiting = plan.waiting.get(str(job.pk))
            otherwise = WAIT_KIND_WORDS.get(waiting.kind, "") if waiting is not None else ""
            detail = waited_words(spent[job.pk], _waited_on(records[job.pk], inventory, busy), otherwise)
            await move_job(
                session, job, JobState.REFUSED_BEFORE_START, now, reason=QUEUE_WAIT_EXCEEDED, detail=detail
            )
        await settle_sessions(session, (job.session_pk for job in jobs), now)
    return ended


def _waited_on(record: QueuedJobRecord, inventory: Inventory, busy: frozenset[str]) -> list[tuple[str, str]]:
    """The devices (or, with ``board: none``, runner hosts) a job could have run on but for something that
    may pass, each with its reasons as the diagnostics word them (DESIGN.md, "A lab problem is not a code
    failure": they stay with the job once its budget ended it)."""
    if record.requirements is None:
        return []
    repository = None if record.health_check else record.repository
    if record.boardless:
        requested = requirements_of_mapping(record.requirements)
        return host_blockers_of(
            resolve_hosts(requested, inventory, repository=repository, vcpus=record.vcpus)
        )
    roles = record.requirements.get("roles") or [record.requirements]
    found: list[tuple[str, str]] = []
    for role in roles:
        resolution = resolve(
            requirements_of_mapping(role),
            inventory,
            busy,
            repository=repository,
            vcpus=record.vcpus,
            unreported_fit=True,
            health_check=record.health_check,
        )
        found += blockers_of(resolution, str(role["role"]) if "role" in role else None)
    return found
