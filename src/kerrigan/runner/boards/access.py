"""What a job's command holds of its boards, without the agent's rights: a terminal on each board's console
(:mod:`~kerrigan.runner.boards.bridge`) and a socket to ask for their power
(:mod:`~kerrigan.runner.boards.power_socket`), made just before the command starts and gone at its end.

The job is told where they are: ``KERRIGAN_CONSOLE`` (a gang's ``KERRIGAN_DEVICE_<ROLE>_CONSOLE`` for each
role whose board has a console) and ``KERRIGAN_DEVICE_SOCKET`` (when a board has power). Nothing else of the
wiring: no port, URL, PDU address or credential.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kerrigan.runner.boards.bridge import ConsoleBridge
from kerrigan.runner.boards.control import Board, BoardControl
from kerrigan.runner.boards.power_socket import PowerSocket

CONSOLE: Final = "KERRIGAN_CONSOLE"
DEVICE_SOCKET: Final = "KERRIGAN_DEVICE_SOCKET"


@dataclass
class BoardAccess:
    """One job's terminals and power socket."""

    bridges: list[tuple[Board, ConsoleBridge]] = field(default_factory=list)
    power: PowerSocket | None = None

    @classmethod
    async def open(cls, job_id: str, control: BoardControl, uid: int | None, folder: Path) -> BoardAccess:
        """Make them for the boards of ``control``, the job's user's own (``uid``; None: the job runs as
        the agent's own user); the power socket in ``folder`` (made here, and not there yet)."""
        access = cls()
        try:
            for board in control.boards:
                if board.console is not None:
                    bridge = ConsoleBridge(board.console, uid)
                    bridge.open()
                    access.bridges.append((board, bridge))
            if any(board.power is not None for board in control.boards):
                owner = os.getuid() if uid is None else uid
                access.power = PowerSocket(job_id, control.boards, owner, folder)
                await access.power.open()
        except BaseException:
            await access.close()
            raise
        return access

    def environment(self) -> dict[str, str]:
        """Where the job finds them."""
        env: dict[str, str] = {}
        for board, bridge in self.bridges:
            name = CONSOLE if board.role is None else f"KERRIGAN_DEVICE_{board.role.upper()}_CONSOLE"
            env[name] = bridge.path
        if self.power is not None:
            env[DEVICE_SOCKET] = str(self.power.path)
        return env

    async def close(self) -> None:
        """Close the terminals and the socket: nothing of the job's reaches the boards any more."""
        if self.power is not None:
            with contextlib.suppress(OSError):
                await self.power.close()
        for _board, bridge in self.bridges:
            await bridge.close()
