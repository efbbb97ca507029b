"""``kerrigan console DEVICE``: the console of a board you hold (its reservation is yours; System Admins any
board no job holds; the owners of its pool watch it read-only), through the lab's server to the board's
runner host (``GET /api/v1/devices/{id}/console``, a WebSocket; docs/reservations.md).

The board's bytes go to stdout as they come; what you type goes to the board (stdin in raw mode when it is a
terminal). Ctrl-] leaves. Exit status: 0 when you left or the session ended as sessions do (idle, the
reservation ended); 1 when refused (the server's message is printed), cut off, or the agent or the console
failed; 2 usage and connection errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import termios
import threading
import tty
from typing import TYPE_CHECKING, Final
from urllib.parse import quote

from kerrigan.cli.api_client import ApiRefusedError, api_call, api_options
from kerrigan.cli.usage import UsageError

if TYPE_CHECKING:
    from aiohttp import ClientWebSocketResponse

EXIT_REFUSED: Final = 1
LEAVE: Final = b"\x1d"  # Ctrl-]
READ_BLOCK: Final = 4096


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan console``."""
    console = commands.add_parser(
        "console",
        help="the console of a board you hold on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN); Ctrl-] leaves",
        description="Open the console of a board whose reservation you hold (System Admins: any board no job "
        "holds; the owners of its pool watch read-only), through its runner host's agent. Ctrl-] leaves. "
        "Exit status: 0 left or ended, 1 refused or failed (the reason is printed), 2 usage or connection "
        "error.",
    )
    console.add_argument("device", metavar="DEVICE", help="the device's id")
    console.add_argument("--read-only", action="store_true", help="watch: send nothing you type")
    api_options(console)
    console.set_defaults(handler=_console)


def _console(args: argparse.Namespace) -> int:
    path = f"/devices/{quote(args.device, safe='')}/console"
    return run_session(args, path, "console", f"the console of {args.device}")


def run_session(args: argparse.Namespace, path: str, command: str, what: str) -> int:
    """``kerrigan console`` and ``kerrigan shell``: the WebSocket at ``path`` bridged to this terminal
    until the person leaves (Ctrl-]) or the server ends it; ``command`` names this command's own lines,
    ``what`` the thing opened."""
    try:
        return asyncio.run(_session(args, path, command, what))
    except ApiRefusedError as exc:
        print(f"kerrigan {command}: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return EXIT_REFUSED


async def _session(args: argparse.Namespace, path: str, command: str, what: str) -> int:
    import aiohttp

    url = (args.url or os.environ.get("KERRIGAN_URL", "")).rstrip("/")
    token = args.token or os.environ.get("KERRIGAN_TOKEN") or None
    if not url:
        raise UsageError("say where the lab is: --url or KERRIGAN_URL (like https://kerrigan.example.com)")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http:
        try:
            socket = await http.ws_connect(f"{url}/api/v1{path}", headers=headers, heartbeat=30.0)
        except aiohttp.WSServerHandshakeError:
            # The refusal's words are in a plain call's answer (a handshake's error has no body).
            await api_call(args, "GET", path)
            raise UsageError(f"{url} did not open {what}") from None
        except aiohttp.ClientError as err:
            raise UsageError(f"{url} could not be reached: {err}") from None
        async with socket:
            return await _bridge(socket, read_only=getattr(args, "read_only", False), command=command)


async def _bridge(socket: ClientWebSocketResponse, *, read_only: bool, command: str) -> int:
    import aiohttp

    loop = asyncio.get_running_loop()
    keys: asyncio.Queue[bytes] = asyncio.Queue()
    stdin = sys.stdin.fileno()
    terminal = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if terminal else None
    _read_stdin(loop, stdin, keys)
    end: dict[str, object] = {}
    left = False

    async def typing() -> None:
        while data := await keys.get():
            leaving = LEAVE in data
            data = data.split(LEAVE, 1)[0]
            if data and not read_only:
                await socket.send_bytes(data)
            if leaving:
                return
        await asyncio.Event().wait()  # stdin ended: watch on until the session ends

    async def showing() -> None:
        out = sys.stdout.buffer
        async for message in socket:
            if message.type is aiohttp.WSMsgType.BINARY:
                out.write(message.data)
                out.flush()
            elif message.type is aiohttp.WSMsgType.TEXT:
                frame = json.loads(message.data)
                if frame.get("type") == "open":
                    _say(f"connected to {_opened(frame)}; Ctrl-] leaves", terminal, command)
                elif frame.get("type") == "notice":
                    _say(str(frame.get("message")), terminal, command)
                elif frame.get("type") == "end":
                    end.update(frame)

    try:
        if saved is not None:
            tty.setraw(stdin)
        tasks = [asyncio.create_task(typing()), asyncio.create_task(showing())]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        left = tasks[0] in done
        if left:
            await socket.close()
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
    if left:
        _say("you left", terminal=False, command=command)
        return 0
    reason = str(end.get("reason") or f"the server closed the {command} (code {socket.close_code})")
    _say(reason, terminal=False, command=command)
    return 0 if end.get("ok") else EXIT_REFUSED


def _opened(frame: dict[str, object]) -> str:
    """What the open frame says was opened: a device's console, or a job's sandbox."""
    mode = " (read-only)" if frame.get("read_only") else ""
    if "job" in frame:
        return f"job {frame['job']}'s sandbox (device {frame.get('device')}){mode}"
    return f"{frame.get('device')}{mode}"


def _read_stdin(loop: asyncio.AbstractEventLoop, fd: int, keys: asyncio.Queue[bytes]) -> None:
    """What is typed, into ``keys`` as it comes (b"" at its end): the loop watches a terminal or a pipe, a
    thread of its own reads anything else (a file)."""

    def readable() -> None:
        data = os.read(fd, READ_BLOCK)
        keys.put_nowait(data)
        if not data:
            loop.remove_reader(fd)

    try:
        loop.add_reader(fd, readable)
    except PermissionError:

        def read_all() -> None:
            while True:
                data = os.read(fd, READ_BLOCK)
                with contextlib.suppress(RuntimeError):  # the loop ended first
                    loop.call_soon_threadsafe(keys.put_nowait, data)
                if not data:
                    return

        threading.Thread(target=read_all, name="kerrigan-console-stdin", daemon=True).start()


def _say(text: str, terminal: bool, command: str) -> None:
    """A line of this command's own, on stderr (a raw terminal needs its carriage returns)."""
    line = f"\r\nkerrigan {command}: {text}\r\n" if terminal else f"kerrigan {command}: {text}\n"
    sys.stderr.write(line)
    sys.stderr.flush()
