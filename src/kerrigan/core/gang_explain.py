"""A gang task explained: each role's resolution, and whether one runner host can ever hold them all.

A gang's outcome is its roles' worst (unschedulable, then waiting), and *unschedulable* too when no runner
host holds a device that could ever match every role (:data:`kerrigan.core.gang.NO_HOST_FOR_EVERY_ROLE`):
devices that are only busy, offline or in maintenance count, since they come back. It is *eligible* when
one host has an eligible device for every role now, else *waiting*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kerrigan.core.gang import NO_HOST_FOR_EVERY_ROLE, Role, hosts_for_every_role, match_roles
from kerrigan.core.inventory import Device
from kerrigan.core.matching import Outcome, TaskResolution

_WORST = {Outcome.UNSCHEDULABLE: 0, Outcome.WAITING: 1, Outcome.ELIGIBLE: 2}


@dataclass(frozen=True, slots=True)
class RoleExplanation:
    """One role of a gang task: how its requirements resolved, and its device if the gang starts now."""

    role: str
    resolution: TaskResolution
    selected: Device | None = None

    def summary(self) -> str:
        """``role peer: 0/12 devices available: 12 board mismatch``."""
        return f"role {self.role}: {self.resolution.summary()}"


@dataclass(frozen=True, slots=True)
class GangVerdict:
    """What the roles make together: the outcome, the hosts that could ever hold them all, and why not."""

    outcome: Outcome
    hosts: tuple[str, ...]
    roles: tuple[RoleExplanation, ...]

    @property
    def never(self) -> str | None:
        """:data:`NO_HOST_FOR_EVERY_ROLE` when every role matches somewhere but no host holds them all."""
        if not self.hosts and all(r.resolution.outcome is not Outcome.UNSCHEDULABLE for r in self.roles):
            return NO_HOST_FOR_EVERY_ROLE
        return None

    def summary(self) -> str:
        """Each role's line, then the gang's when it can never run."""
        lines = [role.summary() for role in self.roles]
        if self.never:
            lines.append(self.never)
        return "; ".join(lines)

    @property
    def bottleneck(self) -> RoleExplanation:
        """The role that holds the gang back most: the worst outcome, then the fewest eligible devices."""
        return min(self.roles, key=lambda r: (_WORST[r.resolution.outcome], len(r.resolution.eligible)))


def explain_gang(names: Sequence[str], resolutions: Sequence[TaskResolution]) -> GangVerdict:
    """The verdict on a gang whose roles ``names`` resolved as ``resolutions`` (in the same order)."""
    device_hosts: Mapping[str, str] = {d.id: d.host for res in resolutions for d in res.devices}
    could = [
        Role(name, tuple(d.id for d in res.eligible) + tuple(v.id for v in res.rejected if not v.never))
        for name, res in zip(names, resolutions, strict=True)
    ]
    hosts = hosts_for_every_role(could, device_hosts)
    selected: list[Device | None] = [None] * len(names)
    outcome = min((res.outcome for res in resolutions), key=_WORST.__getitem__)
    if not hosts:
        outcome = Outcome.UNSCHEDULABLE
    elif outcome is Outcome.ELIGIBLE:
        now = [
            Role(name, tuple(d.id for d in res.eligible))
            for name, res in zip(names, resolutions, strict=True)
        ]
        ready = hosts_for_every_role(now, device_hosts)
        if ready:
            by_id = {d.id: d for res in resolutions for d in res.eligible}
            options = [[d for d in role.candidates if device_hosts[d] == ready[0]] for role in now]
            selected = [by_id[d] if d is not None else None for d in match_roles(options)]
        else:
            outcome = Outcome.WAITING  # each role has a device free, but not on one host
    roles = tuple(
        RoleExplanation(name, res, device)
        for name, res, device in zip(names, resolutions, selected, strict=True)
    )
    return GangVerdict(outcome, hosts, roles)
