"""``kerrigan device power cycle|on|off|status [--role ROLE]``: a job's command switching its own board,
through the agent that runs it (``KERRIGAN_DEVICE_SOCKET``, :mod:`kerrigan.runner.boards.power_requests`).

It prints the board's power state after the call (``on``, ``off``, ``unknown``) and exits 0; when the agent
refuses or the power call fails it prints one line saying why and exits 1; run outside a job of a board with
power, it says so and exits 2. Only the standard library is used here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from typing import Final

from kerrigan.cli.usage import UsageError
from kerrigan.runner.boards.power_requests import (
    SOCKET_NAME,
    PowerAnswer,
    PowerOp,
    PowerRequest,
    RequestError,
)

SOCKET_VARIABLE: Final = "KERRIGAN_DEVICE_SOCKET"
LONGEST_ANSWER: Final = 64 * 1024
LONGEST_SOCKET_PATH: Final = 107  # a sockaddr_un's path, its NUL not counted
DEFAULT_WAIT_S: Final = 600.0  # a cycle may take two power calls' timeouts and off_s


class DeviceError(Exception):
    """The agent could not be asked, or refused, or the power call failed: one line."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    device = commands.add_parser("device", help="a job's own board, from inside the job")
    actions = device.add_subparsers(dest="device_command", required=True, metavar="ACTION")
    power = actions.add_parser(
        "power",
        help="switch the job's board through the agent (KERRIGAN_DEVICE_SOCKET)",
        description="Switch the power of the job's board through the agent running the job, and print its "
        "state after (on, off or unknown).",
    )
    power.add_argument("op", choices=[op.value for op in PowerOp], help="what to do")
    power.add_argument("--role", help="the gang role whose board (needed when several have power)")
    power.add_argument(
        "--wait-s", type=float, default=DEFAULT_WAIT_S, help="how long to wait for the agent's answer"
    )
    power.set_defaults(handler=_power)


def _power(args: argparse.Namespace) -> int:
    path = os.environ.get(SOCKET_VARIABLE, "")
    if not path:
        raise UsageError(f"power: {SOCKET_VARIABLE} is not set: run it in a job on a board with power")
    try:
        answer = ask(path, PowerRequest(PowerOp(args.op), args.role), args.wait_s)
    except DeviceError as err:
        print(f"kerrigan device power {args.op}: {err}", file=sys.stderr)
        return 1
    if not answer.ok:
        print(f"kerrigan device power {args.op}: {answer.error}", file=sys.stderr)
        return 1
    assert answer.state is not None
    print(answer.state.value)
    return 0


def ask(path: str, request: PowerRequest, wait_s: float) -> PowerAnswer:
    """Send ``request`` to the agent's socket at ``path``; its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(wait_s)
        try:
            connect(sock, path)
            # Refused at once and hung up on (another uid, too many connections): its answer waits to be read.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(request.line())
            received = bytearray()
            while b"\n" not in received and len(received) < LONGEST_ANSWER:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                received += chunk
        except TimeoutError:
            raise DeviceError(f"the agent did not answer within {wait_s:g} s") from None
        except OSError as err:
            raise DeviceError(f"cannot reach the agent at {path}: {err.strerror or err}") from None
    line, found, _ = bytes(received).partition(b"\n")
    if not found:
        raise DeviceError("the agent hung up without answering")
    try:
        return PowerAnswer.parse(line)
    except RequestError as err:
        raise DeviceError(str(err)) from None


def connect(sock: socket.socket, path: str) -> None:
    """Connect to the socket at ``path``; one whose path is too long for a socket address is reached
    through its folder's descriptor, as the agent bound it."""
    if len(os.fsencode(path)) <= LONGEST_SOCKET_PATH:
        sock.connect(path)
        return
    folder, _, name = path.rpartition("/")
    fd = os.open(folder or "/", os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{name or SOCKET_NAME}")
    finally:
        os.close(fd)
