"""A job drives its own board without the agent's rights, through the real agent and server: it logs in on
its console through ``KERRIGAN_CONSOLE`` (a terminal the agent bridges to the board's console) and switches
its board through ``KERRIGAN_DEVICE_SOCKET`` with ``kerrigan device power``; nobody else's uid may use that
socket, the job's environment holds nothing of the PDU, and a hostile job neither floods nor holds the
agent, nor makes it touch a file outside what it made."""

from __future__ import annotations

import asyncio
import os
import sys
import sysconfig
from pathlib import Path
from typing import Final

import pytest

import kerrigan
from kerrigan.testing.board import HOSTNAME, RELEASE, SimulatedBoard
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory
from tests.integration.runner.test_wired_jobs import OUTLET, board, pdu, run_job

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

__all__ = ["board", "pdu"]  # the fixtures, shared with test_wired_jobs


def job_cli() -> list[str]:
    """``kerrigan`` as a job's user can run it on this host: the venv's interpreter may be one job users
    cannot reach (pyenv's, under /root), so the host's python of the same version runs the ``kerrigan``
    package (``python -m kerrigan.cli``, what the ``kerrigan`` script runs) from this tree and the venv's
    packages."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = f"/usr/bin/{version}" if Path(f"/usr/bin/{version}").exists() else sys.executable
    path = f"{Path(kerrigan.__file__).parents[1]}:{sysconfig.get_paths()['purelib']}"
    return ["/usr/bin/env", f"PYTHONPATH={path}", python, "-m", "kerrigan.cli"]


KERRIGAN: Final = job_cli()
PRIVATE_IN_JOBS: Final = ("/tmp", "/var/tmp", "/dev/shm")  # a job gets its own of each


def cli_out_of_reach() -> str | None:
    """Why a job's user cannot run :data:`KERRIGAN` here (None: it can): the tree or the venv's packages
    under a folder a job gets a private one of, or behind a folder other users may not pass."""
    for place in (Path(kerrigan.__file__).parents[1], Path(sysconfig.get_paths()["purelib"])):
        if any(place.is_relative_to(private) for private in PRIVATE_IN_JOBS):
            return f"a job's {place.parts[1]} is its own: {place} is not there for its user"
        for folder in (place, *place.parents):
            if not folder.stat().st_mode & 0o001:
                return f"a job's user cannot pass {folder} to reach {place}"
    return None


OTHER_UID: Final = 60999  # nobody's: no job's, not the agent's

# The job's side of its terminal, in Python (as a job's own test tool would be): type, read until a word.
CONSOLE_TOOL: Final = """\
import json, os, select, socket, subprocess, sys, time
def kerrigan(*words):
    done = subprocess.run([*CLI, *words], capture_output=True, text=True)
    return " ".join(part for part in (str(done.returncode), done.stdout.strip(), done.stderr.strip()) if part)
fd = os.open(os.environ["KERRIGAN_CONSOLE"], os.O_RDWR | os.O_NOCTTY)
def until(word, typed=b"", wait_s=15.0):
    if typed:
        os.write(fd, typed)
    seen = b""
    deadline = time.monotonic() + wait_s
    while word not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            sys.exit(f"no {word!r} on the console; seen {seen[-300:]!r}")
        seen += os.read(fd, 4096)
    return seen.decode(errors="replace")
"""


LOGIN: Final = """\
path = os.environ["KERRIGAN_CONSOLE"]
print("console", path, oct(os.stat(path).st_mode))
until(b"login:", b"\\n")  # the prompt may have been printed before the job opened its terminal
until(b"# ", b"root\\n")
print("uname:", until(b"# ", b"uname -a\\n").splitlines()[1])
"""
POWER: Final = """\
until(b"login:", b"\\n")
print("status:", kerrigan("device", "power", "status"))
print("cycle:", kerrigan("device", "power", "cycle"))
print("booted again:", "Booting Linux" in until(b"login:", wait_s=20))
print("off:", kerrigan("device", "power", "off"))
print("then:", kerrigan("device", "power", "status"))
print("role:", kerrigan("device", "power", "on", "--role", "dut"))
print("env:", sorted(os.environ.items()))
"""
MINE_LATER: Final = """\
time.sleep(6)
print("mine:", kerrigan("device", "power", "status"))
"""
HOSTILE: Final = """\
path = os.environ["KERRIGAN_DEVICE_SOCKET"]
def connected():
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(path)
    return sock
