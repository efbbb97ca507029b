"""What the runner agent holds in memory about its host and its jobs, and how it runs a job's task.

The agent is built in layers, each a module adding one concern to the layer below it: this one (the
host's state), :mod:`~kerrigan.runner.reporting` (output pages and the end),
:mod:`~kerrigan.runner.wired_jobs` (the boards of jobs on wired devices, around each job),
:mod:`~kerrigan.runner.processes` (starting, following and stopping the command),
:mod:`~kerrigan.runner.preparation` (the workspace and the source), :mod:`~kerrigan.runner.admission`
(offers, accepting, refusing, withdrawing), :mod:`~kerrigan.runner.recovery` (after a restart) and
:mod:`~kerrigan.runner.agent` (registration, heartbeats, polls and scheduling: the agent itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import html
import logging
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Final

import aiohttp
import structlog

from kerrigan.core.cpus import CpuAllocator
from kerrigan.core.manifest.devices import is_role_name
from kerrigan.core.masking import Masker, secret_problem
from kerrigan.core.runner_protocol import HELD_WORKSPACES
from kerrigan.runner.boards.access import BoardAccess
from kerrigan.runner.boards.board_locks import BoardLocks
from kerrigan.runner.boards.console_log import ConsoleLog, RoleLines
from kerrigan.runner.boards.control import BoardControl
from kerrigan.runner.boards.figures import BoardFigures
from kerrigan.runner.devices_file import DevicePresence
from kerrigan.runner.devices_file.wiring import Wiring
from kerrigan.runner.github_requests import RetryBudget, revoke_token
from kerrigan.runner.isolation.probe import HostFacts, Isolation, agent_key, choose, read_host_facts
from kerrigan.runner.isolation.users import allocate, ids_in_use
from kerrigan.runner.person_console import PersonConsole
from kerrigan.runner.person_power import PersonPower
from kerrigan.runner.records import JobRecord, JobRecords
from kerrigan.runner.server import ServerClient, ServerRefused, ServerUnavailable
from kerrigan.runner.settings import AgentSettings
from kerrigan.runner.sources import SourceCache
from kerrigan.runner.topology import read_topology
from kerrigan.runner.workspaces import WorkspaceStore

log = logging.getLogger(__name__)

TOKEN_REVOKE_RETRY_S: Final = 30.0  # a token not revoked by then expires on its own within the hour


def offer_roles(offer: Mapping[str, object]) -> list[Mapping[str, object]]:
    """A gang offer's devices whose role is a role name (a server sends no other; anything else is
    passed over rather than made into a variable name)."""
    devices = offer.get("devices")
    if not isinstance(devices, list):
        return []
    return [
        device
        for device in devices
        if isinstance(device, dict) and isinstance(device.get("role"), str) and is_role_name(device["role"])
    ]


def gang_roles(offer: Mapping[str, object]) -> list[tuple[str, str]]:
    """(role, device) of a gang offer's devices, in role order; empty for a job of one device."""
    return [(str(device["role"]), str(device.get("id", ""))) for device in offer_roles(offer)]


def may_have_secrets(offer: Mapping[str, object]) -> bool:
    """Whether the offer says the job may have secrets (an older server says nothing: it may not)."""
    return offer.get("secrets_allowed") is True


