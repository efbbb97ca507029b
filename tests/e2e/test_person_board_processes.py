"""A board in a person's hands (issue 30), across real processes: the GitHub stand-in, ``kerrigan serve``, a
runner agent whose devices file wires board-a to an outlet of the PDU stand-in and to a simulated board's
console (both as ``kerrigan.testing.wires`` commands, as ``kerrigan demo`` wires its boards), and the
``kerrigan`` commands as people type them, each with an API token of their own.

- octocat reserves board-a (``kerrigan reserve``), switches it on (``kerrigan power``) and opens its console
  (``kerrigan console`` in a pseudo-terminal of its own): the board's login prompt; they log in. hubot, the
  pool's owner, opens it too and watches read-only: what they type is refused and never reaches the board,
  and they see what octocat sees. ``kerrigan power board-a cycle``: both watch it boot, from the boot loader
  to the login prompt. octocat leaves and releases the board, which ends hubot's console. mallory, a
  stranger, is refused the console and the power with a 403 naming what they lack, and nothing reaches the
  board. Every use (each console session with how long it lasted and why it ended, each switch) is in the
  audit log (``GET /api/v1/audit``).
- Hold board: a push's job fails on board-a; a writer of the repository (as the stand-in says) clicks
  *Hold board* on its check run and gets that board (``kerrigan reserve --job ID`` answers them with it),
  held for that job, whose workspace the agent keeps; a reader of the repository is refused with a 403
  naming the permission they lack. The writer opens ``kerrigan shell JOB`` in the failed job's sandbox and
  runs its command again (it fails as it did, with the job's environment); the reader is refused the
  shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiohttp
import yaml

from kerrigan.store.tokens import create_token
from kerrigan.testing.board import HOSTNAME, PROMPT, SimulatedBoard, State
from kerrigan.testing.github import check_run_action_payload
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.process_lab import (
    REPOSITORY,
    ProcessLab,
    check_runs,
    deliver,
    jobs_of,
    process_lab,
    push,
    runner_agent,
    session_at,
)
from kerrigan.testing.waiting import wait_until

DEVICE: Final = "board-a"
HOST: Final = "rig-01"
OUTLET: Final = 1
BOOT_S: Final = 0.5
HOLDER: Final = "octocat"  # reserves board-a
OWNER: Final = "hubot"  # owns the pool: watches read-only
STRANGER: Final = "mallory"  # neither: refused
WRITER: Final = "rita"  # writes to the repository (the stand-in says so): may hold a failed job's board
LOGIN_PROMPT: Final = f"{HOSTNAME} login:"
LEAVE: Final = b"\x1d"  # Ctrl-]
COMMAND_S: Final = 60  # a kerrigan command's longest wait before the test gives up on it

INVENTORY: Final = f"""
hosts:
  - id: {HOST}
pools:
  - id: bench
    name: Bench rig
    owners: [{OWNER}]
    devices:
      - {{id: {DEVICE}, board: modalix, target_type: devkit, os_type: linux, host: {HOST}}}
"""
MANIFEST: Final = """
name: hil
on: {push: {branches: [main]}}
scheduling:
  max_devkits: 1
tasks:
  - id: hil
    run: ./scripts/hil.sh
    vcpus: 1
