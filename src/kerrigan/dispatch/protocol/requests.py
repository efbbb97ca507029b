"""What a runner host sends, typed: one small request per call, read and checked in one place.

A call's body is read no further than ``MAX_BODY_BYTES`` (413 past it) and must be a JSON object of valid
text and finite numbers; then its request's ``of`` checks every field, the types here and the ranges in
:mod:`kerrigan.core.runner_fields`. The first field that is not right is a 400 naming it, before anything
is stored. Nothing here reads a body before the call's host is known: :func:`read` is only reached from a
handler, which runs once the host's token was checked (:mod:`kerrigan.dispatch.protocol.routes`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, Self, TypeVar

import structlog
from aiohttp import web

from kerrigan.core import runner_fields as fields
from kerrigan.core.cpus import parse_cpu_list
from kerrigan.core.device_power import AGENT_FAILURES, MAX_MESSAGE, PowerFailure, PowerState
from kerrigan.core.runner_fields import MAX_BODY_BYTES, FieldError, size_text
from kerrigan.store.jobs.lifecycle import OUTCOMES

DEVICE_STATES: Final = frozenset({"present", "missing", "error"})
MAX_POWERED_OFF: Final = 64  # a gang's boards; no job holds more
REFUSALS: Final = frozenset({"runner_full", "runner_disk_full", "invalid_claim"})

Body = Mapping[str, Any]


class ProtocolError(Exception):
    """A request the runner must change; answered with the JSON error shape the API uses."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def error_response(exc: ProtocolError) -> web.Response:
    """The JSON error a protocol call answers."""
    body = {"error": {"code": exc.code, "message": exc.message, "field": exc.field}}
    return web.json_response(body, status=exc.status)


def invalid(exc: FieldError) -> ProtocolError:
    """The 400 a field out of range is answered with."""
    return ProtocolError(400, "invalid", exc.message, exc.field)


async def read_bounded(request: web.Request, limit: int, too_large: ProtocolError) -> bytes:
    """The request's body, or ``too_large`` raised as soon as it is known to be over ``limit`` bytes: from
    its ``Content-Length``, or (a chunked body names none) counted as it comes."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    data = bytearray()
    async for piece in request.content.iter_chunked(256 * 1024):
        data += piece
        if len(data) > limit:
            raise too_large
    return bytes(data)


class Request(Protocol):
    """A typed request: made from the body's JSON object, or :class:`FieldError` naming what is wrong."""

    optional: ClassVar[bool]  # whether the call may come without a body (read as ``{}``)

    @classmethod
    def of(cls, body: Body) -> Self: ...


R = TypeVar("R", bound=Request)


async def read(request: web.Request, kind: type[R]) -> R:
    """The call's body as its typed request: a 413 past ``MAX_BODY_BYTES``, a 400 for what is not a JSON
    object of valid text and numbers, and a 400 naming the first field that is not right."""
    if kind.optional and not request.can_read_body:
        body: Any = {}
    else:
        too_large = ProtocolError(
            413,
            "too_large",
            f"a runner protocol call carries at most {size_text(MAX_BODY_BYTES)} ({MAX_BODY_BYTES} bytes)",
        )
        raw = await read_bounded(request, MAX_BODY_BYTES, too_large)
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ProtocolError(400, "invalid_json", "the body is not a JSON object") from None
        if not isinstance(body, dict):
            raise ProtocolError(400, "invalid_json", "the body is not a JSON object")
    try:
        fields.check_document(body)
        return kind.of(body)
    except FieldError as exc:
        raise invalid(exc) from None


def job_id_of(request: web.Request) -> str:
    """The job id in the path, in the database's range (a 404 is for ids that could exist)."""
    try:
        job_id = str(fields.job_id(request.match_info["job_id"]))
    except FieldError as exc:
        raise invalid(exc) from None
    structlog.contextvars.bind_contextvars(job_id=job_id)
    return job_id


def _resources(body: Body) -> Mapping[str, Any]:
    """Resource values by name, as sent: the server's catalog resolves them, and skips the names and kinds
    of value it does not know (seed 001); a whole number is checked against the database's range."""
    raw = body.get("resources", {})
    if not isinstance(raw, dict):
        raise FieldError("resources", "resources must be an object of name: value")
    fields.sized(raw, "resources", 256)
    for name, value in raw.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            fields.whole(value, f"resources.{name}", high=fields.MAX_RESOURCE)
    return raw


