"""Agents on one host hold their job user ranges: a range, or one overlapping it, that another agent holds
is refused with a line naming it, its holder and the lock file; a range of its own is held."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kerrigan.runner.isolation.range_lock import RangeLock, RangeLockError, hold_range
from kerrigan.runner.isolation.users import UserRange

HOLD = """
import sys
from pathlib import Path
from kerrigan.runner.isolation.range_lock import hold_range
from kerrigan.runner.isolation.users import UserRange
lock = hold_range(UserRange.parse(sys.argv[1]), Path("/var/lib/other-agent"), Path(sys.argv[2]))
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "locks"


@pytest.fixture
def held(folder: Path) -> Iterator[RangeLock]:
    lock = hold_range(UserRange(61000, 61183), Path("/var/lib/kerrigan-runner"), folder)
    yield lock
    lock.release()


def test_the_same_range_is_refused_naming_the_holder_and_the_lock_file(held: RangeLock, folder: Path) -> None:
    with pytest.raises(RangeLockError) as refused:
        hold_range(UserRange(61000, 61183), Path("/srv/second"), folder)
    assert str(refused.value) == (
        f"job users 61000-61183 are held by another agent on this host (pid {os.getpid()}, work dir "
        f"/var/lib/kerrigan-runner; lock file {folder}/job-users-61000-61183.lock): give each agent on a "
        "host a --job-users range of its own"
    )


@pytest.mark.parametrize("other", ["61183-61300", "60000-61000", "61050-61060", "60000-70000"])
def test_an_overlapping_range_is_refused(held: RangeLock, folder: Path, other: str) -> None:
    with pytest.raises(RangeLockError, match=f"job users {other} overlap 61000-61183, held by another agent"):
        hold_range(UserRange.parse(other), Path("/srv/second"), folder)
    # The refused one let its own lock go: once the first is gone, its range is free.
    held.release()
    hold_range(UserRange.parse(other), Path("/srv/second"), folder).release()


@pytest.mark.parametrize("other", ["61184-61300", "60000-60999"])
def test_a_range_of_its_own_is_held(held: RangeLock, folder: Path, other: str) -> None:
    lock = hold_range(UserRange.parse(other), Path("/srv/second"), folder)
    lock.release()


def test_a_range_let_go_or_left_by_an_agent_that_ended_is_free(folder: Path) -> None:
    first = hold_range(UserRange(61000, 61183), Path("/srv/first"), folder)
    first.release()
    (folder / "job-users-61100-61200.lock").write_text("pid 1, work dir /gone\n", encoding="utf-8")
    second = hold_range(UserRange(61000, 61183), Path("/srv/second"), folder)
    assert (folder / "job-users-61000-61183.lock").read_text(encoding="utf-8") == (
        f"pid {os.getpid()}, work dir /srv/second\n"
    )
    second.release()


def test_a_range_another_process_holds_is_refused_naming_its_pid(folder: Path) -> None:
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, "61000-61007", str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline() == "held\n"
        with pytest.raises(RangeLockError) as refused:
            hold_range(UserRange(61000, 61183), Path("/srv/second"), folder)
        assert f"overlap 61000-61007, held by another agent on this host (pid {other.pid}, work dir " in str(
            refused.value
        )
    finally:
        other.communicate("")  # it ends, and its lock with it
    hold_range(UserRange(61000, 61183), Path("/srv/second"), folder).release()


def test_the_lock_folder_is_the_agents_alone(folder: Path, held: RangeLock) -> None:
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "job-users-61000-61183.lock").stat().st_mode) == 0o600


def test_a_lock_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(RangeLockError, match=r"is not this agent's user's alone \(owner uid 0, mode 0777\)"):
        hold_range(UserRange(61000, 61183), Path("/srv/first"), open_folder)


def test_a_lock_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "linked").symlink_to(real)
    with pytest.raises(RangeLockError, match="cannot open the folder of job user locks"):
        hold_range(UserRange(61000, 61183), Path("/srv/first"), tmp_path / "linked")
    assert not any(real.iterdir())


def test_the_lock_is_not_inherited_by_what_the_agent_starts(held: RangeLock) -> None:
    # A job the agent starts may outlive it: it must not keep the range held.
    [fd] = [int(fd.name) for fd in Path("/proc/self/fd").iterdir() if fd.resolve() == held.path.resolve()]
    assert os.get_inheritable(fd) is False