"""
FAILS: Final = '#!/bin/sh\necho "on $KERRIGAN_DEVICE_ID: the UART test failed"\nexit 1\n'


@dataclass(frozen=True)
class Rig:
    """The lab, its PDU and board-a on its outlet; ``people`` maps a login to the environment of a
    ``kerrigan`` command typed by them (the server's URL and their own API token)."""

    lab: ProcessLab
    pdu: GudePdu
    board: SimulatedBoard
    people: Mapping[str, Mapping[str, str]]

    def switches(self) -> list[bool]:
        """What board-a's outlet was told, in order (True: on)."""
        return [on for outlet, on in self.pdu.switches if outlet == OUTLET]


def devices_file(folder: Path, pdu: GudePdu, board: SimulatedBoard) -> Path:
    """rig-01's devices file: board-a's power and console as commands (no labgrid, no pyserial), its boot."""
    wires = [sys.executable, "-m", "kerrigan.testing.wires"]
    switch = [*wires, "outlet", pdu.url, str(OUTLET)]
    assert board.socket_url is not None
    wiring = {
        DEVICE: {
            "power": {
                "command": {"on": [*switch, "on"], "off": [*switch, "off"], "status": [*switch, "status"]},
                "off_s": 1,
                "timeout_s": 10,
            },
            "console": {"command": [*wires, "console", board.socket_url.removeprefix("socket://")]},
            "boot": {"ready": "login:", "fail": ["Kernel panic"], "timeout_s": 10},
        }
    }
    path = folder / f"devices-{HOST}.yml"
    # Readable by the agent's user alone, as docs/runner.md asks of a devices file.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        yaml.safe_dump({"devices": wiring}, file, sort_keys=False)
    return path


async def kerrigan(lab: ProcessLab, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """A ``kerrigan`` command run to its end: its exit status, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kerrigan.cli", *args,
        env={**os.environ, **lab.env, **(env or {})},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), COMMAND_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def wired_rig(tmp_path: Path, *, writers: tuple[str, ...] = ()) -> AsyncIterator[Rig]:
    """The lab of :data:`INVENTORY` (a push runs :data:`FAILS` on board-a), its PDU, board-a (off) and an
    API token for each person; the stand-in says ``writers`` write to the repository. rig-01's agent runs
    throughout, stopped gracefully."""
    board = SimulatedBoard(boot_s=BOOT_S)
    async with (
        GudePdu(outlets=1) as pdu,
        contextlib.AsyncExitStack() as stack,
        process_lab(
            tmp_path,
            inventory=INVENTORY,
            files={".kerrigan/workflows/hil.yml": MANIFEST, "scripts/hil.sh": FAILS},
            environment={"KERRIGAN_RUNNER_LEASE_S": "4"},  # the agent beats, and hears holds, each second
            # Public: anyone reads the repository (a stranger sees the job); only ``writers`` write to it.
            github_arguments=["--public", *(f"--permission={login}:write" for login in writers)],
        ) as lab,
    ):
        await board.start(serve_socket=True)  # its console on a socket, for the wires' console command
        stack.push_async_callback(board.close)
        board.attach(pdu, OUTLET)
        people = {}
        async with lab.database.sessions() as session, session.begin():
            for login in (HOLDER, OWNER, STRANGER, WRITER):
                token = await create_token(session, login, datetime.now(UTC))
                people[login] = {"KERRIGAN_URL": lab.base, "KERRIGAN_TOKEN": token}
        devices = devices_file(lab.folder, pdu, board)
        async with runner_agent(lab, HOST, "--devices-file", str(devices), graceful=True):
            yield Rig(lab, pdu, board, people)


class Terminal:
    """``kerrigan *command`` (``console board-a``) typed by ``login`` in a terminal of its own (a
    pseudo-terminal: ``kerrigan console`` puts it in raw mode as it would a real one) once :meth:`start` ed;
    ``shown`` is what the terminal shows, stdout and stderr together."""

    def __init__(self, rig: Rig, login: str, command: tuple[str, ...] = ("console", DEVICE)) -> None:
        self.rig = rig
        self.login = login
        self.command = command
        self.shown = bytearray()
        self.process: asyncio.subprocess.Process | None = None
        self.master = -1
        self._more = asyncio.Event()

    async def start(self) -> None:
        self.master, slave = pty.openpty()
        os.set_blocking(self.master, False)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kerrigan.cli", *self.command,
                env={**os.environ, **self.rig.lab.env, **self.rig.people[self.login]},
                stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(slave)  # the command holds its own: the terminal hangs up once it ends
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # the command ended: the terminal hung up
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.shown.extend(data)
        self._more.set()

    def text(self) -> str:
        return self.shown.decode(errors="replace")

    async def until(self, text: str, *, after: int = 0, timeout: float = 20) -> int:
        """Wait until the terminal shows ``text`` past offset ``after``; the offset just past it."""
        assert self.process is not None
        wanted = text.encode()
        async with asyncio.timeout(timeout):
            while (found := self.shown.find(wanted, after)) < 0:
                if self.process.returncode is not None and not self._more.is_set():
                    raise AssertionError(f"the console ended before {text!r}: {self.text()!r}")
                self._more.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._more.wait(), 0.5)
        return found + len(wanted)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    async def leave(self) -> int:
        """Ctrl-]: the command's exit status once it ended."""
        self.type(LEAVE)
        return await self.ended()

    async def ended(self) -> int:
        """The command's exit status once it ended, and its last words read."""
        assert self.process is not None
        status = await asyncio.wait_for(self.process.wait(), COMMAND_S)
        await asyncio.sleep(0.1)  # its last words may still be on their way through the terminal
        with contextlib.suppress(OSError):
            while data := os.read(self.master, 65536):
                self.shown.extend(data)
        return status

    async def close(self) -> None:
        if self.master < 0:
            return
        asyncio.get_running_loop().remove_reader(self.master)
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        os.close(self.master)
        self.master = -1


@contextlib.asynccontextmanager
async def terminal(
    rig: Rig, login: str, *, command: tuple[str, ...] = ("console", DEVICE), start: bool = True
) -> AsyncIterator[Terminal]:
    """A :class:`Terminal` of ``login``'s running ``kerrigan *command`` (started unless not ``start``),
    closed on the way out."""
    opened = Terminal(rig, login, command)
    try:
        if start:
            await opened.start()
        yield opened
    finally:
        await opened.close()


async def api(rig: Rig, method: str, path: str, login: str, body: Any = None) -> tuple[int, Any]:
    """``{method} /api/v1{path}`` as ``login``: the status and the JSON answer."""
    headers = {"Authorization": f"Bearer {rig.people[login]['KERRIGAN_TOKEN']}"}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{rig.lab.base}/api/v1{path}", headers=headers, json=body) as answer,
    ):
        return answer.status, await answer.json()


