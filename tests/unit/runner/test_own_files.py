"""What runs as root (the agent's Python, Kerrigan's code) and the agent's work dir: an agent whose jobs run
as users of their own refuses to start when a job could change any of it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Final

import aiohttp
import pytest

from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.isolation.own_files import (
    Code,
    JobIds,
    OwnFilesWritableError,
    check_own_files,
    code_problems,
    work_dir_problems,
)
from kerrigan.runner.isolation.probe import HostFacts
from kerrigan.runner.isolation.range_lock import hold_range
from kerrigan.runner.isolation.users import UserRange

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to other users needs root")

USERS: Final = UserRange(61000, 61183)
NAMED: Final = frozenset({0, 1, 1000})  # root, daemon and a person the user database names
IDS: Final = JobIds(USERS, frozenset({20}), named_users=NAMED, named_groups=NAMED | {20})
GIB: Final = 1 << 30


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """An import path folder: a package with a module, a .pth file, and a folder Python cannot import."""
    folder = tmp_path / "lib" / "site-packages"
    (folder / "pkg" / "sub").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "sub" / "mod.py").write_text("x = 1\n")
    (folder / "extra.pth").write_text("/nowhere\n")
    (folder / "not-a-package").mkdir()
    (folder / "not-a-package" / "data").write_text("x")
    for path in [tmp_path, *tmp_path.rglob("*")]:
        os.chown(path, 0, 0)
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def found(site: Path) -> list[str]:
    return code_problems(Code(Path(sys.executable), imported=(site,)), IDS)


def test_code_only_root_may_change_is_fine(site: Path) -> None:
    assert found(site) == []


@pytest.mark.parametrize(("uid", "what"), [(61003, "a job's user"), (4242424, "a uid no one is named")])
def test_a_module_a_job_may_own_is_found(site: Path, uid: int, what: str) -> None:
    module = site / "pkg" / "sub" / "mod.py"
    os.chown(module, uid, 0)
    assert found(site) == [f"{module} is owned by uid {uid}, which a job may run as"], what


def test_a_package_folder_everyone_may_write_is_found(site: Path) -> None:
    (site / "pkg").chmod(0o777)
    assert found(site) == [f"{site / 'pkg'} is writable by everyone (mode 0777)"]


def test_a_file_a_jobs_group_may_write_is_found_and_roots_group_is_not(site: Path) -> None:
    pth = site / "extra.pth"
    pth.chmod(0o664)
    assert found(site) == []
    os.chown(pth, 0, 20)  # one of job_groups
    assert found(site) == [f"{pth} is writable by group 20, which a job may have"]
    os.chown(pth, 0, 61005)  # a job's own gid
    assert found(site) == [f"{pth} is writable by group 61005, which a job may have"]


def test_the_folder_of_the_import_path_itself_and_what_is_above_it_count(site: Path) -> None:
    site.chmod(0o777)  # anyone could add a module or a .pth file
    above = site.parent
    above.chmod(0o777)  # anyone could rename site-packages and put another in its place
    assert found(site) == [
        f"{above} is writable by everyone (mode 0777)",
        f"{site} is writable by everyone (mode 0777)",
    ]


def test_a_sticky_folder_on_the_way_is_fine_its_entries_are_their_owners(site: Path) -> None:
    site.parent.chmod(0o1777)  # as /tmp: only the owner of site-packages (root) may rename it
    assert found(site) == []


def test_a_folder_python_cannot_import_from_is_not_entered(site: Path) -> None:
    os.chown(site / "not-a-package" / "data", 61003, 61003)
    assert found(site) == []
    os.chown(site / "not-a-package", 61003, 61003)  # its name is still an entry of the import path's
    assert found(site) == [f"{site / 'not-a-package'} is owned by uid 61003, which a job may run as"]


def test_where_a_link_leads_counts(site: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "linked").mkdir(parents=True)
    (elsewhere / "linked" / "code.py").write_text("")
    os.chown(elsewhere / "linked" / "code.py", 61007, 61007)
    (site / "linked").symlink_to(elsewhere / "linked")
    assert found(site) == [
        f"{elsewhere / 'linked' / 'code.py'} is owned by uid 61007, which a job may run as"
    ]


def test_a_python_a_job_could_replace_is_found(tmp_path: Path) -> None:
    bin_folder = tmp_path / "venv" / "bin"
    bin_folder.mkdir(parents=True)
    (bin_folder / "python").symlink_to(sys.executable)
    os.chown(bin_folder, 61001, 61001)
    assert code_problems(Code(bin_folder / "python"), IDS) == [
        f"{bin_folder} is owned by uid 61001, which a job may run as"
    ]


def test_what_the_pythons_installation_keeps_in_lib_counts_not_below(tmp_path: Path) -> None:
    lib = tmp_path / "python" / "lib"
    (lib / "python3.11" / "deep").mkdir(parents=True)
    (lib / "libpython3.11.so.1.0").write_bytes(b"\x7fELF")
    (lib / "python3.11" / "deep" / "x").write_text("")
    os.chown(lib / "python3.11" / "deep" / "x", 61009, 61009)  # below lib: the import path's to look at
    assert code_problems(Code(Path(sys.executable), installed=(lib,)), IDS) == []
    (lib / "libpython3.11.so.1.0").chmod(0o666)
    assert code_problems(Code(Path(sys.executable), installed=(lib,)), IDS) == [
        f"{lib / 'libpython3.11.so.1.0'} is writable by everyone (mode 0666)"
    ]


def test_the_work_dir_and_what_the_agent_keeps_in_it_count_not_the_workspaces(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "workspaces" / "octo-firmware--flash").mkdir(parents=True)
    (work / "jobs").mkdir()
    os.chown(work / "workspaces" / "octo-firmware--flash", 61002, 61002)  # a job's, while it runs
    assert work_dir_problems(work, IDS) == []
    (work / "jobs").chmod(0o777)
    os.chown(work, 61002, 61002)
    assert work_dir_problems(work, IDS) == [
        f"{work} is owned by uid 61002, which a job may run as",
        f"{work / 'jobs'} is writable by everyone (mode 0777)",
    ]


def test_a_refusal_names_what_and_how_many_more(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name in "abcde":
        (work / name).mkdir(mode=0o777)
        (work / name).chmod(0o777)
    with pytest.raises(OwnFilesWritableError) as refused:
        check_own_files(work, USERS, ())
    assert str(refused.value) == (
        f"jobs could change what this agent runs as root: {work / 'a'} is writable by everyone (mode 0777); "
        f"{work / 'b'} is writable by everyone (mode 0777); {work / 'c'} is writable by everyone (mode "
        "0777) (and 2 more): make the agent's Python, Kerrigan and its work dir root's, and writable by root "
        "alone"
    )


async def test_an_agent_whose_jobs_could_change_its_work_dir_refuses_to_start(tmp_path: Path) -> None:
    # Jobs run as their own users here (root, with a cgroup: a stand-in freezer folder).
    freezer = tmp_path / "cgroup" / "freezer"
    freezer.mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may put another work dir in the agent's place
    settings = AgentSettings(
        "http://127.0.0.1:9", "kgr_x", "h", shared / "work", job_users_locks=tmp_path / "locks"
    )
    async with aiohttp.ClientSession() as http:
        agent = Agent(
            settings, http, facts=HostFacts(root=True, cgroup_v1={"freezer": freezer}, memory_total=GIB)
        )
        with pytest.raises(OwnFilesWritableError, match=f"{shared} is writable by everyone \\(mode 0777\\)"):
            await asyncio.wait_for(agent.run(), timeout=60)  # it refuses at once; it must not wait on
    # It let its job users go: another agent may have them.
    hold_range(settings.job_users, shared / "another", tmp_path / "locks").release()
