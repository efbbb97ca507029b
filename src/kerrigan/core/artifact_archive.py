"""What a GitHub Actions artifact (a zip) may put in a job's workspace: every member checked, within limits.

An artifact is unpacked into a folder of the workspace the manifest names (``path``). Refused, each with one
message naming the member: absolute names, ``..`` components, backslashes (a Windows path: the zip was not
made by ``actions/upload-artifact``), NUL, empty names; the same path twice; a member inside a file; any
member that is not a regular file or a folder (a symbolic link, a device). Limits count what is *written*,
not what headers claim: bytes of contents are counted as they are inflated, so a zip bomb is stopped where
it passes :attr:`~kerrigan.core.unpacking.UnpackLimits.max_bytes`, and members are counted against
``max_files``. Modes are 0o644 (0o755 when the zip marks the file executable for its owner).

Nothing here performs I/O: the runner reads the zip and writes the workspace.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field

from kerrigan.core.unpacking import EXECUTABLE_MODE, FILE_MODE, UnpackLimits, amount


class ArchiveRefusedError(Exception):
    """The artifact may not be unpacked; the message names the member or the limit."""


@dataclass(frozen=True, slots=True)
class ZipEntry:
    """A zip member as its central directory says: its name and the mode bits of ``external_attr``."""

    name: str
    unix_mode: int = 0  # ``external_attr >> 16``; 0 when the zip was not made on Unix


@dataclass
class ZipCheck:
    """The checks of one artifact: :meth:`admit` each member, :meth:`count_bytes` each inflated chunk."""

    artifact: str
    limits: UnpackLimits = field(default_factory=UnpackLimits)
    members: int = 0
    bytes: int = 0
    _kinds: dict[tuple[str, ...], bool] = field(default_factory=dict)  # path -> is a folder

    def admit(self, entry: ZipEntry) -> tuple[tuple[str, ...], bool, int]:
        """Where the member goes (its parts below the folder), whether it is a folder, and its mode."""
        name = entry.name
        shown = repr(name[:200])
        if not name or "\0" in name:
            raise self._refused("a member has an empty name or a NUL in it")
        if "\\" in name:
            raise self._refused(f"member {shown} has a backslash in its name")
        if name.startswith("/"):
            raise self._refused(f"member {shown} has an absolute name")
        folder = name.endswith("/")
        parts = tuple(part for part in name.split("/") if part not in ("", "."))
        if ".." in parts:
            raise self._refused(f"member {shown} has '..' in its name")
        if not parts:
            raise self._refused(f"member {shown} has an empty name")
        kind = stat.S_IFMT(entry.unix_mode)
        if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
            raise self._refused(f"member {shown} is not a file or a folder (a link or a device)")
        folder = folder or kind == stat.S_IFDIR
        self.members += 1
        if self.members > self.limits.max_files:
            raise self._refused(f"has more than {self.limits.max_files} files")
        for depth in range(1, len(parts)):
            if self._kinds.setdefault(parts[:depth], True) is False:
                raise self._refused(f"member {shown} is inside {'/'.join(parts[:depth])!r}, a file")
        earlier = self._kinds.get(parts)
        if earlier is not None and not (earlier and folder):
            raise self._refused(f"member {shown} appears twice")
        self._kinds[parts] = folder
        mode = EXECUTABLE_MODE if entry.unix_mode & 0o100 else FILE_MODE
        return parts, folder, mode

    def _refused(self, what: str) -> ArchiveRefusedError:
        return ArchiveRefusedError(f"artifact {self.artifact!r}: {what}")

    def count_bytes(self, size: int) -> None:
        """Count ``size`` more inflated bytes, refusing them when they would pass the limit."""
        if self.bytes + size > self.limits.max_bytes:
            raise self._refused(f"unpacks to more than {amount(self.limits.max_bytes)}")
        self.bytes += size
