"""Faults injected per route: an error answer instead of handling, an error after acting, a dropped
connection, a delay; for exercising what a client does when GitHub misbehaves."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from kerrigan.testing.github.errors import default_message, error_response


@dataclass
class Fault:
    """One injected fault; ``hits`` counts the requests it was applied to."""

    method: str
    pattern: re.Pattern[str]
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    message: str | None = None
    act_first: bool = False
    drop: bool = False
    delay_s: float = 0.0
    times: int | None = 1  # None: every matching request
    probability: float = 1.0
    hits: int = 0

    @property
    def spent(self) -> bool:
        """Whether the fault has been applied as many times as it was told to."""
        return self.times is not None and self.hits >= self.times

    def matches(self, method: str, path: str) -> bool:
        """Whether a request with this method and path is one the fault is for (spent or not)."""
        return self.method == method.upper() and self.pattern.search(path) is not None

    def answer(self) -> web.Response | None:
        """The error answer to send, or ``None`` when the fault is a drop or a delay alone."""
        if self.drop or self.status is None:
            return None
        return error_response(self.status, self.message or default_message(self.status), self.headers)


class Faults:
    """The faults injected into one stand-in."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._faults: list[Fault] = []

    def inject(
        self,
        method: str,
        path_pattern: str,
        *,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
        message: str | None = None,
        act_first: bool = False,
        drop: bool = False,
        delay_s: float = 0.0,
        times: int | None = 1,
        probability: float = 1.0,
    ) -> Fault:
        """Make matching requests (``path_pattern`` is searched in the path) fail as described.

        ``status``: answer it (with ``headers`` and a GitHub body carrying ``message``) instead of handling;
        ``act_first``: handle the request, then answer ``status`` or drop; ``drop``: close the connection
        without an answer; ``delay_s``: wait before handling. ``times=None`` applies to every match;
        ``probability`` < 1 applies to matches picked at random (from the stand-in's seed).
        """
        if status is not None and drop:
            raise ValueError("a fault either answers a status or drops the connection")
        if status is None and not drop and not delay_s:
            raise ValueError("a fault needs a status, drop=True or a delay")
        if act_first and status is None and not drop:
            raise ValueError("act_first needs a status or drop=True to follow the real answer")
        if not 0.0 < probability <= 1.0:
            raise ValueError("probability must be in (0, 1]")
        fault = Fault(
            method.upper(),
            re.compile(path_pattern),
            status,
            dict(headers or {}),
            message,
            act_first,
            drop,
            delay_s,
            times,
            probability,
        )
        self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Forget every fault."""
        self._faults.clear()

    def __iter__(self) -> Iterator[Fault]:
        """Every fault injected since the last :meth:`clear`, spent or not, in order."""
        return iter(list(self._faults))

    @property
    def active(self) -> list[Fault]:
        """The faults not yet spent, in the order they were injected."""
        return [fault for fault in self._faults if not fault.spent]

    def pick(self, method: str, path: str) -> Fault | None:
        """The fault to apply to this request, counted as a hit; the first injected that matches wins."""
        for fault in self._faults:
            if fault.spent or not fault.matches(method, path):
                continue
            if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                continue
            fault.hits += 1
            return fault
        return None
