"""The runner's workspace store on real directories: measuring, listing and deleting without escaping."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kerrigan.core.disk import AdmissionPlan, DiskPolicy, Workspace, WorkspaceKind, plan_admission
from kerrigan.runner import workspaces
from kerrigan.runner.workspaces import UnsafeWorkspaceError, WorkspaceStore

NOW = 100_000.0
BIG = 4 << 20
SMALL = 64 << 10


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the work dir holding a big file that must never be counted or deleted."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "big.bin").write_bytes(os.urandom(BIG))
    return path


@pytest.fixture
def store(work_dir: Path) -> WorkspaceStore:
    return WorkspaceStore(work_dir)


def write_catalog(work_dir: Path, names: list[str]) -> None:
    entries = {name: {"last_used_s": 0.0, "kind": "task"} for name in names}
    (work_dir / "workspaces.json").write_text(json.dumps({"version": 1, "workspaces": entries}))


def test_size_is_measured_without_following_a_symlink_to_a_big_file_outside(
    store: WorkspaceStore, outside: Path
) -> None:
    path = store.mark_used("firmware", NOW)
    (path / "src").mkdir()
    (path / "src" / "small.bin").write_bytes(os.urandom(SMALL))
    (path / "big-file-link").symlink_to(outside / "big.bin")
    (path / "big-dir-link").symlink_to(outside, target_is_directory=True)

    [workspace] = store.workspaces()

    assert SMALL <= workspace.size_bytes < BIG


class JobAtTheWorstMoment:
    """``os`` as the workspace store sees it, with a running job that swaps ``folder`` for a link to
    ``target`` just before the store opens or lists it (after it saw a folder there)."""

    def __init__(self, folder: Path, target: Path) -> None:
        self.folder, self.target = folder, target

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _swap(self, path: object) -> None:
        if isinstance(path, (str, Path)) and Path(path) == self.folder and not self.folder.is_symlink():
            shutil.rmtree(self.folder)
            self.folder.symlink_to(self.target, target_is_directory=True)

    def open(self, path: Any, *args: Any, **kwargs: Any) -> int:
        self._swap(path)
        return os.open(path, *args, **kwargs)

    def scandir(self, path: Any = ".") -> Any:
        self._swap(path)
        return os.scandir(path)


def test_size_is_measured_without_entering_a_folder_swapped_for_a_link_while_it_is_walked(
    store: WorkspaceStore, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store.mark_used("firmware", NOW)
    (path / "src").mkdir()
    (path / "src" / "small.bin").write_bytes(os.urandom(SMALL))
    monkeypatch.setattr(workspaces, "os", JobAtTheWorstMoment(path / "src", outside))

    [workspace] = store.workspaces()

    assert (path / "src").is_symlink()  # the job did swap it
    assert workspace.size_bytes < BIG


def test_listing_reports_each_catalogued_workspace_with_its_use_and_kind(store: WorkspaceStore) -> None:
    store.mark_used("task-ws", NOW)
    store.mark_used("head-ws", NOW - 60, WorkspaceKind.HEAD)

    listed = store.workspaces(running={"task-ws"}, reserved={"head-ws"})

    assert [(w.name, w.last_used_s, w.kind, w.running, w.reserved) for w in listed] == [
        ("head-ws", NOW - 60, WorkspaceKind.HEAD, False, True),
        ("task-ws", NOW, WorkspaceKind.TASK, True, False),
    ]


def test_marking_used_again_updates_the_time_and_keeps_the_kind(store: WorkspaceStore) -> None:
    store.mark_used("head-ws", NOW - 600, WorkspaceKind.HEAD)
    store.mark_used("head-ws", NOW)

    [workspace] = store.workspaces()

    assert (workspace.last_used_s, workspace.kind) == (NOW, WorkspaceKind.HEAD)


def test_uncatalogued_directory_is_not_listed_so_never_evicted(store: WorkspaceStore, work_dir: Path) -> None:
    store.mark_used("catalogued", NOW - 7200)
    stray = work_dir / "workspaces" / "stray"
    stray.mkdir()
    policy = DiskPolicy(floor_bytes=1 << 60)

    plan = plan_admission(0, store.workspaces(), policy, NOW, frozenset())

    assert store.apply(plan) == ("catalogued",)
    assert stray.is_dir()


def test_applying_a_plan_deletes_the_workspace_but_not_the_target_of_a_symlink_inside_it(
    store: WorkspaceStore, outside: Path, work_dir: Path
) -> None:
    path = store.mark_used("firmware", NOW - 3600)
    (path / "nested" / "deeper").mkdir(parents=True)
    (path / "nested" / "deeper" / "file.txt").write_text("build output")
    (path / "nested" / "file-link").symlink_to(outside / "big.bin")
    (path / "dir-link").symlink_to(outside, target_is_directory=True)
    (path / "dangling").symlink_to(outside / "missing")
    policy = DiskPolicy(floor_bytes=1 << 60)  # always under the floor, so everything evictable goes

    plan = plan_admission(0, store.workspaces(), policy, NOW, frozenset())
    removed = store.apply(plan)

    assert removed == ("firmware",)
    assert not path.exists()
    assert (outside / "big.bin").stat().st_size == BIG
    assert store.workspaces() == []
    assert "firmware" not in (work_dir / "workspaces.json").read_text()


@pytest.mark.parametrize("name", ["..", "../outside", "nested/../../outside", "", "."])
def test_catalog_entry_pointing_outside_the_work_dir_is_refused(
    store: WorkspaceStore, work_dir: Path, outside: Path, name: str
) -> None:
    (work_dir / "workspaces").mkdir()
    write_catalog(work_dir, [name])

    assert store.workspaces() == []
    with pytest.raises(UnsafeWorkspaceError):
        store.remove(name)
    assert store.apply(AdmissionPlan(evict=(Workspace(name, BIG, 0.0),), free_bytes=0)) == ()
    assert (outside / "big.bin").stat().st_size == BIG


def test_catalog_entry_with_an_absolute_path_is_refused(
    store: WorkspaceStore, work_dir: Path, outside: Path
) -> None:
    write_catalog(work_dir, [str(outside)])

    assert store.workspaces() == []
    with pytest.raises(UnsafeWorkspaceError, match="not a workspace directory name"):
        store.remove(str(outside))
    assert outside.is_dir()


def test_workspace_that_is_a_symlink_to_outside_is_refused(
    store: WorkspaceStore, work_dir: Path, outside: Path
) -> None:
    (work_dir / "workspaces").mkdir()
    (work_dir / "workspaces" / "linked").symlink_to(outside, target_is_directory=True)
    write_catalog(work_dir, ["linked"])

    assert store.workspaces() == []
    with pytest.raises(UnsafeWorkspaceError, match="symbolic link"):
        store.remove("linked")
    assert store.apply(AdmissionPlan(evict=(Workspace("linked", BIG, 0.0),), free_bytes=0)) == ()
    assert (outside / "big.bin").stat().st_size == BIG


def test_workspaces_dir_linked_out_of_the_work_dir_is_refused(
    store: WorkspaceStore, work_dir: Path, outside: Path
) -> None:
    (outside / "victim").mkdir()
    (work_dir / "workspaces").symlink_to(outside, target_is_directory=True)
    write_catalog(work_dir, ["victim"])

    assert store.workspaces() == []
    with pytest.raises(UnsafeWorkspaceError, match="not a directory inside the work dir"):
        store.remove("victim")
    assert (outside / "victim").is_dir()


def test_plan_never_deletes_a_running_workspace(store: WorkspaceStore) -> None:
    busy = store.mark_used("busy", NOW - 7200)
    idle = store.mark_used("idle", NOW - 7200)
    policy = DiskPolicy(floor_bytes=1 << 60)

    plan = plan_admission(0, store.workspaces(running={"busy"}), policy, NOW, frozenset())
    store.apply(plan)

    assert plan.evicted_names == ("idle",)
    assert busy.is_dir()
    assert not idle.exists()


def test_applying_skips_a_planned_workspace_that_started_running_since(store: WorkspaceStore) -> None:
    busy = store.mark_used("busy", NOW - 7200)
    running_in_plan = store.mark_used("running-in-plan", NOW - 7200)
    plan = AdmissionPlan(
        evict=(Workspace("busy", 0, 0.0), Workspace("running-in-plan", 0, 0.0, running=True)),
        free_bytes=0,
    )

    assert store.apply(plan, in_use={"busy"}) == ()
    assert busy.is_dir()
    assert running_in_plan.is_dir()


def test_expiry_removes_task_workspaces_idle_a_day_and_keeps_heads_and_busy_ones(
    store: WorkspaceStore,
) -> None:
    day = 24 * 3600
    store.mark_used("stale-task", NOW - day)
    store.mark_used("stale-head", NOW - day, WorkspaceKind.HEAD)
    store.mark_used("busy-task", NOW - day)
    store.mark_used("fresh-task", NOW - 60)

    assert store.expire_idle(NOW, in_use={"busy-task"}) == ("stale-task",)
    assert [w.name for w in store.workspaces()] == ["busy-task", "fresh-task", "stale-head"]


def test_unreadable_catalog_lists_nothing(store: WorkspaceStore, work_dir: Path) -> None:
    store.mark_used("firmware", NOW)
    (work_dir / "workspaces.json").write_text("{not json")

    assert store.workspaces() == []


def test_catalogued_workspace_deleted_by_hand_is_not_listed_and_removes_cleanly(
    store: WorkspaceStore,
) -> None:
    store.mark_used("gone", NOW).rmdir()

    assert store.workspaces() == []
    assert store.remove("gone")


def test_free_bytes_reads_the_work_dirs_filesystem(store: WorkspaceStore, work_dir: Path) -> None:
    stats = os.statvfs(work_dir)
    assert 0 < store.free_bytes() <= stats.f_blocks * stats.f_frsize
