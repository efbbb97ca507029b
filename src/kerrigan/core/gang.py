"""Gang jobs: several devices at once, one per role, all on one runner host.

A gang task names roles (``dut``, ``peer``, ...), each matched to its own candidate devices. Its job starts
only when one runner host has a free candidate for every role, each role on a different device: all of them
or none, so a gang never holds a device while it waits for another and two gangs cannot deadlock.

Which devices a host can give is a bipartite matching of roles to devices. Gangs rarely name more than four
roles, so a short augmenting-path search (Kuhn's) over each host's few candidates is all it takes.
Everything here is pure: the planner (:mod:`kerrigan.core.dispatch_order`) passes in the free devices and
the hosts' state, and the static check takes the inventory's device-to-host map.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

NO_HOST_FOR_EVERY_ROLE: Final = "gang: no runner host holds a device for every role"


@dataclass(frozen=True, slots=True)
class Role:
    """One role of a gang task and the devices its requirements match, in the order selection prefers."""

    name: str
    candidates: tuple[str, ...]


class RoleCount(NamedTuple):
    """How many of a role's candidate devices were free when its gang's turn came."""

    # A named tuple, not a dataclass: a round makes one per role of every gang it does not start.
    role: str
    free: int
    candidates: int

    def __str__(self) -> str:
        noun = "device" if self.candidates == 1 else "devices"
        return f"role {self.role}: {self.free}/{self.candidates} {noun} free"


def match_roles(options: Sequence[Sequence[str]]) -> list[str | None]:
    """A largest assignment of roles to distinct devices: ``options[i]`` are role i's devices, preferred
    first; the answer gives each role its device, or None where no larger assignment leaves one for it.

    Each role first takes its most preferred device no earlier role holds; only when none is left does it
    move earlier roles along (an augmenting path), so preferences are kept wherever the roles do not collide.
    """
    owner: dict[str, int] = {}  # device -> the role holding it

    def augment(role: int, seen: set[str]) -> bool:
        for device in options[role]:
            if device not in owner:
                owner[device] = role
                return True
        for device in options[role]:
            if device in seen:
                continue
            seen.add(device)
            if augment(owner[device], seen):
                owner[device] = role
                return True
        return False

    for role in range(len(options)):
        augment(role, set())
    chosen: list[str | None] = [None] * len(options)
    for device, role in owner.items():
        chosen[role] = device
    return chosen


def hosts_for_every_role(roles: Sequence[Role], device_hosts: Mapping[str, str]) -> tuple[str, ...]:
    """The runner hosts that hold a distinct candidate for every role, busy or free, in the order their
    devices are preferred. Empty means the gang can never run: :data:`NO_HOST_FOR_EVERY_ROLE`.

    A device whose host is not known counts for no host: a gang's devices must be on one host, and that
    cannot be told of such a device.
    """
    by_host = _by_host([role.candidates for role in roles], device_hosts)
    return tuple(
        host for host, options in by_host.items() if all(options) and None not in match_roles(options)
    )


def _by_host(
    per_role: Sequence[Sequence[str]], device_hosts: Mapping[str, str]
) -> dict[str, list[list[str]]]:
    """Each host's devices per role, hosts in the order their devices come (roles first to last)."""
    by_host: dict[str, list[list[str]]] = {}
    for index, devices in enumerate(per_role):
        for device in devices:
            host = device_hosts.get(device)
            if host is None:
                continue
            options = by_host.get(host)
            if options is None:
                options = by_host[host] = [[] for _ in per_role]
            options[index].append(device)
    return by_host


class Blocker(enum.StrEnum):
    """Why a gang could not be placed this round."""

    DEVICE = "device"  # some role has no free candidate at all
    SPLIT = "split"  # every role has a free candidate, but no one host has one for each
    CAPACITY = "capacity"  # a host has a free device for every role but lacks the vCPUs the job claims
    FENCED = "fenced"  # a host has a free device for every role but is held for another job


@dataclass(frozen=True, slots=True)
class GangFit:
    """Where a gang goes this round, or why it waits.

    Placed: ``host`` and ``devices`` (role, device) in role order. Not placed: ``blocker``, and for
    reservations ``blocked_hosts`` (hosts with a full set, lacking vCPUs) and ``closest`` (the role devices
    free on the host that comes nearest to a full set). ``counts`` per role either way.
    """

    counts: tuple[RoleCount, ...]
    host: str | None = None
    devices: tuple[tuple[str, str], ...] = ()
    blocker: Blocker | None = None
    fenced_by: str | None = None
    blocked_hosts: tuple[str, ...] = ()
    closest: tuple[str, ...] = ()


def fit_gang(
    job_id: str,
    roles: Sequence[Role],
    vcpus: int,
    *,
    free: Collection[str],
    device_hosts: Mapping[str, str],
    held: Mapping[str, str],
    host_room: Mapping[str, int],
    closest_unless: Collection[str] | None = None,
) -> GangFit:
    """Place a gang on the first host (in preference order) with a free candidate for every role, distinct
    devices, vCPU room for its claim and not ``held`` for another job; or say why it waits.

    ``held`` maps runner hosts to the blocked job each is kept for; ``host_room`` the vCPUs a host has left
    (a host not listed has room for anything). When the gang waits and ``closest_unless`` is given, the
    answer names the free devices of the host nearest a full set, among hosts neither held for another job
    nor in ``closest_unless``; without it, that search is skipped.
    """
    free_per_role = [[device for device in role.candidates if device in free] for role in roles]
    counts = tuple(
        RoleCount(role.name, len(devices), len(role.candidates))
        for role, devices in zip(roles, free_per_role, strict=True)
    )
    if closest_unless is None and not all(free_per_role):
        return GangFit(counts, blocker=Blocker.DEVICE)  # the common case in a busy lab: decided cheaply
    fenced_by: str | None = None
    blocked: list[str] = []
    closest: tuple[str, ...] = ()
    for host, options in _by_host(free_per_role, device_hosts).items():
        full = all(options)
        if not full:
            # Only a candidate for the closest set: skipped before matching when it cannot be one (the
            # common case in a busy lab, where most hosts have a device free for one role at most).
            if closest_unless is None or host in closest_unless or held.get(host, job_id) != job_id:
                continue
            if sum(1 for devices in options if devices) <= len(closest):
                continue
        chosen = match_roles(options)
        if full and None not in chosen:
            holder = held.get(host)
            if holder is not None and holder != job_id:
                fenced_by = fenced_by or holder
                continue
            if host in host_room and host_room[host] < vcpus:
                blocked.append(host)
                continue
            devices = tuple(
                (role.name, device) for role, device in zip(roles, chosen, strict=True) if device is not None
            )
            return GangFit(counts, host, devices)
        if closest_unless is not None and held.get(host, job_id) == job_id and host not in closest_unless:
            partial = tuple(device for device in chosen if device is not None)
            if len(partial) > len(closest):
                closest = partial
    if fenced_by is not None:
        blocker = Blocker.FENCED
    elif blocked:
        blocker = Blocker.CAPACITY
    else:
        blocker = Blocker.DEVICE if not all(free_per_role) else Blocker.SPLIT
    return GangFit(
        counts, blocker=blocker, fenced_by=fenced_by, blocked_hosts=tuple(blocked), closest=closest
    )
