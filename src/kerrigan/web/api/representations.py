"""JSON forms of pools and devices: explicit, implicit and effective labels, each with its source."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.host_outage import HostOutage, StrandedJob
from kerrigan.core.inventory import (
    Device,
    Pool,
    effective_pool_labels,
    health_check_of,
    implicit_device_labels,
    implicit_pool_labels,
    sourced_target_labels,
)
from kerrigan.store.audit import AuditEntry
from kerrigan.store.inventory import StoredDevice, StoredPool
from kerrigan.store.runners import HostReport


def _firmware(pool: Pool) -> dict[str, str | None]:
    return {"channel": pool.firmware.channel, "base_version": pool.firmware.base_version}


def pool_json(stored: StoredPool, states: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A pool with its labels by origin and its device count (and counts by state when known)."""
    pool = stored.pool
    implicit = implicit_pool_labels(pool)
    effective = effective_pool_labels(pool)
    body: dict[str, Any] = {
        "id": pool.id,
        "name": pool.name,
        "owners": list(pool.owners),
        "repositories": list(pool.repositories),
        "firmware": _firmware(pool),
        "labels": {
            "explicit": dict(sorted(pool.labels.items())),
            "implicit": implicit,
            "effective": [
                {"key": key, "value": effective[key], "source": "implicit" if key in implicit else "pool"}
                for key in sorted(effective)
            ],
        },
        "tags": sorted(pool.tags),
        "health_check": _check(pool.health_check),
        "devices": stored.devices,
        "version": stored.version,
    }
    if states is not None:
        body["device_states"] = dict(states)
    return body


def _check(check: HealthCheck | None) -> dict[str, object] | None:
    return check.as_document() if check is not None else None


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def device_json(stored: StoredDevice) -> dict[str, Any]:
    """A device with its own, implicit and effective labels, and where each effective label comes from."""
    device: Device = stored.device
    pool = stored.pool
    return {
        "id": device.id,
        "pool": device.pool_id,
        "board": device.board,
        "target_type": device.target_type,
        "os_type": device.os_type,
        "host": device.host,
        "state": device.state.value,
        "state_reason": device.state_reason,
        "state_changed_at": stored.state_changed_at.isoformat(),
        "state_by": device.state_note.by or None,
        "state_until": _iso(device.state_note.until),
        "health": {
            "health": device.health.health.value,
            "reason": device.health.reason,
            "since": _iso(device.health.since),
            "job": device.health.job,
        },
        "labels": {
            "explicit": dict(sorted(device.labels.items())),
            "implicit": {**implicit_pool_labels(pool), **implicit_device_labels(device)},
            "effective": [
                {"key": label.key, "value": label.value, "source": label.source.value}
                | ({"overrides": label.overrides} if label.overrides is not None else {})
                for label in sourced_target_labels(device, pool)
            ],
        },
        "tags": {
            "pool": sorted(pool.tags),
            "device": sorted(device.tags),
            "effective": sorted(pool.tags | device.tags),
        },
        "health_check": _check(device.health_check),  # its own
        "effective_health_check": _check(health_check_of(device, pool)),  # its own, else its pool's
        "version": stored.version,
    }


def device_host_json(outage: HostOutage | None) -> dict[str, Any]:
    """A device's runner host as a read of the device gives it: whether it is online and, while it is not,
    when it was last heard of and the jobs that held the device then (``outage``: the host's, as
    :meth:`HostOutage.on` gives it for this device, its jobs as the reader may see them)."""
    if outage is None:
        return {"host_online": True, "host_outage": None}
    return {
        "host_online": False,
        "host_outage": {
            "last_heartbeat_at": _iso(outage.last_heard_at),
            "jobs": [_stranded_json(job) for job in outage.jobs],
        },
    }


def _stranded_json(job: StrandedJob) -> dict[str, Any]:
    hidden = not job.session_id  # of a repository the reader may not read
    return {
        "id": job.id,
        "session": None if hidden else job.session_id,
        "repository": None if hidden else job.repository,
        "task": None if hidden else job.task_id,
        "state": job.state.value,
        "reason": job.reason,
        "ended": job.ended,
        "ended_at": _iso(job.ended_at),
        "devices": list(job.devices),
    }


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    """One audit row."""
    return {
        "at": entry.at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "subject_type": entry.subject_type,
        "subject_id": entry.subject_id,
        "pool": entry.pool_id,
        "field": entry.field,
        "before": entry.before,
        "after": entry.after,
    }


def host_json(report: HostReport) -> dict[str, Any]:
    """A runner host as its agent last reported it (resources by name, device states, health)."""
    return {
        "id": report.host,
        "online": report.online,
        "last_heartbeat_at": report.last_heartbeat_at.isoformat() if report.last_heartbeat_at else None,
        "protocol": report.protocol,
        "capabilities": sorted(report.capabilities),
        "resources": dict(report.resources),
        "devices": dict(report.device_states),
        "health": dict(report.health) if report.health is not None else None,
        "pause": {
            "reason": report.pause.reason,
            "by": report.pause.by,
            "since": report.pause.since.isoformat(),
            "until": _iso(report.pause.until),
        }
        if report.pause is not None
        else None,
    }
