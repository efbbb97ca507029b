"""The document's operations: every path, its parameters, bodies and answers."""

from __future__ import annotations

import enum
from typing import Any, Final

from aiohttp import web

from kerrigan import __version__
from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.core.logins import LOGIN_PATTERN
from kerrigan.core.reservations import DEFAULT_MAX_S
from kerrigan.web.api.openapi import fields
from kerrigan.web.api.openapi.components import DEVICE_STATE, SCHEMAS, STRING, ref
from kerrigan.web.api.openapi.fields import enum_of
from kerrigan.web.state import SETTINGS

routes = web.RouteTableDef()


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref("Error")}}}


def _json(schema: str, description: str, etag: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": ref(schema)}},
    }
    if etag:
        response["headers"] = {"ETag": {"schema": STRING, "description": "the version read or written"}}
    return response


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": ref(schema)}}}


_READ_ERRORS = {"401": _error("no valid token"), "404": _error("not found")}
_AMBIGUOUS: Final = {
    "400": _error("ambiguous_id: the short id (a prefix, as pages and check runs print it) begins several")
}
_SHORT_ID: Final = "whole, or a unique prefix of at least 4 characters (as pages and check runs print it)"
# A repository's session, job or output: one of a repository the caller may not read on GitHub is a 404,
# the same as one that does not exist; GitHub not saying whether they may is a 503.
_REPOSITORY_READ_ERRORS = {
    "401": _error("no valid token"),
    "404": _error("not found, or of a repository the caller may not read on GitHub (the same answer)"),
    "503": _error("github_unavailable: GitHub did not say whether the caller may read the repository"),
}
_WRITE_ERRORS = {
    "400": _error("invalid input: the error names the field and the rule"),
    "401": _error("no valid token"),
    "403": _error("the caller's role does not allow it"),
    "404": _error("not found"),
    "409": _error("conflict: a duplicate id, or a pool that still has devices"),
    "412": _error("If-Match names an older version"),
}
_UNKNOWN_POOL: Final = {"422": _error("unknown_pool: the body names a pool there is not")}
_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "schema": STRING,
    "description": "the ETag last read; the write is refused with 412 if it is stale",
}
_FILTERS = [
    {
        "name": "label",
        "in": "query",
        "required": False,
        "schema": {
            "type": "array",
            "items": fields.LABEL_FILTER,
        },
        "style": "form",
        "explode": True,
        "description": "key=value an effective label must have (repeatable)",
    },
    {
        "name": "tag",
        "in": "query",
        "required": False,
        "schema": {"type": "array", "items": fields.USER_NAME},
        "style": "form",
        "explode": True,
        "description": "a tag that must be present (repeatable)",
    },
]


_DRY_RUN: Final = {
    "name": "dry_run",
    "in": "query",
    "required": False,
    "schema": {"enum": ["true", "false"]},
    "description": "true: change nothing; answer what the change would be and which tasks of the last 30 "
    "days would lose devices by it",
}


def _edited(schema: str, subject: str) -> dict[str, Any]:
    """The answer of a change that ``?dry_run=true`` may weigh instead."""
    return {
        "description": f"the {subject}, or with dry_run what it would be",
        "content": {"application/json": {"schema": ref(f"{schema}Edited")}},
        "headers": {
            "ETag": {
                "schema": STRING,
                "description": "the version written; for a dry run, the version it was weighed against",
            }
        },
    }


def _query(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema or fields.NO_NUL,
        "description": description,
    }


def _one_of(kind: type[enum.StrEnum]) -> str:
    """The values of ``kind`` in words: ``queued, in_progress or completed``."""
    *first, last = [member.value for member in kind]
    return f"{', '.join(first)} or {last}" if first else last


_SESSION_FILTERS = [
    _query("repository", "owner/name"),
    _query("branch", "the pushed branch"),
    _query("workflow", "the manifest's name"),
    _query("state", _one_of(SessionState), enum_of(SessionState)),
    _query(
        "conclusion", f"{_one_of(Conclusion)} (action_required and neutral: the lab's)", enum_of(Conclusion)
    ),
    _query("device", "a device one of its jobs ran on"),
    _query("since", "created at or after: ISO 8601 with a zone", {"type": "string", "format": "date-time"}),
]
_PAGING = [
    _query(
        "limit", "rows per page, 1 to 500 (default 50)", {"type": "integer", "minimum": 1, "maximum": 500}
    ),
    _query("cursor", "the next_cursor of the previous page, with the same filters", fields.CURSOR),
]
_FILTER_ERRORS: Final = {"400": _error("a bad filter or limit: the error names the field and the rule")}
_LIST_ERRORS = {
    "400": _error("an unknown filter, a bad value, or a cursor of another query: the error names the field"),
    "401": _error("no valid token"),
}