def ask(sock, line):
    try:
        sock.sendall(line)
    except BrokenPipeError:  # refused at once and closed: the refusal is there to read
        pass
    return sock.recv(4096).decode().strip()
# A line that never ends: refused once it passes the longest request, its connection closed.
print("flood:", ask(connected(), b"x" * (1 << 20)))
print("not json:", ask(connected(), b"{nope\\n"))
print("unknown op:", ask(connected(), b'{"op": "explode"}\\n'))
# Idle connections hold nothing up: more than the most at once are refused, and the agent answers on.
time.sleep(0.5)  # the connections above are closed on the agent's side too
idle = [connected() for _ in range(3)]
extra = [connected() for _ in range(3)]
print("crowded:", [ask(sock, b'{"op": "status"}\\n') for sock in extra])
for sock in idle + extra:
    sock.close()
time.sleep(0.5)
print("then:", ask(connected(), b'{"op": "status"}\\n'))
# The job floods its terminal (the board's console); the agent goes on answering.
term = os.open(os.environ["KERRIGAN_CONSOLE"], os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
for _ in range(100):
    try:
        os.write(term, b"y" * 4096)
    except BlockingIOError:
        time.sleep(0.01)
started = time.monotonic()
print("while flooding:", ask(connected(), b'{"op": "status"}\\n'), time.monotonic() - started < 5)
# Its socket swapped for a link to a file of root's, and a link to root's folder beside it: the agent's
# cleanup must follow neither.
os.unlink(path)
os.symlink("CANARY", path)
os.symlink(os.path.dirname("CANARY"), os.path.join(os.path.dirname(path), "folder"))
"""


def job(python: str) -> str:
    """A job script that runs ``python`` (after the console tool) with the host's python3."""
    return f"#!/bin/sh\nexec python3 - <<'PYTHON'\nCLI = {KERRIGAN!r}\n{CONSOLE_TOOL}{python}\nPYTHON\n"


async def test_a_job_logs_in_on_its_board_through_kerrigan_console(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    script = job(LOGIN)
    output = await run_job(harness, agents, tmp_path, pdu, board, script)
    head, _, rest = output.partition("\n")
    assert head == "succeeded None 0", output
    assert f"uname: Linux {HOSTNAME} {RELEASE} #1 SMP PREEMPT" in rest
    assert "console /dev/pts/" in rest
    assert "0o20600" in rest  # a character device only its owner may open
    assert f"root@{HOSTNAME}:~# uname -a" in board.transcript  # typed at the board's own console


async def test_a_job_power_cycles_its_board_and_sees_it_boot_again_on_its_console(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    if (why := cli_out_of_reach()) is not None:
        pytest.skip(f"{why}: its job could not run kerrigan device power")
    script = job(POWER)
    output = await run_job(harness, agents, tmp_path, pdu, board, script)
    head, _, rest = output.partition("\n")
    assert head == "succeeded None 0", output
    assert "status: 0 on\n" in rest
    assert "cycle: 0 on\n" in rest
    assert "booted again: True\n" in rest
    assert "off: 0 off\n" in rest
    assert "then: 0 off\n" in rest
    assert "role: 1 kerrigan device power on: this job holds no board of role 'dut'" in rest
    assert board.boots == 2  # the agent's cycle and the job's
    # The agent's cycle (off, on), the job's (off, on), its off, and after_job's off.
    assert pdu.switches[-6:] == [(OUTLET, v) for v in (False, True, False, True, False, False)]
    env = rest.partition("env: ")[2]
    assert "KERRIGAN_DEVICE_SOCKET" in env
    assert "KERRIGAN_CONSOLE" in env
    assert str(pdu.port) not in env  # neither the PDU's address nor its outlet's wiring
    assert "gude" not in env.lower()


async def test_another_uid_cannot_use_a_jobs_power_socket(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    if (why := cli_out_of_reach()) is not None:
        pytest.skip(f"{why}: its job could not run kerrigan device power")
    if os.geteuid() != 0:
        pytest.skip("connecting as another uid needs root")
    sockets: list[Path] = []
    answers: list[str] = []

    async def as_other(folder: int) -> str:
        # Through a descriptor of the socket's folder: the test's own tmp_path is root's alone (0700),
        # which a job's uid never passes outside its namespace; the folder's own mode is what is tested.
        process = await asyncio.create_subprocess_exec(
            *KERRIGAN,
            "device",
            "power",
            "off",
            env={"KERRIGAN_DEVICE_SOCKET": f"/proc/self/fd/{folder}/device.sock", "PATH": os.environ["PATH"]},
            user=OTHER_UID,
            group=OTHER_UID,
            extra_groups=[],
            pass_fds=(folder,),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await process.communicate()
        return f"{process.returncode} {out.decode().strip()}"

    async def meanwhile() -> None:
        await wait_until(
            lambda: bool(list(tmp_path.glob("lab-a-01/job-areas/*/devices/device.sock"))), timeout=15
        )
        [path] = tmp_path.glob("lab-a-01/job-areas/*/devices/device.sock")
        sockets.append(path)
        folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
        try:
            answers.append(await as_other(folder))
            # Opened to all by mistake: the peer's credentials still refuse it.
            path.parent.chmod(0o711)
            path.chmod(0o666)
            answers.append(await as_other(folder))
        finally:
            os.close(folder)

    script = job(MINE_LATER)
    output = await run_job(harness, agents, tmp_path, pdu, board, script, meanwhile)
    head, _, rest = output.partition("\n")
    if "job user" in rest or not sockets:  # pragma: no cover -- where jobs run as the agent's own user
        pytest.skip("jobs run as the agent's own user here")
    assert head == "succeeded None 0", output
    assert answers[0].startswith("1 kerrigan device power off: cannot reach the agent at /proc/self/fd/"), (
        answers
    )
    assert answers[0].endswith("Permission denied"), answers
    assert answers[1] == "1 kerrigan device power off: refused: this socket is another job's", answers
    assert "mine: 0 on\n" in rest  # the job's own uid still is answered
    assert board.powered is False  # after_job's off; the other uid switched nothing
    assert (OUTLET, False) not in pdu.switches[2:-1]  # only the agent's cycle and after_job switched it off
    assert not sockets[0].exists()  # gone with the job


async def test_a_hostile_job_neither_floods_nor_holds_the_agent(
    harness: Harness, agents: AgentFactory, tmp_path: Path, pdu: GudePdu, board: SimulatedBoard
) -> None:
    canary = tmp_path / "outside" / "canary"
    canary.parent.mkdir()
    canary.write_text("root's")
    script = job(HOSTILE.replace("CANARY", str(canary)))
    output = await run_job(harness, agents, tmp_path, pdu, board, script)
    head, _, rest = output.partition("\n")
    assert head == "succeeded None 0", output
    assert 'flood: {"ok": false, "error": "a request is at most 1024 bytes"}' in rest
    assert 'not json: {"ok": false, "error": "a request is one JSON object on a line"}' in rest
    assert 'unknown op: {"ok": false, "error": "op must be one of cycle, on, off, status"}' in rest
    crowded = rest.partition("crowded: ")[2].partition("\n")[0]
    assert crowded.count("at most 4 connections at once") == 2, crowded
    assert crowded.count('"state": "on"') == 1, crowded
    assert 'then: {"ok": true, "state": "on"}' in rest
    assert 'while flooding: {"ok": true, "state": "on"} True' in rest
    assert canary.read_text() == "root's"  # nothing the agent removed followed the job's link
    assert not list(tmp_path.glob("lab-a-01/job-areas/*"))  # and its area is gone
