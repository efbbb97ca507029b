"""Jobs run apart on a runner host, proved on real processes as root (CI runs as root).

Each job is started the way the agent starts it: the launcher, as root, joins the job's cgroup, gives it a
private /tmp and runs the command as the job's own user. What this machine cannot do is skipped, naming it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kerrigan.runner.isolation.cgroups import empty, memory_cap
from kerrigan.runner.isolation.mounts import AREA_FOLDERS
from kerrigan.runner.isolation.probe import Isolation, agent_key, choose, read_host_facts
from kerrigan.runner.isolation.users import UserRange, give_to
from kerrigan.runner.processes import process_start_time

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
def work(tmp_path: Path) -> Path:
    """A work dir laid out as the agent lays it out (jobs/ the agent's, workspaces passed through)."""
    work = tmp_path / "work"
    for name, mode in (("jobs", 0o700), ("workspaces", 0o711), ("job-areas", 0o711)):
        (work / name).mkdir(parents=True)
        (work / name).chmod(mode)
    work.chmod(0o711)
    return work


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


def start(
    work: Path,
    isolation: Isolation,
    jobs: list[Job],
    job_id: str,
    script: str,
    env: dict[str, str] | None = None,
) -> Job:
    uid = USERS.first + int(job_id)
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
    cgroup = isolation.cgroups.create(job_id, cpus, memory_cap(isolation.memory_total or 0, 1, 2, 4096))
    argv = [sys.executable, "-m", "kerrigan.runner.launch", "--result", str(result), "--grace-s", "1"]
    for procs in isolation.cgroups.join_files(cgroup):
        argv += ["--cgroup-procs", procs]
    argv += ["--user", str(uid), "--private-tmp", str(area), "--keep", str(area / "home")]
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
    first = start(
        work,
        isolation,
        jobs,
        "1",
        "echo 'tmp secret' > /tmp/first.txt; echo $$ > pid; sleep 300",
        env={"GITHUB_TOKEN": "ghs_first_jobs_token"},
    )
    pid = int(wait_for(first.workspace / "pid"))
    probes = [
        ("workspace", f"cat {first.workspace}/secret.txt"),
        ("tmp", "cat /tmp/first.txt"),
        ("environ", f"cat /proc/{pid}/environ"),
        ("records", f"cat {work}/jobs/1/record.json"),
        ("records-list", f"ls {work}/jobs"),
    ]
    script = "".join(
        f"if {command} >/dev/null 2>&1; then echo '{name} READ'; else echo '{name} denied'; fi\n"
        for name, command in probes
    )
    second = start(work, isolation, jobs, "2", script)
    out, _ = second.process.communicate(timeout=30)

    assert out.split("\n")[:-1] == [f"{name} denied" for name, _ in probes], out
    assert not Path("/tmp/first.txt").exists()
    assert (work / "job-areas" / "1" / "tmp" / "first.txt").read_text() == "tmp secret\n"


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