def _devices(body: Body) -> dict[str, str]:
    raw = body.get("devices", {})
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and v in DEVICE_STATES for k, v in raw.items()
    ):
        raise FieldError("devices", f"devices must map device ids to one of {sorted(DEVICE_STATES)}")
    fields.sized(raw, "devices")
    return dict(raw)


@dataclass(frozen=True, slots=True)
class Registration:
    """``/register``: the versions and capabilities the runner speaks, its resources and devices."""

    optional: ClassVar[bool] = False
    versions: tuple[int, ...]
    capabilities: tuple[str, ...]
    resources: Mapping[str, Any]
    devices: Mapping[str, str]

    @classmethod
    def of(cls, body: Body) -> Self:
        versions = body.get("protocol", [])
        capabilities = body.get("capabilities", [])
        if (
            not isinstance(versions, list)
            or len(versions) > 16
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in versions)
            or not all(1 <= v <= fields.MAX_ID for v in versions)
        ):
            raise FieldError("protocol", "protocol must list the versions the runner speaks")
        if (
            not isinstance(capabilities, list)
            or len(capabilities) > 64
            or not all(isinstance(c, str) and 0 < len(c) <= fields.MAX_NAME for c in capabilities)
        ):
            raise FieldError("capabilities", "capabilities must be a list of names")
        return cls(tuple(versions), tuple(capabilities), _resources(body), _devices(body))


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``/heartbeat``: the resources and devices that changed, how long each job waited on the host (by
    job id, in milliseconds), and the host's health report."""

    optional: ClassVar[bool] = False
    resources: Mapping[str, Any]
    devices: Mapping[str, str]
    waiting: Mapping[str, int]
    health: Mapping[str, Any] | None

    @classmethod
    def of(cls, body: Body) -> Self:
        resources, devices = _resources(body), _devices(body)
        waiting = body.get("waiting", {})
        if not isinstance(waiting, dict) or not all(
            isinstance(ms, int) and not isinstance(ms, bool) and 0 <= ms <= fields.MAX_COUNT
            for ms in waiting.values()
        ):
            raise FieldError("waiting", "waiting maps job ids to milliseconds waited on the host")
        try:
            fields.sized(waiting, "waiting")
            waiting = {str(fields.job_id(job)): ms for job, ms in waiting.items()}
        except FieldError as exc:
            raise FieldError("waiting", f"waiting: {exc.message}") from None
        health = body.get("health")
        if health is not None and not isinstance(health, dict):
            raise FieldError("health", "health must be an object")
        return cls(resources, devices, waiting, health)


@dataclass(frozen=True, slots=True)
class Start:
    """``/start``: the job's command started, pinned to ``cpus`` (a kernel CPU list) when it says so."""

    optional: ClassVar[bool] = True
    cpus: str | None

    @classmethod
    def of(cls, body: Body) -> Self:
        cpus = body.get("cpus")
        if cpus is not None:
            try:
                parse_cpu_list(fields.text(cpus, "cpus", 500))
            except ValueError:  # FieldError among them: one message for both
                raise FieldError("cpus", "cpus is a kernel CPU list such as '2-3,6'") from None
        return cls(cpus)


@dataclass(frozen=True, slots=True)
class Refusal:
    """``/refuse``: a typed reason the runner cannot take the job; whether it may be offered again."""

    optional: ClassVar[bool] = False
    reason: str
    detail: str
    retry: bool

    @classmethod
    def of(cls, body: Body) -> Self:
        reason = body.get("reason")
        if reason not in REFUSALS:
            raise FieldError("reason", f"reason must be one of {sorted(REFUSALS)}")
        detail = body.get("detail", "")
        if reason == "runner_disk_full":
            free, floor = body.get("free_bytes"), body.get("floor_bytes")
            if not isinstance(free, int) or not isinstance(floor, int):
                raise FieldError("free_bytes", "runner_disk_full carries free_bytes and floor_bytes")
            fields.whole(free, "free_bytes", high=fields.MAX_RESOURCE)
            fields.whole(floor, "floor_bytes", high=fields.MAX_RESOURCE)
            detail = f"{free} bytes free, floor {floor} bytes"
        if not isinstance(detail, str):
            raise FieldError("detail", "detail must be text")
        fields.text(detail, "detail")
        retry = body.get("retry", True)
        if not isinstance(retry, bool):
            raise FieldError("retry", "retry must be true or false")
        return cls(str(reason), detail, retry)


