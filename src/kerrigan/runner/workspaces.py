"""The workspaces on a runner host: which there are, how big, when last used, and deleting them safely.

Each workspace is a directory directly under ``<work dir>/workspaces``. ``<work dir>/workspaces.json``
catalogues the ones the runner made, with when each was last used and its kind; only catalogued workspaces
are measured or deleted, and only while they are plain directories inside the work dir on its filesystem.
Symbolic links are never followed (deleting one removes the link, not its target) and other filesystems
mounted inside a workspace are neither measured nor entered.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kerrigan.core.disk import AdmissionPlan, Workspace, WorkspaceKind, evictable, workspace_expired

log = logging.getLogger(__name__)

CATALOG_VERSION: Final = 1
# O_NOFOLLOW makes the open fail on a link swapped in after the checks, instead of entering its target.
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class UnsafeWorkspaceError(Exception):
    """A workspace the store will not touch: a bad name, a link, a mount, or a path out of the work dir."""


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """What the catalog records about one workspace."""

    last_used_s: float
    kind: WorkspaceKind = WorkspaceKind.TASK


class WorkspaceStore:
    """The catalogued workspaces under one runner work dir."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.root = work_dir / "workspaces"
        self.catalog_path = work_dir / "workspaces.json"

    def free_bytes(self) -> int:
        """Free space on the work dir's filesystem, as much as an unprivileged process may use."""
        stats = os.statvfs(self.work_dir)
        return stats.f_bavail * stats.f_frsize

    def path(self, name: str) -> Path:
        """The directory of workspace ``name``; raises ``UnsafeWorkspaceError`` if it is not safe to touch."""
        if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise UnsafeWorkspaceError(f"{name!r} is not a workspace directory name")
        if self.root.is_symlink() or not self.root.resolve().is_relative_to(self.work_dir.resolve()):
            raise UnsafeWorkspaceError(f"{self.root} is not a directory inside the work dir")
        path = self.root / name
        if not os.path.lexists(path):
            return path
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise UnsafeWorkspaceError(f"workspace {name!r} is a symbolic link")
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeWorkspaceError(f"workspace {name!r} is not a directory")
        if info.st_dev != self.root.lstat().st_dev:
            raise UnsafeWorkspaceError(f"workspace {name!r} is on another filesystem")
        if path.resolve().parent != self.root.resolve():
            raise UnsafeWorkspaceError(f"workspace {name!r} resolves outside the work dir")
        return path

    def workspaces(
        self, running: Collection[str] = frozenset(), reserved: Collection[str] = frozenset()
    ) -> list[Workspace]:
        """Every catalogued workspace that is safe to touch, measured, in name order."""
        found = []
        for name, entry in sorted(self._read_catalog().items()):
            try:
                path = self.path(name)
            except UnsafeWorkspaceError as error:
                log.warning("ignoring catalogued workspace: %s", error)
                continue
            if not path.is_dir():
                continue
            found.append(
                Workspace(
                    name=name,
                    size_bytes=_allocated_bytes(path),
                    last_used_s=entry.last_used_s,
                    running=name in running,
                    reserved=name in reserved,
                    kind=entry.kind,
                )
            )
        return found

    def mark_used(self, name: str, now_s: float, kind: WorkspaceKind | None = None) -> Path:
        """Create the workspace if needed, catalogue it as used at ``now_s`` and return its directory.

        ``kind`` left out keeps the recorded kind, or ``task`` for a new workspace.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path(name)
        path.mkdir(exist_ok=True)
        catalog = self._read_catalog()
        previous = catalog.get(name)
        if kind is None:
            kind = previous.kind if previous else WorkspaceKind.TASK
        catalog[name] = CatalogEntry(last_used_s=now_s, kind=kind)
        self._write_catalog(catalog)
        return path

    def remove(self, name: str) -> bool:
        """Delete a workspace and its catalog entry; ``False`` when a filesystem mounted inside it stayed."""
        path = self.path(name)
        if os.path.lexists(path):
            root_fd = os.open(self.root, _DIRECTORY_FLAGS)
            try:
                removed = _remove_directory(name, root_fd, os.fstat(root_fd).st_dev)
            finally:
                os.close(root_fd)
            if not removed:
                log.warning("workspace %r holds another filesystem; removed what was on ours", name)
                return False
        catalog = self._read_catalog()
        if catalog.pop(name, None) is not None:
            self._write_catalog(catalog)
        return True

    def apply(self, plan: AdmissionPlan, in_use: Collection[str] = frozenset()) -> tuple[str, ...]:
        """Evict the plan's workspaces in order, skipping any now in use; the names actually removed.

        ``in_use`` names workspaces that started running or were reserved after the plan was made.
        """
        busy = frozenset(in_use)
        removed = []
        for workspace in plan.evict:
            if not evictable(workspace, busy):
                log.warning("not evicting workspace %r: it is in use", workspace.name)
                continue
            if self._remove_logged(workspace.name):
                removed.append(workspace.name)
        return tuple(removed)

    def expire_idle(self, now_s: float, in_use: Collection[str] = frozenset()) -> tuple[str, ...]:
        """Delete task workspaces idle for 24 hours; the names removed."""
        removed = []
        for workspace in self.workspaces(running=in_use):
            if workspace_expired(workspace, now_s) and self._remove_logged(workspace.name):
                removed.append(workspace.name)
        return tuple(removed)

    def _remove_logged(self, name: str) -> bool:
        # One workspace that cannot go must not stop the others from going.
        try:
            return self.remove(name)
        except (UnsafeWorkspaceError, OSError) as error:
            log.warning("could not remove workspace %r: %s", name, error)
            return False

    def _read_catalog(self) -> dict[str, CatalogEntry]:
        try:
            document = json.loads(self.catalog_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            # Without the catalog nothing is evicted, which is the safe way to be wrong.
            log.warning("ignoring unreadable workspace catalog %s: %s", self.catalog_path, error)
            return {}
        entries = document.get("workspaces") if isinstance(document, dict) else None
        catalog = {}
        for name, fields in (entries or {}).items():
            try:
                catalog[name] = CatalogEntry(
                    last_used_s=float(fields["last_used_s"]), kind=WorkspaceKind(fields.get("kind", "task"))
                )
            except (TypeError, KeyError, ValueError, AttributeError):
                log.warning("ignoring malformed catalog entry for workspace %r", name)
        return catalog

    def _write_catalog(self, catalog: dict[str, CatalogEntry]) -> None:
        document = {
            "version": CATALOG_VERSION,
            "workspaces": {
                name: {"last_used_s": entry.last_used_s, "kind": entry.kind.value}
                for name, entry in sorted(catalog.items())
            },
        }
        # Written beside the catalog and renamed over it, so a crash leaves the old or the new one whole.
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=self.work_dir, prefix=".workspaces.", suffix=".json", delete=False
        ) as staged:
            json.dump(document, staged, indent=2)
        Path(staged.name).replace(self.catalog_path)


def _allocated_bytes(path: Path) -> int:
    """The disk space deleting ``path`` would free: its own filesystem only, links counted as links.

    A job may be running in it and swap a folder for a link at any moment: each folder is opened without
    following a link and listed only if it is still the folder that was seen in its parent (its device and
    inode), so the walk never leaves the workspace."""
    top = path.lstat()
    device = top.st_dev
    seen: set[int] = set()
    total = 0
    pending = [(path, top.st_ino)]
    while pending:
        folder, inode = pending.pop()
        try:
            fd = os.open(folder, _DIRECTORY_FLAGS)
        except OSError:
            continue  # vanished, a link now, or unreadable while a job runs in it: count what is left
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (device, inode):
                continue  # not the folder seen: reached through a link swapped in on the way
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if info.st_dev != device:
                        continue  # a mount point: another filesystem's space is not freed by deleting ours
                    if stat.S_ISDIR(info.st_mode):
                        pending.append((folder / entry.name, info.st_ino))
                    if info.st_ino not in seen:  # hard links share their blocks
                        seen.add(info.st_ino)
                        total += info.st_blocks * 512
        except OSError:
            continue
        finally:
            os.close(fd)
    return total


def _remove_directory(name: str, parent_fd: int, device: int) -> bool:
    """Delete directory ``name`` under ``parent_fd`` and everything in it on ``device``.

    Returns ``False`` when a mount point inside kept something, so the directory had to stay.
    """
    fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent_fd)
    try:
        if os.fstat(fd).st_dev != device:
            return False
        emptied = True
        with os.scandir(fd) as entries:
            children = list(entries)
        for entry in children:
            if entry.is_dir(follow_symlinks=False):
                emptied = _remove_directory(entry.name, fd, device) and emptied
            else:
                os.unlink(entry.name, dir_fd=fd)  # a symbolic link goes; its target stays
    finally:
        os.close(fd)
    if emptied:
        os.rmdir(name, dir_fd=parent_fd)
    return emptied