def _path_param(name: str, schema: dict[str, Any] = fields.NO_NUL) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema}


_REPOSITORY_PARAMS: Final = [
    _path_param("owner", fields.REPOSITORY_OWNER),
    _path_param("repo", fields.REPOSITORY_NAME),
]
_SECRET_NAME: Final = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "minLength": 1, "maxLength": 100},
    "description": "any case, stored upper-case; not starting with GITHUB_ or KERRIGAN_",
}
_SECRET_ERRORS: Final = {
    "400": _error("a bad repository, name, value or paging parameter: the error names the field"),
    "401": _error("no valid token"),
    "403": _error("neither a System Admin nor, on GitHub, a writer of the repository"),
    "404": _error("Kerrigan's App is not installed on the repository, or it has no secret of that name"),
    "503": _error("github_unavailable: GitHub did not say whether the caller writes to the repository"),
}


def _op(summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": responses, **extra}


def _edit_ops(kind: str, schema: str, subject: str, param: str) -> dict[str, Any]:
    """PUT and DELETE of a label or a tag."""
    put_extra: dict[str, Any] = {"parameters": [_IF_MATCH, _DRY_RUN]}
    if kind == "label":
        put_extra["requestBody"] = _body("LabelValue")
    return {
        "parameters": [_path_param(f"{subject}_id"), _path_param(param, fields.USER_NAME)],
        "put": _op(
            f"set a {subject} {kind}" + (" (an empty value removes it)" if kind == "label" else ""),
            {"200": _edited(schema, subject), **_WRITE_ERRORS},
            **put_extra,
        ),
        "delete": _op(
            f"remove a {subject} {kind}",
            {"200": _edited(schema, subject), **_WRITE_ERRORS},
            parameters=[_IF_MATCH, _DRY_RUN],
        ),
    }


def _resource_ops(subject: str, schema: str, patch: str) -> dict[str, Any]:
    return {
        "parameters": [_path_param(f"{subject}_id")],
        "get": _op(f"read a {subject}", {"200": _json(schema, f"the {subject}", etag=True), **_READ_ERRORS}),
        "patch": _op(
            f"change a {subject}",
            {
                "200": _edited(schema, subject),
                **_WRITE_ERRORS,
                **(_UNKNOWN_POOL if subject == "device" else {}),
            },
            requestBody=_body(patch),
            parameters=[_IF_MATCH, _DRY_RUN],
        ),
        "delete": _op(
            f"delete a {subject}",
            {"204": {"description": "deleted"}, **_WRITE_ERRORS},
            parameters=[_IF_MATCH],
        ),
    }


def document(reservation_max_s: int = DEFAULT_MAX_S) -> dict[str, Any]:
    """The OpenAPI 3.1 document of a server whose ``KERRIGAN_RESERVATION_MAX_S`` is ``reservation_max_s``."""
    request = SCHEMAS["ReservationRequest"]
    reservation = {
        **request,
        "properties": {
            **request["properties"],
            "duration_s": {**request["properties"]["duration_s"], "maximum": reservation_max_s},
        },
    }
    created = {"201": _json("Pool", "created", etag=True), **_WRITE_ERRORS}
    device_created = {"201": _json("Device", "created", etag=True), **_WRITE_ERRORS, **_UNKNOWN_POOL}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Kerrigan API",
            "version": __version__,
            "description": "Pools, devices, labels and tags of a hardware-in-the-loop lab.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": {
            "/pools": {
                "get": _op(
                    "list pools",
                    {"200": _json("PoolList", "pools"), **_FILTER_ERRORS, **_READ_ERRORS},
                    parameters=_FILTERS,
                ),
                "post": _op("create a pool (admins)", created, requestBody=_body("PoolCreate")),
            },
            "/pools/{pool_id}": _resource_ops("pool", "Pool", "PoolPatch"),
            "/pools/{pool_id}/labels/{key}": _edit_ops("label", "Pool", "pool", "key"),
            "/pools/{pool_id}/tags/{tag}": _edit_ops("tag", "Pool", "pool", "tag"),
            "/devices": {
                "get": _op(
                    "list devices",
                    {"200": _json("DeviceList", "devices"), **_FILTER_ERRORS, **_READ_ERRORS},
                    parameters=[
                        *_FILTERS,
                        {"name": "pool", "in": "query", "required": False, "schema": fields.NO_NUL},
                        {"name": "state", "in": "query", "required": False, "schema": DEVICE_STATE},
                    ],
                ),
                "post": _op("create a device (admins)", device_created, requestBody=_body("DeviceCreate")),
            },
            "/devices/{device_id}": _resource_ops("device", "Device", "DevicePatch"),
            "/devices/{device_id}/labels/{key}": _edit_ops("label", "Device", "device", "key"),
            "/devices/{device_id}/tags/{tag}": _edit_ops("tag", "Device", "device", "tag"),
            "/devices/{device_id}/state": {
                "parameters": [_path_param("device_id")],
                "put": _op(
                    "change a device's state with a reason and, for maintenance, an optional until (admins; "
                    "the pool's owners for available and maintenance)",
                    {"200": _json("Device", "the device", etag=True), **_WRITE_ERRORS},
                    requestBody=_body("DeviceState"),
                    parameters=[_IF_MATCH],
                ),
            },
            "/devices/{device_id}/health-check": {
                "parameters": [_path_param("device_id")],
                "post": _op(
                    "queue the device's health check (admins and the pool's owners); a second is not "
                    "queued while one is queued or running",
                    {
                        "202": _json("HealthCheckQueued", "the health-check job"),
                        **_WRITE_ERRORS,
                        "409": _error("the device has no health check"),
                    },
                ),
            },
            "/devices/{device_id}/power": {
                "parameters": [_path_param("device_id")],
                "post": _op(
                    "switch or read a board's power through its runner host's agent (the person holding its "
                    "reservation and System Admins); waits for the agent's answer, at most 60 s",
                    {
                        "200": _json("DevicePower", "the action done: the power state its switch then read"),
                        "400": _error("invalid input: the error names the field (action) and the rule"),
                        "401": _error("no valid token"),
                        "403": _error(
                            "the caller holds no reservation of the device (nor is an admin), or held it no "
                            "more when its host took the request"
                        ),
                        "404": _error("no such device"),
                        "409": _error(
                            "device_busy: a job holds the device; no_power: its devices file gives it no "
                            "power; not_supported: its host's agent does not speak device_power; too_many: "
                            "4 of the caller's requests wait for an answer already"
                        ),
                        "413": _error("too_large: the body is over the limit"),
                        "502": _error("power_failed: the switch failed or did not answer; the message says"),
                        "503": _error("host_offline: the device's runner host's agent is offline"),
                        "504": _error("no_answer: the agent did not answer in time; the request expired"),
                    },
                    requestBody=_body("PowerRequest"),
                ),
            },
            "/devices/{device_id}/console": {
                "parameters": [_path_param("device_id")],
                "get": _op(
                    "a board's console as a WebSocket through its runner host's agent (the person holding "
                    "its reservation and System Admins type, its pool's owners watch); frames: docs/api.md",
                    {
                        "101": {"description": "switching to the WebSocket protocol"},
                        "400": _error("not_websocket: a plain request; the console is a WebSocket"),
                        "401": _error("no valid token"),
                        "403": _error("the caller holds no reservation of the device nor owns its pool"),
                        "404": _error("no such device"),
                        "409": _error(
                            "device_busy: a job holds the device; not_supported: its host's agent does not "
                            "speak device_console; too_many: 16 people watch its console already"
                        ),
                        "503": _error("host_offline: the device's runner host's agent is offline"),
                    },
                ),
            },
            "/label-keys": {
                "get": _op(
                    "list approved label keys", {"200": _json("LabelKeyList", "keys"), **_READ_ERRORS}
                ),
            },
            "/label-keys/{key}": {
                "parameters": [_path_param("key", fields.USER_NAME)],
                "put": _op(
                    "approve a key or change its description (admins)",
                    {
                        "200": _json("LabelKey", "changed"),
                        "201": _json("LabelKey", "approved"),
                        **_WRITE_ERRORS,
                    },
                    requestBody=_body("LabelKeyDescription"),
                ),
                "delete": _op(
                    "withdraw a key (admins)", {"204": {"description": "withdrawn"}, **_WRITE_ERRORS}
                ),
            },
            "/audit": {
                "get": _op(
                    "the audit log, newest first",
                    {"200": _json("AuditList", "entries"), **_FILTER_ERRORS, **_READ_ERRORS},
                    parameters=[
                        *(
                            {"name": name, "in": "query", "required": False, "schema": fields.NO_NUL}
                            for name in ("pool", "device", "actor")
                        ),
                        _query(
                            "limit",
                            "entries, 1 to 1000 (default 200)",
                            {"type": "integer", "minimum": 1, "maximum": 1000},
                        ),
                    ],
                ),
            },
            "/repositories/{owner}/{repo}/secrets": {
                "parameters": _REPOSITORY_PARAMS,
                "get": _op(
                    "the repository's secrets in name order, never their values (System Admins and the "
                    "repository's writers); cursor paging",
                    {"200": _json("SecretList", "a page of secrets"), **_SECRET_ERRORS},
                    parameters=_PAGING,
                ),
            },
            "/repositories/{owner}/{repo}/secrets/{name}": {
                "parameters": [*_REPOSITORY_PARAMS, _SECRET_NAME],
                "put": _op(
                    "set a secret, encrypted at rest (System Admins and the repository's writers)",
                    {
                        "201": _json("Secret", "created"),
                        "204": {"description": "replaced"},
                        **_SECRET_ERRORS,
                        "409": _error("the repository holds 100 secrets already"),
                        "503": _error(
                            "secrets_key_unset: KERRIGAN_SECRETS_KEY is not set; github_unavailable: GitHub "
                            "did not say whether the caller writes to the repository"
                        ),
                    },
                    requestBody=_body("SecretValue"),
                ),
                "delete": _op(
                    "delete a secret (System Admins and the repository's writers)",
                    {"204": {"description": "deleted"}, **_SECRET_ERRORS},
                ),
            },
            "/reservations": {
                "get": _op(
                    "reservations waiting or active, newest first (?login=, ?ended=true); cursor paging",
                    {"200": _json("ReservationList", "a page of reservations"), **_LIST_ERRORS},
                    parameters=[
                        _query(
                            "login",
                            "whose reservations (System Admins: anyone's)",
                            {"type": "string", "pattern": fields.anchored(LOGIN_PATTERN)},
                        ),
                        _query("ended", "true: the ended ones too", {"enum": ["true", "false"]}),
                        *_PAGING,
                    ],
                ),
                "post": _op(
                    "reserve a device for the caller: queued after gate work, answered once decided",
                    {
                        "201": _json("Reservation", "queued: granted, waiting, or ended when none freed"),
                        "400": _error("invalid input: the error names the field and the rule"),
                        "401": _error("no valid token"),
                        "409": _error(
                            "too_many: the caller holds or waits for KERRIGAN_RESERVATIONS_PER_USER already; "
                            "exists: a reservation of that id exists"
                        ),
                        "422": _json(
                            "ReservationRefused",
                            "unschedulable: no device can ever match (the answer's resolution says why); "
                            "unknown_device: there is no device of that id",
                        ),
                    },
                    requestBody=_body("ReservationRequest"),
                ),
            },
            "/reservations/{reservation_id}": {
                "parameters": [{**_path_param("reservation_id"), "description": _SHORT_ID}],
                "get": _op(
                    "one reservation",
                    {"200": _json("Reservation", "the reservation"), **_READ_ERRORS, **_AMBIGUOUS},
                ),
                "patch": _op(
                    "extend an active reservation by extend_s while nobody waits for its board",
                    {
                        "200": _json("Reservation", "extended"),
                        "400": _error(
                            "over the limit, or someone waits for the board; or an ambiguous short id"
                        ),
                        "409": _error("not_active: it has ended, or still waits for a board"),
                        **_READ_ERRORS,
                        "403": _error("the caller may not extend it"),
                    },
                    requestBody=_body("ReservationExtension"),
                ),
                "delete": _op(
                    "release it, or withdraw it while it waits (its person, its pool owners, admins)",
                    {
                        "200": _json("Reservation", "ended"),
                        **_READ_ERRORS,
                        **_AMBIGUOUS,
                        "403": _error("the caller may not release it"),
                    },
                ),
            },
            "/hosts": {
                "get": _op(
                    "runner hosts as their agents last reported them",
                    {"200": _json("RunnerHostList", "hosts"), **_READ_ERRORS},
                ),
            },
            "/hosts/{host_id}": {
                "parameters": [_path_param("host_id")],
                "get": _op(
                    "one runner host: resources by name, device states, health",
                    {"200": _json("RunnerHost", "the host"), **_READ_ERRORS},
                ),
            },
            "/hosts/{host_id}/state": {
                "parameters": [_path_param("host_id")],
                "put": _op(
                    "pause a runner host with a reason and an optional until (its devices get no new jobs; "
                    "running ones finish), or make it active again (System Admins)",
                    {"200": _json("RunnerHost", "the host"), **_WRITE_ERRORS},
                    requestBody=_body("HostState"),
                ),
            },
            "/sessions": {
                "get": _op(
                    "sessions, newest first, filtered; cursor paging (those of repositories the caller may "
                    "read on GitHub)",
                    {"200": _json("SessionList", "a page of sessions"), **_LIST_ERRORS},
                    parameters=[*_SESSION_FILTERS, *_PAGING],
                ),
            },
            "/sessions/{session_id}": {
                "parameters": [{**_path_param("session_id"), "description": _SHORT_ID}],
                "get": _op(
                    "one session with its jobs, each attempt its own",
                    {
                        "200": _json("Session", "the session", etag=True),
                        **_REPOSITORY_READ_ERRORS,
                        **_AMBIGUOUS,
                    },
                ),
            },
            "/sessions/{session_id}/cancel": {
                "parameters": [{**_path_param("session_id"), "description": _SHORT_ID}],
                "post": _op(
                    "cancel a session: queued jobs end, running ones are stopped (the repository's writers "
                    "and System Admins)",
                    {
                        "200": _json("Cancelled", "cancelled, or already cancelled (changed: false)"),
                        **_AMBIGUOUS,
                        "401": _error("no valid token"),
                        "403": _error("the caller may not cancel this repository's sessions"),
                        "404": _error("not found, or of a repository the caller may not read on GitHub"),
                        "503": _REPOSITORY_READ_ERRORS["503"],
                        "409": _error(
                            "session_ended: the session had already completed; the message says how"
                        ),
                    },
                ),
            },
            "/jobs/{job_id}": {
                "parameters": [_path_param("job_id")],
                "get": _op("one job", {"200": _json("Job", "the job", etag=True), **_REPOSITORY_READ_ERRORS}),
            },
            "/jobs/{job_id}/hold": {
                "parameters": [_path_param("job_id")],
                "post": _op(
                    "Hold board: reserve the failed job's board(s) for the caller for KERRIGAN_HOLD_S, each "
                    "pinned to its device, its workspace kept on its runner host while the hold lasts (the "
                    "repository's writers and System Admins); answered once the dispatcher has decided",
                    {
                        "200": _json("JobHold", "the caller's hold of this job, which lasts still"),
                        "201": _json("JobHold", "held: each board granted, or waiting for it"),
                        "401": _error("no valid token"),
                        "403": _error(
                            "the caller may not: the message names the permission they lack on the repository"
                        ),
                        "404": _error("no such job, or a job of a repository the caller may not read"),
                        "409": _error(
                            "not_holdable: the job did not fail, ran on no board, or its board is retired or "
                            "gone; too_many: the caller holds or waits for KERRIGAN_RESERVATIONS_PER_USER"
                        ),
                        "422": _error("unschedulable: no request can ever have the job's board"),
                        "503": _error("github_unavailable: GitHub did not say if the caller writes there"),
                    },
                ),
            },
            "/jobs/{job_id}/shell": {
                "parameters": [_path_param("job_id")],
                "get": _op(
                    "a shell in the held job's sandbox on its runner host, as a WebSocket (kerrigan shell): "
                    "for the person whose hold of its board lasts and System Admins; frames: docs/api.md",
                    {
                        "101": {"description": "switching to the WebSocket protocol"},
                        "400": _error("not_websocket: a plain request; the shell is a WebSocket"),
                        "401": _error("no valid token"),
                        "403": _error("the caller does not hold the job's board (its hold is another's)"),
                        "404": _error("no such job, or one of a repository the caller may not read"),
                        "409": _error(
                            "not_held: no hold of the job's board lasts now (or the caller's waits); "
                            "not_supported: its host's agent does not speak job_shell"
                        ),
                        "503": _error(
                            "host_offline: the job's runner host's agent is offline; github_unavailable: "
                            "GitHub did not say whether the caller may read the job's repository"
                        ),
                    },
                ),
            },
            "/jobs/{job_id}/files/{file_id}": {
                "parameters": [_path_param("job_id"), _path_param("file_id")],
                "get": _op(
                    "one file the job uploaded (artifacts.upload), as an attachment",
                    {
                        "200": {
                            "description": "the file's bytes",
                            "content": {"application/octet-stream": {"schema": STRING}},
                        },
                        **_REPOSITORY_READ_ERRORS,
                    },
                ),
            },
            "/jobs/{job_id}/output": {
                "parameters": [
                    _path_param("job_id"),
                    _query(
                        "timestamps",
                        "true: each line starts with when it reached the server (ISO 8601, UTC, to the "
                        "millisecond), as GitHub Actions' raw logs",
                        {"type": "string", "enum": ["true", "false"], "default": "false"},
                    ),
                ],
                "get": _op(
                    "the job's whole stored output, streamed",
                    {
                        "200": {
                            "description": "the raw log as the runner sent it (a cut notice last)",
                            "content": {"text/plain; charset=utf-8": {"schema": STRING}},
                        },
                        "400": _error("an unknown parameter, or timestamps neither true nor false"),
                        **_REPOSITORY_READ_ERRORS,
                    },
                ),
            },
            "/jobs/{job_id}/console": {
                "parameters": [
                    _path_param("job_id"),
                    _query(
                        "timestamps",
                        "true: each line starts with when it reached the server (ISO 8601, UTC, to the "
                        "millisecond), as the output's",
                        {"type": "string", "enum": ["true", "false"], "default": "false"},
                    ),
                ],
                "get": _op(
                    "the job's whole stored console (its board's, from power-on to the job's end), streamed; "
                    "empty when its runner sent none",
                    {
                        "200": {
                            "description": "the console as the runner sent it, the job's secrets masked (a "
                            "cut notice last)",
                            "content": {"text/plain; charset=utf-8": {"schema": STRING}},
                        },
                        "400": _error("an unknown parameter, or timestamps neither true nor false"),
                        **_REPOSITORY_READ_ERRORS,
                    },
                ),
            },
            "/devices/{device_id}/jobs": {
                "parameters": [_path_param("device_id")],
                "get": _op(
                    "the jobs a device ran, newest first (of repositories the caller may read); cursor "
                    "paging",
                    {"200": _json("JobList", "a page of jobs"), **_LIST_ERRORS, **_READ_ERRORS},
                    parameters=_PAGING,
                ),
            },
            "/explain": {
                "post": _op(
                    "resolve a manifest against the stored inventory",
                    {
                        "200": {
                            "description": "the kerrigan explain document; with format=text, the command's "
                            "text, its exit code in the Kerrigan-Exit-Code header",
                            "content": {
                                "application/json": {"schema": ref("Explanation")},
                                "text/plain": {"schema": STRING},
                            },
                        },
                        "400": _error("no body, a body that is not a manifest, a bad repository or format"),
                        **_READ_ERRORS,
                    },
                    parameters=[
                        {
                            "name": "repository",
                            "in": "query",
                            "required": False,
                            "schema": fields.REPOSITORY,
                            "description": "owner/name, for a raw YAML body (a JSON body's repository wins)",
                        },
                        {
                            "name": "format",
                            "in": "query",
                            "required": False,
                            "schema": {"enum": ["json", "text"]},
                            "description": "json (the default) or text, as kerrigan explain prints it",
                        },
                    ],
                    requestBody={
                        "required": True,
                        "content": {
                            "application/json": {"schema": ref("ExplainRequest")},
                            "application/yaml": {"schema": STRING},
                        },
                    },
                ),
            },
            "/openapi.json": {
                "get": _op("this document", {"200": {"description": "OpenAPI 3.1"}}, security=[]),
            },
        },
        "components": {
            "schemas": {**SCHEMAS, "ReservationRequest": reservation},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token from `kerrigan tokens create`",
                }
            },
        },
    }


@routes.get("/openapi.json")
async def openapi_json(request: web.Request) -> web.Response:
    """The document, open to everyone."""
    return web.json_response(document(request.config_dict[SETTINGS].reservation_max_s))
