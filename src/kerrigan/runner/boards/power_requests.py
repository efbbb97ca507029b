"""What a job asks of its boards' power through ``KERRIGAN_DEVICE_SOCKET``, and what it is answered: one JSON
object a line each way.

A request: ``{"op": "cycle" | "on" | "off" | "status", "role": "dut"}`` (``role`` only where the job holds
more than one board with power: a gang's). An answer: ``{"ok": true, "state": "on" | "off" | "unknown"}``
or ``{"ok": false, "error": "one line"}``. A line is at most :data:`LONGEST_REQUEST` bytes. Shared by the
agent (:mod:`kerrigan.runner.boards.power_socket`) and ``kerrigan device power``, so only the standard
library is used: the job's command starts it in a few tens of milliseconds.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Final

LONGEST_REQUEST: Final = 1024  # bytes of a request line, its line end included
SOCKET_NAME: Final = "device.sock"


class PowerOp(enum.Enum):
    """What a job may do to its board's power."""

    CYCLE = "cycle"
    ON = "on"
    OFF = "off"
    STATUS = "status"


class PowerState(enum.Enum):
    """The board's power as the switch says it (``unknown``: a command switch without ``status``)."""

    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


class RequestError(ValueError):
    """A request line that is not one: one line saying why."""


@dataclass(frozen=True, slots=True)
class PowerRequest:
    op: PowerOp
    role: str | None = None

    def line(self) -> bytes:
        """The request as sent."""
        body: dict[str, str] = {"op": self.op.value}
        if self.role is not None:
            body["role"] = self.role
        return json.dumps(body).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> PowerRequest:
        """The request ``line`` holds; :class:`RequestError` when it holds none."""
        try:
            body = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            raise RequestError("a request is one JSON object on a line") from None
        if not isinstance(body, dict):
            raise RequestError("a request is one JSON object on a line")
        unknown = sorted(set(body) - {"op", "role"})
        if unknown:
            raise RequestError(f"unknown key {unknown[0]!r} (a request has op and role)")
        try:
            op = PowerOp(body.get("op"))
        except ValueError:
            raise RequestError("op must be one of cycle, on, off, status") from None
        role = body.get("role")
        if role is not None and (not isinstance(role, str) or not role or len(role) > 64):
            raise RequestError("role must be a role's name")
        return cls(op, role)


@dataclass(frozen=True, slots=True)
class PowerAnswer:
    state: PowerState | None = None  # set when ok
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> bytes:
        """The answer as sent."""
        if self.error is not None:
            return json.dumps({"ok": False, "error": self.error}).encode() + b"\n"
        assert self.state is not None
        return json.dumps({"ok": True, "state": self.state.value}).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> PowerAnswer:
        """The answer ``line`` holds; :class:`RequestError` when it holds none."""
        try:
            body = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            raise RequestError("the agent's answer is not JSON") from None
        if not isinstance(body, dict):
            raise RequestError("the agent's answer is not a JSON object")
        if body.get("ok") is True:
            try:
                return cls(state=PowerState(body.get("state")))
            except ValueError:
                raise RequestError(f"the agent answered an unknown state {body.get('state')!r}") from None
        return cls(error=str(body.get("error") or "the agent refused without saying why"))
