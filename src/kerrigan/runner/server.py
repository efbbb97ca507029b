"""The agent's side of the runner protocol: HTTP calls to ``/api/runner/v1/`` with the host's token.

Every call the agent makes may be repeated safely (the server answers a repeat with the state it left), so a
call that fails on the way (connection refused, a timeout, a 5xx while the server restarts) is retried with
jittered exponential backoff by ``stamina``. A 4xx is the agent's own mistake and is raised at once as
:class:`ServerRefused` with the server's error code.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, Final
from urllib.parse import quote, urlencode

import aiohttp
import stamina

from kerrigan.core.runner_protocol import HELD_WORKSPACES, JOB_SHELL, POWER_UNKNOWN, PROTOCOL_VERSIONS

log = logging.getLogger(__name__)

RUNNER_CAPABILITIES: Final = frozenset(
    {
        "gate_jobs",
        "log_pages",
        "withdraw",
        "source_unavailable",
        "holder_settings",
        "board_faults",
        "recovery",
        "device_power",
        HELD_WORKSPACES,
        "device_console",
        JOB_SHELL,
        "runner_lost",
        POWER_UNKNOWN,
    }
)
RETRY_TIMEOUT_S: Final = 120.0  # how long one call keeps retrying before the agent's loop sees the failure


class ServerUnavailable(Exception):  # noqa: N818 -- a state the agent waits out, not a fault of its own
    """The server could not be reached or answered 5xx; retried until the retry budget ran out."""


class ServerRefused(Exception):  # noqa: N818 -- the server's word
    """The server answered 4xx: ``status``, its error ``code`` and message, and the whole body."""

    def __init__(self, status: int, code: str, message: str, body: Mapping[str, Any]) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.body = status, code, dict(body)


class TokenRefused(ServerRefused):
    """The server answered 401: this host's token was revoked or replaced (or never made). No call of the
    agent can succeed any more, so the agent stops."""


@dataclass(frozen=True, slots=True)
class Registration:
    """What registering agreed on, and the devices the server says this host drives."""

    protocol: int
    capabilities: frozenset[str]
    lease_ttl_s: float
    poll_timeout_s: float
    devices: tuple[Mapping[str, Any], ...]


class ServerClient:
    """Calls to the server as one runner host."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, token: str) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/") + "/api/runner/v1"
        self._headers = {"Authorization": f"Bearer {token}"}

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = 30.0,
        retry_timeout_s: float = RETRY_TIMEOUT_S,
        data: bytes | Callable[[], BinaryIO] | None = None,
    ) -> dict[str, Any]:
        """One call, retried while the server is unreachable; the JSON answer. ``data`` is sent as the
        body instead of ``body``'s JSON: bytes, or what opens a file anew for each try (streamed)."""
        try:
            async for attempt in stamina.retry_context(
                on=(aiohttp.ClientConnectionError, TimeoutError, ServerUnavailable),
                attempts=None,
                timeout=retry_timeout_s,
                wait_max=10.0,
            ):
                with attempt:
                    return await self._once(method, path, body, timeout_s, data)
        except (aiohttp.ClientConnectionError, TimeoutError) as err:
            raise ServerUnavailable(f"{method} {path}: {err or type(err).__name__}") from err
        raise AssertionError("unreachable: stamina either returns or raises")  # pragma: no cover

    async def _once(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        timeout_s: float,
        data: bytes | Callable[[], BinaryIO] | None,
    ) -> dict[str, Any]:
        with contextlib.ExitStack() as opened:
            sent: Any = data
            if callable(data):
                sent = opened.enter_context(data())
            raw = {"data": sent} if data is not None else {"json": body}
            return await self._answer(method, path, raw, timeout_s)

    async def _answer(self, method: str, path: str, raw: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        async with self.http.request(
            method,
            self.base_url + path,
            **raw,
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as response:
            try:
                answer = await response.json(content_type=None)
            except ValueError:
                answer = {}
            if response.status >= 500:
                raise ServerUnavailable(f"{method} {path}: {response.status}")
            if response.status >= 400 or not isinstance(answer, dict):
                found = answer if isinstance(answer, dict) else {}
                error = found.get("error") or {}
                refused = TokenRefused if response.status == 401 else ServerRefused
                raise refused(
                    response.status,
                    str(error.get("code", "error")),
                    str(error.get("message", response.reason)),
                    found,
                )
            return answer

    async def register(self, resources: Mapping[str, int], devices: Mapping[str, str]) -> Registration:
        """Negotiate a protocol version and capabilities; learn this host's devices."""
        answer = await self.call(
            "POST",
            "/register",
            {
                "protocol": list(PROTOCOL_VERSIONS),
                "capabilities": sorted(RUNNER_CAPABILITIES),
                "resources": dict(resources),
                "devices": dict(devices),
            },
        )
        return Registration(
            int(answer["protocol"]),
            frozenset(answer.get("capabilities", [])),
            float(answer.get("lease_ttl_s", 60)),
            float(answer.get("poll_timeout_s", 25)),
            tuple(answer.get("devices", [])),
        )

    async def heartbeat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Resources, device states, jobs waiting on this host and its health; renews the leases."""
        return await self.call("POST", "/heartbeat", body)

    async def poll(self, wait_s: float) -> dict[str, Any]:
        """Offers, and jobs to cancel or withdraw, waiting up to ``wait_s`` for something."""
        return await self.call("GET", f"/poll?wait={int(wait_s)}", timeout_s=wait_s + 15)

    async def holder_settings(self, reservation_id: str, device_id: str, settings: Mapping[str, str]) -> bool:
        """Report a reserved device's settings for the person holding it; whether they were kept."""
        answer = await self.call(
            "POST",
            f"/reservations/{quote(reservation_id, safe='')}/settings",
            {"device": device_id, "settings": dict(settings)},
        )
        return bool(answer.get("recorded"))

    async def device_request(self, request_id: str, body: Mapping[str, Any]) -> bool:
        """Report the outcome of a person's power request; whether the server still waited for it."""
        answer = await self.call("POST", f"/device-requests/{quote(request_id, safe='')}", body)
        return bool(answer.get("recorded"))

    async def console_socket(self, request_id: str) -> aiohttp.ClientWebSocketResponse:
        """The WebSocket of a person's console request, bridged by the server to the person's."""
        return await self.http.ws_connect(
            f"{self.base_url}/device-requests/{quote(request_id, safe='')}/console",
            headers=self._headers,
            heartbeat=30.0,
            timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
        )

    async def shell_socket(self, request_id: str) -> aiohttp.ClientWebSocketResponse:
        """The WebSocket of a person's shell request (``kerrigan shell``), bridged by the server to theirs."""
        return await self.http.ws_connect(
            f"{self.base_url}/job-shells/{quote(request_id, safe='')}",
            headers=self._headers,
            heartbeat=30.0,
            timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
        )

    async def results(
        self, job_id: str, path: str, data: bytes, size: int, workspace: str, *, withheld: bool = False
    ) -> dict[str, Any]:
        """Send one results file of the job (its first bytes, ``size`` in all); its counts. ``withheld``:
        send no bytes, only that the file is not sent (it would show a secret the server cannot hide)."""
        query = urlencode(
            {"path": path, "size": size, "workspace": workspace} | ({"withheld": 1} if withheld else {})
        )
        return await self.call(
            "POST", f"/jobs/{job_id}/results?{query}", data=data, timeout_s=120.0, retry_timeout_s=60.0
        )

    async def artifact(
        self, job_id: str, path: str, opener: Callable[[], BinaryIO] | None, size: int
    ) -> dict[str, Any]:
        """Upload one file of the job, streamed from what ``opener`` opens (anew for each try); ``opener``
        None declares it over the limit."""
        query = urlencode({"path": path, "size": size} | ({} if opener is not None else {"skipped": 1}))
        return await self.call(
            "POST",
            f"/jobs/{job_id}/artifacts?{query}",
            data=opener if opener is not None else b"",
            timeout_s=600.0,
            retry_timeout_s=120.0,
        )

    async def job(self, job_id: str, action: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``accept``, ``refuse``, ``start``, ``output``, ``finish`` or ``withdrawn`` for one job."""
        return await self.call("POST", f"/jobs/{job_id}/{action}", body or {})
