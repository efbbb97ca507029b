"""Simulated boards wired to a runner agent as an operator wires real ones: a devices file entry per board,
its power an outlet of the PDU stand-in and its console the board's socket, both through the commands of
:mod:`kerrigan.testing.wires` (so that neither labgrid nor pyserial is needed). ``kerrigan demo`` and the
lab soak (``benchmarks/soak_lab_week.py``) wire their boards so."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kerrigan.testing.board import SimulatedBoard

WIRES = (sys.executable, "-m", "kerrigan.testing.wires")


def wired_device(
    pdu_url: str, outlet: int, board: SimulatedBoard, *, boot_timeout_s: float, off_s: float = 1
) -> dict[str, Any]:
    """The devices file entry of ``board`` (started with ``serve_socket``) on ``outlet`` of the PDU stand-in
    at ``pdu_url``: power by command, console by command, boot waited for up to ``boot_timeout_s``."""
    if board.socket_url is None:
        raise ValueError("start the board with serve_socket=True: its console is wired by its socket")
    switch = [*WIRES, "outlet", pdu_url, str(outlet)]
    return {
        "power": {
            "command": {"on": [*switch, "on"], "off": [*switch, "off"], "status": [*switch, "status"]},
            "off_s": off_s,
            "timeout_s": 10,
        },
        "console": {"command": [*WIRES, "console", board.socket_url.removeprefix("socket://")]},
        "boot": {"ready": "login:", "fail": ["Kernel panic"], "timeout_s": boot_timeout_s},
    }


def write_devices_file(path: Path, devices: Mapping[str, Mapping[str, Any]]) -> Path:
    """``devices`` (device id: entry) written as a devices file at ``path`` (a new file), readable by its
    owner alone as docs/runner.md asks of one; the path."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        yaml.safe_dump(
            {"devices": {name: dict(entry) for name, entry in devices.items()}}, file, sort_keys=False
        )
    return path
