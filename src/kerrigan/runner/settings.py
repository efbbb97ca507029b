"""How ``kerrigan runner`` was started: the agent's settings, a frozen dataclass the command line fills."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kerrigan.core.disk import DiskPolicy
from kerrigan.core.host_capacity import HostLimits
from kerrigan.runner.topology import SYSFS_CPU_ROOT


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
