"""What a repository tarball may put in a job's workspace: the checks of every member, and the limits.

The runner unpacks a tarball member by member; each member is shown to :class:`TarballCheck` before anything
is written, and the check says where it goes or refuses it with one message naming it. GitHub wraps the tree
in a single top-level folder (``owner-repo-sha/``), which is stripped. Refused: absolute names, ``..``
components, empty names and names with NUL; members outside the top folder; any member whose path passes
through a symbolic link of the tarball (or through a file); the same path twice (folders excepted); hard
links whose target is not a regular file earlier in the tarball; device files, FIFOs, sparse files and any
type other than regular file, folder, symbolic link and hard link; symbolic links leading outside the
workspace.

Symbolic links are resolved *lexically* against the tarball's own tree, never against the disk: a target is
followed through the other links of the tarball (a chain of up to :data:`MAX_LINK_HOPS` links, as Linux
allows, and never round a loop), with no path-length limit to stop resolving early (the trick of
CVE-2025-4517, which defeats the standard library's ``data`` filter where ``os.path.realpath`` gives up past
PATH_MAX). Links are resolved once the whole tarball has been read, so their order in it does not matter, and
are created only then: nothing is ever written through one.

Modes are masked rather than refused: a file is 0o755 when its owner may execute it, else 0o644; a folder
is 0o755. Git records only those two file modes, so the mask loses nothing a repository holds, and no
set-user-id, set-group-id or sticky bit is ever set.

Nothing here performs I/O: the caller reads the tarball and writes the workspace.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

KIB: Final = 1 << 10
MIB: Final = 1 << 20
GIB: Final = 1 << 30
# The default limits are far above what a firmware repository unpacks to (the Linux kernel's tree, among the
# largest anyone tests on hardware, is about 1.5 GiB in 90,000 files) and far below what fills a runner
# host's disk or inode table: a repository that reaches them is a mistake or an attack.
DEFAULT_MAX_BYTES: Final = 4 * GIB
DEFAULT_MAX_FILES: Final = 200_000
# What the tar stream may hold per member besides its contents: its header, a pax header for a long name or
# link target, padding. Tarfile reads a pax header whole, so the stream itself is limited too.
HEADER_ALLOWANCE: Final = 4 * KIB
MAX_LINK_HOPS: Final = 40  # Linux's MAXSYMLINKS: a longer chain would not resolve on disk either
FILE_MODE: Final = 0o644
EXECUTABLE_MODE: Final = 0o755
FOLDER_MODE: Final = 0o755


class TarballRefusedError(Exception):
    """The tarball may not be unpacked; the message names the member or the limit."""


@dataclass(frozen=True, slots=True)
class UnpackLimits:
    """How much one tarball may unpack to: bytes of file contents and members (files, folders, links)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_files: int = DEFAULT_MAX_FILES

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


class Kind(enum.Enum):
    """A tar member's type, as the caller read it from the member's header."""

    FILE = "regular file"
    FOLDER = "folder"
    SYMLINK = "symbolic link"
    HARD_LINK = "hard link"
    CHARACTER_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    FIFO = "FIFO"
    SPARSE_FILE = "sparse file"
    OTHER = "member of a type other than file, folder or link"


@dataclass(frozen=True, slots=True)
class Member:
    """One member of the tarball, as its header says: its name, type, size, mode and link target."""

    name: str
    kind: Kind
    size: int = 0
    mode: int = FILE_MODE
    linkname: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    """What a member becomes in the workspace: ``path`` (its parts below the workspace), the mode to give a
    file or folder, and for a link its ``target`` (a symbolic link's text, a hard link's path parts)."""

    path: tuple[str, ...]
    kind: Kind
    mode: int = FILE_MODE
    target: str = ""
    linked: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The path as messages name it."""
        return "/".join(self.path)


def amount(size: int) -> str:
    """``size`` bytes the way a limit is spoken of: ``4 GiB``, ``64 MiB``, else in bytes."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