@dataclass(frozen=True, slots=True)
class Chunk:
    """``/output``: a numbered chunk of the job's output at a byte offset; ``truncated_before_seq`` says the
    host dropped the chunks before that one (its paged log let them go)."""

    optional: ClassVar[bool] = False
    seq: int
    offset: int
    data: str
    truncated_before_seq: int | None

    @classmethod
    def of(cls, body: Body) -> Self:
        seq, offset, data = body.get("seq"), body.get("offset"), body.get("data")
        truncated = body.get("truncated_before_seq")
        if not isinstance(seq, int) or not isinstance(offset, int) or not isinstance(data, str):
            raise FieldError("seq", "a chunk is {seq, offset, data}")
        if truncated is not None and not isinstance(truncated, int):
            raise FieldError("truncated_before_seq", "truncated_before_seq is a chunk number")
        fields.sequence(seq)
        fields.whole(offset, "offset")
        fields.chunk_data(data)
        if truncated is not None:
            fields.sequence(truncated, "truncated_before_seq")
        return cls(seq, offset, data, truncated)


def _device_ids(body: Body, name: str) -> tuple[str, ...]:
    """The list of device ids ``body[name]`` (none when absent), each checked."""
    sent = body.get(name, [])
    if not isinstance(sent, list) or len(sent) > MAX_POWERED_OFF:
        raise FieldError(name, f"{name} is a list of at most {MAX_POWERED_OFF} device ids")
    return tuple(fields.text(device, name, fields.MAX_NAME) for device in sent)


@dataclass(frozen=True, slots=True)
class Finish:
    """``/finish``: the job's exit status, its accounting when the runner has it, an ``outcome`` when
    the runner, not the command, ended it, the job's boards it ``powered_off`` at its end (a runner that
    speaks ``recovery``), and those it had to switch off and could not, their power silent
    (``power_unknown``, a runner that speaks ``power_unknown``)."""

    optional: ClassVar[bool] = False
    exit_status: int
    accounting: dict[str, Any] | None
    outcome: str | None
    powered_off: tuple[str, ...] = ()
    power_unknown: tuple[str, ...] = ()

    @classmethod
    def of(cls, body: Body) -> Self:
        status, accounting, outcome = body.get("exit_status"), body.get("accounting"), body.get("outcome")
        devices, unknown = _device_ids(body, "powered_off"), _device_ids(body, "power_unknown")
        if not isinstance(status, int) or isinstance(status, bool):
            raise FieldError("exit_status", "exit_status must be a whole number")
        if accounting is not None and not isinstance(accounting, dict):
            raise FieldError("accounting", "accounting must be an object")
        fields.exit_status(status)
        if accounting is not None:
            fields.figures(accounting, "accounting")
        if outcome is not None and outcome not in OUTCOMES:
            raise FieldError("outcome", f"outcome must be one of {sorted(OUTCOMES)}")
        return cls(status, accounting, outcome, devices, unknown)


@dataclass(frozen=True, slots=True)
class HolderSettings:
    """``/reservations/{id}/settings``: the devices-file settings of a device, for a reservation's holder."""

    optional: ClassVar[bool] = False
    device: str
    settings: dict[str, str]

    @classmethod
    def of(cls, body: Body) -> Self:
        return cls(
            fields.text(body.get("device"), "device", fields.MAX_NAME), fields.settings(body.get("settings"))
        )


@dataclass(frozen=True, slots=True)
class DevicePowerAnswer:
    """``/device-requests/{id}``: a person's power request done, with the ``state`` the switch then read;
    or not, with the ``failure`` and a ``message`` saying why."""

    optional: ClassVar[bool] = False
    state: PowerState | None
    failure: PowerFailure | None
    message: str

    @classmethod
    def of(cls, body: Body) -> Self:
        failure = _one_of(body.get("failure"), "failure", PowerFailure, optional=True)
        if failure is not None and failure not in AGENT_FAILURES:
            allowed = ", ".join(sorted(member.value for member in AGENT_FAILURES))
            raise FieldError("failure", f"failure must be one of {allowed}")
        state = _one_of(body.get("state"), "state", PowerState, optional=failure is not None)
        message = body.get("message", "")
        message = "" if message == "" else fields.text(message, "message", MAX_MESSAGE)
        return cls(state, failure, message)


E = TypeVar("E", PowerState, PowerFailure)


def _one_of(value: object, field: str, kind: type[E], *, optional: bool) -> E | None:
    """``value`` as a member of ``kind`` (None when it is missing or null and ``optional``)."""
    if value is None and optional:
        return None
    for member in kind:
        if member.value == value:
            return member
    raise FieldError(field, f"{field} must be one of {', '.join(member.value for member in kind)}")
