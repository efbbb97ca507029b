"""Small builders for inventories and requirements, so tests say only what matters to them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kerrigan.core.inventory import Device, DeviceState, Firmware, Pool
from kerrigan.core.job_spec import JobSpec
from kerrigan.core.lifecycle import NO_RETRY, RetryPolicy
from kerrigan.core.manifest import Priority, Strategy
from kerrigan.core.requirements import LabelRequirement, Requirements, TagRequirement
from kerrigan.core.resolution import Resolution
from kerrigan.core.sessions import Job, Session, SessionState


def pool(
    pool_id: str,
    *,
    labels: Mapping[str, str] | None = None,
    tags: Iterable[str] = (),
    name: str | None = None,
    owners: Iterable[str] = (),
    firmware: Firmware | None = None,
) -> Pool:
    """A pool with only the fields a test names."""
    return Pool(
        id=pool_id,
        name=name or pool_id,
        owners=tuple(owners),
        firmware=firmware or Firmware(),
        labels=dict(labels or {}),
        tags=frozenset(tags),
    )


def device(
    device_id: str,
    pool_id: str,
    *,
    labels: Mapping[str, str] | None = None,
    tags: Iterable[str] = (),
    board: str = "modalix",
    host: str = "lab-a-01",
    state: DeviceState = DeviceState.AVAILABLE,
    target_type: str = "devkit",
    os_type: str = "linux",
) -> Device:
    """A device with only the fields a test names."""
    return Device(
        id=device_id,
        pool_id=pool_id,
        board=board,
        target_type=target_type,
        os_type=os_type,
        host=host,
        state=state,
        labels=dict(labels or {}),
        tags=frozenset(tags),
    )


def requirements(
    labels: Mapping[str, str | Iterable[str]] | None = None, tags: Iterable[str] = ()
) -> Requirements:
    """Requirements from plain values: a string is one value, a list means any of."""
    built = {}
    for key, value in (labels or {}).items():
        values = (value,) if isinstance(value, str) else tuple(value)
        built[key] = LabelRequirement(key, values)
    return Requirements(built, tuple(TagRequirement(tag) for tag in tags))


def session(
    session_id: str,
    tasks: Iterable[str] = ("smoke",),
    *,
    repository: str = "octo/firmware",
    resolution: Mapping[str, object] | None = None,
    retry: RetryPolicy = NO_RETRY,
    vcpus: int = 2,
    at: datetime | None = None,
    boardless: Iterable[str] = (),
    needs: Mapping[str, Iterable[str]] | None = None,
) -> Session:
    """A queued push session with one job per task, and the manifest's ``retry`` policy. A ``resolution``
    shaped as the explain JSON (``tasks`` with ``requested``, and ``scheduling`` as older documents had it)
    is the session's resolution (:meth:`Resolution.from_document`) and also sets what the store keeps
    typed: each job's requirements (its task's ``requested`` as given, a gang's ``roles`` in it too) and the
    session's ``max_devkits``, ``strategy`` and ``queue_wait_limit_s``. The tasks named in ``boardless``
    hold no device (``board: none``); ``needs`` gives tasks the tasks they need."""
    given = dict(resolution or {})
    scheduling: Mapping[str, Any] = given.pop("scheduling", {})  # type: ignore[assignment]
    # The jobs' requirements as the test wrote them: a job's record, which a gang's roles are part of.
    requested: dict[str, Mapping[str, Any]] = {}
    for task in given.get("tasks", ()):  # type: ignore[attr-defined]
        requested[str(task["id"])] = dict(task.get("requested", {}))
    typed: dict[str, Any] = {}
    if "max_devkits" in scheduling:
        typed["max_devkits"] = int(scheduling["max_devkits"])
    if "strategy" in scheduling:
        typed["strategy"] = Strategy(scheduling["strategy"])
    if "queue_wait_limit_s" in scheduling:
        typed["queue_wait_limit_s"] = float(scheduling["queue_wait_limit_s"])
    return Session(
        id=session_id,
        repository=repository,
        installation_id=1,
        head_sha="c" * 40,
        workflow="w",
        manifest_path=".kerrigan/workflows/w.yml",
        event="push",
        priority=Priority.NORMAL,
        state=SessionState.QUEUED,
        created_at=at or datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        resolution=Resolution.from_document(given),
        retry=retry,
        jobs=tuple(
            Job(
                JobSpec(
                    task,
                    command="./run.sh",
                    vcpus=vcpus,
                    requirements=requested.get(task),
                    needs=tuple((needs or {}).get(task, ())),
                    boardless=task in set(boardless),
                )
            )
            for task in tasks
        ),
        **typed,
    )
