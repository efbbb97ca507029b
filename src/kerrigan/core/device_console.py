"""A board's console in a person's hands (``GET /api/v1/devices/{id}/console``, ``kerrigan console``): who
may type, who may only watch, and the bounds that keep one person from holding the console for others.

The server cannot call an agent: a console request (action :data:`ACTION`) is handed to the device's host in
its long poll (``device_requests``, to a host that announced :data:`CAPABILITY`), and the agent then opens a
WebSocket to the server, bridged there to the people's WebSockets. Frames (docs/api.md): binary frames are
the console's bytes (board to person) and keystrokes (person to board); text frames are small JSON objects,
``{"type": "open"|"notice"|"end", ...}``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

from kerrigan.core.device_power import Holder
from kerrigan.core.roles import Principal

CAPABILITY: Final = "device_console"
ACTION: Final = "console"
AGENT_WITHIN_S: Final = 10.0  # how long a person's WebSocket waits for the agent's to connect
IDLE_S: Final = 900  # KERRIGAN_CONSOLE_IDLE_S's default: a session without a keystroke this long ends
HOLDER_CHECK_S: Final = 1.0  # how often a session looks whether its device is still held as it was
# A watcher that lags this far behind the board (bytes queued for its WebSocket) is cut off: a WebSocket
# that never reads must not hold the console for others.
WATCHER_QUEUE_BYTES: Final = 1 << 20
KEYSTROKE_FRAME_MAX: Final = 4096  # a larger frame of keystrokes is refused (the WebSocket is closed)
KEYSTROKES_QUEUED: Final = 64  # frames of keystrokes waiting for the board; past this they are dropped
MAX_WATCHERS: Final = 16  # people on one device's console at once; one more is refused (409 too_many)
CLOSE_REASON_BYTES: Final = 120  # a WebSocket's close frame holds at most 123 bytes of reason


class Access(enum.StrEnum):
    """What a person may do with a console."""

    READ_WRITE = "read-write"
    READ_ONLY = "read-only"


class Frame(enum.StrEnum):
    """The ``type`` of a text frame."""

    OPEN = "open"  # to a person, first: {"device", "read_only"}
    NOTICE = "notice"  # {"message"}: a keystroke refused or dropped, the writer's seat taken
    END = "end"  # {"reason"}: the session ended, the WebSocket closes after it


def console_access(
    principal: Principal, device_id: str, holder: Holder, owners: Sequence[str]
) -> Access | str:
    """What ``principal`` may do with ``device_id``'s console, or why they may not (a sentence naming what
    they lack): the holder of its reservation and System Admins type, its pool's owners watch."""
    if principal.admin:
        return Access.READ_WRITE
    login = principal.login.lower()
    if holder.login is not None and holder.login.lower() == login:
        return Access.READ_WRITE
    if login in {owner.lower() for owner in owners}:
        return Access.READ_ONLY
    return f"you do not hold a reservation of {device_id} and are not an owner of its pool"


def close_reason(reason: str) -> bytes:
    """``reason`` as a WebSocket's close frame carries it: UTF-8, at most :data:`CLOSE_REASON_BYTES` bytes,
    cut before a character that does not fit whole (a close reason that is not valid UTF-8 fails the
    connection at the other end instead of closing it)."""
    return reason.encode()[:CLOSE_REASON_BYTES].decode("utf-8", "ignore").encode()


def watchers_refusal(device_id: str, watchers: int) -> str | None:
    """Why one more person may not join ``device_id``'s console that ``watchers`` people have open (None:
    they may)."""
    if watchers < MAX_WATCHERS:
        return None
    return (
        f"the console of {device_id} has {watchers} watchers, the most one console may have at once "
        f"({MAX_WATCHERS}): try again once one has left"
    )