@dataclass
class TarballCheck:
    """The checks of one tarball, member by member in the tarball's order, then its links once it is read.

    :meth:`admit` each member before writing it, :meth:`count_bytes` each chunk of contents before writing
    it, and :meth:`links` at the end: the symbolic links to create, all resolved inside the workspace. The
    uncompressed tar stream as it is read goes to :meth:`count_stream`, which bounds what a reader holds
    before a member is even seen (a huge pax header).
    """

    limits: UnpackLimits = field(default_factory=UnpackLimits)
    members: int = 0
    bytes: int = 0
    streamed: int = 0
    _top: str | None = None
    _kinds: dict[tuple[str, ...], Kind] = field(default_factory=dict)
    _links: dict[tuple[str, ...], Placement] = field(default_factory=dict)

    def admit(self, member: Member) -> Placement | None:
        """Where ``member`` goes in the workspace (``None``: the top-level folder itself, not written)."""
        parts = self._parts(member.name, member.name)
        if self._top is None:
            self._top = parts[0]
        if parts[0] != self._top:
            raise TarballRefusedError(
                f"member {member.name!r} is outside the tarball's top folder {self._top!r}"
            )
        path = parts[1:]
        if not path:
            if member.kind is Kind.FOLDER:
                return None
            raise TarballRefusedError(
                f"member {member.name!r} is the tarball's top folder but a {member.kind.value}"
            )
        shown = "/".join(path)
        self.members += 1
        if self.members > self.limits.max_files:
            raise TarballRefusedError(f"the repository's tarball has more than {self.limits.max_files} files")
        self._check_parents(path, shown)
        earlier = self._kinds.get(path)
        if earlier is not None and not (earlier is Kind.FOLDER and member.kind is Kind.FOLDER):
            raise TarballRefusedError(f"member {shown!r} appears twice in the tarball")
        placement = self._placement(member, path, shown)
        self._kinds[path] = member.kind
        if member.kind is Kind.SYMLINK:
            self._links[path] = placement
        return placement

    def count_bytes(self, size: int) -> None:
        """Count ``size`` more bytes of contents, refusing them when they would pass the limit."""
        if self.bytes + size > self.limits.max_bytes:
            raise self._too_big()
        self.bytes += size

    def count_stream(self, size: int) -> None:
        """Count ``size`` more bytes of the uncompressed tar stream: the contents the limit allows and, per
        member it allows, :data:`HEADER_ALLOWANCE` (with one more member's worth for the end of the tar)."""
        self.streamed += size
        if self.streamed > self.limits.max_bytes + (self.limits.max_files + 1) * HEADER_ALLOWANCE:
            raise self._too_big()

    def _too_big(self) -> TarballRefusedError:
        return TarballRefusedError(
            f"the repository's tarball unpacks to more than {amount(self.limits.max_bytes)}"
        )

    def links(self) -> Iterator[Placement]:
        """The tarball's symbolic links, in its order, each resolved against the whole tree: call once every
        member has been admitted; a link leading outside the workspace is refused."""
        resolved: dict[tuple[str, ...], tuple[tuple[str, ...], int]] = {}
        for path, placement in self._links.items():
            self._resolve_link(path, resolved, set())
            yield placement

    # -- the rules -------------------------------------------------------------------------------------

    def _parts(self, name: str, shown: str) -> tuple[str, ...]:
        """The parts of a name in the tarball (``.`` and empty parts dropped)."""
        if not name:
            raise TarballRefusedError("a member of the tarball has an empty name")
        if "\0" in name:
            raise TarballRefusedError(f"member {shown!r} has a NUL in its name")
        if name.startswith("/"):
            raise TarballRefusedError(f"member {shown!r} has an absolute name")
        parts = tuple(part for part in name.split("/") if part not in ("", "."))
        if ".." in parts:
            raise TarballRefusedError(f"member {shown!r} has '..' in its name")
        if not parts:
            raise TarballRefusedError(f"member {shown!r} has an empty name")
        return parts

    def _check_parents(self, path: tuple[str, ...], shown: str) -> None:
        for depth in range(1, len(path)):
            parent = path[:depth]
            kind = self._kinds.get(parent)
            if kind is Kind.SYMLINK:
                raise TarballRefusedError(f"member {shown!r} passes through the link {'/'.join(parent)!r}")
            if kind is not None and kind is not Kind.FOLDER:
                raise TarballRefusedError(
                    f"member {shown!r} is inside {'/'.join(parent)!r}, which is not a folder"
                )
        for depth in range(1, len(path)):  # created as folders on the way to the member
            self._kinds.setdefault(path[:depth], Kind.FOLDER)

    def _placement(self, member: Member, path: tuple[str, ...], shown: str) -> Placement:
        kind = member.kind
        if kind is Kind.FOLDER:
            return Placement(path, kind, FOLDER_MODE)
        if kind is Kind.FILE:
            if member.size < 0:
                raise TarballRefusedError(f"member {shown!r} has a negative size")
            if self.bytes + member.size > self.limits.max_bytes:  # refused before a byte of it is written
                raise self._too_big()
            return Placement(path, kind, EXECUTABLE_MODE if member.mode & 0o100 else FILE_MODE)
        if kind is Kind.SYMLINK:
            target = member.linkname
            if not target:
                raise TarballRefusedError(f"member {shown!r} is a link with no target")
            if "\0" in target:
                raise TarballRefusedError(f"member {shown!r} has a NUL in its link target")
            if target.startswith("/"):
                raise TarballRefusedError(f"member {shown!r} links outside the workspace")
            return Placement(path, kind, target=target)
        if kind is Kind.HARD_LINK:
            return Placement(path, kind, linked=self._hard_link_target(member, shown))
        article = "an" if kind.value[0] in "aeiou" else "a"
        raise TarballRefusedError(f"member {shown!r} is {article} {kind.value}")

    def _hard_link_target(self, member: Member, shown: str) -> tuple[str, ...]:
        # A hard link names its target by its name in the tarball, top folder included.
        if not member.linkname:
            raise TarballRefusedError(f"member {shown!r} is a hard link with no target")
        parts = tuple(part for part in member.linkname.split("/") if part not in ("", "."))
        target = parts[1:] if parts and parts[0] == self._top else ()
        named = not member.linkname.startswith("/") and ".." not in parts and "\0" not in member.linkname
        if not named or not target or self._kinds.get(target) not in (Kind.FILE, Kind.HARD_LINK):
            raise TarballRefusedError(
                f"member {shown!r} is a hard link to {member.linkname!r}, which is not a file earlier in "
                "the tarball"
            )
        return target

    def _resolve_link(
        self,
        path: tuple[str, ...],
        resolved: dict[tuple[str, ...], tuple[tuple[str, ...], int]],
        resolving: set[tuple[str, ...]],
    ) -> tuple[tuple[str, ...], int]:
        """Where the link at ``path`` leads, lexically, through the tarball's other links, and how many
        links that follows."""
        done = resolved.get(path)
        if done is not None:
            return done
        shown = "/".join(path)
        if path in resolving or len(resolving) > MAX_LINK_HOPS:
            raise TarballRefusedError(
                f"member {shown!r} starts a loop of links or a chain of more than {MAX_LINK_HOPS}"
            )
        resolving.add(path)
        here, hops = list(path[:-1]), 0
        for part in self._links[path].target.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not here:
                    raise TarballRefusedError(f"member {shown!r} links outside the workspace")
                here.pop()
                continue
            here.append(part)
            if tuple(here) in self._links:  # followed as the disk would follow it
                inner, inner_hops = self._resolve_link(tuple(here), resolved, resolving)
                hops += 1 + inner_hops
                if hops > MAX_LINK_HOPS:
                    raise TarballRefusedError(
                        f"member {shown!r} starts a loop of links or a chain of more than {MAX_LINK_HOPS}"
                    )
                here = list(inner)
        resolving.discard(path)
        resolved[path] = (tuple(here), hops)
        return resolved[path]
