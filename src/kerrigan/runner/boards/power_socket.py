"""A job's hand on its boards' power: a Unix socket the agent serves for that job only
(``KERRIGAN_DEVICE_SOCKET``), speaking :mod:`~kerrigan.runner.boards.power_requests`.

Only the job's user reaches it: the socket is in a folder of its own, made by the agent (root) mode 0700,
the socket bound in it before the folder is given to the job's uid, so no other job's uid may even look it
up; and every connection's peer credentials (``SO_PEERCRED``: the uid of the process that connected, as the
kernel saw it) must be the job's uid, else it is answered a refusal and closed (a folder opened wider by
mistake, or a descriptor passed on, gives nobody else the board). The agent's own switch drivers
(:mod:`~kerrigan.runner.boards.power`) do the work with their ``timeout_s``; the job never learns what
switches its board: an answer names the device, never the PDU, its address or its credentials, and a
failure says only that it failed (the agent's log has the masked reason).

A hostile job cannot hold the agent: a request line longer than
:data:`~kerrigan.runner.boards.power_requests.LONGEST_REQUEST` is refused and its connection closed (the
reader never buffers more); a connection that sends nothing for :data:`IDLE_S` is closed, and so is one
that does not read its answers within :data:`ANSWER_S`; at most :data:`MOST_CONNECTIONS` are open at once;
and one power call at a time is made for the job, each bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import struct
from pathlib import Path
from typing import Any, Final

from kerrigan.runner.boards.control import Board
from kerrigan.runner.boards.power import PowerFailed
from kerrigan.runner.boards.power_requests import (
    LONGEST_REQUEST,
    SOCKET_NAME,
    PowerAnswer,
    PowerOp,
    PowerRequest,
    PowerState,
    RequestError,
)

log = logging.getLogger(__name__)

IDLE_S: Final = 30.0  # a connection that asks nothing for this long is closed
ANSWER_S: Final = 5.0  # an answer the job does not read within this closes its connection
MOST_CONNECTIONS: Final = 4  # open at once, per job
BACKLOG: Final = 16  # connections waiting to be refused (a full one makes a connect fail at once)
SLACK_S: Final = 5.0  # beyond the drivers' own bounds, before a power call is given up here too


class PowerSocket:
    """The power socket of one job's boards: :meth:`open` it before the command, :meth:`close` at its end."""

    def __init__(self, job_id: str, boards: list[Board], uid: int, folder: Path) -> None:
        self.job_id = job_id
        self.boards = boards
        self.uid = uid  # the only uid answered
        self.folder = folder
        self.refused = 0  # connections of another uid, refused
        self._server: asyncio.Server | None = None
        self._lock = asyncio.Lock()  # one power call at a time
        self._connections: set[asyncio.Task[None]] = set()
        self._calls: set[asyncio.Task[PowerState]] = set()  # power calls under way, which close waits for

    @property
    def path(self) -> Path:
        return self.folder / SOCKET_NAME

    async def open(self) -> Path:
        """Make the folder and the socket, the job's own; start answering. The socket's path."""
        self.folder.mkdir(mode=0o700)  # new: nothing of the job's is in it to follow
        folder = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Bound through the folder's descriptor: the path a socket may have is 108 bytes, a work dir's
            # may be longer (the job connects the same way, kerrigan device power does).
            listener.bind(f"/proc/self/fd/{folder}/{SOCKET_NAME}")
            os.chmod(SOCKET_NAME, 0o600, dir_fd=folder)  # only root may enter the folder yet
            os.chown(SOCKET_NAME, self.uid, self.uid, dir_fd=folder, follow_symlinks=False)
            os.fchown(folder, self.uid, self.uid)  # only now may the job enter it
            listener.setblocking(False)
            self._server = await asyncio.start_unix_server(
                self._serve, sock=listener, limit=LONGEST_REQUEST, backlog=BACKLOG
            )
        except BaseException:
            listener.close()
            raise
        finally:
            os.close(folder)
        return self.path

    async def close(self) -> None:
        """Stop answering, end every connection, let a power call under way end (each is bounded), remove
        the folder."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        # A call the job asked for is let finish (each is bounded), never left running behind the agent's
        # own: a PDU's call, in a thread no cancel stops, could switch the board on after after_job's off.
        await asyncio.gather(*self._calls, return_exceptions=True)
        await asyncio.to_thread(shutil.rmtree, self.folder, True)  # fd-based: links in it are not followed

    # -- a connection ------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._converse(reader, writer)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), ANSWER_S)

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_uid(writer.get_extra_info("socket"))
        if peer != self.uid:
            self.refused += 1
            log.warning("job %s: its power socket refused a connection of uid %s", self.job_id, peer)
            await _answer(writer, PowerAnswer(error="refused: this socket is another job's"))
            return
        if len(self._connections) > MOST_CONNECTIONS:
            crowded = f"refused: at most {MOST_CONNECTIONS} connections at once"
            await _answer(writer, PowerAnswer(error=crowded))
            return
        while True:
            try:
                line = await asyncio.wait_for(reader.readuntil(b"\n"), IDLE_S)
            except asyncio.IncompleteReadError:
                return  # the job hung up
            except asyncio.LimitOverrunError:
                await _answer(writer, PowerAnswer(error=f"a request is at most {LONGEST_REQUEST} bytes"))
                return
            try:
                request = PowerRequest.parse(line)
            except RequestError as err:
                await _answer(writer, PowerAnswer(error=str(err)))
                continue
            async with self._lock:
                answer = await self._apply(request)
            await _answer(writer, answer)

    # -- the board ---------------------------------------------------------------------------------

    def _board(self, role: str | None) -> Board | str:
        """The board a request names, or why none."""
        powered = [board for board in self.boards if board.power is not None]
        roles = ", ".join(str(board.role) for board in powered if board.role is not None)
        if role is None:
            if len(powered) == 1:
                return powered[0]
            return f"this job's boards of roles {roles} have power: say which with --role"
        found = [board for board in powered if board.role == role]
        if found:
            return found[0]
        if not roles:
            return f"this job holds no board of role {role!r} (it holds one board: leave --role out)"
        return f"this job holds no board of role {role!r} with power (its roles with power: {roles})"

    async def _apply(self, request: PowerRequest) -> PowerAnswer:
        board = self._board(request.role)
        if isinstance(board, str):
            return PowerAnswer(error=board)
        power, wiring = board.power, board.wiring.power
        assert power is not None
        assert wiring is not None
        log.info("job %s: power %s of %s, as the job asked", self.job_id, request.op.value, board.named)
        # The drivers bound every call by timeout_s; a cycle is two calls and off_s between.
        bound = 2 * wiring.timeout_s + wiring.off_s + SLACK_S
        call = asyncio.create_task(asyncio.wait_for(self._switch(board, request.op), bound))
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)
        try:
            state = await asyncio.shield(call)  # the job hanging up, or its end, does not stop the call
        except (PowerFailed, TimeoutError) as err:
            log.warning("job %s: power %s of %s failed: %s", self.job_id, request.op.value, board.named, err)
            return PowerAnswer(
                error=f"{board.named}: power {request.op.value} failed (the runner host's log says why)"
            )
        return PowerAnswer(state=state)

    @staticmethod
    async def _switch(board: Board, op: PowerOp) -> PowerState:
        power, wiring = board.power, board.wiring.power
        assert power is not None
        assert wiring is not None
        if op is PowerOp.STATUS:
            found = await power.status()
            return PowerState.UNKNOWN if found is None else PowerState.ON if found else PowerState.OFF
        if op is PowerOp.OFF:
            await power.off()
            return PowerState.OFF
        if op is PowerOp.ON:
            await power.on()
        else:
            await power.cycle(wiring.off_s)
        return PowerState.ON


def peer_uid(sock: Any) -> int | None:
    """The uid of the process that connected ``sock`` (a socket, or asyncio's transport socket) as
    ``SO_PEERCRED`` says it; None when it cannot be read."""
    if sock is None:
        return None
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except OSError:
        return None
    return int(uid)


async def _answer(writer: asyncio.StreamWriter, answer: PowerAnswer) -> None:
    """Written, and read by the job within :data:`ANSWER_S` (TimeoutError closes the connection)."""
    writer.write(answer.line())
    await asyncio.wait_for(writer.drain(), ANSWER_S)
