"""A person's requests of a board's power (``kerrigan power``), as the long poll hands them to the agent
(``device_requests``): done with the board's power driver, counted as ``person`` switches, answered.

The server hands a request only for a device no job holds; the agent checks again (a job it holds for the
device: ``busy``) under the board's lock (:mod:`kerrigan.runner.boards.board_locks`), which a job taking the
board holds too: one request of a board at a time, and never in the middle of a job's start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from kerrigan.core.device_power import PowerAction, PowerFailure, power_state, read_action
from kerrigan.runner.boards.board_locks import BoardLocks
from kerrigan.runner.boards.control import CountedPower
from kerrigan.runner.boards.figures import BoardFigures, SwitchReason
from kerrigan.runner.boards.power import PowerFailed, power_driver
from kerrigan.runner.devices_file.wiring import Wiring

log = logging.getLogger(__name__)


class PersonPower:
    """Does the power requests of one agent's boards; ``busy(device)`` says whether a job holds one,
    ``locks`` are the boards' locks the agent's jobs take too."""

    def __init__(
        self,
        wiring_of: Callable[[str], Wiring | None],
        figures: BoardFigures,
        busy: Callable[[str], bool],
        locks: BoardLocks,
    ) -> None:
        self._wiring_of = wiring_of
        self._figures = figures
        self._busy = busy
        self._locks = locks

    async def perform(self, asked: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to one request (``{"state"}``, or ``{"failure", "message"}``)."""
        device_id = str(asked.get("device"))
        try:
            action = read_action(asked.get("action"))
        except ValueError as err:  # a newer server's action: say so rather than guess
            return {"failure": PowerFailure.POWER_FAILED.value, "message": str(err)}
        wiring = self._wiring_of(device_id)
        if wiring is None or wiring.power is None:
            message = f"{device_id} has no power wiring in this host's devices file"
            return {"failure": PowerFailure.NO_POWER.value, "message": message}
        async with self._locks.of(device_id):
            if self._busy(device_id):
                message = f"a job holds {device_id} on this host"
                return {"failure": PowerFailure.BUSY.value, "message": message}
            power = CountedPower(power_driver(wiring.power), partial(self._figures.switched, device_id))
            try:
                if action is PowerAction.CYCLE:
                    await power.cycle(wiring.power.off_s, SwitchReason.PERSON)
                elif action is PowerAction.ON:
                    await power.on(SwitchReason.PERSON)
                elif action is PowerAction.OFF:
                    await power.off(SwitchReason.PERSON)
                state = power_state(await power.status())
            except PowerFailed as err:
                log.warning("%s of %s for a person failed: %s", action.value, device_id, err)
                return {"failure": PowerFailure.POWER_FAILED.value, "message": err.shown[:500]}
        log.info("%s of %s for a person: %s", action.value, device_id, state.value)
        return {"state": state.value}
