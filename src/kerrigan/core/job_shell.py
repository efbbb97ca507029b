"""``kerrigan shell JOB`` (DESIGN.md, "Boards in a person's hands"): a shell in a held job's sandbox on its
runner host, for the person holding its hold while it lasts, and for System Admins.

The server cannot call an agent: the request is handed to the job's host in its long poll (``job_shells``,
to a host that announced :data:`~kerrigan.core.runner_protocol.JOB_SHELL`), whose agent opens a WebSocket
back to the server, bridged there to the person's (frames as a console's:
:mod:`kerrigan.core.device_console`). Who may, and why not, are decided here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from kerrigan.core.reservations import ReservationState
from kerrigan.core.roles import Principal


@dataclass(frozen=True, slots=True)
class HoldOfJob:
    """One reservation holding a job's board: whose, its state, and when it ends (while active)."""

    login: str
    state: ReservationState
    ends_at: datetime | None

    def lasts(self, now: datetime) -> bool:
        """Whether it holds the board at ``now``: granted, not ended and not past its end."""
        return self.state is ReservationState.ACTIVE and (self.ends_at is None or self.ends_at > now)


@dataclass(frozen=True, slots=True)
class ShellRefusal:
    """Why no shell: the HTTP status and error code, and the words for the person."""

    status: int
    code: str
    message: str


def shell_holder(holds: Sequence[HoldOfJob], now: datetime) -> str | None:
    """The login of the person whose hold of the job lasts at ``now`` (None: no hold lasts)."""
    return next((hold.login for hold in holds if hold.lasts(now)), None)


def shell_refusal(
    principal: Principal, job_pk: int, holds: Sequence[HoldOfJob], now: datetime
) -> ShellRefusal | None:
    """Why ``principal`` may not open a shell in job ``job_pk``'s sandbox now (None: they may). A person
    who holds none of its holds is a 403 naming what they lack; a job no hold holds now a 409."""
    holder = shell_holder(holds, now)
    mine = [hold for hold in holds if hold.login.lower() == principal.login.lower()]
    if holder is not None and (principal.admin or holder.lower() == principal.login.lower()):
        return None
    if not principal.admin and not mine:
        return ShellRefusal(
            403,
            "forbidden",
            f"{principal.login} may not open a shell in job {job_pk}'s sandbox: you do not hold its board "
            "(Hold board, `kerrigan reserve --job`); the person holding it and System Admins may",
        )
    if any(hold.state is ReservationState.WAITING for hold in mine):
        return ShellRefusal(
            409, "not_held", f"your hold of job {job_pk}'s board waits for the board: try again once granted"
        )
    return ShellRefusal(
        409,
        "not_held",
        f"job {job_pk} is not held now: its sandbox is kept only while a hold of its board lasts "
        f"(Hold board, `kerrigan reserve --job {job_pk}`)",
    )