async def audited(rig: Rig, field: str, count: int) -> list[dict[str, Any]]:
    """The audit log's entries about board-a's ``field``, oldest first, once there are ``count`` (a console
    session is written as its person's WebSocket closes)."""

    async def written() -> list[dict[str, Any]] | None:
        status, body = await api(rig, "GET", f"/audit?device={DEVICE}", HOLDER)
        assert status == 200, body
        found = [entry for entry in reversed(body["entries"]) if entry["field"] == field]
        return found if len(found) >= count else None

    return await wait_until(written, timeout=15, interval=0.2, what=f"{count} {field} entries audited")


# -- console and power ---------------------------------------------------------------------------------------


async def refused(rig: Rig, login: str, *args: str) -> str:
    """``kerrigan *args`` typed by ``login``, refused with a 403: what it printed (stderr)."""
    status, out, err = await kerrigan(rig.lab, *args, env=rig.people[login])
    assert (status, out) == (1, ""), err
    assert "(HTTP 403)" in err
    assert "Traceback" not in err
    return err


async def strangers_are_refused(rig: Rig) -> None:
    """mallory may neither switch board-a nor open its console, hubot (the pool's owner) may not switch it;
    each refusal names what they lack, and nothing reaches the board."""
    lacks = f"you do not hold a reservation of {DEVICE}"
    err = await refused(rig, STRANGER, "power", DEVICE, "cycle")
    assert f"{STRANGER} may not switch the power of {DEVICE}: {lacks}" in err
    err = await refused(rig, STRANGER, "console", DEVICE)
    assert f"{STRANGER} may not use the console of {DEVICE}: {lacks} and are not an owner of its pool" in err
    for method, path, body in (
        ("POST", f"/devices/{DEVICE}/power", {"action": "on"}),
        ("GET", f"/devices/{DEVICE}/console", None),
    ):
        answered, refusal = await api(rig, method, path, STRANGER, body)
        assert (answered, refusal["error"]["code"]) == (403, "forbidden"), refusal
    err = await refused(rig, OWNER, "power", DEVICE, "off")  # the owner may watch, not switch
    assert f"{OWNER} may not switch the power of {DEVICE}: {lacks}" in err
    assert rig.switches() == []
    assert not rig.board.powered
    assert rig.board.connections == 0  # no console was opened for them


