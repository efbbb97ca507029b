"""A network PDU stand-in: a Gude Expert Power Control's HTTP interface on loopback, with faults on demand.

It speaks what labgrid's ``labgrid.driver.power.gude`` backend sends and parses, so that labgrid's own code
runs against it: ``GET /switch.html?cmd=1&p=<outlet>&s=<0|1>`` switches an outlet, and ``GET /`` answers the
status page, one table row per outlet whose line reads ``Power Port <n></td>`` and ``ON`` or ``OFF``. Gude
was chosen among labgrid's HTTP models because it is the one DESIGN.md's devices file names, its protocol is
two plain GETs (no JSON-RPC as shelly_gen2, no hard-coded login in the query as netio, no URL template in the
host as simplerest), and its ``PORT`` constant lets labgrid's driver reach it on any port.

Real units may ask for HTTP basic auth; labgrid's backend sends none of its own, but ``requests`` sends the
user and password of a host written ``user:password@host``. With ``credentials`` set the stand-in answers
``401`` without them, so a test can show they reach the PDU (and, elsewhere, that they reach nothing else).

Outlets are numbered from 1. ``on_switch`` subscribes to an outlet so that a simulated board powers on and
off with it (``kerrigan.testing.board``). Faults: ``fail`` (an error status), ``hang`` (no answer until
``behave``), ``slow`` (each answer delayed). labgrid's backend calls ``requests`` without a timeout, so a
hanging PDU hangs its caller: whoever calls it must bound the call itself.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import enum
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from aiohttp import web

MODEL = "gude"  # the labgrid model (``labgrid.driver.power.gude``) whose protocol this speaks

OutletListener = Callable[[bool], None]


class Fault(enum.Enum):
    """How the stand-in answers every request until told otherwise."""

    NONE = "none"
    ERROR = "error"  # answers ``error_status`` and switches nothing
    HANG = "hang"  # answers nothing until ``behave()``; then answers as usual
    SLOW = "slow"  # answers as usual after ``delay_s``


@dataclass(frozen=True, slots=True)
class PduRequest:
    """One request the stand-in received, as it arrived."""

    method: str
    path_qs: str
    authorization: str | None  # the ``Authorization`` header, if any
    status: int | None  # what it answered; ``None`` while it hangs or when the caller went away


class GudePdu:
    """A Gude PDU with ``outlets`` outlets (all off) listening on ``127.0.0.1``; ``start`` it, then point
    labgrid at ``host`` and ``port``."""

    def __init__(self, outlets: int = 8, *, credentials: tuple[str, str] | None = None) -> None:
        if outlets < 1:
            raise ValueError("a PDU has at least one outlet")
        self.outlets = outlets
        self.credentials = credentials
        self.states = dict.fromkeys(range(1, outlets + 1), False)
        self.switches: list[tuple[int, bool]] = []  # every switch command applied, in order
        self.requests: list[PduRequest] = []
        self.fault = Fault.NONE
        self.error_status = 500
        self.delay_s = 0.0
        self.port = 0
        self._listeners: dict[int, list[OutletListener]] = {}
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None

    # -- the address labgrid is given ------------------------------------------------------------

    @property
    def host(self) -> str:
        """The ``host`` for labgrid's backend: with the credentials in it when the PDU asks for them."""
        if self.credentials is None:
            return "127.0.0.1"
        user, password = self.credentials
        return f"{user}:{password}@127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- outlets ---------------------------------------------------------------------------------

    def is_on(self, index: int) -> bool:
        return self.states[self._outlet(index)]

    def switch(self, index: int, on: bool) -> None:
        """Switch an outlet as its button on the unit would; its listeners hear of a change."""
        index = self._outlet(index)
        self.switches.append((index, on))
        if self.states[index] == on:
            return
        self.states[index] = on
        for listener in list(self._listeners.get(index, ())):
            listener(on)

    def on_switch(self, index: int, listener: OutletListener) -> None:
        """Call ``listener(on)`` whenever outlet ``index`` changes state (on the stand-in's event loop)."""
        self._listeners.setdefault(self._outlet(index), []).append(listener)

    def _outlet(self, index: int) -> int:
        if not 1 <= index <= self.outlets:
            raise ValueError(f"outlet {index} is not one of 1..{self.outlets}")
        return index

    # -- faults ----------------------------------------------------------------------------------

    def fail(self, status: int = 500) -> None:
        """Answer every request with ``status`` (and switch nothing) until ``behave()``."""
        self.fault, self.error_status = Fault.ERROR, status

    def hang(self) -> None:
        """Answer nothing until ``behave()``."""
        self.fault = Fault.HANG
        self._released.clear()

    def slow(self, seconds: float) -> None:
        """Answer every request ``seconds`` late until ``behave()``."""
        self.fault, self.delay_s = Fault.SLOW, seconds

    def behave(self) -> None:
        """Answer as a healthy PDU again; requests left hanging are answered now."""
        self.fault = Fault.NONE
        self._released.set()

    # -- serving ---------------------------------------------------------------------------------

    async def start(self, port: int = 0) -> None:
        """Listen on ``127.0.0.1:port`` (any free port when 0)."""
        app = web.Application()
        app.router.add_get("/", self._status_page)
        app.router.add_get("/switch.html", self._switch_page)
        # A hanging request must not hold the shutdown for aiohttp's default minute.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        """Stop listening; requests still hanging are released first."""
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> GudePdu:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def _status_page(self, request: web.Request) -> web.Response:
        return await self._answer(request, switch=None)

    async def _switch_page(self, request: web.Request) -> web.Response:
        # Gude's interface: cmd=1 switches outlet p to state s; it answers with the status page.
        try:
            command, index, state = (int(request.query[key]) for key in ("cmd", "p", "s"))
        except (KeyError, ValueError):
            raise web.HTTPBadRequest(text="cmd, p and s must be numbers") from None
        if command != 1 or state not in (0, 1) or not 1 <= index <= self.outlets:
            raise web.HTTPBadRequest(text="no such command, outlet or state")
        return await self._answer(request, switch=(index, state == 1))

    async def _answer(self, request: web.Request, *, switch: tuple[int, bool] | None) -> web.Response:
        authorization = request.headers.get("Authorization")
        recorded = len(self.requests)
        self.requests.append(PduRequest(request.method, request.path_qs, authorization, None))
        response = await self._respond(authorization, switch)
        self.requests[recorded] = PduRequest(request.method, request.path_qs, authorization, response.status)
        return response

    async def _respond(self, authorization: str | None, switch: tuple[int, bool] | None) -> web.Response:
        if self.fault is Fault.HANG:
            await self._released.wait()
        elif self.fault is Fault.SLOW:
            await asyncio.sleep(self.delay_s)
        elif self.fault is Fault.ERROR:
            return web.Response(status=self.error_status, text="error\n")
        if not self._authorized(authorization):
            return web.Response(
                status=401, text="unauthorized\n", headers={"WWW-Authenticate": 'Basic realm="Gude EPC"'}
            )
        if switch is not None:
            self.switch(*switch)
        return web.Response(text=self._page(), content_type="text/html")

    def _authorized(self, header: str | None) -> bool:
        if self.credentials is None:
            return True
        if header is None or not header.startswith("Basic "):
            return False
        try:
            given = base64.b64decode(header.removeprefix("Basic "), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        return given == ":".join(self.credentials)

    def _page(self) -> str:
        # One row per line: labgrid's backend reads the line that holds "Power Port <n></td>".
        rows = "\n".join(
            f"<tr><td>Power Port {index}</td><td>{'ON' if on else 'OFF'}</td></tr>"
            for index, on in self.states.items()
        )
        return (
            "<html><head><title>Expert Power Control</title></head><body>\n"
            f"<table>\n{rows}\n</table>\n</body></html>\n"
        )
