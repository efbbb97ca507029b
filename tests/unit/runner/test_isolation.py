"""Choosing how jobs run apart from what a host offers; job users; the memory cap of a claim."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from kerrigan.core.cpus import format_cpu_list
from kerrigan.core.disk import DiskPolicy
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.isolation.cgroups import memory_cap
from kerrigan.runner.isolation.keyrings import uid_keyrings, uid_keys
from kerrigan.runner.isolation.probe import (
    HostFacts,
    IsolationUnavailableError,
    cgroup_mounts,
    choose,
    memory_total,
    own_cgroups,
    read_host_facts,
    sysctl_flag,
)
from kerrigan.runner.isolation.users import NoJobUserError, UserRange, allocate, ids_in_use
from kerrigan.runner.records import JobRecord
from tests.unit.runner.sysfs import SNAPSHOTS

USERS = UserRange(61000, 61183)
GIB = 1 << 30
V1_HOST = HostFacts(
    root=True,
    cgroup_v1={name: Path(f"/sys/fs/cgroup/{name}") for name in ("freezer", "memory", "cpuset", "pids")},
    memory_total=64 * GIB,
)


def test_a_host_that_is_not_root_runs_jobs_as_today_and_says_so() -> None:
    found = choose(HostFacts(root=False, memory_total=GIB), "auto", USERS, "auto", "k")
    assert not found.isolated
    assert found.report() == {
        "users": False,
        "tmp": False,
        "cgroup": None,
        "memory_cap": False,
        "cpu_set": False,
        "keyrings": False,
        "protected_hardlinks": None,
        "protected_symlinks": None,
        "missing": ["not root"],
    }
    assert found.summary() == "jobs NOT isolated: not root"


async def test_a_root_host_without_the_kernels_link_protections_says_so_at_start_and_in_its_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The kernel's own default is 0 for both (systemd turns them on): then a job may hard-link a root file
    # into its workspace. Jobs still run apart; the host says what it lacks.
    facts = HostFacts(
        root=True,
        cgroup_v1=V1_HOST.cgroup_v1,
        memory_total=GIB,
        protected_hardlinks=False,
        protected_symlinks=True,
    )
    found = choose(facts, "require", USERS, "never", "k")
    assert found.isolated
    report = found.report()
    assert (report["protected_hardlinks"], report["protected_symlinks"]) == (False, True)
    assert report["missing"] == ["fs.protected_hardlinks is 0"]
    settings = AgentSettings("http://127.0.0.1:9", "kgr_x", "h", tmp_path / "work", systemd_scope="never")
    async with aiohttp.ClientSession() as http:
        agent = Agent(settings, http, facts=facts)
        with caplog.at_level(logging.INFO, logger="kerrigan.runner.agent"):
            agent.announce_isolation()
    assert agent.health()["isolation"]["protected_hardlinks"] is False
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "jobs isolated: users, private /tmp, cgroup-v1, memory cap (missing: fs.protected_hardlinks is 0)"
    ]
    both_on = choose(V1_HOST, "auto", USERS, "never", "k")
    assert both_on.missing == ()
    flags = [sysctl_flag(text) for text in ("1\n", "0\n", "2", "")]
    assert flags == [True, False, True, None]


def test_this_machines_link_protections_are_read_as_proc_shows_them() -> None:
    facts = read_host_facts("k")
    for name in ("protected_hardlinks", "protected_symlinks"):
        shown = Path(f"/proc/sys/fs/{name}").read_text().strip()
        assert getattr(facts, name) is (shown != "0"), name


def test_require_refuses_a_host_that_cannot_isolate_naming_what_is_missing() -> None:
    with pytest.raises(IsolationUnavailableError, match=r"isolation: require, but .*: not root"):
        choose(HostFacts(root=False), "require", USERS, "auto", "k")
    with pytest.raises(IsolationUnavailableError, match="no usable cgroup"):
        choose(HostFacts(root=True), "require", USERS, "never", "k")


@pytest.mark.parametrize(
    ("facts", "systemd_scope", "backend"),
    [
        (V1_HOST, "auto", "cgroup-v1"),
        (HostFacts(root=True, cgroup_v2=Path("/sys/fs/cgroup/kerrigan.service")), "auto", "cgroup-v2"),
        (HostFacts(root=True, systemd=True, cgroup_v1=V1_HOST.cgroup_v1), "auto", "systemd"),
        (HostFacts(root=True, systemd=True, cgroup_v1=V1_HOST.cgroup_v1), "never", "cgroup-v1"),
    ],
)
def test_the_cgroup_backend_is_the_best_the_host_offers(
    facts: HostFacts, systemd_scope: str, backend: str
) -> None:
    found = choose(facts, "auto", USERS, systemd_scope, "k")
    assert found.isolated
    assert found.cgroups.name == backend


def test_off_runs_jobs_as_the_agents_user_keeping_the_systemd_scope() -> None:
    found = choose(HostFacts(root=True, systemd=True), "off", USERS, "auto", "k")
    assert (found.users, found.private_tmp, found.cgroups.name) == (None, False, "systemd")
    assert found.summary() == "jobs NOT isolated: isolation is off"


def test_this_machines_mount_table_and_cgroups_are_read() -> None:
    mounts = (
        "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n"
    )
    found = cgroup_mounts(mounts)
    assert [(str(point), kind) for point, kind, _ in found] == [
        ("/sys/fs/cgroup/memory", "cgroup"),
        ("/sys/fs/cgroup/cpu,cpuacct", "cgroup"),
        ("/sys/fs/cgroup/unified", "cgroup2"),
    ]
    assert "cpuacct" in found[1][2]
    own = own_cgroups("4:memory:/process_api/9c5d\n1:cpu,cpuacct:/\n0::/\n")
    assert own == {"memory": "/process_api/9c5d", "cpu": "/", "cpuacct": "/", "": "/"}
    assert memory_total("MemTotal:       24683584 kB\nMemFree: 1 kB\n") == 24683584 * 1024
    assert memory_total("nothing here") is None


def test_job_users_are_one_per_live_job_and_never_the_hosts_own(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0::/root:/bin/sh\nci:x:61000:61000::/home/ci:/bin/sh\nbad line\n")
    taken = ids_in_use(passwd, tmp_path / "no-group-file")
    assert taken == {0, 61000}
    assert allocate(USERS, live={61001}, taken=taken) == 61002
    with pytest.raises(NoJobUserError, match="61000-61001"):
        allocate(UserRange(61000, 61001), live={61001}, taken=taken)


@pytest.mark.parametrize("text", ["", "61000", "5-4", "0-100", "61000-61999x", "6100000000000-6100000000001"])
def test_a_bad_job_users_range_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(ValueError, match="job_users"):
        UserRange.parse(text)


def test_a_bad_isolation_setting_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="isolation must be one of auto, require, off"):
        AgentSettings("http://127.0.0.1:9", "kgr_x", "h", tmp_path, isolation="sometimes")


@pytest.mark.skipif(not (SNAPSHOTS / "epyc7402").is_dir(), reason=f"no sysfs snapshots at {SNAPSHOTS}")
async def test_isolated_four_vcpus_enforce_cpu_set_and_memory_max(tmp_path: Path) -> None:
    # Seed 003: the memory cap follows the claim. The allocation on a 48-vCPU EPYC snapshot; the cgroup
    # files written in a stand-in cgroupfs (plain folders), since this machine has neither the CPUs nor
    # the memory; tests/e2e/test_job_isolation.py has the kernel enforce a claim that fits.
    fake_cgroups = {name: tmp_path / "cgroup" / name for name in ("freezer", "memory", "cpuset", "pids")}
    for folder in fake_cgroups.values():
        folder.mkdir(parents=True)
    (fake_cgroups["cpuset"] / "cpuset.mems").write_text("0\n")
    facts = HostFacts(root=True, cgroup_v1=fake_cgroups, memory_total=256 * GIB + 123)
    settings = AgentSettings(
        "http://127.0.0.1:9", "kgr_x", "h", tmp_path / "work", sysfs_root=SNAPSHOTS / "epyc7402"
    )
    async with aiohttp.ClientSession() as http:
        agent = Agent(settings, http, facts=facts)
    vcpus = agent.allocator.limit
    cpus = agent.allocator.allocate("7", 4)
    cap = agent.memory_cap(4)
    entry = agent.isolation.cgroups.create("7", cpus, cap)

    assert len(cpus) == 4
    assert cap == (256 * GIB + 123) * 4 // vcpus // 4096 * 4096
    assert cap is not None
    assert cap % 4096 == 0
    folders = {name: Path(path) for name, path in entry["paths"].items()}
    assert (folders["cpuset"] / "cpuset.cpus").read_text() == format_cpu_list(cpus)
    assert int((folders["memory"] / "memory.limit_in_bytes").read_text()) == cap


async def test_the_health_report_and_the_start_say_how_jobs_are_isolated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = AgentSettings("http://127.0.0.1:9", "kgr_x", "h", tmp_path / "work")
    async with aiohttp.ClientSession() as http:
        agent = Agent(settings, http, facts=HostFacts(root=False, memory_total=GIB))
        agent.jobs["3"] = JobRecord("3", {"claim": {"vcpus": 1}})
        with caplog.at_level(logging.INFO, logger="kerrigan.runner.agent"):
            agent._lay_out_work_dir()
            agent.announce_isolation()
    assert agent.health()["isolation"]["missing"] == ["not root"]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "jobs NOT isolated: not root"
    ]
    assert (tmp_path / "work").stat().st_mode & 0o777 == 0o700  # nobody else runs jobs here: the agent's own
    assert memory_cap(GIB, 1, 3, 4096) == GIB // 3 // 4096 * 4096


@pytest.mark.parametrize(("floor_bytes", "warned"), [(1 << 60, True), (1, False), (0, False)])
async def test_the_start_says_when_free_disk_is_under_the_floor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, floor_bytes: int, warned: bool
) -> None:
    settings = AgentSettings(
        "http://127.0.0.1:9", "kgr_x", "h", tmp_path / "work", disk=DiskPolicy(floor_bytes=floor_bytes)
    )
    async with aiohttp.ClientSession() as http:
        agent = Agent(settings, http, facts=HostFacts(root=False, memory_total=GIB))
        with caplog.at_level(logging.INFO, logger="kerrigan.runner.agent"):
            agent._lay_out_work_dir()
            agent.announce_disk()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warned:
        [line] = said
        assert line.startswith("free disk ")
        assert (
            "is under the floor of 1,073,741,824.0 GiB (--free-space-floor-bytes): every job is refused"
            in line
        )
    else:
        assert said == []


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_a_workspace_deeper_than_path_max_is_handed_over_whole_and_its_links_are_not_followed(
    tmp_path: Path,
) -> None:
    from kerrigan.runner.isolation.users import give_to

    outside = tmp_path / "outside.txt"
    outside.write_text("the agent's\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "escape").symlink_to(outside)
    # 40 levels of 200-character names: about 8,000 characters, past PATH_MAX (4,096).
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(40):
            os.mkdir("d" * 200, dir_fd=fd)
            deeper = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        os.close(os.open("deep.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
        give_to(workspace, 61234)
        assert os.stat("deep.txt", dir_fd=fd).st_uid == 61234
    finally:
        os.close(fd)
    assert os.lstat(workspace / "escape").st_uid == 61234
    assert outside.stat().st_uid == 0
    assert workspace.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user and back needs root")
async def test_at_a_jobs_end_its_workspace_goes_back_to_root_and_its_leftovers_in_shared_folders_go(
    tmp_path: Path,
) -> None:
    # Before its uid is free: a later job given the same uid would otherwise read and plant files in what
    # this one left (tests/e2e/test_job_isolation.py has the later job try).
    from kerrigan.runner.isolation.users import SHARED_WRITABLE, give_to

    fake_cgroups = {"freezer": tmp_path / "cgroup" / "freezer"}
    fake_cgroups["freezer"].mkdir(parents=True)
    settings = AgentSettings("http://127.0.0.1:9", "kgr_x", "h", tmp_path / "work")
    async with aiohttp.ClientSession() as http:
        agent = Agent(settings, http, facts=HostFacts(root=True, cgroup_v1=fake_cgroups, memory_total=GIB))
    agent._lay_out_work_dir()
    record = JobRecord("9", {"claim": {"vcpus": 1}}, state="ended", workspace="ws-9", user=61234)
    workspace = agent.workspaces.mark_used("ws-9", 0.0)
    (workspace / "left.txt").write_text("the job's\n")
    give_to(workspace, 61234)
    left = Path(SHARED_WRITABLE[0], f"kerrigan-unit-{os.getpid()}")
    kept = Path(SHARED_WRITABLE[0], f"kerrigan-unit-{os.getpid()}-root")
    left.write_text("the job's\n")
    kept.write_text("root's\n")
    os.chown(left, 61234, 61234)
    try:
        await agent._empty_cgroup(record)
        assert not left.exists()
        assert kept.exists()
    finally:
        left.unlink(missing_ok=True)
        kept.unlink(missing_ok=True)
    info = workspace.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, 0, 0o700)
    assert (workspace / "left.txt").stat().st_uid == 61234  # given whole to the next job's user, later


async def test_a_workspace_whose_jobs_cgroup_would_not_empty_is_not_given_to_the_next_job(
    tmp_path: Path,
) -> None:
    # Its processes may still run as its uid and write there: root must not unpack the next job's source
    # and artifacts where they can link or swap files under it, nor hand what they left to another uid.
    settings = AgentSettings("http://127.0.0.1:9", "kgr_x", "h", tmp_path / "work")
    async with aiohttp.ClientSession() as http:
        agent = Agent(settings, http, facts=HostFacts(root=False, memory_total=GIB))
    offer = {"repository": "octo/firmware", "task": "flash", "claim": {"vcpus": 1}}
    agent.jobs["4"] = JobRecord(
        "4", offer, state="ended", workspace="octo-firmware--flash", user=61004, cgroup={"paths": {}}
    )
    assert agent._workspace_name(offer) == "octo-firmware--flash.2"
    assert agent.workspaces_in_use() == {"octo-firmware--flash"}
    agent.jobs["4"].cgroup = None  # emptied at last
    assert agent._workspace_name(offer) == "octo-firmware--flash"
    assert agent.workspaces_in_use() == set()


def test_each_job_gets_keyrings_of_its_own_where_the_host_has_user_namespaces() -> None:
    facts = HostFacts(root=True, cgroup_v1=V1_HOST.cgroup_v1, memory_total=GIB, user_namespaces=True)
    found = choose(facts, "auto", USERS, "never", "k")
    assert (found.own_keyrings, found.report()["keyrings"], found.missing) == (True, True, ())
    without = choose(replace(facts, user_namespaces=False), "require", USERS, "never", "k")
    assert without.isolated  # the rest still holds; what is missing is said
    assert (without.own_keyrings, without.missing) == (
        False,
        ("no user namespaces: a job's keyrings outlive it",),
    )
    assert not choose(replace(facts, root=False), "auto", USERS, "never", "k").own_keyrings


def test_a_uids_own_keyrings_are_found_in_proc_keys_as_it_reads_them() -> None:
    proc_keys = (
        "2617fddb I--Q---     2 perm 1f3f0000 61151 65534 keyring   _uid.61151: 1\n"
        "0d98153a I--Q---     1 perm 1f3f0000 61151 65534 keyring   _uid_ses.61151: 1\n"
        "1a2b3c4d I--Q---     1  2d   3f130000 61151 61151 keyring   _persistent.61151: empty\n"
        "04f018b4 I--Q---     1 perm 3f010000 61151 61151 user      _uid.61151: 6\n"  # not a keyring
        "3f3bd80a I--Q---     2 perm 1f3f0000     0 65534 keyring   _uid.0: empty\n"  # another uid's
        "11111111 I--Q---     1 perm 3f3f0000 61151 61151 keyring   _uid.61152: empty\n"  # named for another
        "not a line of /proc/keys\n"
    )
    assert uid_keyrings(proc_keys, 61151) == {
        "_uid.61151": 0x2617FDDB,
        "_uid_ses.61151": 0x0D98153A,
        "_persistent.61151": 0x1A2B3C4D,
    }


def test_the_keys_a_uid_owns_besides_its_own_keyrings_are_the_ones_invalidated() -> None:
    proc_keys = (
        "2617fddb I--Q---     2 perm 1f3f0000 61151 65534 keyring   _uid.61151: 1\n"
        "0d98153a I--Q---     1 perm 1f3f0000 61151 65534 keyring   _uid_ses.61151: 1\n"
        "04f018b4 I--Q---     1 perm 3f010000 61151 61151 user      kerrigan-host-left: 13\n"
        "05f018b4 I--Q---     1 perm 3f010000 61151 61151 keyring   made-by-a-job: empty\n"
        "3f3bd80a I--Q---     2 perm 1f3f0000     0 65534 keyring   _uid.0: empty\n"  # another uid's
        "06f018b4 I--Q---     1 perm 3f010000 61152 61152 user      kerrigan-host-left: 13\n"  # another's
        "not a line of /proc/keys\n"
    )
    assert uid_keys(proc_keys, 61151) == [0x04F018B4, 0x05F018B4]