class HostState:
    """The host's jobs, their tasks and tokens, and the clients the agent works through."""

    def __init__(
        self,
        settings: AgentSettings,
        http: aiohttp.ClientSession,
        clock: Callable[[], float] = time.time,
        facts: HostFacts | None = None,
    ) -> None:
        """``facts``: what the host allows for isolating jobs (read from the host when not given); raises
        :class:`~kerrigan.runner.isolation.probe.IsolationUnavailableError` under ``isolation: require`` when
        jobs cannot run apart."""
        self.settings = settings
        self.http = http
        self.clock = clock
        self.server = ServerClient(http, settings.server_url, settings.token)
        self.records = JobRecords(settings.work_dir, settings.output_max_bytes)
        self.workspaces = WorkspaceStore(settings.work_dir)
        self.sources = SourceCache(settings.work_dir, http, settings.github_retry)
        self.allocator = CpuAllocator(read_topology(settings.sysfs_root))
        key = agent_key(settings.work_dir)
        self.isolation: Isolation = choose(
            facts if facts is not None else read_host_facts(key),
            settings.isolation,
            settings.job_users,
            settings.systemd_scope,
            key,
        )
        # Ids the host gives to its own users and groups are never a job's.
        self._taken_ids = (
            ids_in_use(Path("/etc/passwd"), Path("/etc/group")) if self.isolation.users else frozenset()
        )
        self.jobs: dict[str, JobRecord] = {}
        self.devices: dict[str, str] = {}
        self.presence = DevicePresence(settings.devices_file)  # what --devices-file finds, and device env
        self.refusals: dict[str, int] = {}
        self.board_figures = BoardFigures()  # power switches and boot times, for /metrics
        self.lease_ttl_s = 60.0
        self.poll_timeout_s = 25.0
        self.capabilities: frozenset[str] = frozenset()  # what registration agreed on
        # The jobs whose workspaces a hold keeps (the server's word in each heartbeat answer), and whether
        # it has been heard since the start: until it is, no workspace is evicted or expired.
        self.held_jobs: frozenset[str] = frozenset()
        self.holds_heard = False
        self._credentials: dict[str, dict[str, Any]] = {}  # job -> its GitHub token; in memory only
        self._issued: dict[str, dict[str, str]] = {}  # job -> every token it was handed -> its API
        # job -> the secrets its accept handed out, and the masker of what it was handed (those and its
        # devices' secret_env): in memory only, never on disk
        self._secrets: dict[str, dict[str, str]] = {}
        self._maskers: dict[str, Masker] = {}
        self._revoking: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._stop_reasons: dict[str, str] = {}
        self._accepting: set[str] = set()
        self._stopping = False
        # job -> its wired boards while it holds them, and its console log on its way (wired_jobs)
        self._boards: dict[str, BoardControl] = {}
        self._console_logs: dict[str, tuple[ConsoleLog, list[RoleLines], asyncio.Task[None]]] = {}
        self._access: dict[str, BoardAccess] = {}  # job -> its terminals and power socket while it runs
        # A person's power requests (kerrigan power) under way, beside the poll.
        # One lock per board, shared by a job taking it and a person's power request and keystrokes.
        self.board_locks = BoardLocks()
        self._person_power = PersonPower(
            self._wiring_of, self.board_figures, self._held_by_job, self.board_locks
        )
        self._person_tasks: set[asyncio.Task[None]] = set()
        self._person_console = PersonConsole(
            self._wiring_of, self._held_by_job, self._console_socket, self.board_locks
        )
        self._shells: set[str] = set()  # the jobs with a person's shell open in their sandbox (job_shell)

    async def _console_socket(self, request_id: str) -> aiohttp.ClientWebSocketResponse:
        return await self.server.console_socket(request_id)

    def _wiring_of(self, device_id: str) -> Wiring | None:
        entry = self.presence.entries.get(device_id)
        return entry.wiring if entry is not None else None

    def _held_by_job(self, device_id: str) -> bool:
        """Whether a job this agent holds (not ended) has ``device_id``, alone or as a gang's role."""
        for record in self.jobs.values():
            if record.state == "ended":
                continue
            held = {record.offer.get("device")} | {role.get("id") for role in offer_roles(record.offer)}
            if device_id in held:
                return True
        return False

    def resources(self) -> dict[str, int]:
        """The host's resource values, by name."""
        values = {
            "vcpus": self.allocator.limit,
            "max_weight": self.settings.limits.max_weight,
            "max_queue_depth": self.settings.limits.max_queue_depth,
            "floor_bytes": self.settings.disk.floor_bytes,
        }
        with contextlib.suppress(OSError):
            values["free_disk_bytes"] = self.workspaces.free_bytes()
        with contextlib.suppress(OSError, ValueError):
            values["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return values

    def workspaces_in_use(self) -> set[str]:
        """The workspaces of jobs not ended, and of ended jobs whose cgroup could not be emptied yet: what
        is left of those may still write there, so the workspace is not given to another job, evicted or
        expired (its uid is held as long, :meth:`allocate_user`). So are those of the jobs a hold keeps
        (:attr:`held_jobs`): the person holding the failed job's board looks at what it left."""
        return {
            r.workspace
            for r in self.jobs.values()
            if r.workspace is not None
            and (r.state != "ended" or r.cgroup is not None or r.id in self.held_jobs)
        }

    @property
    def may_remove_workspaces(self) -> bool:
        """Whether workspaces may be evicted or expired now: not before the server has said which of them
        holds keep (a server that does not speak ``held_workspaces`` keeps none)."""
        return self.holds_heard or HELD_WORKSPACES not in self.capabilities

    def hear_holds(self, answer: Mapping[str, Any]) -> None:
        """Take the jobs whose workspaces holds keep from a heartbeat's answer (none when it names none)."""
        listed = answer.get("held_workspaces")
        held = frozenset(str(job) for job in listed) if isinstance(listed, list) else frozenset()
        if held != self.held_jobs:
            log.info("workspaces kept for holds: jobs %s", ", ".join(sorted(held)) or "none")
        self.held_jobs, self.holds_heard = held, True

    def allocate_user(self, record: JobRecord) -> int | None:
        """The job's own uid (kept on its record), when jobs run as their own users; the uid of a job whose
        workspace a hold keeps is no other job's while it does (its files are that uid's)."""
        if self.isolation.users is None:
            return None
        if record.user is None:
            record.user = allocate(self.isolation.users, self.live_users(record), self._taken_ids)
        return record.user

    def live_users(self, record: JobRecord) -> set[int]:
        """The uids of the jobs other than ``record`` that hold theirs now: not ended, their cgroup not
        emptied yet, or their workspace kept by a hold."""
        return {
            r.user
            for r in self.jobs.values()
            if r.user is not None
            and r is not record
            and (r.state != "ended" or r.cgroup is not None or r.id in self.held_jobs)
        }

    def reallocate_user(self, record: JobRecord) -> int | None:
        """``record``'s uid where no other job holds it now, else a new one no job holds (on its record): an
        ended job's uid was free from its end until a hold kept its workspace, and a job started meanwhile
        may run as it (``kerrigan shell``). The uid it had before, when it changed (None: unchanged)."""
        if self.isolation.users is None or record.user is None:
            return None
        live = self.live_users(record)
        if record.user not in live:
            return None
        before = record.user
        record.user = allocate(self.isolation.users, live, self._taken_ids)
        return before

    def _spawn(self, job_id: str, work: Coroutine[Any, Any, None]) -> None:
        # What the job's task logs names the job (its own copy of the context: no other job's lines do).
        context = contextvars.copy_context()
        context.run(structlog.contextvars.bind_contextvars, job_id=job_id)
        task = asyncio.create_task(work, name=f"kerrigan-job-{job_id}", context=context)
        self._tasks[job_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._tasks.get(job_id) is finished:
                del self._tasks[job_id]
            if not finished.cancelled() and finished.exception() is not None:
                log.error("job %s: %s", job_id, finished.exception(), exc_info=finished.exception())
            self._changed.set()

        task.add_done_callback(done)

    def _keep_credentials(self, job_id: str, github: dict[str, Any]) -> None:
        """The token an accept handed out: the job fetches with it, and it is revoked when the job ends
        (with any other one an earlier accept of the same job handed out)."""
        self._credentials[job_id] = github
        token, api_url = github.get("token"), github.get("api_url")
        if token and api_url:
            self._issued.setdefault(job_id, {})[str(token)] = str(api_url)

    async def _accept(self, job_id: str) -> str | None:
        """Accept (again); the state the server answers (None: no answer), keeping the token and the
        secrets it hands out."""
        try:
            answer = await self.server.job(job_id, "accept")
        except (ServerUnavailable, ServerRefused) as err:
            log.warning("job %s: accept failed: %s", job_id, err)
            return None
        if isinstance(answer.get("github"), dict):
            self._keep_credentials(job_id, answer["github"])
        if "secrets" in answer:
            self._keep_secrets(job_id, answer["secrets"])
        return str(answer.get("state"))

    def _keep_secrets(self, job_id: str, values: object) -> None:
        """The secrets an accept handed out (name to value), for the job's environment and its masker."""
        if not isinstance(values, dict):
            return
        secrets = {str(name): value for name, value in values.items() if isinstance(value, str)}
        refused = sorted(name for name, value in secrets.items() if secret_problem(name, value) is not None)
        if refused:  # the server refuses such values when they are set: never given to the command
            log.warning("job %s: secrets %s cannot be masked; the command does not get them", job_id, refused)
            secrets = {name: value for name, value in secrets.items() if name not in refused}
        self._secrets[job_id] = secrets
        self._maskers.pop(job_id, None)  # made again with these

    def _needs_secrets(self, record: JobRecord) -> bool:
        """Whether the job names secrets this agent does not hold (it restarted since the accept)."""
        return bool(record.offer.get("secrets")) and record.id not in self._secrets

    def _device_settings(self, record: JobRecord, *, secret: bool) -> dict[str, str]:
        """The devices file's settings for the job: its device's ``env`` (``secret_env`` with ``secret``)
        under their own names, and each gang role's under ``KERRIGAN_DEVICE_<ROLE>_``."""
        settings = self.presence.secret_env if secret else self.presence.env
        device = record.offer.get("device")  # None for a job with board: none: no device, no settings
        found = dict(settings(str(device))) if device is not None else {}
        for role, device in gang_roles(record.offer):
            found.update(
                {f"KERRIGAN_DEVICE_{role.upper()}_{name}": v for name, v in settings(device).items()}
            )
        return found

    def _given_device_secrets(self, record: JobRecord) -> dict[str, str]:
        """The devices file's secret settings the job is given: none unless it may have secrets."""
        return self._device_settings(record, secret=True) if may_have_secrets(record.offer) else {}

    def _masker_of(self, record: JobRecord) -> Masker | None:
        """The masker of every secret value the job was handed (the accept's secrets, and its devices'
        ``secret_env`` when it may have secrets), as written and as it stands XML-escaped in a JUnit file
        (in text and in attributes); None when it was handed none. Nothing it was not handed is masked:
        stars would tell it which of its guesses is a value."""
        masker = self._maskers.get(record.id)
        if masker is None:
            values = {f"secret {name}": value for name, value in self._secrets.get(record.id, {}).items()}
            values |= {f"setting {name}": value for name, value in self._given_device_secrets(record).items()}
            if not values:
                return None
            escaped = {
                f"{name}\0{quote}": html.escape(value, quote=quote)
                for name, value in values.items()
                for quote in (False, True)
            }
            masker = self._maskers[record.id] = Masker.for_secrets(values | escaped)
        return masker

    def _revoke_tokens(self, job_id: str) -> None:
        """The job is over on this host: forget its tokens and secrets and revoke the tokens at GitHub,
        beside whatever follows (the end's report to the server never waits for GitHub)."""
        self._credentials.pop(job_id, None)
        self._secrets.pop(job_id, None)
        self._maskers.pop(job_id, None)
        for token, api_url in self._issued.pop(job_id, {}).items():
            task = asyncio.create_task(self._revoke(job_id, api_url, token), name=f"kerrigan-revoke-{job_id}")
            self._revoking.add(task)
            task.add_done_callback(self._revoking.discard)

    async def _revoke(self, job_id: str, api_url: str, token: str) -> None:
        budget = RetryBudget(TOKEN_REVOKE_RETRY_S, self.settings.github_backoff_s)
        if await revoke_token(self.http, api_url, token, budget):
            log.info("job %s: its GitHub token is revoked", job_id)
