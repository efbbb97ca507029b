"""Preparing a job: its workspace emptied and filled with the repository at the job's commit and the
artifacts its manifest takes from the triggering workflow run, then given to the job's own user (mode 0700)
where jobs run as their own users."""

from __future__ import annotations

import asyncio
import logging

from kerrigan.runner.artifacts import download_artifacts, downloads_of
from kerrigan.runner.isolation.users import NoJobUserError, give_to
from kerrigan.runner.job_shell import JobShells
from kerrigan.runner.records import JobRecord
from kerrigan.runner.sources import SourceError, empty_folder, unpack
from kerrigan.runner.workspaces import UnsafeWorkspaceError

log = logging.getLogger(__name__)


class Preparation(JobShells):
    """The workspace and the source of accepted jobs."""

    async def _prepare(self, record: JobRecord) -> None:
        """Put the job's source in its workspace; then it waits for capacity. A stop asked meanwhile is
        acted on once the step under way is done (an unpack is never cut off half-written)."""
        offer = record.offer
        github = self._credentials.get(record.id, {})
        assert record.workspace is not None
        fetching = False
        try:
            uid = self.allocate_user(record)
            self.records.save(record)  # the uid is on record before it owns anything
            path = self.workspaces.mark_used(record.workspace, self.clock())
            if offer.get("repository") and offer.get("sha"):
                fetching = True
                if not github.get("token"):
                    raise SourceError("the server gave no token to fetch the repository with")
                tarball = await self.sources.fetch(
                    str(offer["repository"]), str(offer["sha"]), str(github["api_url"]), str(github["token"])
                )
                fetching = False
                await asyncio.to_thread(unpack, tarball, path, self.settings.unpack_limits)
            else:  # nothing to fetch: still no files from an earlier job
                await asyncio.to_thread(empty_folder, path)
            if downloads_of(offer):
                fetching = True  # a failure GitHub may not repeat passes the job to another host
                await download_artifacts(
                    self.http,
                    offer,
                    api_url=str(github.get("api_url", "")),
                    token=str(github.get("token", "")),
                    workspace=path,
                    scratch=self.settings.work_dir / "artifacts",
                    limits=self.settings.unpack_limits,
                    retry=self.settings.github_retry,
                )
                fetching = False
            if uid is not None:  # unpacked as root, then the job's own and no one else's
                await asyncio.to_thread(give_to, path, uid)
        except (SourceError, OSError, UnsafeWorkspaceError, NoJobUserError) as err:
            log.warning("job %s: %s", record.id, err)
            outcome = self._stop_reasons.pop(record.id, None)
            passing = fetching and isinstance(err, SourceError) and err.transient
            if outcome is None and passing and "source_unavailable" in self.capabilities:
                # GitHub or the network failed the fetch: another attempt may find it (a 404, a refused
                # tarball or a broken workspace would fail the same way anywhere, and is not said so).
                outcome = "source_unavailable"
            await self._end(record, None, outcome, note=f"kerrigan: {err}\n")
            return
        if record.id in self._stop_reasons:
            await self._end(record, None, self._stop_reasons.pop(record.id))
            return
        record.state, record.ready_at = "waiting", self.clock()
        self.records.save(record)
        self._changed.set()
