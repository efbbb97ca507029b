"""Restart recovery: the job records a previous agent left, picked up where it left them."""

from __future__ import annotations

import logging

from kerrigan.runner.admission import Admission
from kerrigan.runner.records import JobRecord

log = logging.getLogger(__name__)


class Recovery(Admission):
    """Jobs found on disk when the agent starts."""

    def recover(self) -> None:
        """Jobs a previous agent left: follow running ones to their end, accept waiting ones again (for a
        fresh token) and prepare them, report ended ones not yet reported. A job's cgroup still on
        record is emptied first: what the job left running dies before anyone hears it ended."""
        for record in self.records.load_all():
            self.jobs[record.id] = record
            if record.state == "ended":
                if not record.reported or record.cgroup is not None:
                    self._spawn(record.id, self._finish_ended(record))
                continue
            if record.state in ("running", "starting") and record.pid is not None:
                if record.cpus:
                    try:
                        self.allocator.register(record.id, record.cpus)
                    except ValueError as err:
                        log.warning("job %s: its recorded CPUs are not registered again: %s", record.id, err)
                record.state = "running"
                self._spawn(record.id, self._follow(record))
            else:
                record.state = "accepted"
                self._spawn(record.id, self._accept_again(record))
            log.info("job %s: picked up after a restart (%s)", record.id, record.state)

    async def _finish_ended(self, record: JobRecord) -> None:
        await self._empty_cgroup(record)
        if not record.reported:
            await self._report_end(record)
