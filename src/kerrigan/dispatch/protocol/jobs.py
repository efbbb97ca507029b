"""What a runner host says of a job it was offered: accept (with its token and secrets), refuse, start,
withdrawn, its output, its console, and its end.

Each call is a transition of the store's (the job's session and check run follow in the same transaction).
"Already decided" is an answer: a repeated call gets the state it left, with ``changed`` false. A job's
output is stored up to ``output_max_bytes`` (``KERRIGAN_OUTPUT_MAX_BYTES``); the answer to the chunk that
crosses it, and to every later one, carries ``"output_cut": true`` so the runner stops sending. Its console
(``/console``) is a log of its own, numbered apart and capped at the same size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import ENDED, JobState, TransitionError
from kerrigan.core.log_streams import LogStream
from kerrigan.core.masking import Masker
from kerrigan.dispatch.protocol.credentials import JobTokens, LeaseEndedError, MintFailedError
from kerrigan.dispatch.protocol.requests import (
    Chunk,
    Finish,
    ProtocolError,
    Refusal,
    Start,
    job_id_of,
    read,
)
from kerrigan.store.check_runs import output_arrived
from kerrigan.store.database import Database
from kerrigan.store.jobs import lifecycle
from kerrigan.store.jobs.holders import HeldLease, NotYoursError, accepted_lease, job_state
from kerrigan.store.jobs.output import LogGapError, append_log
from kerrigan.store.retrying import in_transaction
from kerrigan.store.runners import host_report
from kerrigan.store.secrets import JobSecrets, SecretsKeyError, given_secrets, hand_secrets

Change = Callable[[AsyncSession, str, str], Awaitable[lifecycle.Transition]]
# Stored in place of a console chunk when a secret the job was handed can no longer be read (deleted since,
# or its key dropped): the chunk cannot be masked, so none of it is kept.
UNMASKABLE_NOTICE: Final = "[console chunk not kept: a secret this job was handed can no longer be read]\n"


class JobCalls:
    """The calls on ``/jobs/{job_id}/``, for a host whose token was checked."""

    def __init__(
        self,
        database: Database,
        tokens: JobTokens,
        *,
        output_max_bytes: int,
        secrets_keys: tuple[str, ...],
    ) -> None:
        self.database = database
        self.tokens = tokens
        self.output_max_bytes = output_max_bytes
        self.secrets_keys = secrets_keys  # KERRIGAN_SECRETS_KEY: what opens the secrets jobs are handed
        self.maskers = Maskers(database, secrets_keys)

    async def _apply(self, job_id: str, host: str, change: Change) -> lifecycle.Transition:
        """Apply ``change`` to the job in one transaction (done again if the database aborts it for a
        deadlock). A job that leaves its host's hands has its token forgotten once this commits
        (:class:`JobTokens` hears the store's job moves, whoever made them)."""

        async def work(session: AsyncSession) -> lifecycle.Transition:
            return await change(session, job_id, host)

        try:
            done = await in_transaction(self.database, work, what=f"job {job_id} from {host}")
        except NotYoursError as exc:
            raise ProtocolError(404, "not_found", str(exc)) from None
        except TransitionError as exc:
            raise ProtocolError(409, "invalid_transition", str(exc)) from None
        if done.state in ENDED:  # its console's masker: the job's secrets are not kept past its end
            self.maskers.forget(job_id)
        return done

    async def _transition(self, job_id: str, host: str, change: Change) -> web.Response:
        """Apply ``change``; the answer is the state it left the job in."""
        return web.json_response(_answer(job_id, await self._apply(job_id, host, change)))

    async def accept(self, request: web.Request, host: str) -> web.Response:
        """The runner takes an offered job; the answer carries the token to fetch its repository with and
        the secrets the job names (``secrets``; ``secrets_withheld`` names those a fork's session does not
        get). A secret that cannot be handed ends the job before it starts (the answer says so)."""
        job_id = job_id_of(request)
        handed: list[JobSecrets] = []
        leased: list[HeldLease] = []

        async def change(session: AsyncSession, job_id: str, host: str) -> lifecycle.Transition:
            handed.clear()  # what an aborted try handed is not handed
            leased.clear()
            at = self.database.clock()
            done = await lifecycle.accept(session, job_id, host, at)
            if done.state not in (JobState.ACCEPTED, JobState.RUNNING):
                return done
            secrets = await hand_secrets(session, job_id, host, at, keys=self.secrets_keys)
            if secrets.refused:
                return lifecycle.Transition(JobState.REFUSED_BEFORE_START, changed=True)
            handed.append(secrets)
            lease = await accepted_lease(session, job_id)
            if lease is not None:
                leased.append(lease)
            return done

        done = await self._apply(job_id, host, change)
        answer = _answer(job_id, done)
        if done.state is JobState.ACCEPTED and leased:
            # Minted after the accept commits (GitHub's retries must not hold the job's row or SQLite's
            # writer); a lease that ended meanwhile gets no token, and the answer says what the job is now.
            try:
                credentials = await self.tokens.of(leased[0])
            except MintFailedError as exc:
                raise ProtocolError(503, "github_unavailable", str(exc)) from None
            except LeaseEndedError:
                async with self.database.sessions() as session:
                    now = await job_state(session, job_id)
                return web.json_response(
                    {"job": job_id, "state": (now or done.state).value, "changed": done.changed}
                )
            answer["github"] = credentials.as_dict() if credentials else None
        if handed and (handed[0].values or handed[0].withheld):
            answer |= {"secrets": dict(handed[0].values), "secrets_withheld": list(handed[0].withheld)}
        return web.json_response(answer)

    async def refuse(self, request: web.Request, host: str) -> web.Response:
        """The runner cannot take the job, with a typed reason."""
        job_id = job_id_of(request)
        sent = await read(request, Refusal)
        clock = self.database.clock
        return await self._transition(
            job_id,
            host,
            lambda session, job, host: lifecycle.refuse(
                session, job, host, clock(), reason=sent.reason, detail=sent.detail, retry=sent.retry
            ),
        )

    async def start(self, request: web.Request, host: str) -> web.Response:
        """The job's command started; ``{"cpus": "2-3"}`` names the CPUs it is pinned to."""
        job_id = job_id_of(request)
        sent = await read(request, Start)
        clock = self.database.clock
        return await self._transition(
            job_id, host, lambda session, job, host: lifecycle.start(session, job, host, clock(), sent.cpus)
        )

    async def withdrawn(self, request: web.Request, host: str) -> web.Response:
        """The runner withdrew a job it had not started, as asked: it ends ``queue_wait_exceeded``."""
        job_id = job_id_of(request)
        clock = self.database.clock
        return await self._transition(
            job_id, host, lambda session, job, host: lifecycle.withdrawn(session, job, host, clock())
        )

    async def finish(self, request: web.Request, host: str) -> web.Response:
        """The job ended with an exit status (and accounting, when the runner has it)."""
        job_id = job_id_of(request)
        sent = await read(request, Finish)
        clock = self.database.clock
        return await self._transition(
            job_id,
            host,
            lambda session, job, host: lifecycle.finish(
                session,
                job,
                host,
                clock(),
                exit_status=sent.exit_status,
                accounting=sent.accounting,
                outcome=sent.outcome,
                powered_off=sent.powered_off,
                power_unknown=sent.power_unknown,
            ),
        )

    async def output(self, request: web.Request, host: str) -> web.Response:
        """A numbered chunk of the job's output; a repeat is acknowledged, a gap answered with 409."""
        return await self._log(request, host, LogStream.OUTPUT)

    async def console(self, request: web.Request, host: str) -> web.Response:
        """A numbered chunk of the job's console, answered as ``/output`` is: its own numbering, from the
        accept (power-on and boot come before the command starts) until the job ends; capped alike."""
        return await self._log(request, host, LogStream.CONSOLE)

    async def _log(self, request: web.Request, host: str, stream: LogStream) -> web.Response:
        job_id = job_id_of(request)
        chunk = await read(request, Chunk)
        if chunk.truncated_before_seq is not None:
            async with self.database.sessions() as session:
                known = await host_report(session, host)
            if known is None or "log_pages" not in known.capabilities:
                raise ProtocolError(
                    400,
                    "not_negotiated",
                    "truncated_before_seq needs the log_pages capability, announced at registration",
                    "truncated_before_seq",
                )
        data, masker = chunk.data, None
        if stream is LogStream.CONSOLE:
            # The agent masks the console as it masks output; the server hides the values in each chunk
            # again, so no value the job was handed is stored even from an agent that missed it.
            try:
                masker = await self.maskers.of(job_id, host)
            except NotYoursError as exc:
                raise ProtocolError(404, "not_found", str(exc)) from None
            except SecretsKeyError:
                data = UNMASKABLE_NOTICE  # never stored unmasked: its length still counts as sent
        try:
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                appended = await append_log(
                    session,
                    job_id,
                    host,
                    stream,
                    seq=chunk.seq,
                    byte_offset=chunk.offset,
                    data=data,
                    sent_bytes=len(chunk.data.encode()),
                    truncated_before_seq=chunk.truncated_before_seq,
                    max_bytes=self.output_max_bytes,
                    at=self.database.clock(),
                    masker=masker,
                )
                # This chunk of output is stored: its check run may show it. (A console shows there only
                # once its job has ended, with the version its end records.)
                if stream is LogStream.OUTPUT and appended.next_seq == chunk.seq + 1:
                    await output_arrived(session, int(job_id), self.database.clock())
        except NotYoursError as exc:
            raise ProtocolError(404, "not_found", str(exc)) from None
        except LogGapError as exc:
            return web.json_response(
                {
                    "error": {"code": "gap", "message": str(exc), "field": "seq"},
                    "next_seq": exc.expected_seq,
                },
                status=409,
            )
        if appended.cut:  # the runner stops sending: nothing more of this log is stored
            return web.json_response({"next_seq": appended.next_seq, "output_cut": True})
        return web.json_response({"next_seq": appended.next_seq})


class Maskers:
    """The masker of each job's secrets, read once per job (their values are decrypted for it) and kept
    while the job sends its console; the oldest are let go past ``LIMIT`` jobs."""

    LIMIT: Final = 1024

    def __init__(self, database: Database, secrets_keys: tuple[str, ...]) -> None:
        self.database = database
        self.secrets_keys = secrets_keys
        self._known: OrderedDict[str, Masker | None] = OrderedDict()

    async def of(self, job_id: str, host: str) -> Masker | None:
        """The job's masker (None when it was handed no secret); ``NotYoursError`` for another host's job,
        ``SecretsKeyError`` when a secret it was handed can no longer be read."""
        if job_id in self._known:
            self._known.move_to_end(job_id)
            return self._known[job_id]
        async with self.database.sessions() as session:
            values = await given_secrets(session, job_id, host, keys=self.secrets_keys)
        masker = Masker.for_secrets(values) if values else None
        self._known[job_id] = masker
        while len(self._known) > self.LIMIT:
            self._known.popitem(last=False)
        return masker

    def forget(self, job_id: str) -> None:
        """The job ended: its values are not kept (a late chunk reads them again)."""
        self._known.pop(job_id, None)


def _answer(job_id: str, done: lifecycle.Transition) -> dict[str, Any]:
    # "Already decided" is an answer: a repeated call gets the state it left, with changed false.
    return {"job": job_id, "state": done.state.value, "changed": done.changed}
