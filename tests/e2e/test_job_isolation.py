"""Jobs run apart on a runner host, proved on real processes as root (CI runs as root).

Each job is started the way the agent starts it: the launcher, as root, joins the job's cgroup, gives it a
private /tmp and runs the command as the job's own user. What this machine cannot do is skipped, naming it.

The work dir is made outside /tmp (as the agent's, /var/lib/kerrigan-runner): under /tmp a job's private
/tmp would hide another job's workspace by itself, and a refusal would prove nothing about its permissions.
The second half is a hostile job's attempts (an approved fork's script): each holds, or was a hole fixed
with the test that showed it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kerrigan.runner.isolation.cgroups import JOB_PIDS_MAX, empty, memory_cap
from kerrigan.runner.isolation.mounts import AREA_FOLDERS
from kerrigan.runner.isolation.probe import Isolation, agent_key, choose, read_host_facts
from kerrigan.runner.isolation.users import SHARED_WRITABLE, UserRange, give_to, remove_owned, take_back
from kerrigan.runner.processes import process_start_time
from kerrigan.runner.sources import empty_folder
from kerrigan.runner.workspaces import WorkspaceStore

USERS = UserRange(61000, 61183)


def isolation_here(work: Path) -> Isolation:
    """What this machine allows, skipping the test when jobs cannot run apart here."""
    if os.geteuid() != 0:
        pytest.skip("jobs run apart only when the agent is root; this test runs as a user")
    key = agent_key(work)
    found = choose(read_host_facts(key), "auto", USERS, "never", key)
    if not found.isolated:
        pytest.skip(f"this machine cannot isolate jobs: {', '.join(found.missing)}")
    return found


@dataclass
class Job:
    """A job started as the agent starts one."""

    id: str
    uid: int
    workspace: Path
    result: Path
    cgroup: dict[str, object] | None
    process: subprocess.Popen[str]


@pytest.fixture
def work() -> Iterator[Path]:
    """A work dir laid out as the agent lays it out (jobs/ and sources/ the agent's, workspaces passed
    through), outside /tmp."""
    if os.geteuid() != 0:
        pytest.skip("jobs run apart only when the agent is root; this test runs as a user")
    work = Path(tempfile.mkdtemp(prefix="kerrigan-isolation-test-", dir="/var/lib"))
    try:
        for name, mode in (("jobs", 0o700), ("sources", 0o700), ("workspaces", 0o711), ("job-areas", 0o711)):
            (work / name).mkdir(parents=True)
            (work / name).chmod(mode)
        work.chmod(0o711)
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def jobs(work: Path) -> Iterator[list[Job]]:
    """Jobs started in the test; whatever is left of them is emptied at the end."""
    started: list[Job] = []
    yield started
    for job in started:
        if job.process.poll() is None:
            job.process.kill()
            job.process.wait()
        if job.process.stdout is not None:
            job.process.stdout.close()
        empty(job.cgroup)
    for uid in {job.uid for job in started}:  # what a hole let a job leave on the host
        for folder in SHARED_WRITABLE:
            remove_owned(Path(folder), uid)
        for shmid in shm_segments(uid):
            subprocess.run(["ipcrm", "-m", str(shmid)], check=False)


def shm_segments(uid: int) -> list[int]:
    """The host's System V shared memory segments ``uid`` owns (the host's IPC namespace: the test's)."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    header = Path("/proc/sysvipc/shm").read_text().splitlines()[0].split()
    found = []
    for line in lines:
        fields = dict(zip(header, line.split(), strict=False))
        if fields.get("uid") == str(uid):
            found.append(int(fields["shmid"]))
    return found


