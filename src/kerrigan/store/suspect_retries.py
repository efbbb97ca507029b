"""What becomes of a job that failed on a suspect device (:mod:`kerrigan.core.suspect_retry`), with the
suspects as of its failure (:mod:`kerrigan.store.suspects`, the failure itself counted) and the devices
that match its task (the inventory: free now, or kept only by what may pass; a retired device is none).

:func:`settle_session <kerrigan.store.transitions.settle_session>` asks it for each failed job of a session
whose policy has suspect retries; the answer is stored on the job (its device's numbers and the verdict),
which is what its check run says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.flaky import Suspect
from kerrigan.core.gang import Role, hosts_for_every_role
from kerrigan.core.inventory import Inventory
from kerrigan.core.lifecycle import JobState, RetryPolicy
from kerrigan.core.matching import resolve
from kerrigan.core.requirements import Requirements
from kerrigan.core.suspect_retry import SuspectFailure, SuspectRetry, suspect_retry, unsuspected_peers
from kerrigan.store.database import signals_of
from kerrigan.store.inventory import load_inventory
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.suspects import SuspectTracker, task_key, tracker_of


@dataclass(frozen=True, slots=True)
class SuspectVerdict:
    """A failed job's suspect device, what becomes of the job, and, when it is retried, the devices its new
    attempt must never be leased (where it failed, and every device suspect for its task)."""

    failure: SuspectFailure
    avoid: tuple[str, ...] = ()


class SuspectLookup:
    """The suspects and the inventory, each read at most once for one settling of a session."""

    def __init__(self, session: AsyncSession, at: datetime) -> None:
        self.session, self.at = session, at
        self._suspects: Mapping[tuple[str, str], Suspect] | None = None
        self._inventory: Inventory | None = None

    async def suspects(self, ended_at: datetime | None) -> Mapping[tuple[str, str], Suspect]:
        if self._suspects is None:
            signals = signals_of(self.session)
            tracker = tracker_of(signals) if signals is not None else SuspectTracker()
            self._suspects = await tracker.suspects(self.session, self.at, ended_at=ended_at)
        return self._suspects

    async def inventory(self) -> Inventory:
        if self._inventory is None:
            self._inventory = await load_inventory(self.session)
        return self._inventory


async def suspect_verdict(
    lookup: SuspectLookup,
    row: SessionRow,
    job: JobRow,
    jobs: Sequence[JobRow],
    policy: RetryPolicy,
) -> SuspectVerdict | None:
    """The verdict on ``job`` (failed, of ``row``'s ``jobs``) when it ran on a device suspect for its task;
    ``None`` when it did not, or the rule does not apply (:func:`kerrigan.core.suspect_retry.suspect_retry`).
    """
    held = _held(job)
    if policy.suspect < 1 or job.state != JobState.FAILED or job.boardless or not held:
        return None
    found = await lookup.suspects(job.finished_at)
    key = task_key(row.repository, row.workflow, job.task_id)
    suspect = next((found[key, device] for device in held if (key, device) in found), None)
    if suspect is None:
        return None
    suspects = {device for task, device in found if task == key}
    spent = sum(
        1
        for other in jobs
        if other.task_id == job.task_id
        and other.state == JobState.RETRIED
        and other.suspect_retry == SuspectRetry.RETRIED
    )
    peers = await _peers(lookup, row, job, held, suspects)
    verdict = suspect_retry(policy, JobState.FAILED, job.failure_class, job.reason, spent=spent, peers=peers)
    if verdict is None:
        return None
    failure = SuspectFailure(suspect.device, suspect.runs, suspect.failures, verdict)
    if verdict is not SuspectRetry.RETRIED:
        return SuspectVerdict(failure)
    avoid = tuple(dict.fromkeys([*(job.avoid_devices or ()), *held, *sorted(suspects)]))
    return SuspectVerdict(failure, avoid)


def record_verdict(job: JobRow, verdict: SuspectVerdict) -> None:
    """Keep the device's numbers and the verdict on the failed job, for its check run and its page."""
    job.suspect_runs = verdict.failure.runs
    job.suspect_failures = verdict.failure.failures
    job.suspect_retry = verdict.failure.retry


async def _peers(
    lookup: SuspectLookup, row: SessionRow, job: JobRow, held: tuple[str, ...], suspects: set[str]
) -> tuple[str, ...]:
    """The devices that match the job's task and are neither where it failed nor suspect: those free now
    and those kept only by what may pass (maintenance, an offline runner host, bad health), which the retry
    waits for within its queue-wait budget, as any job does (a lab problem if none comes back, never a
    code failure); for a gang, none unless one runner host holds such a device for every role (its retry
    avoids the others for good, so a gang no host can hold would only wait out its budget)."""
    if job.requirements is None:
        return ()
    inventory = await lookup.inventory()
    gang = job.requirements.get("roles")
    roles = gang or [job.requirements]
    peers: list[Role] = []
    for index, role in enumerate(roles):
        resolved = resolve(
            Requirements.from_dict(role),
            inventory,
            repository=row.repository,
            vcpus=job.vcpus,
            unreported_fit=True,
        )
        candidates = [device.id for device in resolved.eligible]
        candidates += [verdict.id for verdict in resolved.rejected if not verdict.never]
        found = unsuspected_peers(candidates, held, suspects)
        if not found:
            return ()
        peers.append(Role(str(role.get("role", index)), found))
    if gang and not hosts_for_every_role(peers, {device.id: device.host for device in inventory.devices}):
        return ()
    return tuple(dict.fromkeys(device for role in peers for device in role.candidates))


def _held(job: JobRow) -> tuple[str, ...]:
    gang = tuple(str(role["device"]) for role in job.devices or ())
    return gang or ((job.device_id,) if job.device_id is not None else ())
