"""Checking which devices of a devices file are there: all at once and off the event loop, each ``present``,
``missing`` (the path does not exist, the command exited non-zero) or ``error`` (the check itself failed: it
timed out and was killed, could not be started, the path could not be looked at)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from kerrigan.runner.devices_file.reading import CommandCheck, DeviceEntry, DevicesFile, PathCheck, PresentIf

log = logging.getLogger(__name__)


State = Literal["present", "missing", "error"]


PATH_TIMEOUT_S: Final = 10.0  # a path on a filesystem that hangs (NFS) is an error, not a stuck heartbeat


@dataclass(frozen=True, slots=True)
class Presence:
    """What a check found, and in words why (``/dev/ttyUSB3 does not exist``)."""

    state: State
    detail: str


# -- checking the devices --------------------------------------------------------------------------------


async def check(present_if: PresentIf) -> Presence:
    """Whether the device is there: a path looked at in a thread, a command run as a subprocess in its
    own process group (killed, with whatever it started, when its time is up)."""
    if isinstance(present_if, PathCheck):
        return await _look_at(present_if.path)
    return await _run(present_if)


async def _look_at(path: str) -> Presence:
    try:
        await asyncio.wait_for(asyncio.to_thread(os.stat, path), PATH_TIMEOUT_S)
    except (FileNotFoundError, NotADirectoryError):
        return Presence("missing", f"{path} does not exist")
    except TimeoutError:
        return Presence("error", f"{path} could not be looked at within {PATH_TIMEOUT_S:g} s")
    except OSError as exc:
        return Presence("error", f"{path} could not be looked at: {exc.strerror or exc}")
    return Presence("present", f"{path} exists")


async def _run(command: CommandCheck) -> Presence:
    shown = shlex.join(command.argv)
    # Never the runner's token, nor any other of the agent's settings (as for jobs).
    env = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
    try:
        process = await asyncio.create_subprocess_exec(
            *command.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return Presence("error", f"{shown} could not be started: {exc.strerror or exc}")
    try:
        status = await asyncio.wait_for(process.wait(), command.timeout_s)
    except TimeoutError:
        return Presence("error", f"{shown} did not finish within {command.timeout_s:g} s; killed")
    finally:
        if process.returncode is None:  # timed out, or the agent is stopping
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    if status == 0:
        return Presence("present", f"{shown} exited 0")
    if status < 0:
        return Presence("error", f"{shown} was killed by signal {-status}")
    return Presence("missing", f"{shown} exited {status}")


class DevicePresence:
    """The devices of a devices file: checked together, their last states, and their jobs' env.

    A check still running when the next is asked for is not started again: its device keeps its last state
    until it ends (a slow command never holds up a heartbeat for longer than the caller waits).
    """

    def __init__(self, file: DevicesFile | None) -> None:
        self.file = file
        self.entries: dict[str, DeviceEntry] = dict(file.devices) if file is not None else {}
        self.last: dict[str, Presence] = {}
        self._checks: dict[str, asyncio.Task[Presence]] = {}

    @property
    def states(self) -> dict[str, State]:
        """Each device's state as last checked (a device not yet checked is not in it)."""
        return {device_id: presence.state for device_id, presence in self.last.items()}

    def env(self, device_id: str) -> Mapping[str, str]:
        """The settings a job on the device gets as environment (none for a device not in the file)."""
        entry = self.entries.get(device_id)
        return entry.env if entry is not None else {}

    def secret_env(self, device_id: str) -> Mapping[str, str]:
        """The secret settings a job on the device gets when it may have secrets (none for a device not in
        the file)."""
        entry = self.entries.get(device_id)
        return entry.secret_env if entry is not None else {}

    def holder_settings(self, device_id: str) -> dict[str, str]:
        """The settings the person holding a reservation of the device is shown (none for a device not in
        the file)."""
        entry = self.entries.get(device_id)
        return entry.holder_settings if entry is not None else {}

    async def check(self, wait_s: float | None = None) -> dict[str, State]:
        """Check every device at once, waiting up to ``wait_s`` (None: until each check has ended, each
        within its own timeout); each device's state as last checked. A change is logged."""
        for device_id, entry in self.entries.items():
            if entry.present_if is not None and device_id not in self._checks:
                task = asyncio.create_task(check(entry.present_if), name=f"kerrigan-device-{device_id}")
                self._checks[device_id] = task
        if self._checks:
            try:
                await asyncio.wait(self._checks.values(), timeout=wait_s)
            except asyncio.CancelledError:  # the agent is stopping: nothing of a check outlives it
                await self.close()
                raise
        for device_id, task in list(self._checks.items()):
            if task.done():
                del self._checks[device_id]
                if device_id in self.entries:  # not skipped meanwhile
                    self._found(device_id, _outcome(task))
        for device_id, entry in self.entries.items():
            if entry.present_if is None:
                self.last.setdefault(device_id, Presence("present", "no present_if: taken to be there"))
        return self.states

    def _found(self, device_id: str, presence: Presence) -> None:
        before = self.last.get(device_id)
        self.last[device_id] = presence
        if before is not None and before.state != presence.state:
            level = logging.INFO if presence.state == "present" else logging.WARNING
            log.log(
                level, "device %s: %s, now %s: %s", device_id, before.state, presence.state, presence.detail
            )

    def keep(self, listed: Collection[str]) -> list[str]:
        """From now on only the devices the server lists for this host: each other one the file names is a
        warning, and skipped (seed 001); those skipped. The state each kept one was found in is logged."""
        skipped = sorted(device_id for device_id in self.entries if device_id not in listed)
        for device_id in skipped:
            log.warning(
                "devices file %s: the server does not list device %s for this host; skipped",
                self.file.path if self.file is not None else "",
                device_id,
            )
            del self.entries[device_id]
            self.last.pop(device_id, None)
        for device_id, presence in sorted(self.last.items()):
            level = logging.INFO if presence.state == "present" else logging.WARNING
            log.log(level, "device %s: %s (%s)", device_id, presence.state, presence.detail)
        return skipped

    async def close(self) -> None:
        """Stop the checks under way (their commands are killed)."""
        tasks = list(self._checks.values())
        self._checks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _outcome(task: asyncio.Task[Presence]) -> Presence:
    exc = task.exception()
    if exc is not None:  # not expected: every failure of a check is a Presence of its own
        return Presence("error", f"the check failed: {exc!r}")
    return task.result()
