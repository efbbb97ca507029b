"""How ``kerrigan runner`` was started: the agent's settings, a frozen dataclass the command line fills."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kerrigan.core.disk import DiskPolicy
from kerrigan.core.github_retry import BACKOFF_BASE_S
from kerrigan.core.host_capacity import HostLimits
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES
from kerrigan.core.unpacking import UnpackLimits
from kerrigan.runner.devices_file import DevicesFile
from kerrigan.runner.github_requests import RetryBudget
from kerrigan.runner.isolation.probe import ISOLATION_MODES
from kerrigan.runner.isolation.range_lock import DEFAULT_LOCK_FOLDER
from kerrigan.runner.isolation.users import DEFAULT_JOB_USERS, UserRange
from kerrigan.runner.topology import SYSFS_CPU_ROOT

OUTPUT_MAX_LEAST: Final = 1024  # below a kilobyte not even an error message would fit


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How ``kerrigan runner`` was started."""

    server_url: str
    token: str
    host_id: str
    work_dir: Path
    limits: HostLimits = field(default_factory=HostLimits)
    disk: DiskPolicy = field(default_factory=DiskPolicy)
    sysfs_root: Path = SYSFS_CPU_ROOT
    kill_grace_s: float = 10.0
    heartbeat_s: float | None = None  # None: a quarter of the lease time the server gives
    systemd_scope: str = "auto"  # auto (when root under systemd), always or never
    isolation: str = "auto"  # auto (what the host allows), require (refuse to start without it) or off
    job_users: UserRange = field(default_factory=lambda: UserRange.parse(DEFAULT_JOB_USERS))
    job_groups: tuple[int, ...] = ()  # supplementary gids jobs get (dialout, plugdev: the devices they drive)
    job_users_locks: Path = DEFAULT_LOCK_FOLDER  # where agents on this host lock their job_users ranges
    unpack_limits: UnpackLimits = field(default_factory=UnpackLimits)  # bytes and members of a tarball
    output_max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES  # of a job's output, the most kept and sent
    github_retry_s: float = 300.0  # how long a GitHub download keeps being tried again before the job fails
    github_backoff_s: float = BACKOFF_BASE_S  # the first wait after a GitHub error without Retry-After
    devices_file: DevicesFile | None = None  # --devices-file, read: which devices are there, their jobs' env
    metrics_host: str = "127.0.0.1"  # where GET /metrics listens (--metrics-host)
    metrics_port: int | None = None  # --metrics-port: None serves no metrics, 0 any free port (tests)

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION_MODES)}, not {self.isolation!r}")
        if self.output_max_bytes < OUTPUT_MAX_LEAST:
            raise ValueError(
                f"output_max_bytes must be {OUTPUT_MAX_LEAST} or more, not {self.output_max_bytes}"
            )
        if self.github_retry_s < 0:
            raise ValueError(f"github_retry_s must be 0 or more, not {self.github_retry_s}")
        if self.github_backoff_s <= 0:
            raise ValueError(f"github_backoff_s must be more than 0, not {self.github_backoff_s}")
        if not self.metrics_host.strip():
            raise ValueError("metrics_host must name an address to listen on, not an empty string")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metrics_port must be 0-65535, not {self.metrics_port}")

    @property
    def github_retry(self) -> RetryBudget:
        """How requests to GitHub are tried again."""
        return RetryBudget(self.github_retry_s, self.github_backoff_s)
