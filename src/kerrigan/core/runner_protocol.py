"""The runner protocol's rules that need no network: versions, capabilities, and the server's resources.

A runner and a server may be upgraded one at a time: at registration each side names the protocol versions
and capabilities it speaks, the highest common version is used, and a capability is used only when both
announce it. Resource values travel keyed by name (seed 001) and are resolved through the server's own
catalog (:mod:`kerrigan.core.resources`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kerrigan.core.resources import ResourceCatalog, Unit

PROTOCOL_VERSIONS: Final = (1,)
# The capability by which the server names, in each heartbeat's answer, the jobs whose workspaces holds keep
# (``held_workspaces``), and the agent keeps them (docs/runner.md).
HELD_WORKSPACES: Final = "held_workspaces"
# The capability by which the long poll hands a person's ``kerrigan shell`` in a held job's sandbox to the
# job's agent (``job_shells``), which connects back to ``job-shells/{id}`` (docs/runner.md).
JOB_SHELL: Final = "job_shell"
# The capability by which ``/finish`` names the job's boards the agent had to switch off and could not (their
# power did not answer): the server recovers them as it recovers those ``powered_off``.
POWER_UNKNOWN: Final = "power_unknown"
SERVER_CAPABILITIES: Final = frozenset(
    {
        "gate_jobs",
        "log_pages",
        "withdraw",
        "source_unavailable",
        "holder_settings",
        "board_faults",
        "recovery",
        "device_power",
        HELD_WORKSPACES,
        "device_console",
        JOB_SHELL,
        "runner_lost",
        POWER_UNKNOWN,
    }
)
LEASE_TTL_S: Final = 60
HEARTBEATS_PER_LEASE: Final = 4  # an agent beats every quarter of the lease time unless told otherwise
POLL_TIMEOUT_S: Final = 25

SERVER_RESOURCES: Final = (
    ("vcpus", Unit.COUNT),
    ("max_weight", Unit.COUNT),
    ("max_queue_depth", Unit.COUNT),
    ("free_disk_bytes", Unit.BYTES),
    ("floor_bytes", Unit.BYTES),
    ("memory_bytes", Unit.BYTES),
)


def server_catalog() -> ResourceCatalog:
    """The resources the server knows, in the server's own order."""
    return ResourceCatalog(SERVER_RESOURCES)


@dataclass(frozen=True, slots=True)
class JobCredentials:
    """What an offer carries to fetch its repository: a token scoped to it, and where the API is."""

    token: str
    expires_at: str
    api_url: str

    def as_dict(self) -> dict[str, str]:
        """The offer's ``github`` object."""
        return {"token": self.token, "expires_at": self.expires_at, "api_url": self.api_url}


class NoCommonVersionError(ValueError):
    """The runner and the server share no protocol version; the message says which each speaks."""


@dataclass(frozen=True, slots=True)
class Negotiated:
    """What a registration agreed on."""

    version: int
    capabilities: frozenset[str]


def negotiate(versions: Iterable[int], capabilities: Iterable[str]) -> Negotiated:
    """The highest version both speak, and the capabilities both announce."""
    offered = set(versions)
    common = offered & set(PROTOCOL_VERSIONS)
    if not common:
        raise NoCommonVersionError(
            f"the runner speaks protocol {sorted(offered) or 'none'}, this server "
            f"{list(PROTOCOL_VERSIONS)}: upgrade the older side"
        )
    return Negotiated(max(common), SERVER_CAPABILITIES & frozenset(capabilities))
