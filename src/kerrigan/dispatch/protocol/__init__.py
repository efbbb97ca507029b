"""The runner protocol's server side (``/api/runner/v1/``): registration, heartbeats, offers, job life.

Each runner host authenticates with its own bearer token, checked before anything else of a call is read
(:mod:`~kerrigan.dispatch.protocol.authentication`, :mod:`~kerrigan.dispatch.protocol.routes`). A runner host
is not trusted to send anything at all: a call carries at most ``MAX_BODY_BYTES`` (413 past it), and every
field is range-checked as its typed request is read (:mod:`~kerrigan.dispatch.protocol.requests`) before
anything is stored, a field out of range answered 400 naming it, the job left as it was.

What a host says of itself is :mod:`~kerrigan.dispatch.protocol.hosts`, the long poll
:mod:`~kerrigan.dispatch.protocol.polls`, a job's life :mod:`~kerrigan.dispatch.protocol.jobs` (its token
:mod:`~kerrigan.dispatch.protocol.credentials`), and a reservation holder's settings
:mod:`~kerrigan.dispatch.protocol.reservations`.
"""

from __future__ import annotations

from kerrigan.dispatch.protocol.requests import ProtocolError, error_response, read_bounded
from kerrigan.dispatch.protocol.routes import RunnerProtocol

__all__ = ["ProtocolError", "RunnerProtocol", "error_response", "read_bounded"]
