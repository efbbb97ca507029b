"""Secrets hidden in a job's output: every exact occurrence, on bytes, also when split across chunks.

What is hidden. Each secret value contributes *patterns* (UTF-8 bytes): the whole value; each of its lines,
stripped of surrounding whitespace, when at least :data:`MIN_SECRET_BYTES` long and not a PEM boundary
(``-----BEGIN ...-----``), since tools print keys line by line and a serial console turns ``\\n`` into
``\\r\\n``; and the base64 of the value at each of the three byte alignments it can have inside a larger
encoded blob (``base64(user:token)``, ``base64(value + "\\n")``), keeping only the characters that the value
alone determines. That is the GitHub Actions runner's choice (it registers the same three shifts); it stays
exact, and other encodings (line-wrapped base64, hex, URL-escaping) are not attempted: masking guards against
accidents, and a job that means to print its secret can always encode it in a way no masker knows.

The rule. Every byte that lies inside any occurrence of any pattern is hidden, and each maximal run of
*overlapping* occurrences becomes one mask. With secrets ``ab..`` and ``b....`` the text ``ab....`` is one
mask, not a mask followed by the rest of the second secret: a "leftmost-longest match wins" rule would print
most of a secret whose start was taken by another. Occurrences that only touch (adjacent repeats) are masked
one by one (``******``). Among occurrences at one position the longest counts, so a secret that is a prefix or
substring of another is inside the longer's mask.

Short values are refused (:class:`SecretRefusedError`), neither ignored nor masked. GitHub masks any value,
but a short one cannot be masked usefully: ``ok`` or ``1`` would be starred all through every log, and a
value that short is found by printing guesses and seeing which one is starred; ignoring it instead would
print it in clear without a word. Refusing at ``secrets
set`` time (and again when a job's masker is built) tells the person who can fix it. Eight bytes is GitLab's
minimum for masked variables; it also lets the fast filter below anchor on 4-byte pieces.

Streaming. :meth:`Masker.cut` masks a buffer and says how much of it is settled; the rest (at most the longest
pattern less one byte) may be the start of a secret and is held back for the next call, with the count of its
leading bytes already hidden under the mask just emitted (an overlapping occurrence continuing there extends
that mask). Both numbers are all the state there is, so an agent that reads its output from a file can keep
them beside its offset and resume after a restart. :class:`OutputMasker` keeps them in memory.

Speed. One ``re`` alternation of the patterns (longest first) scans at a few MB/s with hundreds of them,
since most positions of ordinary text start some alternative. Instead, every occurrence holds one of its
4-byte pieces at a position divisible by 4 (at least 7 bytes long), or by 12 (at least 15 bytes), and so
on: the buffer read as 32-bit words at that stride, intersected with the set of every piece of every
pattern, runs in C and is almost always empty; where it is not, the patterns holding a piece that was read
are compared (``bytes.startswith``) at the place it was read.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

MASK: Final = b"***"
MIN_SECRET_BYTES: Final = 8
_PIECE: Final = 4  # bytes of the filter's pieces: any pattern of 2 * _PIECE - 1 bytes holds an aligned one
_PEM_BOUNDARY: Final = re.compile(rb"-----(BEGIN|END) [^\r\n]*-----")


class SecretRefusedError(ValueError):
    """A secret value that cannot be masked; the message names the secret, never its value."""


def secret_problem(name: str, value: str) -> str | None:
    """Why the secret ``name`` cannot be masked (for ``secrets set`` and the API), or None when it can."""
    size = len(value.encode("utf-8"))
    if size < MIN_SECRET_BYTES:
        return (
            f"secret {name}: its value is {size} bytes long; a masked secret needs at least "
            f"{MIN_SECRET_BYTES} (a shorter one would be starred all through the output)"
        )
    return None


def patterns_of(value: str) -> frozenset[bytes]:
    """The byte strings hidden for one secret value: itself, its lines, its base64 at three alignments."""
    raw = value.encode("utf-8")
    found = {raw}
    for line in raw.splitlines():
        stripped = line.strip()
        if len(stripped) >= MIN_SECRET_BYTES and not _PEM_BOUNDARY.fullmatch(stripped):
            found.add(stripped)
    for shift in range(3):
        # ``shift`` bytes of something else before the value in its 3-byte group: drop the characters that
        # mix those bytes in, and the last one if it mixes in whatever follows the value.
        encoded = base64.b64encode(bytes(shift) + raw)
        start, end = (8 * shift + 5) // 6, 8 * (shift + len(raw)) // 6
        if end - start >= MIN_SECRET_BYTES:
            found.add(encoded[start:end])
    return frozenset(found)


@dataclass(frozen=True)
class Cut:
    """What :meth:`Masker.cut` made of a buffer."""

    text: bytes  # safe to emit now
    consumed: int  # how many leading bytes of the buffer ``text`` stands for; the rest is held back
    covered: int  # how many leading bytes of the held-back rest are already hidden under ``text``'s last mask


@dataclass(frozen=True)
class Masker:
    """The patterns of a job's secrets, compiled for masking; see the module's notes for the rule."""

    patterns: frozenset[bytes]
    mask: bytes = MASK
    longest: int = field(init=False)
    _pieces: frozenset[int] = field(init=False, repr=False, compare=False)
    _holders: dict[int, tuple[tuple[int, bytes], ...]] = field(init=False, repr=False, compare=False)
    _stride: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.mask:
            # An empty mask would join the text around a secret, and "se" + "" + "cret" can be a secret.
            raise ValueError("the mask must not be empty")
        short = [pattern for pattern in self.patterns if len(pattern) < MIN_SECRET_BYTES]
        if short:
            raise ValueError(f"{len(short)} pattern(s) shorter than {MIN_SECRET_BYTES} bytes")
        # Each 4-byte piece of a pattern, as a word, with every (offset, pattern) it appears at.
        holders: dict[int, list[tuple[int, bytes]]] = {}
        for pattern in sorted(self.patterns):
            for offset in range(len(pattern) - _PIECE + 1):
                word = _words(pattern[offset : offset + _PIECE])[0]
                holders.setdefault(word, []).append((offset, pattern))
        shortest = min(map(len, self.patterns), default=MIN_SECRET_BYTES)
        object.__setattr__(self, "longest", max(map(len, self.patterns), default=0))
        object.__setattr__(self, "_pieces", frozenset(holders))  # a set's intersection runs in C
        object.__setattr__(self, "_holders", {word: tuple(at) for word, at in holders.items()})
        # Every ``_stride``-th word is enough when the shortest pattern spans that many words and 3 bytes.
        object.__setattr__(self, "_stride", max((shortest - _PIECE + 1) // _PIECE, 1))

    @classmethod
    def for_secrets(cls, secrets: Mapping[str, str], mask: bytes = MASK) -> Masker:
        """The masker of a job's secrets (name to value); :class:`SecretRefusedError` naming every secret
        that cannot be masked. Empty values are skipped: there is nothing to hide."""
        problems = [
            problem
            for name, value in sorted(secrets.items())
            if value and (problem := secret_problem(name, value)) is not None
        ]
        if problems:
            raise SecretRefusedError("; ".join(problems))
        return cls(frozenset().union(*(patterns_of(value) for value in secrets.values() if value)), mask)

    @property
    def held(self) -> int:
        """The most bytes :meth:`cut` holds back: a secret's start less its last byte."""
        return max(self.longest - 1, 0)

    def cut(self, data: bytes, covered: int = 0, *, final: bool = False) -> Cut:
        """``data`` masked as far as it is settled; ``covered``: leading bytes of ``data`` already hidden
        under the last mask emitted (the previous cut's). ``final``: nothing follows, settle everything."""
        if not 0 <= covered <= len(data):
            raise ValueError(f"covered is {covered}, outside the {len(data)} bytes given")
        # An occurrence starting before ``settled`` lies wholly in ``data``; one starting later may not, and
        # may still extend the run that ``covered`` continues, so even covered bytes after it are held.
        settled = len(data) if final else max(len(data) - self.held, 0)
        parts: list[bytes] = []
        run_end = covered  # where the run of overlapping occurrences being masked ends; text resumes there
        for start, end in self._occurrences(data, settled):
            if start >= run_end:
                parts += (data[run_end:start], self.mask)
            run_end = max(run_end, end)
        if run_end < settled:
            parts.append(data[run_end:settled])
        return Cut(b"".join(parts), settled, max(run_end - settled, 0))

    def mask_all(self, data: bytes) -> bytes:
        """All of ``data`` masked at once: what the chunks of a stream, masked in turn, add up to."""
        return self.cut(data, final=True).text

    def _occurrences(self, data: bytes, before: int) -> list[tuple[int, int]]:
        """The span of every occurrence of a pattern in ``data`` starting below ``before``, in order."""
        if not self._pieces or before == 0:
            return []
        # Every occurrence holds one of its pieces at a position divisible by 4 * stride: of the words read
        # there, the few that are pieces say where to compare which patterns.
        words = _words(memoryview(data)[: len(data) - len(data) % _PIECE])[:: self._stride]
        hits = self._pieces.intersection(words)
        if not hits:
            return []
        step = _PIECE * self._stride
        found = set()
        for index, word in enumerate(words):
            if word in hits:
                for offset, pattern in self._holders[word]:
                    start = index * step - offset
                    if 0 <= start < before and data.startswith(pattern, start):
                        found.add((start, start + len(pattern)))
        return sorted(found)


class OutputMasker:
    """One output stream masked as it arrives: :meth:`feed` each chunk, :meth:`flush` at the end."""

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self._held = b""
        self._covered = 0

    def feed(self, data: bytes) -> bytes:
        """What is safe to emit after ``data``; what may begin a secret waits for the next chunk."""
        return self._cut(self._held + data, final=False)

    def flush(self) -> bytes:
        """What was held back, masked: the stream has ended."""
        return self._cut(self._held, final=True)

    def _cut(self, data: bytes, *, final: bool) -> bytes:
        cut = self.masker.cut(data, self._covered, final=final)
        self._held, self._covered = data[cut.consumed :], cut.covered
        return cut.text


def _words(data: bytes | memoryview) -> memoryview:
    """``data`` (a multiple of 4 bytes long) read as native 32-bit words, without a copy."""
    return memoryview(data).cast("I")