async def watch_it_boot(terminal: Terminal, after: int) -> None:
    """The terminal shows a boot past ``after``: the boot loader, the kernel, then the login prompt."""
    for line in ("U-Boot SPL 2024.01", "Starting kernel ...", "Booting Linux on physical CPU", LOGIN_PROMPT):
        after = await terminal.until(line, after=after)


def check_audit(consoles: list[dict[str, Any]], powers: list[dict[str, Any]]) -> None:
    """The holder's console session and the owner's (who, how, how long, why it ended); the holder's two
    switches (what they asked, the board's power after); nothing of those refused."""
    sessions = {entry["actor"]: entry for entry in consoles}
    assert sorted(sessions) == [OWNER, HOLDER]
    assert sessions[HOLDER]["before"]["access"] == "read-write"
    assert sessions[OWNER]["before"]["access"] == "read-only"
    assert sessions[HOLDER]["after"]["reason"] == "you left"
    assert sessions[OWNER]["after"]["reason"] == f"the reservation of {DEVICE} ended"
    for entry in consoles:
        assert (entry["subject_type"], entry["subject_id"], entry["pool"]) == ("device", DEVICE, "bench")
        assert entry["after"]["seconds"] > 0
        assert datetime.fromisoformat(entry["before"]["started"]) < datetime.fromisoformat(
            entry["after"]["ended"]
        )
    # The holder's session began before the owner's and ended before it.
    times = {
        login: [
            datetime.fromisoformat(entry[at][key]) for at, key in (("before", "started"), ("after", "ended"))
        ]
        for login, entry in sessions.items()
    }
    assert times[HOLDER][0] < times[OWNER][0]
    assert times[HOLDER][1] < times[OWNER][1]
    assert [(entry["actor"], entry["before"], entry["after"]) for entry in powers] == [
        (HOLDER, "on", "on"),
        (HOLDER, "cycle", "on"),
    ]