def start(
    work: Path,
    isolation: Isolation,
    jobs: list[Job],
    job_id: str,
    script: str,
    env: dict[str, str] | None = None,
    uid: int | None = None,
    groups: str = "",
    pids_max: int = JOB_PIDS_MAX,
) -> Job:
    uid = USERS.first + int(job_id) if uid is None else uid
    workspace = work / "workspaces" / f"ws-{job_id}"
    workspace.mkdir()
    (workspace / "secret.txt").write_text(f"workspace secret of job {job_id}\n", encoding="utf-8")
    give_to(workspace, uid)
    area = work / "job-areas" / job_id
    for name in ("home", *AREA_FOLDERS):
        (area / name).mkdir(parents=True)
    give_to(area, uid)
    (work / "jobs" / job_id).mkdir()
    (work / "jobs" / job_id / "record.json").write_text('{"token": "kgr_runner"}', encoding="utf-8")
    result = work / "jobs" / job_id / "result.json"
    cpus = sorted(os.sched_getaffinity(0))[:1]
    cap = memory_cap(isolation.memory_total or 0, 1, 2, 4096)
    cgroup = isolation.cgroups.create(job_id, cpus, cap, pids_max=pids_max)
    argv = [sys.executable, "-m", "kerrigan.runner.launch", "--result", str(result), "--grace-s", "1"]
    for procs in isolation.cgroups.join_files(cgroup):
        argv += ["--cgroup-procs", procs]
    argv += ["--user", str(uid), "--groups", groups, "--private-tmp", str(area), "--keep", str(area / "home")]
    argv += ["--user-namespace"] if isolation.own_keyrings else []
    argv += ["--", "/bin/sh", "-c", script]
    process = subprocess.Popen(
        argv,
        cwd=workspace,
        env={"PATH": os.environ["PATH"], "TMPDIR": "/tmp", "HOME": str(area / "home"), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    job = Job(job_id, uid, workspace, result, cgroup, process)
    jobs.append(job)
    return job


def wait_for(path: Path, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()


def test_an_escaping_job_is_killed_whole_even_when_its_launcher_died(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    # The review's hostile job. As its own user it cannot kill the root launcher, so the test does.
    job = start(
        work, isolation, jobs, "1", "setsid sleep 987654 & echo $! > escapee; kill -9 $PPID; sleep 300"
    )
    escapee = int(wait_for(job.workspace / "escapee"))
    assert process_start_time(escapee) is not None
    job.process.kill()  # the launcher dies; its subreaper cannot clean up
    job.process.wait()
    assert process_start_time(escapee) is not None, "the escapee outlived its launcher"

    empty(job.cgroup)  # what the agent does before it reports the end and frees the device

    assert process_start_time(escapee) is None
    paths = dict(job.cgroup or {}).get("paths") or {}
    assert paths
    assert not any(Path(str(path)).exists() for path in dict(paths).values())


def test_a_job_cannot_read_another_running_jobs_workspace_tmp_environ_or_the_agents_records(
    work: Path, jobs: list[Job]
) -> None:
    isolation = isolation_here(work)
    (work / "sources" / "octo-firmware.tar.gz").write_text("the agent's cached tarball", encoding="utf-8")
    first = start(
        work,
        isolation,
        jobs,
        "1",
        "echo 'tmp secret' > /tmp/first.txt; echo 'shm secret' > /dev/shm/first.txt;"
        " echo $$ > pid; sleep 300",
        env={"GITHUB_TOKEN": "ghs_first_jobs_token"},
    )
    pid = int(wait_for(first.workspace / "pid"))
    probes = [
        ("workspace", f"cat {first.workspace}/secret.txt"),
        ("workspace-list", f"ls {first.workspace}"),
        ("tmp", "cat /tmp/first.txt"),
        ("shm", "cat /dev/shm/first.txt"),
        ("area", f"ls {work}/job-areas/1/tmp"),
        ("environ", f"cat /proc/{pid}/environ"),
        ("launcher-environ", f"cat /proc/{first.process.pid}/environ"),  # root, the job's token in it
        ("agent-environ", f"cat /proc/{os.getpid()}/environ"),  # the runner token is in the agent's
        ("agent-memory", f"head -c1 /proc/{os.getpid()}/mem"),
        ("records", f"cat {work}/jobs/1/record.json"),
        ("records-list", f"ls {work}/jobs"),
        ("sources", f"cat {work}/sources/octo-firmware.tar.gz"),
        ("sources-list", f"ls {work}/sources"),
        ("work-list", f"ls {work}"),
    ]
    script = "".join(
        f"if {command} >/dev/null 2>&1; then echo '{name} READ'; else echo '{name} denied'; fi\n"
        for name, command in probes
    )
    # The path is there to see, and refused: its permissions do it, not a mount that hides it.
    script += f"cat {first.workspace}/secret.txt\n"
    second = start(work, isolation, jobs, "2", script)
    out, _ = second.process.communicate(timeout=30)

    assert out.split("\n")[: len(probes)] == [f"{name} denied" for name, _ in probes], out
    assert "Permission denied" in out.split("\n")[len(probes)], out
    assert not Path("/tmp/first.txt").exists()
    assert (work / "job-areas" / "1" / "tmp" / "first.txt").read_text() == "tmp secret\n"
    assert (work / "job-areas" / "1" / "shm" / "first.txt").read_text() == "shm secret\n"


def test_a_jobs_tmp_is_its_own_and_its_workspace_keeps_its_path(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    (Path("/tmp") / f"host-file-{os.getpid()}").write_text("the host's", encoding="utf-8")
    try:
        job = start(
            work,
            isolation,
            jobs,
            "1",
            f'ls -A /tmp /var/tmp; id -u; pwd; cd "$PWD" && cat secret.txt; ls /tmp/host-file-{os.getpid()}',
        )
        out, _ = job.process.communicate(timeout=30)
    finally:
        (Path("/tmp") / f"host-file-{os.getpid()}").unlink()
    assert f"host-file-{os.getpid()}" not in out.replace(
        f"ls: cannot access '/tmp/host-file-{os.getpid()}'", ""
    )
    assert str(job.uid) in out.split()
    assert str(job.workspace) in out.split()
    assert "workspace secret of job 1" in out
    assert job.process.returncode != 0  # the host's file is not there to list


def test_isolated_job_runs_on_its_cpu_set_under_the_memory_cap_of_its_claim(
    work: Path, jobs: list[Job]
) -> None:
    isolation = isolation_here(work)
    if not (isolation.cgroups.cpu_set and isolation.cgroups.memory_cap and isolation.memory_total):
        pytest.skip(f"this machine's cgroups cannot cap memory and pin CPUs: {isolation.missing}")
    script = (
        "grep Cpus_allowed_list /proc/self/status; "
        "for line in $(cat /proc/self/cgroup); do "
        "case $line in *:memory:*) m=${line#*:memory:};; 0::*) u=${line#0::};; esac; done; "
        'echo "memory_cap $(cat /sys/fs/cgroup/memory$m/memory.limit_in_bytes 2>/dev/null '
        '|| cat /sys/fs/cgroup/unified$u/memory.max)"'
    )
    job = start(work, isolation, jobs, "1", script)
    out, _ = job.process.communicate(timeout=30)
    cpu = sorted(os.sched_getaffinity(0))[0]
    assert f"Cpus_allowed_list:\t{cpu}" in out
    assert f"memory_cap {memory_cap(isolation.memory_total, 1, 2, 4096)}" in out


def test_a_signal_from_the_job_cannot_reach_its_launcher(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    job = start(work, isolation, jobs, "1", "kill -9 $PPID 2>&1; echo status $?")
    out, _ = job.process.communicate(timeout=30)
    assert "status 1" in out
    assert job.process.returncode == 0  # the launcher lived to report the command's own status
    assert job.result.exists()


def probe_script(probes: list[tuple[str, str]]) -> str:
    """A shell script that tries each command and says ``NAME READ`` or ``NAME denied``, one line each."""
    return "".join(
        f"if {command} >/dev/null 2>&1; then echo '{name} READ'; else echo '{name} denied'; fi\n"
        for name, command in probes
    )


def test_a_job_cannot_move_itself_out_of_its_cgroup_nor_make_one(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    backend = isolation.cgroups
    parents = [str(path) for path in getattr(backend, "parents", {}).values()]
    parents += [str(backend.parent)] if hasattr(backend, "parent") else []
    if not parents:
        pytest.skip(f"the test knows the folders of cgroup-v1 and cgroup-v2, not of {backend.name}")
    probes = []
    for parent in [*parents, "/sys/fs/cgroup/unified", "/sys/fs/cgroup/freezer"]:
        for name in ("cgroup.procs", "tasks"):
            if Path(parent, name).exists():
                probes.append((f"{parent}/{name}", f"sh -c 'echo $$ > {parent}/{name}'"))
        probes.append((f"mkdir {parent}", f"mkdir {parent}/kerrigan-escape-{os.getpid()}"))
    for parent in parents:  # its own cgroup's folders, root's: no child cgroup of its own either
        probes.append((f"mkdir in own {parent}", f"mkdir {parent}/{backend.unit_name('1')}/child"))
    for agent in ("/sys/fs/cgroup/freezer/release_agent", "/sys/fs/cgroup/unified/cgroup.subtree_control"):
        if Path(agent).exists():
            probes.append((agent, f"sh -c 'echo /x > {agent}'"))
    job = start(work, isolation, jobs, "1", probe_script(probes) + "cat /proc/self/cgroup")
    out, _ = job.process.communicate(timeout=30)

    lines = out.split("\n")
    assert lines[: len(probes)] == [f"{name} denied" for name, _ in probes], out
    own = {
        line.split(":", 2)[1]: line.split(":", 2)[2] for line in lines[len(probes) :] if line.count(":") >= 2
    }
    for controller in dict(dict(job.cgroup or {}).get("paths") or {}):
        assert own[controller].endswith(f"/{backend.unit_name('1')}"), out
    assert not any(Path(parent, f"kerrigan-escape-{os.getpid()}").exists() for parent in parents)


def test_what_a_job_leaves_running_dies_with_it_double_forked_deaf_to_sigterm_or_stopped(
    work: Path, jobs: list[Job]
) -> None:
    isolation = isolation_here(work)
    script = (
        "(setsid sh -c 'sleep 987001 & echo $! > double-forked' &);"
        " sh -c 'trap \"\" TERM; echo $$ > deaf; exec sleep 987002' &"
        " sleep 987003 & echo $! > stopped; kill -STOP $!;"
        " while [ ! -s double-forked ] || [ ! -s deaf ]; do sleep 0.05; done"
    )
    job = start(work, isolation, jobs, "1", script)
    job.process.communicate(timeout=30)  # the launcher ends what is left (SIGKILL after its grace period)

    assert job.process.returncode == 0
    pids = {name: int((job.workspace / name).read_text()) for name in ("double-forked", "deaf", "stopped")}
    assert {name: process_start_time(pid) for name, pid in pids.items()} == dict.fromkeys(pids)
    paths = dict(dict(job.cgroup or {}).get("paths") or {})
    assert all(not Path(str(path), "cgroup.procs").read_text().split() for path in paths.values())


def test_a_fork_bomb_fills_its_own_cgroups_pids_limit_and_dies_whole(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    if "pids" not in getattr(isolation.cgroups, "parents", {}):
        pytest.skip("the test follows a cgroup v1 pids controller, which this machine's cgroups lack")
    limit = 40
    script = "exec 2>/dev/null; b() { b & b & }; b; sleep 300"
    # Never started unbounded: the launcher waits on a pids.max the test checks first (below).
    gate = "while [ ! -e $HOME/go ]; do sleep 0.05; done; "
    job = start(work, isolation, jobs, "1", gate + script, pids_max=limit)
    pids = Path(str(dict(dict(job.cgroup or {}).get("paths") or {})["pids"]))
    assert (pids / "pids.max").read_text().strip() == str(limit)
    (work / "job-areas" / "1" / "home" / "go").write_text("", encoding="utf-8")
    deadline = time.monotonic() + 30
    while "max 0" in (pids / "pids.events").read_text():
        assert time.monotonic() < deadline, "the bomb never reached its limit"
        time.sleep(0.05)

    assert int((pids / "pids.current").read_text()) <= limit
    job.process.kill()  # its launcher dies too: the agent's emptying of the cgroup is all there is
    job.process.wait()
    empty(job.cgroup)
    assert not pids.exists()


def test_the_launcher_drops_root_for_good(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    # A setuid-root program stands in for the host's (su, mount, pkexec and their bugs).
    tools = work / "tools"
    tools.mkdir(mode=0o755)
    shutil.copy("/usr/bin/id", tools / "suid-id")
    (tools / "suid-id").chmod(0o4755)
    script = (
        "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status;"
        f" echo setuid $({tools}/suid-id -u) $({tools}/suid-id -g)"
    )
    job = start(work, isolation, jobs, "1", script, groups="20,5")
    out, _ = job.process.communicate(timeout=30)

    status = {line.split(":")[0]: line.split(":", 1)[1].split() for line in out.splitlines() if ":" in line}
    uid = str(job.uid)
    assert status["Uid"] == [uid] * 4, out  # real, effective, saved and filesystem
    assert status["Gid"] == [uid] * 4, out
    assert sorted(status["Groups"]) == ["20", "5"], out
    for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[name][0], 16) == 0, out
    assert status["NoNewPrivs"] == ["1"], out
    assert f"setuid {uid} {uid}" in out  # a setuid-root program runs with the job's rights


def test_the_job_gets_no_descriptor_of_the_launcher_or_the_agent(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    job = start(work, isolation, jobs, "1", "ls /proc/$$/fd")
    out, _ = job.process.communicate(timeout=30)
    assert out.split() == ["0", "1", "2"]


def test_a_job_cannot_signal_its_launcher_the_agent_or_another_job(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    other = start(work, isolation, jobs, "1", "echo $$ > pid; sleep 300")
    other_pid = int(wait_for(other.workspace / "pid"))
    # kill -0 asks the kernel whether a signal would be allowed, and sends none.
    targets = [("launcher", "$PPID"), ("agent", str(os.getpid())), ("other job", str(other_pid))]
    targets.append(("other launcher", str(other.process.pid)))
    script = "".join(
        f"kill -0 {pid} 2>/dev/null && echo '{name} signalled' || echo '{name} denied'\n"
        for name, pid in targets
    )
    job = start(work, isolation, jobs, "2", script + "kill -TERM 0; echo alive")
    out, _ = job.process.communicate(timeout=30)

    assert out.split("\n")[: len(targets)] == [f"{name} denied" for name, _ in targets], out
    assert other.process.poll() is None  # the group's SIGTERM reached the sender's group only
    assert process_start_time(other_pid) is not None
    assert job.result.exists()


def test_a_later_job_with_the_same_uid_finds_nothing_of_an_earlier_one(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    lock = Path(SHARED_WRITABLE[0], f"kerrigan-test-{os.getpid()}")
    script = (
        f"echo 'left in the workspace' > left.txt; echo 'left in the lock folder' > {lock};"
        " ipcmk -M 4096 >/dev/null"
    )
    first = start(work, isolation, jobs, "1", script)
    first.process.communicate(timeout=30)
    assert first.process.returncode == 0
    # What the agent does at the job's end, before its uid is free (Processes._empty_cgroup).
    empty(first.cgroup)
    take_back(first.workspace)
    for folder in SHARED_WRITABLE:
        remove_owned(Path(folder), first.uid)

    probes = [
        ("workspace", f"cat {first.workspace}/left.txt"),
        ("plant", f"sh -c 'echo planted > {first.workspace}/planted'"),
        ("lock", f"cat {lock}"),
    ]
    later = start(work, isolation, jobs, "2", probe_script(probes), uid=first.uid)
    out, _ = later.process.communicate(timeout=30)

    assert out.split("\n")[: len(probes)] == [f"{name} denied" for name, _ in probes], out
    assert shm_segments(first.uid) == []  # a segment of its own went with its IPC namespace
    assert not lock.exists()
    assert (first.workspace / "left.txt").exists()  # kept for the next job of the workspace, root's now


def test_links_a_job_leaves_in_its_workspace_do_not_turn_what_root_does_there_against_the_host(
    work: Path, jobs: list[Job]
) -> None:
    isolation = isolation_here(work)
    host = work / "host"  # the host's files, root's, that the job can name but not touch
    host.mkdir(mode=0o755)
    (host / "passwd").write_text("root:x:0:0\n", encoding="utf-8")
    (host / "folder").mkdir()
    (host / "folder" / "file").write_text("keep me\n", encoding="utf-8")
    script = (
        f"ln -s {host}/passwd file-link; ln -s {host}/folder folder-link; ln -s / root-link;"
        f" mkdir nested; ln -s {host}/folder nested/deeper;"
        f" if ln {host}/passwd hard-link 2>/dev/null; then echo 'hard link made';"
        " else echo 'no hard link'; fi"
    )
    job = start(work, isolation, jobs, "1", script)
    out, _ = job.process.communicate(timeout=30)
    assert "no hard link" in out  # fs.protected_hardlinks: a job cannot link a file it may not write
    empty(job.cgroup)

    def host_untouched() -> None:
        for path in (host, host / "passwd", host / "folder", host / "folder" / "file"):
            assert (path.stat().st_uid, path.stat().st_gid) == (0, 0), path
        assert (host / "passwd").read_text() == "root:x:0:0\n"
        assert (host / "folder" / "file").read_text() == "keep me\n"
        assert Path("/etc/passwd").stat().st_uid == 0

    take_back(job.workspace)  # the job's end
    host_untouched()
    give_to(job.workspace, USERS.first + 7)  # handed to the next job's user
    host_untouched()
    assert os.lstat(job.workspace / "file-link").st_uid == USERS.first + 7
    empty_folder(job.workspace)  # emptied for the next job's source
    host_untouched()
    assert list(job.workspace.iterdir()) == []

    store = WorkspaceStore(work)  # evicted
    store.mark_used(job.workspace.name, 0.0)
    (job.workspace / "root-link").symlink_to("/")
    (job.workspace / "nested").mkdir()
    (job.workspace / "nested" / "deeper").symlink_to(host / "folder")
    assert store.remove(job.workspace.name)
    host_untouched()
    assert not job.workspace.exists()


def test_a_job_sees_neither_another_jobs_command_line_nor_the_agents(work: Path, jobs: list[Job]) -> None:
    isolation = isolation_here(work)
    # A token in a command line (curl -H, git clone https://x-access-token:...@) is in /proc/PID/cmdline,
    # which the host's /proc shows everyone.
    first = start(work, isolation, jobs, "1", "sh -c 'echo $$ > pid; sleep 300; :' ghs_token_in_argv")
    pid = int(wait_for(first.workspace / "pid"))
    assert "ghs_token_in_argv" in Path(f"/proc/{pid}/cmdline").read_text()
    probes = [
        ("other job", f"cat /proc/{pid}/cmdline"),
        ("other launcher", f"cat /proc/{first.process.pid}/cmdline"),
        ("agent", f"cat /proc/{os.getpid()}/cmdline"),
        ("listed", f"sh -c 'ls /proc | grep -qx {pid}'"),
        # A user namespace of its own (root in it) cannot lift the mount from /proc nor see past it.
        ("unmounted in a user namespace", f"unshare -Urm sh -c 'umount /proc; cat /proc/{pid}/cmdline'"),
        ("a new proc in a user namespace", f"unshare -Urpfm --mount-proc cat /proc/{pid}/cmdline"),
    ]
    second = start(work, isolation, jobs, "2", probe_script(probes) + "cat /proc/$$/status | grep ^Uid")
    out, _ = second.process.communicate(timeout=30)

    assert out.split("\n")[: len(probes)] == [f"{name} denied" for name, _ in probes], out
    assert f"Uid:\t{second.uid}" in out  # its own processes it still sees


# What a job may leave behind keyed by its uid or in the host's IPC namespace rather than in files: a key in
# its user keyring and in its persistent keyring, a POSIX message queue (mq_open, and one made through an
# mqueue mount of the host's, as /dev/mqueue is where systemd mounts it), a System V segment.
KEYS = """
import ctypes, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
USER_KEYRING, GET_PERSISTENT, SEARCH = -4, 22, 10
def call(*args):
    got = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return got if got >= 0 else -ctypes.get_errno()
def add(description, ring):
    return call(ADD_KEY, b"user", description, b"left by job 1", 13, ring)
def find(description, ring):
    return "found" if call(KEYCTL, SEARCH, ring, b"user", description, 0) >= 0 else "gone"
persistent = call(KEYCTL, GET_PERSISTENT, -1, USER_KEYRING)
"""
LEAVE = (
    KEYS
    + """
assert add(b"kerrigan-left", USER_KEYRING) > 0 and persistent > 0 and add(b"kerrigan-kept", persistent) > 0
assert libc.mq_open(b"/kerrigan-left", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
open(sys.argv[1] + "/kerrigan-left", "w").close()  # a queue made through the host's mqueue mount
print("left")
"""
)
FIND = (
    KEYS
    + """
print("user keyring", find(b"kerrigan-left", USER_KEYRING))
print("persistent keyring", find(b"kerrigan-kept", persistent))
print("mq_open", "found" if libc.mq_open(b"/kerrigan-left", os.O_RDONLY, 0, None) >= 0 else "gone")
print("mqueue mount", "found" if os.listdir(sys.argv[1]) else "gone")
"""
)


def test_a_later_job_with_the_same_uid_finds_no_key_message_queue_or_ipc_of_an_earlier_one(
    work: Path, jobs: list[Job]
) -> None:
    isolation = isolation_here(work)
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the test calls keyctl by its number on x86_64 and aarch64, not {platform.machine()}")
    mqueue = work / "mqueue"  # the host's message queues, as /dev/mqueue shows them on a systemd host
    mqueue.mkdir(mode=0o755)
    subprocess.run(["mount", "-t", "mqueue", "mqueue", str(mqueue)], check=True)
    try:
        mqueue.chmod(0o1777)
        python = f"/usr/bin/python3 -I -c {shlex.quote(LEAVE)} {mqueue}"
        first = start(work, isolation, jobs, "1", f"{python} && ipcmk -M 4096 >/dev/null")
        out, _ = first.process.communicate(timeout=30)
        assert first.process.returncode == 0, out
        # What the agent does at the job's end, before its uid is free (Processes._empty_cgroup).
        empty(first.cgroup)
        take_back(first.workspace)
        for folder in SHARED_WRITABLE:
            remove_owned(Path(folder), first.uid)

        assert list(mqueue.iterdir()) == []  # the queue it made went with its IPC namespace
        find = f"/usr/bin/python3 -I -c {shlex.quote(FIND)} {mqueue}"
        later = start(work, isolation, jobs, "2", find, uid=first.uid)
        out, _ = later.process.communicate(timeout=30)
    finally:
        subprocess.run(["umount", str(mqueue)], check=False)
        ctypes.CDLL(None).mq_unlink(b"/kerrigan-left")  # the host's, where a hole let the job make it
    assert out.splitlines() == [
        "user keyring gone",
        "persistent keyring gone",
        "mq_open gone",
        "mqueue mount gone",
    ], out
    assert shm_segments(first.uid) == []


# A key left in the uid's keyring of the host's own user namespace (by a job of an older agent, or anything
# that ran as the uid there), made readable by its owner without holding the keyring.
HOST_KEY = (
    KEYS
    + """
key = add(b"kerrigan-host-left", USER_KEYRING)
assert key > 0 and call(KEYCTL, 5, key, 0x3F3F0000) == 0  # KEYCTL_SETPERM: its user may read it
print(key)
"""
)
READ_BY_SERIAL = (
    KEYS
    + """
buffer = ctypes.create_string_buffer(64)
got = call(KEYCTL, 11, int(sys.argv[1]), buffer, 64)  # KEYCTL_READ, by the serial /proc/keys shows
print("read", buffer.value.decode() if got >= 0 else os.strerror(-got))
"""
)


def test_what_a_uid_left_in_the_hosts_own_keyrings_is_emptied_before_its_next_job_starts(
    work: Path, jobs: list[Job]
) -> None:
    isolation = isolation_here(work)
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the test calls keyctl by its number on x86_64 and aarch64, not {platform.machine()}")
    uid = USERS.first + 3
    left = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", HOST_KEY],
        user=uid,
        group=uid,
        extra_groups=[],
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    serial = left.stdout.strip()
    job = start(
        work, isolation, jobs, "1", f"/usr/bin/python3 -I -c {shlex.quote(READ_BY_SERIAL)} {serial}", uid=uid
    )
    out, _ = job.process.communicate(timeout=30)
    assert out.strip() == "read Required key not available", out
