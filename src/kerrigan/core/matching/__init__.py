"""Matching a task's requirements against an inventory snapshot, with every reason for every rejection.

A device is eligible when every requested label matches, every requested tag is present, it is
``available``, its runner host is online and it is not busy. Pools are filtered first on the pool-scoped
keys (``kerrigan.pool_*``, ``kerrigan.firmware_*``); a device in a rejected pool carries its pool's reasons
too, so each device's list is complete.

A pool that lists ``repositories`` admits only the sessions of those repositories: given the session's
repository, every other pool is rejected (``repository octo/other may not use pool lab-a``), and so is each of
its devices. Without a repository (``kerrigan explain`` with no ``--repository``) the lists are not applied.

Given the task's vCPU claim, a device whose runner host has fewer allocatable vCPUs than that is rejected
too: never once the host has reported its CPUs, not yet before (its agent reports them when it connects;
until then a host is taken to fit the default claim of 2).

A task with ``board: none`` holds no device: :func:`resolve_hosts` matches it against the runner hosts
instead, by the same rules where they apply (``kerrigan.host``, the host online and not paused, its vCPUs),
and by the pools of the host's boards for the repository: a host whose every board is in pools the
repository may not use refuses it too, so no repository runs code on a host it could not have run a boarded
job on.

Reasons are worded as the seed words them and marked permanent ("never": labels, tags, a retired device, a
pool the repository may not use, a host too small for the claim) or transient ("not yet": maintenance,
offline, health bad, absent from its runner host, host offline or paused, a host that has not reported its
CPUs, busy). A state's reason says who set it, since and until when, and why
(:mod:`kerrigan.core.device_status`).

Matching devices is :mod:`~kerrigan.core.matching.devices`, runner hosts
:mod:`~kerrigan.core.matching.hosts`, and the reasons both give :mod:`~kerrigan.core.matching.reasons`.
"""

from __future__ import annotations

from kerrigan.core.matching.devices import (
    NEAREST_MISSES,
    DeviceVerdict,
    PoolVerdict,
    TaskResolution,
    resolve,
)
from kerrigan.core.matching.hosts import HostResolution, HostVerdict, host_refused, resolve_hosts
from kerrigan.core.matching.reasons import (
    Hint,
    Outcome,
    Reason,
    ReasonCount,
    ReasonKind,
    repository_refused,
)

__all__ = [
    "NEAREST_MISSES",
    "DeviceVerdict",
    "Hint",
    "HostResolution",
    "HostVerdict",
    "Outcome",
    "PoolVerdict",
    "Reason",
    "ReasonCount",
    "ReasonKind",
    "TaskResolution",
    "host_refused",
    "repository_refused",
    "resolve",
    "resolve_hosts",
]
