"""Preparing a job: its workspace emptied and filled with the repository at the job's commit."""

from __future__ import annotations

import asyncio
import logging

from kerrigan.runner.processes import Processes
from kerrigan.runner.records import JobRecord
from kerrigan.runner.sources import SourceError, empty_folder, unpack
from kerrigan.runner.workspaces import UnsafeWorkspaceError

log = logging.getLogger(__name__)


class Preparation(Processes):
    """The workspace and the source of accepted jobs."""

    async def _prepare(self, record: JobRecord) -> None:
        """Put the job's source in its workspace; then it waits for capacity. A stop asked meanwhile is
        acted on once the step under way is done (an unpack is never cut off half-written)."""
        offer = record.offer
        github = self._credentials.get(record.id, {})
        assert record.workspace is not None
        try:
            path = self.workspaces.mark_used(record.workspace, self.clock())
            if offer.get("repository") and offer.get("sha"):
                if not github.get("token"):
                    raise SourceError("the server gave no token to fetch the repository with")
                tarball = await self.sources.fetch(
                    str(offer["repository"]), str(offer["sha"]), str(github["api_url"]), str(github["token"])
                )
                await asyncio.to_thread(unpack, tarball, path)
            else:  # nothing to fetch: still no files from an earlier job
                await asyncio.to_thread(empty_folder, path)
        except (SourceError, OSError, UnsafeWorkspaceError) as err:
            log.warning("job %s: %s", record.id, err)
            await self._end(record, None, self._stop_reasons.pop(record.id, None), note=f"kerrigan: {err}\n")
            return
        if record.id in self._stop_reasons:
            await self._end(record, None, self._stop_reasons.pop(record.id))
            return
        record.state, record.ready_at = "waiting", self.clock()
        self.records.save(record)
        self._changed.set()
