"""Jobs on wired devices: the agent's layer that takes a job's boards before its command and gives them
back at its end (:mod:`kerrigan.runner.boards.control`).

Only a job whose device (or a gang role's) has wiring in the devices file (``power`` or ``console``) is
touched: any other job runs exactly as before. For a wired one, after the server acknowledged its start and
before its command, under the boards' locks (:mod:`kerrigan.runner.boards.board_locks`: a person's power
request or keystroke under way ends first, and a person's console of them closes): consoles opened, boards
power-cycled (or kept: the offer's ``power``), boots waited for; a failure ends the job without running its
command, as an infrastructure failure (``power_failed``, ``boot_failed``, ``console_lost``) whose note in
its output says why, with the console's last lines. While it runs, a console going away stops it
(``console_lost``). Whenever it ends (done, failed, cancelled, timed out, or followed to its end by a
restarted agent), before its end is reported: ``after_job`` applied (every board with power switched off
after a job that ended in doubt, which the end's ``powered_off`` tells the server, which recovers them) and
the consoles closed, so the board is off before the device's next job.
The consoles' bytes go to the server as the job's console log (:mod:`kerrigan.runner.boards.console_log`).
The command itself gets a terminal on each console and a socket to switch its boards' power, its own user's
(:mod:`kerrigan.runner.boards.access`), closed before the boards are given back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from kerrigan.core.lifecycle import BOARD_FAULTS, DEVICE_FAULT_EXIT, RUNNER_LOST
from kerrigan.core.manifest import PowerChoice
from kerrigan.core.recovery import RECOVERY_TASK
from kerrigan.runner.boards.access import BoardAccess
from kerrigan.runner.boards.console import Sink
from kerrigan.runner.boards.console_log import ConsoleLog, RoleLines
from kerrigan.runner.boards.control import CONSOLE_LOST, Board, BoardControl, BoardFault
from kerrigan.runner.boards.figures import SwitchReason
from kerrigan.runner.devices_file.wiring import Wiring
from kerrigan.runner.host_state import offer_roles
from kerrigan.runner.records import JobRecord
from kerrigan.runner.reporting import Reporting

log = logging.getLogger(__name__)

CONSOLE_SEND_S: Final = 0.5  # a console line reaches the server within about this
STOP_CHECK_S: Final = 0.2  # while boards are taken, how often a stop (a cancel) is looked for
# Ends after which a board is not trusted as it is (besides exit 75, the job's own word for a device fault).
IN_DOUBT: Final = frozenset({"cancelled", "timed_out", RUNNER_LOST, *BOARD_FAULTS})


def offered_power(offer: Mapping[str, object]) -> PowerChoice:
    """The task's ``power`` as offered; ``cycle`` (what every job got before the key) from a server that
    sends none, or one this agent does not know."""
    value = offer.get("power")
    return next((choice for choice in PowerChoice if choice.value == value), PowerChoice.CYCLE)


class WiredJobs(Reporting):
    """The boards of jobs on wired devices, taken and given back around each job."""

    def _wired(self, record: JobRecord) -> list[tuple[str, str | None, Wiring]]:
        """The job's devices that have wiring (id, gang role, wiring), in role order."""
        devices: list[tuple[str, str | None]] = []
        roles = offer_roles(record.offer)
        if roles:
            devices = [(str(device.get("id", "")), str(device["role"])) for device in roles]
        elif record.offer.get("device") is not None:
            devices = [(str(record.offer["device"]), None)]
        wired = []
        for device_id, role in devices:
            entry = self.presence.entries.get(device_id)
            if entry is not None and (entry.wiring.power is not None or entry.wiring.console is not None):
                wired.append((device_id, role, entry.wiring))
        return wired

    async def _take_boards(
        self, record: JobRecord, on_lost: Callable[[BoardFault], object]
    ) -> BoardFault | None:
        """Take the job's wired boards (none: nothing is done); the fault that ends the job, if any. Gives
        up as soon as the job is stopped (its boards are given back at its end)."""
        wired = self._wired(record)
        if not wired:
            return None
        console_log = ConsoleLog(self._masker_of(record), self.settings.output_max_bytes)
        feeders: list[RoleLines] = []

        def sink_for(board: Board) -> Sink:
            if board.role is None:
                return lambda at, data: console_log.feed(data)
            lines = RoleLines(board.role, console_log)
            feeders.append(lines)
            return lambda at, data: lines.feed(data)

        control = BoardControl.of(wired, sink_for, figures=self.board_figures)
        control.on_lost = on_lost
        self._boards[record.id] = control
        sender = asyncio.create_task(
            self._send_console(record.id, console_log), name=f"kerrigan-console-{record.id}"
        )
        self._console_logs[record.id] = (console_log, feeders, sender)
        record.boards = True  # a restarted agent gives them back too
        self.records.save(record)
        why = SwitchReason.RECOVERY if record.offer.get("task") == RECOVERY_TASK else SwitchReason.JOB

        async def take() -> None:
            # Under the boards' locks: a person's power request or keystroke under way ends first (then
            # finds the boards the job's), and a person's console of them closes (its reader is not the
            # job's console's rival), before the job's power-cycle and boot.
            async with self.board_locks.holding(device_id for device_id, _, _ in wired):
                for device_id, _, _ in wired:
                    await self._person_console.closed(device_id)
                await control.take(offered_power(record.offer), why)

        taking = asyncio.create_task(take())
        while not taking.done():
            await asyncio.wait({taking}, timeout=STOP_CHECK_S)
            reason = self._stop_reasons.get(record.id)
            if not taking.done() and reason is not None and reason != "withdrawn":
                taking.cancel()
                with contextlib.suppress(asyncio.CancelledError, BoardFault):
                    await taking
                return None  # the caller sees the stop
        try:
            taking.result()
        except BoardFault as fault:
            log.warning("job %s: %s", record.id, fault)
            return fault
        return None

    def _board_environment(self, record: JobRecord) -> dict[str, str]:
        """``KERRIGAN_BOOT_SECONDS`` (and a gang role's own) for a job whose boards were booted."""
        control = self._boards.get(record.id)
        return control.environment() if control is not None else {}

    async def _open_board_access(self, record: JobRecord, folder: Path) -> dict[str, str]:
        """Just before the command: its terminals on its boards' consoles and its power socket (in
        ``folder``, made here), the job's user's own; where the job finds them (``KERRIGAN_CONSOLE``,
        ``KERRIGAN_DEVICE_SOCKET``, a gang role's own), nothing for a job without wired boards."""
        control = self._boards.get(record.id)
        if control is None:
            return {}
        access = await BoardAccess.open(record.id, control, record.user, folder)
        self._access[record.id] = access
        return access.environment()

    async def _send_console(self, job_id: str, console_log: ConsoleLog) -> None:
        while not console_log.done:
            await asyncio.sleep(CONSOLE_SEND_S)
            await console_log.send(self.server, job_id)

    async def _give_back_boards(
        self, record: JobRecord, exit_status: int | None, outcome: str | None
    ) -> None:
        """Apply ``after_job`` to the job's boards (switch every one with power off after a job that ended
        in doubt: the server recovers them) and close their consoles; what could not be done and a console
        lost meanwhile are noted in its output. The job's terminals and power socket go first."""
        access = self._access.pop(record.id, None)
        if access is not None:
            await access.close()
        control = self._boards.pop(record.id, None)
        if control is None:
            if not record.boards:
                return
            # Taken by an agent before a restart: its consoles are gone with it, its after_job is not.
            control = BoardControl.of(self._wired(record), consoles=False, figures=self.board_figures)
        notes = []
        if control.lost is not None and outcome == CONSOLE_LOST:
            notes.append(control.lost.note())
        doubt = outcome in IN_DOUBT or exit_status == DEVICE_FAULT_EXIT
        given = await control.give_back(off=doubt)
        record.powered_off, record.power_unknown = given.powered_off, given.power_unknown
        notes += [f"kerrigan: {problem}\n" for problem in given.problems]
        if notes:
            with self.records.output_path(record.id).open("a", encoding="utf-8") as output:
                output.write("".join(notes))
        await self._flush_console(record.id)
        record.boards = False
        self.records.save(record)

    async def _flush_console(self, job_id: str) -> None:
        found = self._console_logs.pop(job_id, None)
        if found is None:
            return
        console_log, feeders, sender = found
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        for lines in feeders:
            lines.finish()
        console_log.finish()
        await console_log.send(self.server, job_id)

    async def _end(
        self,
        record: JobRecord,
        exit_status: int | None,
        outcome: str | None,
        accounting: dict[str, Any] | None = None,
        note: str = "",
    ) -> None:
        """The boards are given back before the end is reported (and its output sent). A job that failed
        after its consoles went away with the agent that took its boards (a restart while it ran) failed
        for the lab: ``console_lost``."""
        if outcome is None and exit_status not in (0, None) and self._consoles_gone(record):
            outcome = CONSOLE_LOST
            note += (
                "kerrigan: its board's console went away while it ran: the runner agent that bridged it "
                "stopped (restarted); its failure is the lab's\n"
            )
        await self._give_back_boards(record, exit_status, outcome)
        await super()._end(record, exit_status, outcome, accounting, note)

    def _consoles_gone(self, record: JobRecord) -> bool:
        """Whether the job had board consoles that an agent before a restart bridged (gone with it)."""
        return (
            record.boards
            and record.id not in self._boards
            and any(wiring.console is not None for _, _, wiring in self._wired(record))
        )
