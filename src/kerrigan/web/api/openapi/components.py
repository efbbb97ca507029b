"""The components of the API's document: the schemas of what the server answers and what it reads."""

from __future__ import annotations

from typing import Any, Final

from kerrigan.core.device_power import PowerAction, PowerState
from kerrigan.core.device_status import Health
from kerrigan.core.health_checks import MAX_EVERY_S, MAX_RUN, MAX_TIMEOUT_S, MAX_VCPUS, MIN_EVERY_S
from kerrigan.core.inventory import DeviceState, LabelSource
from kerrigan.core.inventory_diff import ChangeKind
from kerrigan.core.lifecycle import Conclusion, FailureClass, JobState, SessionState
from kerrigan.core.matching import Outcome
from kerrigan.core.reservations import DEFAULT_MAX_S, MAX_NOTE, MAX_WAIT_S, EndReason, ReservationState
from kerrigan.web.api.openapi import fields
from kerrigan.web.api.openapi.fields import enum_of

STRING: Final = {"type": "string"}
DEVICE_STATE: Final = enum_of(DeviceState)
_NULLABLE_STRING: Final = {"type": ["string", "null"]}
_STRINGS: Final = {"type": "array", "items": STRING}
_LABEL_MAP: Final = {"type": "object", "additionalProperties": STRING}
_TIME: Final = {"type": "string", "format": "date-time"}
_NULLABLE_TIME: Final = {"type": ["string", "null"], "format": "date-time"}
# A completed session's conclusion; action_required and neutral are the lab's (KERRIGAN_LAB_CONCLUSION).
_CONCLUSION: Final = {
    **enum_of(Conclusion, nullable=True),
    "description": "action_required or neutral: the lab's problem, not the code's (KERRIGAN_LAB_CONCLUSION)",
}
_CURSOR: Final = {
    "type": ["string", "null"],
    "description": "pass as ?cursor= with the same filters for the next page; null on the last",
}
_REPOSITORY_GLOBS: Final = {
    "type": "array",
    "items": {
        "type": "string",
        "minLength": 3,
        "maxLength": 200,
        "pattern": "^[A-Za-z0-9*?-]+/[A-Za-z0-9._*?-]+$",
    },
    "maxItems": 100,
    "description": "globs on owner/name (* and ?, case-insensitive) of the repositories whose sessions "
    "may use the pool; empty: every installed repository. System Admins change it.",
}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or null (in a reservation request, an optional field that is null is taken as left out)."""
    return {"anyOf": [{"type": "null"}, schema]}


_NULLABLE_LABEL_VALUE: Final = _or_null(fields.LABEL_VALUE)
_HEALTH_CHECK_CHANGE: Final = {
    "anyOf": [
        {"type": "null", "description": "no health check of its own"},
        {
            "type": "object",
            "properties": {
                "run": {
                    "allOf": [fields.text(1, MAX_RUN, "the command"), {"pattern": "\\S"}],
                    "description": "the command, run on the device's runner host as a job is",
                },
                "every": {
                    "anyOf": [
                        {"type": "integer", "minimum": MIN_EVERY_S, "maximum": MAX_EVERY_S},
                        {"type": "string", "pattern": fields.EVERY_PATTERN},
                    ],
                    "description": "how often it runs while the device is idle: seconds, or 30m, 24h, 7d "
                    "(the server also takes 1h30m and 90s forms, 5 minutes to 365 days); left out, it runs "
                    "only when something asks",
                },
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_S},
                "vcpus": {"type": "integer", "minimum": 1, "maximum": MAX_VCPUS},
            },
            "required": ["run"],
            "additionalProperties": False,
        },
    ],
}
_POOL_FIELDS: Final = {
    "name": fields.text(1, 200, "the pool's display name"),
    "owners": fields.LOGINS,
    "repositories": _REPOSITORY_GLOBS,
    "firmware": {"$ref": "#/components/schemas/FirmwareChange"},
    "labels": fields.LABELS,
    "tags": fields.TAGS,
    "health_check": _HEALTH_CHECK_CHANGE,
}
_DEVICE_FIELDS: Final = {
    "pool": fields.ID,
    "board": fields.LABEL_VALUE,
    "target_type": fields.LABEL_VALUE,
    "os_type": fields.LABEL_VALUE,
    "host": fields.ID,
    "labels": fields.LABELS,
    "tags": fields.TAGS,
    "health_check": _HEALTH_CHECK_CHANGE,
}


_UNTIL: Final = {"anyOf": [{"type": "null"}, {"const": ""}, {"type": "string", "format": "date-time"}]}


def _until_only_with(state: str) -> dict[str, Any]:
    """``until`` (a time) is for ``state`` only: with another state it is null or left out."""
    return {
        "if": {"properties": {"state": {"not": {"const": state}}}},
        "then": {"properties": {"until": {"enum": [None, ""]}}},
    }


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


_ERROR: Final = _object({"code": STRING, "message": STRING, "field": _NULLABLE_STRING})
_EFFECTIVE_LABEL = _object(
    {
        "key": STRING,
        "value": STRING,
        "source": enum_of(LabelSource),
        "overrides": STRING,
    },
    required=["key", "value", "source"],
)

_HEALTH_CHECK = {
    "type": ["object", "null"],
    "properties": {
        "run": STRING,
        "every": {"type": "string", "description": "30m, 24h, 7d, or seconds: 90s"},
        "timeout_s": {"type": "integer", "minimum": 1, "maximum": 86400},
        "vcpus": {"type": "integer", "minimum": 1, "maximum": 256},
    },
    "required": ["run", "timeout_s", "vcpus"],
    "additionalProperties": False,
}

_HISTOGRAM: Final = {
    "type": "array",
    "items": _object(
        {
            "reason": STRING,
            "kind": STRING,
            "count": {"type": "integer"},
            "permanent": {"type": "boolean"},
            "got": {"type": "object", "additionalProperties": {"type": "integer"}},
        }
    ),
}

SCHEMAS: Final[dict[str, Any]] = {
    "Error": _object({"error": _ERROR}),
    "ReservationRefused": _object(
        {
            "error": _ERROR,
            "resolution": {
                "type": "object",
                "description": "with unschedulable: the request resolved as a task's requirements are "
                "(requested, outcome, summary, the pools and devices with why each is rejected)",
            },
        },
        required=["error"],
    ),
    "Firmware": _object(
        {"channel": _NULLABLE_LABEL_VALUE, "base_version": _NULLABLE_LABEL_VALUE},
        description="the firmware labels' values; null: none",
    ),
    "FirmwareChange": _object(
        {"channel": _NULLABLE_LABEL_VALUE, "base_version": _NULLABLE_LABEL_VALUE},
        required=[],
        description="the firmware labels' values to set; null or left out: none",
    ),
    "Labels": _object(
        {
            "explicit": _LABEL_MAP,
            "implicit": _LABEL_MAP,
            "effective": {"type": "array", "items": _EFFECTIVE_LABEL},
        }
    ),
    "Pool": _object(
        {
            "id": STRING,
            "name": STRING,
            "owners": _STRINGS,
            "repositories": _REPOSITORY_GLOBS,
            "firmware": ref("Firmware"),
            "labels": ref("Labels"),
            "tags": _STRINGS,
            "health_check": _HEALTH_CHECK,
            "devices": {"type": "integer", "minimum": 0},
            "version": {"type": "integer", "minimum": 1},
            "device_states": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        required=[
            "id",
            "name",
            "owners",
            "repositories",
            "firmware",
            "labels",
            "tags",
            "health_check",
            "devices",
            "version",
        ],
    ),
    "PoolList": _object({"pools": {"type": "array", "items": ref("Pool")}}),
    "Device": _object(
        {
            "id": STRING,
            "pool": STRING,
            "board": STRING,
            "target_type": STRING,
            "os_type": STRING,
            "host": STRING,
            "state": DEVICE_STATE,
            "state_reason": STRING,
            "state_changed_at": {"type": "string", "format": "date-time"},
            "state_by": {"type": ["string", "null"]},
            "state_until": {"type": ["string", "null"], "format": "date-time"},
            "health": _object(
                {
                    "health": enum_of(Health),
                    "reason": STRING,
                    "since": {"type": ["string", "null"], "format": "date-time"},
                    "job": {"type": ["integer", "null"]},
                }
            ),
            "labels": ref("Labels"),
            "tags": _object({"pool": _STRINGS, "device": _STRINGS, "effective": _STRINGS}),
            "health_check": _HEALTH_CHECK,
            "effective_health_check": _HEALTH_CHECK,
            "version": {"type": "integer", "minimum": 1},
            "host_online": {
                "type": "boolean",
                "description": "whether its runner host is online (a read's; a write's answer leaves it out)",
            },
            "host_outage": {
                "anyOf": [ref("HostOutage"), {"type": "null"}],
                "description": "while its runner host is offline: when it was last heard of and the jobs "
                "that held this device then (a read's; a write's answer leaves it out)",
            },
        },
        required=[
            "id",
            "pool",
            "board",
            "target_type",
            "os_type",
            "host",
            "state",
            "state_reason",
            "state_changed_at",
            "state_by",
            "state_until",
            "health",
            "labels",
            "tags",
            "health_check",
            "effective_health_check",
            "version",
        ],
    ),
    "HostOutage": _object(
        {
            "last_heartbeat_at": {"type": ["string", "null"], "format": "date-time"},
            "jobs": {"type": "array", "items": ref("StrandedJob")},
        },
        description="an offline runner host: its last heartbeat (null: its agent never spoke)",
    ),
    "StrandedJob": _object(
        {
            "id": {"type": "integer"},
            "session": _NULLABLE_STRING,
            "repository": _NULLABLE_STRING,
            "task": _NULLABLE_STRING,
            "state": enum_of(JobState),
            "reason": _NULLABLE_STRING,
            "ended": {"type": "boolean"},
            "ended_at": {"type": ["string", "null"], "format": "date-time"},
            "devices": _STRINGS,
        },
        description="a job that held the device when its host went silent; it may still run on the host "
        "until the host's agent restarts, whether or not the server ended it (ended_at). session, "
        "repository and task are null for a repository the caller may not read",
    ),
    "LostDevices": _object(
        {
            "repository": STRING,
            "workflow": STRING,
            "task": STRING,
            "role": _NULLABLE_STRING,
            "devices_before": {"type": "integer", "minimum": 1},
            "devices_after": {"type": "integer", "minimum": 0},
            "lost": _STRINGS,
        },
        description="a task that ran lately and would match fewer devices after the change",
    ),
    "PoolDryRun": _object(
        {
            "dry_run": {"const": True},
            "would_be": ref("Pool"),
            "window_days": {"type": "integer", "minimum": 1},
            "lost": {"type": "array", "items": ref("LostDevices")},
        },
        description="what the change would do; nothing was changed",
    ),
    "DeviceDryRun": _object(
        {
            "dry_run": {"const": True},
            "would_be": ref("Device"),
            "window_days": {"type": "integer", "minimum": 1},
            "lost": {"type": "array", "items": ref("LostDevices")},
        },
        description="what the change would do; nothing was changed",
    ),
    "PoolEdited": {"anyOf": [ref("Pool"), ref("PoolDryRun")]},
    "DeviceEdited": {"anyOf": [ref("Device"), ref("DeviceDryRun")]},
    "HealthCheckQueued": _object(
        {"device": STRING, "job": {"type": "integer"}, "queued": {"type": "boolean"}},
        description="the device's health-check job; queued false: one was queued or running already",
    ),
    "DeviceList": _object({"devices": {"type": "array", "items": ref("Device")}}),
    "PoolCreate": _object({"id": fields.ID, **_POOL_FIELDS}, required=["id"]),
    "PoolPatch": _object(_POOL_FIELDS, required=[]),
    "DeviceCreate": _object(
        {
            "id": fields.ID,
            **_DEVICE_FIELDS,
            "state": DEVICE_STATE,
            "state_reason": fields.text(0, 500, "why it is in that state"),
        },
        required=["id", "pool", "board", "host"],
    ),
    "DevicePatch": _object(_DEVICE_FIELDS, required=[]),
    "LabelValue": _object({"value": fields.LABEL_VALUE_OR_EMPTY}),
    "DeviceState": _object(
        {
            "state": DEVICE_STATE,
            "reason": fields.text(0, 500, "why"),
            "until": {
                **_UNTIL,
                "description": "for maintenance only: when it ends by itself, in the future",
            },
        },
        required=["state"],
        **_until_only_with("maintenance"),
    ),
    "LabelKey": _object({"key": STRING, "description": STRING}),
    "LabelKeyList": _object({"label_keys": {"type": "array", "items": ref("LabelKey")}}),
    "LabelKeyDescription": _object({"description": fields.text(1, 500, "what the key means")}),
    "AuditEntry": _object(
        {
            "at": {"type": "string", "format": "date-time"},
            "actor": STRING,
            "action": enum_of(ChangeKind),
            "subject_type": {
                "enum": ["pool", "device", "host", "label_key", "secret", "reservation", "api_token"]
            },
            "subject_id": STRING,
            "pool": _NULLABLE_STRING,
            "field": STRING,
            "before": {},
            "after": {},
        }
    ),
    "AuditList": _object({"entries": {"type": "array", "items": ref("AuditEntry")}}),
    "Secret": _object(
        {
            "name": {"type": "string", "pattern": "^[A-Z_][A-Z0-9_]*$", "maxLength": 100},
            "set_by": STRING,
            "set_at": _TIME,
        },
        description="a secret's name (upper-case), who set it and when; never its value",
    ),
    "SecretList": _object(
        {
            "items": {"type": "array", "items": ref("Secret"), "description": "in name order"},
            "next_cursor": _CURSOR,
        }
    ),
    "SecretValue": _object(
        {
            "value": {
                "type": "string",
                "minLength": 8,
                "maxLength": 12288,
                "pattern": "^[^\\u0000]*$",
                "description": "8 bytes to 48 KiB of UTF-8 without NUL (a shorter one could not be masked in "
                "a job's output); 8 to 12,288 characters are within that whatever they are",
            }
        }
    ),
    "ReservationRequest": _object(
        {
            "labels": _or_null(fields.REQUESTED_LABELS),
            "tags": _or_null(fields.REQUESTED_TAGS),
            "device": _or_null(
                {**fields.ID, "description": "one device by id (its labels and tags must match too)"}
            ),
            "duration_s": {
                "type": "integer",
                "minimum": 1,
                "maximum": DEFAULT_MAX_S,
                "description": "at most KERRIGAN_RESERVATION_MAX_S (this server's)",
            },
            "wait_s": _or_null(
                {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_WAIT_S,
                    "description": "how long it may wait",
                }
            ),
            "note": fields.text(0, MAX_NOTE, "what it is for, shown on the device"),
            "id": _or_null(
                {
                    "type": "string",
                    "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
                    "description": "the client's own id for it, a UUID in lowercase, to withdraw it",
                }
            ),
        },
        required=["duration_s"],
        anyOf=[
            {"required": ["labels"], "properties": {"labels": {"type": "object", "minProperties": 1}}},
            {"required": ["tags"], "properties": {"tags": {"type": ["string", "array"], "minItems": 1}}},
            {"required": ["device"], "properties": {"device": {"type": "string"}}},
        ],
        description="labels, tags or a device (at least one), for duration_s seconds; an optional field "
        "that is null is left out",
    ),
    "Reservation": _object(
        {
            "id": STRING,
            "login": STRING,
            "state": enum_of(ReservationState),
            "requested": _object(
                {"labels": {"type": "object", "additionalProperties": _STRINGS}, "tags": _STRINGS}
            ),
            "device_requested": _NULLABLE_STRING,
            "duration_s": {"type": "integer"},
            "wait_s": {"type": "integer"},
            "note": STRING,
            "created_at": _TIME,
            "wait_until": _NULLABLE_TIME,
            "granted_at": _NULLABLE_TIME,
            "ends_at": _NULLABLE_TIME,
            "device": {
                "oneOf": [
                    {"type": "null"},
                    _object({"id": STRING, "host": _NULLABLE_STRING, "labels": _LABEL_MAP}),
                ],
                "description": "the device leased to the person, its runner host and effective labels",
            },
            "position": {"type": ["integer", "null"], "description": "its place in the queue, waiting"},
            "waiting_on": {"type": ["string", "null"], "description": "what it waits on, in words"},
            "end_reason": enum_of(EndReason, nullable=True),
            "ended_by": _NULLABLE_STRING,
            "held_job": {
                "type": ["integer", "null"],
                "description": "a hold (Hold board, reserve --job): the failed job whose board it is",
            },
            "settings": {
                "type": ["object", "null"],
                "additionalProperties": STRING,
                "description": "only in its own person's answers, while active: the private settings its "
                "runner host's devices file shows them (null: the host has not reported them yet)",
            },
        },
        required=[
            "id",
            "login",
            "state",
            "requested",
            "device_requested",
            "duration_s",
            "wait_s",
            "note",
            "created_at",
            "wait_until",
            "granted_at",
            "ends_at",
            "device",
            "position",
            "waiting_on",
            "end_reason",
            "ended_by",
            "held_job",
        ],
    ),
    "JobHold": _object(
        {
            "job": {"type": "integer", "description": "the failed job whose board(s) are held"},
            "reservations": {
                "type": "array",
                "items": ref("Reservation"),
                "minItems": 1,
                "description": "one per board of the job (a gang job's: each of its devices), in role order",
            },
        }
    ),
    "ReservationExtension": _object({"extend_s": {"type": "integer", "minimum": 1}}),
    "ReservationList": _object(
        {"items": {"type": "array", "items": ref("Reservation")}, "next_cursor": _CURSOR}
    ),
    "RunnerHost": _object(
        {
            "id": STRING,
            "online": {"type": "boolean"},
            "last_heartbeat_at": {"type": ["string", "null"], "format": "date-time"},
            "protocol": {"type": ["integer", "null"]},
            "capabilities": {"type": "array", "items": STRING},
            "resources": {"type": "object", "additionalProperties": {"type": "integer"}},
            "devices": {"type": "object", "additionalProperties": {"enum": ["present", "missing", "error"]}},
            "health": {"type": ["object", "null"]},
            "pause": {
                "type": ["object", "null"],
                "properties": {
                    "reason": STRING,
                    "by": STRING,
                    "since": {"type": "string", "format": "date-time"},
                    "until": {"type": ["string", "null"], "format": "date-time"},
                },
            },
        }
    ),
    "PowerRequest": _object({"action": enum_of(PowerAction)}),
    "DevicePower": _object(
        {"device": STRING, "action": enum_of(PowerAction), "state": enum_of(PowerState)},
    ),
    "HostState": _object(
        {
            "state": {"enum": ["active", "paused"]},
            "reason": fields.text(0, 500, "why"),
            "until": {
                **_UNTIL,
                "description": "for a pause only: when it ends by itself, in the future",
            },
        },
        required=["state"],
        **_until_only_with("paused"),
    ),
    "RunnerHostList": _object({"hosts": {"type": "array", "items": ref("RunnerHost")}}),
    "Job": _object(
        {
            "id": {"type": "integer"},
            "session": STRING,
            "repository": STRING,
            "workflow": STRING,
            "task": STRING,
            "state": enum_of(JobState),
            "attempt": {"type": "integer", "minimum": 1},
            "retry_of": {"type": ["integer", "null"], "description": "the job this attempt retries"},
            "failure_class": enum_of(FailureClass, nullable=True) | {"description": "why it did not succeed"},
            "reason": _NULLABLE_STRING,
            "detail": _NULLABLE_STRING,
            "device": _NULLABLE_STRING,
            "host": _NULLABLE_STRING,
            "boardless": {
                "type": "boolean",
                "description": "board: none: it holds no device (device stays null); host is where it runs",
            },
            "exit_status": {"type": ["integer", "null"]},
            "created_at": _TIME,
            "started_at": _NULLABLE_TIME,
            "finished_at": _NULLABLE_TIME,
            "output_bytes": {"type": "integer", "minimum": 0},
            "output_url": STRING,
            "files": {
                "type": "array",
                "items": ref("JobFile"),
                "description": "the files it uploaded (artifacts.upload): in a job's and a session's answers",
            },
        },
        required=[
            "id",
            "session",
            "repository",
            "workflow",
            "task",
            "state",
            "attempt",
            "retry_of",
            "failure_class",
            "reason",
            "detail",
            "device",
            "host",
            "boardless",
            "exit_status",
            "created_at",
            "started_at",
            "finished_at",
            "output_bytes",
            "output_url",
        ],
    ),
    "JobFile": _object(
        {
            "id": {"type": "integer"},
            "path": STRING,
            "size": {"type": "integer", "minimum": 0},
            "url": {**_NULLABLE_STRING, "description": "where to download it; null when it was not kept"},
            "note": {**_NULLABLE_STRING, "description": "why it was not kept (over a limit)"},
        }
    ),
    "JobList": _object({"items": {"type": "array", "items": ref("Job")}, "next_cursor": _CURSOR}),
    "Session": _object(
        {
            "id": STRING,
            "repository": STRING,
            "branch": _NULLABLE_STRING,
            "workflow": STRING,
            "commit": STRING,
            "event": STRING,
            "state": enum_of(SessionState),
            "conclusion": _CONCLUSION,
            "cancelled_by": _NULLABLE_STRING,
            "cancel_reason": _NULLABLE_STRING,
            "devices": _STRINGS,
            "created_at": _TIME,
            "updated_at": _TIME,
            "started_at": _NULLABLE_TIME,
            "finished_at": _NULLABLE_TIME,
            "duration_s": {"type": ["number", "null"]},
            "url": STRING,
            "jobs": {"type": "array", "items": ref("Job"), "description": "every attempt of every task"},
        },
        required=[
            "id",
            "repository",
            "branch",
            "workflow",
            "commit",
            "event",
            "state",
            "conclusion",
            "cancelled_by",
            "cancel_reason",
            "devices",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "duration_s",
            "url",
        ],
    ),
    "SessionList": _object({"items": {"type": "array", "items": ref("Session")}, "next_cursor": _CURSOR}),
    "Cancelled": _object(
        {
            "session": STRING,
            "state": enum_of(SessionState),
            "conclusion": _CONCLUSION,
            "changed": {"type": "boolean", "description": "false: it had already ended or been cancelled"},
        }
    ),
    "ExplainRequest": _object(
        {
            "manifest": {"type": "string", "description": "the manifest's YAML text"},
            "path": fields.text(1, 500, "the manifest's path, for messages"),
            "repository": {
                **fields.REPOSITORY,
                "description": "owner/name of the repository whose session this would be: pools whose "
                "repositories do not admit it are rejected; without it no pool's list is applied",
            },
        },
        required=["manifest"],
    ),
    "Problem": _object(
        {
            "path": STRING,
            "line": {"type": "integer"},
            "column": {"type": "integer"},
            "field": STRING,
            "message": STRING,
        }
    ),
    "DeviceVerdict": _object(
        {"device": STRING, "pool": STRING, "reasons": _STRINGS, "never": {"type": "boolean"}}
    ),
    "ExplainTask": _object(
        {
            "id": STRING,
            "line": {"type": "integer"},
            "requested": _object(
                {"labels": {"type": "object", "additionalProperties": _STRINGS}, "tags": _STRINGS}
            ),
            "outcome": enum_of(Outcome),
            "summary": STRING,
            "eligible_pools": _STRINGS,
            "rejected_pools": {"type": "array", "items": _object({"pool": STRING, "reasons": _STRINGS})},
            "eligible_devices": _STRINGS,
            "rejected_devices": {"type": "array", "items": ref("DeviceVerdict")},
            "histogram": _HISTOGRAM,
            "nearest_misses": {"type": "array", "items": ref("DeviceVerdict")},
            "hints": {
                "type": "array",
                "items": _object({"field": STRING, "line": {"type": "integer"}, "message": STRING}),
            },
            "selected": _STRINGS,
            "descriptions": _LABEL_MAP,
            "board": {
                "enum": ["none"],
                "description": "board: none: the task holds no device; its outcome, summary and hints are "
                "its runner hosts' (hosts), and the device fields are empty",
            },
            "hosts": _object(
                {
                    "total": {"type": "integer", "minimum": 0},
                    "eligible": _STRINGS,
                    "rejected": {
                        "type": "array",
                        "items": _object({"host": STRING, "reasons": _STRINGS, "never": {"type": "boolean"}}),
                    },
                    "histogram": _HISTOGRAM,
                    "selected": {**_NULLABLE_STRING, "description": "the runner host it would run on now"},
                },
                required=["total", "eligible", "rejected", "histogram", "selected"],
            ),
        },
        required=[
            "id",
            "line",
            "requested",
            "outcome",
            "summary",
            "eligible_pools",
            "rejected_pools",
            "eligible_devices",
            "rejected_devices",
            "histogram",
            "nearest_misses",
            "hints",
            "selected",
        ],
    ),
    "Explanation": _object(
        {
            "workflow": _NULLABLE_STRING,
            "file": STRING,
            "errors": {"type": "array", "items": ref("Problem")},
            "warnings": {"type": "array", "items": ref("Problem")},
            "repository": _NULLABLE_STRING,
            "repositories_not_checked": _STRINGS,
            "tasks": {"type": "array", "items": ref("ExplainTask")},
            "exit_code": {"enum": [0, 1, 2]},
        }
    ),
}
