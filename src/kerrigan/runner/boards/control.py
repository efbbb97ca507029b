"""The boards of one job, around its command: taken before it, watched while it runs, given back after.

For every device of the job that has wiring (every role of a gang), all boards at once: the console is
opened before power-on and kept until the job ends; the board is power-cycled (``power: cycle``, the
default) or, with ``power: keep``, only switched on when it is off; its boot is waited for (``boot.ready``)
when the agent powered it on and ``boot`` is set. At the end ``after_job`` is applied (``off`` by default
for a device with power; every board with power is switched off after a job that ended in doubt, for the
server's recovery) and the consoles are closed.

What goes wrong is a :class:`BoardFault` whose ``reason`` is the job's end reason: ``power_failed``,
``boot_failed`` or ``console_lost`` (a console that goes away while the job runs too: ``on_lost`` hears of
it).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from kerrigan.core.lifecycle import BOARD_FAULTS, BOOT_FAILED, CONSOLE_LOST, POWER_FAILED
from kerrigan.core.manifest import PowerChoice
from kerrigan.runner.boards.boot import BootFailed, watch_boot
from kerrigan.runner.boards.console import Console, ConsoleLost, Sink
from kerrigan.runner.boards.figures import BoardFigures, SwitchReason
from kerrigan.runner.boards.power import PowerDriver, PowerFailed, power_driver
from kerrigan.runner.devices_file.wiring import AfterJob, Wiring

log = logging.getLogger(__name__)

__all__ = ["BOARD_FAULTS", "BOOT_FAILED", "CONSOLE_LOST", "POWER_FAILED", "BoardControl", "BoardFault"]

BOOT_SECONDS: Final = "KERRIGAN_BOOT_SECONDS"


class BoardFault(Exception):  # noqa: N818 -- a reason the job ends, named as the server names it
    """A board failed its job: ``reason`` (:data:`BOARD_FAULTS`), one line of ``detail`` and, for a boot,
    the console's last lines."""

    def __init__(self, reason: str, detail: str, last_lines: list[str] | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.last_lines = last_lines or []

    def note(self) -> str:
        """The fault as the job's output tells it: a line, then the console's last lines."""
        text = f"kerrigan: {self.reason}: {self.detail}\n"
        if self.last_lines:
            text += "kerrigan: the console's last lines:\n" + "".join(
                f"  {line}\n" for line in self.last_lines
            )
        return text


class CountedPower:
    """A board's power driver whose every switch is counted: under the reason the agent's own call gives
    (None: not counted, as the off of the agent's own cycle), or as ``job_request`` when none is given:
    the job's power socket (:mod:`~kerrigan.runner.boards.power_socket`) calls it as a plain driver."""

    def __init__(self, driver: PowerDriver, switched: Callable[[SwitchReason], None]) -> None:
        self.driver = driver
        self._switched = switched

    def _count(self, reason: SwitchReason | None) -> None:
        if reason is not None:
            self._switched(reason)

    async def on(self, reason: SwitchReason | None = SwitchReason.JOB_REQUEST) -> None:
        await self.driver.on()
        self._count(reason)

    async def off(self, reason: SwitchReason | None = SwitchReason.JOB_REQUEST) -> None:
        await self.driver.off()
        self._count(reason)

    async def cycle(self, off_s: float, reason: SwitchReason | None = SwitchReason.JOB_REQUEST) -> None:
        await self.driver.cycle(off_s)
        self._count(reason)

    async def status(self) -> bool | None:
        return await self.driver.status()


@dataclass
class Board:
    """One device's board as a job holds it."""

    device_id: str
    role: str | None  # the gang role, None for a job of one device
    wiring: Wiring
    power: CountedPower | None = None
    console: Console | None = None
    boot_s: float | None = None  # how long its boot took, when the agent powered it on and waited

    @property
    def named(self) -> str:
        return self.device_id if self.role is None else f"{self.device_id} ({self.role})"


@dataclass
class BoardControl:
    """The wired boards of one job: :meth:`take` them before its command, :meth:`give_back` at its end."""

    boards: list[Board]
    figures: BoardFigures = field(default_factory=BoardFigures)
    on_lost: Callable[[BoardFault], object] | None = None
    lost: BoardFault | None = None  # a console that went away while the job held it
    _watches: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        devices: list[tuple[str, str | None, Wiring]],
        sink_for: Callable[[Board], Sink | None] = lambda board: None,
        *,
        consoles: bool = True,
        figures: BoardFigures | None = None,
    ) -> BoardControl:
        """The boards of ``devices`` (id, role, wiring), their power drivers made from their wiring and
        (unless not ``consoles``) consoles whose bytes go to ``sink_for(board)``; what they do is counted in
        ``figures`` (the agent's, for its ``/metrics``; a count of their own without)."""
        figures = figures if figures is not None else BoardFigures()
        boards = []
        for device_id, role, wiring in devices:
            board = Board(device_id, role, wiring)
            if wiring.power is not None:
                board.power = CountedPower(power_driver(wiring.power), partial(figures.switched, device_id))
            if wiring.console is not None and consoles:
                board.console = Console(wiring.console, sink=sink_for(board))
            boards.append(board)
        return cls(boards, figures)

    async def take(
        self, choice: PowerChoice = PowerChoice.CYCLE, reason: SwitchReason = SwitchReason.JOB
    ) -> None:
        """Open every console, then power every board and wait for its boot, all boards at once (its switch
        counted under ``reason``); a :class:`BoardFault` (the first board's, in order) when one fails."""
        opened = await asyncio.gather(
            *(self._open(board) for board in self.boards if board.console is not None),
            return_exceptions=True,
        )
        self._raise_first(opened)
        powered = await asyncio.gather(
            *(self._bring_up(board, choice, reason) for board in self.boards), return_exceptions=True
        )
        self._raise_first(powered)
        for board in self.boards:
            if board.console is not None:
                self._watches.append(asyncio.create_task(self._watch(board, board.console)))

    @staticmethod
    def _raise_first(outcomes: list[BaseException | None]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, BoardFault):
                raise outcome
            if isinstance(outcome, BaseException):
                raise outcome

    async def _open(self, board: Board) -> None:
        assert board.console is not None
        try:
            await board.console.open()
        except ConsoleLost as err:
            raise BoardFault(CONSOLE_LOST, f"{board.named}: {err}") from None

    async def _bring_up(self, board: Board, choice: PowerChoice, reason: SwitchReason) -> None:
        power = board.power
        if power is None or board.wiring.power is None:
            return
        try:
            if choice is PowerChoice.KEEP and await power.status() is not False:
                return  # on, or not known: left as it is, its boot not waited for
            if choice is PowerChoice.CYCLE:
                await power.off(reason=None)  # the cycle is counted once, at its on
                await asyncio.sleep(board.wiring.power.off_s)
            boot, console = board.wiring.boot, board.console
            watch = watch_boot(console, boot) if boot is not None and console is not None else None
            try:
                await power.on(reason=reason)
            except BaseException:
                if watch is not None:
                    watch.cancel()
                raise
            if watch is not None:
                board.boot_s = await watch.wait()
                self.figures.booted(board.device_id, board.boot_s)
                log.info("board %s booted in %.2f s", board.named, board.boot_s)
        except PowerFailed as err:
            log.warning("board %s: power failed: %s", board.named, err)  # the job's output gets err.shown
            raise BoardFault(POWER_FAILED, f"{board.named}: {err.shown}") from None
        except BootFailed as err:
            raise BoardFault(BOOT_FAILED, f"{board.named}: {err.reason}", err.last_lines) from None
        except ConsoleLost as err:
            raise BoardFault(CONSOLE_LOST, f"{board.named}: {err}") from None

    async def _watch(self, board: Board, console: Console) -> None:
        await console.gone.wait()
        if self.lost is None:
            self.lost = BoardFault(CONSOLE_LOST, f"{board.named}: {console.lost}", console.last_lines())
            if self.on_lost is not None:
                self.on_lost(self.lost)

    def environment(self) -> dict[str, str]:
        """What the job is told of its boards' boots: ``KERRIGAN_BOOT_SECONDS`` (the longest, for a gang)
        and a gang role's own ``KERRIGAN_DEVICE_<ROLE>_BOOT_SECONDS``; nothing of a board not booted."""
        env: dict[str, str] = {}
        booted = [board for board in self.boards if board.boot_s is not None]
        for board in booted:
            if board.role is not None:
                env[f"KERRIGAN_DEVICE_{board.role.upper()}_BOOT_SECONDS"] = f"{board.boot_s:.3f}"
        if booted:
            env[BOOT_SECONDS] = f"{max(board.boot_s or 0.0 for board in booted):.3f}"
        return env

    async def give_back(self, *, off: bool = False) -> GivenBack:
        """Apply every board's ``after_job`` (``off``: switch every board with power off, whatever its
        ``after_job`` says: the job ended in doubt) and close the consoles. A board left on is a problem in
        words: the job's end stands, the device's next job power-cycles it."""
        for watch in self._watches:
            watch.cancel()
        await asyncio.gather(*self._watches, return_exceptions=True)
        self._watches.clear()
        ends = await asyncio.gather(*(self._after_job(board, off) for board in self.boards))
        for board in self.boards:
            if board.console is not None:
                with contextlib.suppress(Exception):
                    await board.console.close()
        paired = list(zip(self.boards, ends, strict=True))
        return GivenBack(
            [board.device_id for board, (end, _) in paired if end is _Off.SWITCHED],
            [board.device_id for board, (end, _) in paired if end is _Off.FAILED],
            [problem for _, problem in ends if problem is not None],
        )

    @staticmethod
    async def _after_job(board: Board, off: bool) -> tuple[_Off, str | None]:
        """Whether the board was switched off, and what went wrong."""
        if board.power is None or (board.wiring.after_job is not AfterJob.OFF and not off):
            return _Off.LEFT, None
        try:
            await board.power.off(reason=SwitchReason.AFTER_JOB)
        except PowerFailed as err:
            log.warning("board %s not powered off after its job: %s", board.named, err)
            return _Off.FAILED, f"{board.named} not powered off after the job: {err.shown}"
        return _Off.SWITCHED, None


class _Off(enum.Enum):
    """A board's power at its job's end: switched off, left as it was, or to be switched off and failed."""

    SWITCHED = enum.auto()
    LEFT = enum.auto()
    FAILED = enum.auto()


@dataclass(frozen=True, slots=True)
class GivenBack:
    """What giving a job's boards back did: the devices switched off, those that had to be and whose power
    failed (the server recovers both after a job in doubt), and what failed, in words."""

    powered_off: list[str]
    power_unknown: list[str]
    problems: list[str]
