"""A board's power in a person's hands (``POST /api/v1/devices/{id}/power``, ``kerrigan power``): the
actions, who may switch, what a request goes through and how its agent's answer is worded.

The server cannot call an agent: a request waits in the store until the device's host takes it in its long
poll (``device_requests``, for a host that announced :data:`CAPABILITY`), and its agent reports the outcome.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from kerrigan.core.roles import Principal

CAPABILITY: Final = "device_power"
# How long the API waits for the agent's answer: the wiring's timeout_s is the agent's, unknown here.
ANSWER_WITHIN_S: Final = 60.0
MAX_MESSAGE: Final = 500  # an agent's words on a failure, as stored
# A person's requests waiting for their agents' answers at once; one more is refused (409 too_many): each
# holds an API call and a row for up to ANSWER_WITHIN_S.
MAX_PENDING_PER_PERSON: Final = 4


class PowerAction(enum.StrEnum):
    """What a person asks of a board's power."""

    CYCLE = "cycle"
    ON = "on"
    OFF = "off"
    STATUS = "status"


class PowerState(enum.StrEnum):
    """The board's power after the action, as its switch said (``unknown``: it cannot tell)."""

    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


class RequestState(enum.StrEnum):
    """A request's way: ``waiting`` for its host's poll, ``sent`` to its agent, then answered ``done`` or
    ``failed``, or ``expired`` when no answer came in time."""

    WAITING = "waiting"
    SENT = "sent"
    DONE = "done"
    FAILED = "failed"
    EXPIRED = "expired"


PENDING: Final = frozenset({RequestState.WAITING, RequestState.SENT})


class PowerFailure(enum.StrEnum):
    """Why an agent could not do it."""

    NO_POWER = "no_power"  # the devices file gives the device no power wiring (or does not name it)
    BUSY = "busy"  # a job holds the board on the host
    POWER_FAILED = "power_failed"  # the switch failed or did not answer within the wiring's timeout_s
    NOT_HOLDER = "not_holder"  # the person held the device no more when its agent was to take the request


# What an agent may answer: not_holder is the server's own refusal, as the host's poll takes a request.
AGENT_FAILURES: Final = frozenset({PowerFailure.NO_POWER, PowerFailure.BUSY, PowerFailure.POWER_FAILED})


class ActionError(ValueError):
    """The body's ``action`` is not one of :class:`PowerAction`."""


def read_action(value: object) -> PowerAction:
    """The action ``value`` names; :class:`ActionError` saying what it may be otherwise."""
    if isinstance(value, str):
        for action in PowerAction:
            if action.value == value:
                return action
    allowed = ", ".join(action.value for action in PowerAction)
    raise ActionError(f"action must be one of {allowed}")


def power_state(on: bool | None) -> PowerState:
    """The state a switch's status reads as (None: it cannot say)."""
    if on is None:
        return PowerState.UNKNOWN
    return PowerState.ON if on else PowerState.OFF


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a device now: a person's reservation (their login), a job (its id), or nobody."""

    login: str | None = None
    job: int | None = None


def refusal(principal: Principal, device_id: str, holder: Holder) -> str | None:
    """Why ``principal`` may not switch ``device_id``'s power (None: they may): the person whose reservation
    holds it may, and System Admins."""
    if principal.admin:
        return None
    if holder.login is not None and holder.login.lower() == principal.login.lower():
        return None
    return f"you do not hold a reservation of {device_id}"


def refusal_when_taken(
    login: str, admin: bool, device_id: str, holder: Holder
) -> tuple[PowerFailure, str] | None:
    """Why a request ``login`` made must not reach the agent now that its host takes it (None: it may):
    asked while they held ``device_id``, it waited for the host's poll, and meanwhile a job may have taken
    the device (``busy``: its power is the job's) or their reservation may have ended (``not_holder``)."""
    if holder.job is not None:
        return PowerFailure.BUSY, (
            f"job {holder.job} took {device_id} before its agent got the request: its power is the job's"
        )
    if refusal(Principal(login, admin=admin), device_id, holder) is not None:
        return PowerFailure.NOT_HOLDER, (
            f"{login} no longer holds {device_id}: the reservation ended before its agent got the request"
        )
    return None


def pending_refusal(login: str, pending: int) -> str | None:
    """Why ``login``, with ``pending`` requests still waiting for an answer, may not ask one more (None:
    they may)."""
    if pending < MAX_PENDING_PER_PERSON:
        return None
    return (
        f"{login} has {pending} power requests waiting for their agents' answers, the most one person may "
        f"have at once ({MAX_PENDING_PER_PERSON}): wait for one to end"
    )


def outcome_text(state: RequestState, power: PowerState | None, message: str) -> str:
    """A request's outcome as the audit log says it: ``on``, ``failed: <why>``, ``expired``."""
    if state is RequestState.DONE and power is not None:
        return power.value
    if state is RequestState.FAILED:
        return f"failed: {message}" if message else "failed"
    return state.value
