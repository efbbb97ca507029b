"""The runner protocol's routes, each call's host known before anything else is read.

Every handler here is reached through :meth:`RunnerProtocol.authenticated`: the bearer token is checked
first, so a call without a valid one is a 401 whatever its path and body hold, and not a byte of the body
is read for it. A handler gets the host and raises :class:`ProtocolError` for any other answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES
from kerrigan.core.runner_protocol import LEASE_TTL_S
from kerrigan.dispatch.protocol.authentication import host_of
from kerrigan.dispatch.protocol.consoles import ConsoleCall
from kerrigan.dispatch.protocol.credentials import MINT_RETRY_S, Answer, Credentials, JobTokens
from kerrigan.dispatch.protocol.device_requests import DeviceRequestsCall
from kerrigan.dispatch.protocol.hosts import HostReports
from kerrigan.dispatch.protocol.jobs import JobCalls
from kerrigan.dispatch.protocol.polls import Polls
from kerrigan.dispatch.protocol.requests import ProtocolError, error_response, job_id_of
from kerrigan.dispatch.protocol.reservations import HolderSettingsCall
from kerrigan.store.database import Database

Handler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


class RunnerProtocol:
    """Handlers for the runner protocol, bound to a database.

    Job transitions are the store's (their session and check run follow in the same transaction);
    ``credentials`` mints the repository-scoped token an accepted job fetches its source with (the app
    wires the GitHub App), once per acceptance: a repeated accept gets the same token.
    """

    def __init__(
        self,
        database: Database,
        lease_ttl_s: int = LEASE_TTL_S,
        *,
        mint_retry_s: float = MINT_RETRY_S,
        mint_backoff_s: float = 0.5,
        output_max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES,
        secrets_keys: tuple[str, ...] = (),
        admins: frozenset[str] = frozenset(),
    ) -> None:
        self.database = database
        self.secrets_keys = secrets_keys  # KERRIGAN_SECRETS_KEY: what opens the secrets jobs are handed
        self.lease_ttl_s = lease_ttl_s
        self.output_max_bytes = output_max_bytes
        self.tokens = JobTokens(database, retry_s=mint_retry_s, backoff_s=mint_backoff_s)
        self.hosts = HostReports(database, lease_ttl_s)
        self.polls = Polls(database, admins)
        self.jobs = JobCalls(
            database, self.tokens, output_max_bytes=output_max_bytes, secrets_keys=secrets_keys
        )
        self.holders = HolderSettingsCall(database)
        self.device_requests = DeviceRequestsCall(database)
        self.consoles = ConsoleCall(database)
        self.shells = ConsoleCall(database, database.shells)  # kerrigan shell: bridged as consoles are

    # What the app wires once the GitHub App is connected, kept by the job tokens.
    @property
    def credentials(self) -> Credentials | None:
        """Mints a job's token (None: no GitHub App, no token)."""
        return self.tokens.credentials

    @credentials.setter
    def credentials(self, mint: Credentials | None) -> None:
        self.tokens.credentials = mint

    @property
    def answer_of(self) -> Callable[[BaseException], Answer | None]:
        """GitHub's answer out of a failed mint, to retry it as GitHub asks."""
        return self.tokens.answer_of

    @answer_of.setter
    def answer_of(self, read: Callable[[BaseException], Answer | None]) -> None:
        self.tokens.answer_of = read

    @property
    def revoking(self) -> Callable[[int], None] | None:
        """Told the installation of each job token the runner revokes when its job ends."""
        return self.tokens.revoking

    @revoking.setter
    def revoking(self, count: Callable[[int], None] | None) -> None:
        self.tokens.revoking = count

    async def stop_polls(self, app: web.Application | None = None) -> None:
        """The server is stopping: answer every waiting long poll now."""
        await self.polls.stop(app)

    async def host_of(self, request: web.Request) -> str:
        """The runner host whose token the request carries, or a 401 (:class:`ProtocolError`)."""
        return await host_of(self.database, request)

    job_id_of = staticmethod(job_id_of)

    def authenticated(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """``handler`` behind the host's token: it runs only for a call whose token is valid, and each
        :class:`ProtocolError` it raises is answered as the API answers errors."""

        async def call(request: web.Request) -> web.StreamResponse:
            try:
                host = await self.host_of(request)
                return await handler(request, host)
            except ProtocolError as exc:
                return error_response(exc)

        return call

    def routes(self) -> list[web.RouteDef]:
        """The routes, to add under ``/api/runner/v1``."""
        authenticated, prefix = self.authenticated, "/api/runner/v1"
        return [
            web.post(f"{prefix}/register", authenticated(self.hosts.register)),
            web.post(f"{prefix}/heartbeat", authenticated(self.hosts.heartbeat)),
            web.get(f"{prefix}/poll", authenticated(self.polls.poll)),
            web.post(f"{prefix}/jobs/{{job_id}}/accept", authenticated(self.jobs.accept)),
            web.post(f"{prefix}/jobs/{{job_id}}/refuse", authenticated(self.jobs.refuse)),
            web.post(f"{prefix}/jobs/{{job_id}}/start", authenticated(self.jobs.start)),
            web.post(f"{prefix}/jobs/{{job_id}}/output", authenticated(self.jobs.output)),
            web.post(f"{prefix}/jobs/{{job_id}}/console", authenticated(self.jobs.console)),
            web.post(f"{prefix}/jobs/{{job_id}}/finish", authenticated(self.jobs.finish)),
            web.post(f"{prefix}/jobs/{{job_id}}/withdrawn", authenticated(self.jobs.withdrawn)),
            web.post(
                f"{prefix}/reservations/{{reservation_id}}/settings", authenticated(self.holders.record)
            ),
            web.post(f"{prefix}/device-requests/{{request_id}}", authenticated(self.device_requests.record)),
            web.get(f"{prefix}/device-requests/{{request_id}}/console", authenticated(self.consoles.bridge)),
            web.get(f"{prefix}/job-shells/{{request_id}}", authenticated(self.shells.bridge)),
        ]
