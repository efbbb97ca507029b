"""A job's console log on its way to the server: the bytes its boards' consoles print, masked like its
output, cut into numbered chunks and sent in order to ``POST /jobs/{id}/console``.

The chunks are those of ``/output`` (``{seq, offset, data}``: ``seq`` from 0, ``offset`` in bytes of the
UTF-8 text sent), and so are the answers: ``{"next_seq": N}``, 409 ``gap`` with the ``next_seq`` the server
wants, ``{"output_cut": true}`` once it stores no more. Unlike output, nothing is kept on disk: the console
is the agent's to read only while the job holds the board, and what the server has not acknowledged waits
in memory (at most :data:`MAX_PENDING_BYTES`; older chunks are dropped first and the next one sent says
``truncated_before_seq``, as a replay of evicted output pages does). A server without the endpoint (404) is
sent no more of it. For a gang every role's lines are sent whole, each line after ``[role] ``.
"""

from __future__ import annotations

import codecs
import collections
import logging
from typing import Any, Final

from kerrigan.core.masking import Masker, OutputMasker
from kerrigan.runner.server import ServerClient, ServerRefused, ServerUnavailable

log = logging.getLogger(__name__)

CHUNK_BYTES: Final = 64 * 1024
MAX_PENDING_BYTES: Final = 8 * 1024 * 1024
LONGEST_LINE: Final = 16 * 1024  # a gang role's line that never ends is sent in pieces of this


class ConsoleLog:
    """What a job's consoles printed, masked, cut into chunks, sent in order."""

    def __init__(self, masker: Masker | None, max_bytes: int) -> None:
        self.max_bytes = max_bytes  # the agent's --output-max-bytes: the console is capped like output
        self.masker = OutputMasker(masker) if masker is not None else None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._text: list[str] = []  # masked text not cut into a chunk yet
        self._text_bytes = 0
        self.pending: collections.deque[tuple[int, int, str]] = collections.deque()  # (seq, offset, data)
        self._pending_bytes = 0
        self.next_seq = 0
        self.next_offset = 0
        self.acknowledged = 0  # the next seq the server wants
        self.truncated_before: int | None = None
        self.cut = False  # the server (or the cap) stores no more
        self.refused = False  # the server has no console endpoint
        self._gap: int | None = None  # the seq the last gap answer asked for

    @property
    def done(self) -> bool:
        """Whether nothing more will be sent."""
        return self.cut or self.refused

    def feed(self, data: bytes) -> None:
        """Bytes a console printed (masked here before anything else sees them)."""
        if self.done or self.next_offset + self._text_bytes > self.max_bytes:
            return
        if self.masker is not None:
            data = self.masker.feed(data)
        self._add(self._decoder.decode(data))

    def _add(self, text: str) -> None:
        if not text:
            return
        text = text.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL, which consoles print
        self._text.append(text)
        self._text_bytes += len(text.encode())
        if self._text_bytes >= CHUNK_BYTES:
            self._cut()

    def _cut(self) -> None:
        """Make chunks of the text so far (each at most about :data:`CHUNK_BYTES`)."""
        if not self._text:
            return
        data = "".join(self._text).encode()
        self._text.clear()
        self._text_bytes = 0
        at = 0
        while at < len(data):
            end = min(at + CHUNK_BYTES, len(data))
            while end < len(data) and data[end] & 0xC0 == 0x80:  # never split a character
                end -= 1
            text = data[at:end].decode()
            self.pending.append((self.next_seq, self.next_offset, text))
            self.next_seq += 1
            self.next_offset += end - at
            self._pending_bytes += end - at
            at = end
        while self._pending_bytes > MAX_PENDING_BYTES and len(self.pending) > 1:
            _, _, dropped = self.pending.popleft()
            self._pending_bytes -= len(dropped.encode())
            self.truncated_before = self.pending[0][0]

    def finish(self) -> None:
        """The consoles are closed: what was held back (a possible start of a secret, a partial
        character) is cut too."""
        if self.done:
            return
        tail = self.masker.flush() if self.masker is not None else b""
        self._add(self._decoder.decode(tail, final=True))
        self._cut()

    async def send(self, server: ServerClient, job_id: str, *, retry_s: float = 10.0) -> bool:
        """Send the chunks cut so far that the server has not acknowledged, in order; whether all went
        (or need not: the server stores no more)."""
        self._cut()
        while self.pending and not self.done:
            seq, offset, data = self.pending[0]
            body: dict[str, Any] = {"seq": seq, "offset": offset, "data": data}
            if self.truncated_before is not None and seq == self.truncated_before:
                body["truncated_before_seq"] = seq
            try:
                answer = await server.call("POST", f"/jobs/{job_id}/console", body, retry_timeout_s=retry_s)
            except ServerRefused as err:
                if err.status in (404, 405):
                    log.warning("job %s: the server takes no console log (%s); none is sent", job_id, err)
                    self.refused = True
                    return True
                if err.code == "gap" and isinstance(err.body.get("next_seq"), int):
                    wanted = int(err.body["next_seq"])
                    if wanted == self._gap:  # asked again for what is gone here: nothing more can be sent
                        log.warning(
                            "job %s: console chunk %s is gone; no more of the console is sent", job_id, wanted
                        )
                        self.cut = True
                        return True
                    self._gap = wanted
                    self._resend_from(wanted)
                    continue
                log.warning("job %s: console chunk %s refused (%s); skipped", job_id, seq, err)
                self._acknowledged(seq + 1)
                continue
            except ServerUnavailable as err:
                log.warning("job %s: console log not sent yet: %s", job_id, err)
                return False
            self._acknowledged(int(answer.get("next_seq", seq + 1)))
            self._gap = None
            if answer.get("output_cut") is True:
                self.cut = True
        return True

    def _acknowledged(self, next_seq: int) -> None:
        self.acknowledged = max(self.acknowledged, next_seq)
        while self.pending and self.pending[0][0] < self.acknowledged:
            _, _, data = self.pending.popleft()
            self._pending_bytes -= len(data.encode())

    def _resend_from(self, next_seq: int) -> None:
        """The server wants ``next_seq``: what it has is acknowledged; what it wants that was dropped
        here is gone, and the first chunk kept says so."""
        self._acknowledged(next_seq)
        if self.pending and self.pending[0][0] > next_seq:
            self.truncated_before = self.pending[0][0]
        if not self.pending:
            log.warning("console chunk %s is gone and cannot be sent again", next_seq)
            self.acknowledged = self.next_seq


class RoleLines:
    """A gang role's console as whole lines, each after ``[role] ``, fed on to a job's console log (so
    that the roles' lines never run into each other)."""

    def __init__(self, role: str, log_: ConsoleLog) -> None:
        self.prefix = f"[{role}] ".encode()
        self.log = log_
        self._partial = bytearray()

    def feed(self, data: bytes) -> None:
        self._partial += data
        end = self._partial.rfind(b"\n")
        if end < 0 and len(self._partial) < LONGEST_LINE:
            return
        whole = bytes(self._partial[: end + 1]) if end >= 0 else bytes(self._partial)
        del self._partial[: len(whole)]
        lines = whole.splitlines(keepends=True)
        self.log.feed(b"".join(self.prefix + line for line in lines))

    def finish(self) -> None:
        if self._partial:
            self.log.feed(self.prefix + bytes(self._partial) + b"\n")
            self._partial.clear()