async def test_a_person_reserves_a_board_uses_its_console_and_power_an_owner_watches_a_stranger_is_refused(
    tmp_path: Path,
) -> None:
    async with wired_rig(tmp_path) as rig:
        lab, board = rig.lab, rig.board
        reserve = ("reserve", "--device", DEVICE, "--for", "1h", "--note", "UART bring-up")
        status, out, err = await kerrigan(lab, *reserve, env=rig.people[HOLDER])
        assert status == 0, err
        assert out.startswith(f"reserved {DEVICE} on runner host {HOST} until "), out
        reservation = out.split("(reservation ", 1)[1].split(")", 1)[0]
        assert rig.switches() == []  # a reservation leaves the board as it is: off
        await strangers_are_refused(rig)

        # The holder switches it on and opens its console: the login prompt; they log in.
        status, out, err = await kerrigan(lab, "power", DEVICE, "on", env=rig.people[HOLDER])
        assert (status, out) == (0, f"{DEVICE}: on\n"), err
        await wait_until(lambda: board.state is State.LOGIN, timeout=15, what="board-a booted")
        async with terminal(rig, HOLDER) as holder, terminal(rig, OWNER, start=False) as owner:
            await holder.until(f"connected to {DEVICE}; Ctrl-] leaves")
            holder.type(b"\r")
            seen = await holder.until(LOGIN_PROMPT)
            holder.type(b"root\r")
            seen = await holder.until(PROMPT, after=seen)
            assert board.state is State.SHELL

            # The pool's owner watches: read-only; what they type is refused and never reaches the board.
            await owner.start()
            await owner.until(f"connected to {DEVICE} (read-only); Ctrl-] leaves")
            owner.type(b"poweroff\r")
            await owner.until("read-only for you")
            holder.type(b"hostname\r")
            seen = await holder.until(f"hostname\r\n{HOSTNAME}\r\n{PROMPT}", after=seen)
            await owner.until(f"hostname\r\n{HOSTNAME}\r\n{PROMPT}")  # the same output
            assert board.state is State.SHELL  # still at its prompt: no poweroff reached it
            assert "poweroff" not in "\n".join(board.transcript)

            # A power cycle: both watch it boot, from the boot loader to the login prompt.
            owner_seen, boots = len(owner.shown), board.boots
            status, out, err = await kerrigan(lab, "power", DEVICE, "cycle", env=rig.people[HOLDER])
            assert (status, out) == (0, f"{DEVICE}: on\n"), err
            assert board.boots == boots + 1
            await watch_it_boot(holder, seen)
            await watch_it_boot(owner, owner_seen)
            assert board.state is State.LOGIN

            # The holder leaves while the owner watches, then releases the board: the owner's console ends.
            assert await holder.leave() == 0
            assert board.connections == 1  # the agent's, for the owner
            status, out, err = await kerrigan(
                lab, "reservations", "release", reservation, env=rig.people[HOLDER]
            )
            assert status == 0, err
            assert await owner.ended() == 0  # a session ended as sessions do
        assert holder.text().endswith("kerrigan console: you left\r\n"), holder.text()
        assert owner.text().endswith(f"kerrigan console: the reservation of {DEVICE} ended\r\n"), owner.text()
        for shown in (holder.text(), owner.text()):
            assert "poweroff" not in shown  # raw: a read-only person's keys are not even echoed
        await wait_until(lambda: board.connections == 0, timeout=15, what="the agent closed the console")

        # Every use is in the audit log.
        check_audit(await audited(rig, "console", 2), await audited(rig, "power", 2))
    # The refused calls switched nothing: the holder's on, then the cycle's off and on.
    assert rig.switches() == [True, False, True]


# -- Hold board ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A failed job whose board a writer holds: its id, the reservation and the writer's environment."""

    job: int
    reservation: str
    writer: Mapping[str, str]


async def failed_and_held(rig: Rig) -> Held:
    """Push a commit whose job fails on board-a; the writer clicks *Hold board* on its check run and gets
    board-a, which the check run then says; a reader is refused ``kerrigan reserve --job ID`` (a 403 naming
    the permission they lack), and the writer's own ``kerrigan reserve --job ID`` answers with their hold."""
    lab = rig.lab
    sha = "7a" * 20
    await push(lab, sha)
    session = await session_at(lab, sha, timeout=60)
    [row] = await jobs_of(lab)
    assert (session.conclusion, row.state, row.device_id, row.exit_status) == ("failure", "failed", DEVICE, 1)

    # GitHub's API does not show a check run's actions (tests/integration/github/test_hold_board.py reads
    # them as posted); the click is the delivery GitHub sends for it.
    async def completed() -> dict[str, Any] | None:
        done = [run for run in await check_runs(lab, sha) if run["status"] == "completed"]
        return done[0] if done else None

    run = await wait_until(completed, timeout=30, interval=0.3, what="the check run completed")
    await deliver(lab, "check_run", check_run_action_payload(REPOSITORY, run, "hold", WRITER))

    async def said() -> str | None:
        [shown] = [found for found in await check_runs(lab, sha) if found["id"] == run["id"]]
        output = shown.get("output") or {}
        text = f"{output.get('summary') or ''}\n{output.get('text') or ''}"
        return text if f"@{WRITER}" in text else None

    shown = await wait_until(said, timeout=30, interval=0.3, what="the check run saying who holds the board")

    # A reader of the (public) repository: may see the job, may not hold its board.
    status, out, err = await kerrigan(lab, "reserve", "--job", str(row.pk), env=rig.people[STRANGER])
    assert (status, out) == (1, ""), err
    assert (
        f"hold job {row.pk}'s board: Hold board needs write, maintain or admin permission on octo/firmware "
        "(you have none)" in err
    )
    assert "(HTTP 403)" in err

    status, out, err = await kerrigan(lab, "reserve", "--job", str(row.pk), env=rig.people[WRITER])
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"holding the board(s) of failed job {row.pk} (held already)", out
    assert lines[1].startswith(f"reserved {DEVICE} on runner host {HOST} until "), out
    reservation = lines[1].split("(reservation ", 1)[1].split(")", 1)[0]
    assert DEVICE in shown, shown
    return Held(row.pk, reservation, rig.people[WRITER])


