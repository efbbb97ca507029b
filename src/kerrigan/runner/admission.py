"""Offers: admitted or refused (seed 003's claim, queue depth and disk admission), accepted, withdrawn.

A claim is keyed by resource name and resolved through the agent's own catalog (seed 001).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from kerrigan.core.disk import plan_admission
from kerrigan.core.host_capacity import admission_refusal
from kerrigan.core.resources import ResourceCatalog, Unit, initial_values
from kerrigan.runner.preparation import Preparation
from kerrigan.runner.records import JobRecord
from kerrigan.runner.server import ServerRefused, ServerUnavailable

log = logging.getLogger(__name__)

CLAIM_CATALOG: Final = ResourceCatalog([("vcpus", Unit.COUNT)])  # what the agent knows of a claim
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Admission(Preparation):
    """Admitting, accepting, refusing and withdrawing offered jobs."""

    async def _offered(self, offer: dict[str, Any]) -> None:
        """Admit or refuse an offer."""
        job_id = str(offer.get("id", ""))
        if not (job_id.isascii() and job_id.isdigit()):
            log.warning("ignoring an offer without a job id: %r", offer.get("id"))
            return
        known = self.jobs.get(job_id)
        if known is not None and known.state != "ended":
            # Offered again (our accept's answer was lost, or its lease was renewed): accepting is idempotent.
            await self._accept(job_id)
            return
        if known is not None:  # ended here before, and sent back to the queue since: a new attempt
            del self.jobs[job_id]
        # The claim is keyed by resource name and resolved through the agent's own catalog (seed 001).
        raw_claim = offer.get("claim")
        values, skipped = initial_values(CLAIM_CATALOG, raw_claim if isinstance(raw_claim, dict) else {})
        for item in skipped:
            log.warning("job %s: claim resource %r skipped: %s", job_id, item.name, item.reason)
        claim = values.value(CLAIM_CATALOG, "vcpus")
        if claim is None:
            await self._refuse(job_id, {"reason": "invalid_claim", "detail": "the claim names no vcpus"})
            return
        accepted_waiting = sum(1 for r in self.jobs.values() if r.state in ("accepted", "waiting"))
        refusal = admission_refusal(claim, self.allocator, accepted_waiting, self.settings.limits)
        if refusal is not None:
            body = {"reason": "runner_full", "detail": refusal.detail, "retry": refusal.retry}
            await self._refuse(job_id, body)
            return
        workspace = self._workspace_name(offer)
        disk_full = await asyncio.to_thread(self._admit_disk, workspace)
        if disk_full is not None:
            await self._refuse(job_id, {"reason": "runner_disk_full", **disk_full})
            return
        record = JobRecord(job_id, offer, accepted_at=self.clock(), workspace=workspace)
        self.jobs[job_id] = record  # before the accept: a heartbeat meanwhile must not think it foreign
        self._accepting.add(job_id)
        try:
            state = await self._accept(job_id)
        finally:
            self._accepting.discard(job_id)
        if state != "accepted":
            del self.jobs[job_id]
            self._revoke_tokens(job_id)
            log.info("job %s: not ours to run (%s)", job_id, state)
            return
        self.records.save(record)
        self._spawn(job_id, self._prepare(record))

    async def _accept_again(self, record: JobRecord) -> None:
        """After a restart: the token was not kept on disk, so accept again to be handed it (the server
        hands the token it minted for this host's lease again; the server process that answers mints one if
        it has none). A lease lost meanwhile answers another state: the job is dropped."""
        state = await self._accept(record.id)
        if state == "accepted":
            await self._prepare(record)
        elif state is not None:
            log.info("job %s: the server has it %s now; dropping it", record.id, state)
            record.state, record.ended_at, record.reported = "ended", self.clock(), True
            record.outcome = "lost"
            self.records.save(record)
            self._revoke_tokens(record.id)

    def _admit_disk(self, workspace: str) -> dict[str, int] | None:
        """Disk admission (seed 003); the refusal's byte counts, or None to admit. Runs in a thread."""
        policy = self.settings.disk
        free = self.workspaces.free_bytes()
        if not policy.enabled or free >= policy.soft_goal_bytes:
            return None  # nothing to measure or evict
        busy = self.workspaces_in_use()
        # Until the server has said which workspaces holds keep, none is a candidate for eviction.
        candidates = self.workspaces.workspaces(running=busy) if self.may_remove_workspaces else []
        plan = plan_admission(
            free,
            candidates,
            policy,
            self.clock(),
            protected=frozenset({workspace}),
        )
        self.workspaces.apply(plan, in_use=busy)
        if plan.refusal is None:
            return None
        return {"free_bytes": self.workspaces.free_bytes(), "floor_bytes": plan.refusal.floor_bytes}

    async def _refuse(self, job_id: str, body: dict[str, Any]) -> None:
        reason = str(body["reason"])
        self.refusals[reason] = self.refusals.get(reason, 0) + 1
        log.info("job %s: refused %s (%s)", job_id, reason, body.get("detail") or body)
        with contextlib.suppress(ServerUnavailable, ServerRefused):
            await self.server.job(job_id, "refuse", body)

    def _workspace_name(self, offer: Mapping[str, Any]) -> str:
        """The task's workspace; a second job of the same task at once gets its own (one job at a time)."""
        base = _UNSAFE.sub("-", f"{offer.get('repository', '')}--{offer.get('task', '')}").strip("-.")
        busy = self.workspaces_in_use()
        name, n = base or "job", 1
        while name in busy:
            n += 1
            name = f"{base}.{n}"
        return name

    async def _withdraw(self, job_id: str) -> bool:
        """The server asks to withdraw a job whose queue-wait budget ran out; only one not started goes.
        Whether this was news."""
        record = self.jobs.get(job_id)
        if record is not None and (
            record.state not in ("accepted", "waiting") or job_id in self._stop_reasons
        ):
            return False  # started (the start answered), ended, or being withdrawn already
        if record is not None:
            self._stop_reasons[job_id] = "withdrawn"
        self._spawn(f"{job_id}-withdraw", self._send_withdrawn(job_id, record))
        return True

    async def _send_withdrawn(self, job_id: str, record: JobRecord | None) -> None:
        while True:
            try:
                answer = await self.server.job(job_id, "withdrawn")
                break
            except ServerUnavailable as err:
                log.warning("job %s: withdrawal not reported yet: %s", job_id, err)
                await asyncio.sleep(5.0)
            except ServerRefused as err:
                log.warning("job %s: withdrawal refused: %s", job_id, err)
                answer = {}
                break
        if record is None:
            return
        if answer.get("state") == "running":  # the server has it started: it runs after all
            self._stop_reasons.pop(job_id, None)
            return
        task = self._tasks.get(job_id)
        if task is not None and not task.done() and record.state == "accepted":
            return  # still fetching: _prepare ends it (the server already has it withdrawn)
        self._stop_reasons.pop(job_id, None)
        record.state, record.outcome, record.ended_at, record.reported = (
            "ended",
            "withdrawn",
            self.clock(),
            True,
        )
        self.records.save(record)
        self._revoke_tokens(job_id)
        self._changed.set()
        log.info("job %s: withdrawn (queue_wait_exceeded)", job_id)