async def test_a_writer_holds_the_board_of_a_failed_job_and_a_reader_is_refused(tmp_path: Path) -> None:
    async with wired_rig(tmp_path, writers=(WRITER,)) as rig:
        held = await failed_and_held(rig)
        status, kept = await api(rig, "GET", f"/reservations/{held.reservation}", WRITER)
        assert status == 200, kept
        # The board is theirs: its power answers them, and still no one else.
        status, out, err = await kerrigan(rig.lab, "power", DEVICE, "status", env=held.writer)
        stranger = await kerrigan(rig.lab, "power", DEVICE, "status", env=rig.people[STRANGER])

        # While the hold lasts the writer opens a shell in the failed job's sandbox and runs its command
        # again; a reader of the repository is refused it before anything reaches the agent.
        refused = await kerrigan(rig.lab, "shell", str(held.job), env=rig.people[STRANGER])
        async with terminal(rig, WRITER, command=("shell", str(held.job))) as shell:
            await shell.until("$ ", after=await shell.until(f"connected to job {held.job}'s sandbox"))
            shell.type(b"./scripts/hil.sh; echo rerun-exit-$?\r")
            await shell.until("rerun-exit-1", timeout=30)
            shown = shell.text()
            left = await shell.leave()
        [shell_session] = await audited(rig, "shell", 1)

        audit_status, audit = await api(rig, "GET", f"/audit?actor={WRITER}", WRITER)
        # The job's workspace is kept while the hold lasts: the agent hears it in its next heartbeat.
        log = rig.lab.folder / f"{HOST}.log"
        await wait_until(
            lambda: f"workspaces kept for holds: jobs {held.job}" in log.read_text(errors="replace"),
            timeout=15,
            interval=0.2,
            what="the agent keeping the held job's workspace",
        )

    assert f"on {DEVICE}: the UART test failed" in shown  # the job's command, its environment, again
    assert "rerun-exit-1" in shown
    assert left == 0, shown
    assert (shell_session["actor"], shell_session["subject_id"]) == (WRITER, DEVICE), shell_session
    assert shell_session["after"]["reason"] == "you left", shell_session
    assert refused[0] == 1
    assert "(HTTP 403)" in refused[2] or "(HTTP 404)" in refused[2], refused
    assert (kept["login"], kept["state"], kept["held_job"]) == (WRITER, "active", held.job)
    assert (kept["device"]["id"], kept["duration_s"]) == (DEVICE, 1800)  # KERRIGAN_HOLD_S's default
    assert (status, out) == (0, f"{DEVICE}: off\n"), err  # the agent switched it off after the job
    assert stranger[0] == 1
    assert f"{STRANGER} may not switch the power of {DEVICE}" in stranger[2]
    assert audit_status == 200, audit
    assert f"hold:{DEVICE}" in [entry["field"] for entry in audit["entries"]]
