"""``kerrigan shell JOB`` (issue 30): ``GET /api/v1/jobs/{id}/shell`` through the real server to a real agent
(lab-b-01), whose records hold the failed boot job as it ended there: its workspace kept by the hold. The
holder gets a shell in the job's workspace, as the job's own user where this machine isolates jobs, with the
job's environment but not its secrets, runs a command and sees its output; a stranger is refused before
anything reaches the agent; a job no hold holds is a 409; when the hold ends the shell is closed and
everything it started killed; every session is in the audit log; ``kerrigan shell`` does it all from a
terminal's side."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from kerrigan.core.disk import DiskPolicy
from kerrigan.core.runner_protocol import JOB_SHELL
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.devices_file import load_devices_file
from kerrigan.runner.isolation.users import give_to
from kerrigan.runner.processes import process_start_time
from kerrigan.runner.records import JobRecord
from kerrigan.store.audit import list_audit
from kerrigan.store.runners import create_runner_token, host_report
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.waiting import wait_until
from tests.integration.api.conftest import ADMIN, OWNER_A, OWNER_B, READER, Api
from tests.integration.api.person_sockets import Screen, idle_api, started
from tests.integration.api.test_cli_sessions import _lab
from tests.integration.api.test_job_hold_api import _jobs
from tests.integration.github.conftest import REPO

__all__ = ["idle_api"]  # the fixture, shared with the console's tests

SECRET: Final = "job-secret-5d1f0c"
DEVICE_SECRET: Final = "pdu-pass-9c4e1a77"
TOKEN: Final = "ghs_the_jobs_github_token"


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """Where the agent keeps its work dir and devices file: as root outside /tmp (as in
    /var/lib/kerrigan-runner and /etc/kerrigan), where the shell's private /tmp does not hide them and a
    refusal is its permissions' doing; under the test's own folder otherwise."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    made = Path(tempfile.mkdtemp(prefix="kerrigan-shell-test-", dir="/var/lib"))
    made.chmod(0o711)
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
async def agent(api: Api, base: Path) -> AsyncIterator[Agent]:
    """lab-b-01's agent, registered with ``api``'s server."""
    async with running_agent(api, base) as made:
        yield made


@contextlib.asynccontextmanager
async def running_agent(api: Api, base: Path) -> AsyncIterator[Agent]:
    """lab-b-01's agent (dev-b1 in its devices file, with an env and a secret_env, the file the agent's
    alone as deployed), registered."""
    devices = base / "devices.yml"
    devices.touch(mode=0o600)
    devices.write_text(
        "devices:\n"
        "  dev-b1:\n"
        "    env: {POWER_OUTLET: 'pdu-3:7'}\n"
        f"    secret_env: {{PDU_PASSWORD: '{DEVICE_SECRET}'}}\n",
        encoding="utf-8",
    )
    async with api.db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-b-01", api.db.clock())
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(
            server_url=str(api.client.make_url("")),
            token=token,
            host_id="lab-b-01",
            work_dir=base / "lab-b-01",
            disk=DiskPolicy(0),
            heartbeat_s=0.2,
            systemd_scope="never",
            job_users=spare_job_users(),
            devices_file=load_devices_file(devices),
        )
        made = Agent(settings, http)
        if made.isolation.users is None:
            pytest.skip(f"a shell opens only where jobs run as users of their own: {made.isolation.missing}")
        task = asyncio.create_task(made.run())

        async def registered() -> bool:
            async with api.db.sessions() as session:
                report = await host_report(session, "lab-b-01")
            return report is not None and JOB_SHELL in report.capabilities

        await wait_until(registered, timeout=15)
        yield made
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def ended_job(agent: Agent, job_pk: int) -> JobRecord:
    """The failed job's record as the agent keeps it once the job ended: its workspace (a file the job
    left in it), its uid where jobs run as their own users, the secrets its accept handed out."""
    name = f"octo-firmware-{job_pk}"
    workspace = agent.workspaces.mark_used(name, agent.clock())
    (workspace / "build.log").write_text("error: the job failed here\n", encoding="utf-8")
    offer = {
        "id": str(job_pk),
        "session": "30303030-3030-3030-3030-303030303030",
        "task": "boot",
        "device": "dev-b1",
        "board": "stm32",
        "repository": "octo/firmware",
        "sha": "a" * 40,
        "command": "make boot",
        "env": {"BUILD_MODE": "debug"},
        "secrets": ["JOB_SECRET"],
        "secrets_allowed": True,
        "claim": {"vcpus": 1},
    }
    record = JobRecord(str(job_pk), offer, state="ended", workspace=name, reported=True, outcome="failed")
    agent.allocate_user(record)
    agent.records.save(record)
    agent.jobs[record.id] = record
    agent._secrets[record.id] = {"JOB_SECRET": SECRET}  # in memory, as an accept leaves them
    agent._credentials[record.id] = {"token": TOKEN, "api_url": "https://api.github.com"}
    return record


async def held(api: Api, agent: Agent, job_pk: int, who: str = ADMIN) -> str:
    """Hold the job's board for ``who``; the reservation's id once the agent heard of the hold."""
    made = await api.call("POST", f"/jobs/{job_pk}/hold", who=who)
    assert made.status == 201, made.body
    [reservation] = made.body["reservations"]
    # The answer waits 2 s at most for the dispatcher's grant: a loaded machine may take longer.
    granted = f"/reservations/{reservation['id']}"

    async def active() -> bool:
        return bool((await api.call("GET", granted, who=who)).body["state"] == "active")

    await wait_until(active, timeout=15, what=f"the hold of job {job_pk} granted")
    await wait_until(lambda: str(job_pk) in agent.held_jobs, timeout=15)
    return str(reservation["id"])


async def open_shell(api: Api, job_pk: int, who: str) -> Screen:
    socket = await api.client.ws_connect(
        f"/api/v1/jobs/{job_pk}/shell", headers={"Authorization": f"Bearer {api.tokens[who]}"}
    )
    return Screen(socket)


async def shell_uses(api: Api, count: int = 1) -> list[Any]:
    """The audit log's shell sessions on dev-b1, once there are ``count``."""
    found: list[Any] = []

    async def written() -> bool:
        async with api.db.sessions() as session:
            audited = await list_audit(session, device_id="dev-b1")
        found[:] = [entry for entry in audited if entry.field == "shell"]
        return len(found) >= count

    await wait_until(written, timeout=15)
    return found


async def test_the_holder_runs_a_command_in_the_jobs_sandbox_without_its_secrets_a_stranger_is_refused(
    api: Api, agent: Agent, github: GitHubStandIn
) -> None:
    jobs = await _jobs(api)
    job = jobs["boot"]
    record = ended_job(agent, job)
    github.set_permission(REPO, READER, "write")  # rita may hold the board

    # One who may not even read the repository is told there is no such job, as the hold's API tells them.
    github.set_permission(REPO, OWNER_B, "none")
    reply = await api.call("GET", f"/jobs/{job}/shell", who=OWNER_B)
    assert (reply.status, reply.body["error"]["message"]) == (404, f"no job {job}"), reply.body

    for stranger in (READER, OWNER_A):  # nobody's hold yet
        reply = await api.call("GET", f"/jobs/{job}/shell", who=stranger)
        assert reply.status == 403, reply.body
        assert "you do not hold its board" in reply.body["error"]["message"]
    reply = await api.call("GET", f"/jobs/{job}/shell", who=ADMIN)
    assert (reply.status, reply.body["error"]["code"]) == (409, "not_held")
    assert "is not held now" in reply.body["error"]["message"]
    assert (await api.call("GET", "/jobs/987654/shell", who=ADMIN)).status == 404

    await held(api, agent, job, who=READER)
    for stranger in (OWNER_A,):  # rita's hold, not theirs (olga owns the pool: no matter)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await open_shell(api, job, stranger)
        assert refused.value.status == 403
        reply = await api.call("GET", f"/jobs/{job}/shell", who=stranger)
        assert f"{stranger} may not open a shell in job {job}'s sandbox" in reply.body["error"]["message"]
    assert api.db.shells.sessions() == []  # nothing was asked of the agent

    shell = await open_shell(api, job, READER)
    opened = await shell.frame("open")
    assert opened == {"type": "open", "job": job, "device": "dev-b1", "read_only": False}
    await shell.socket.send_bytes(
        b'echo "uid=$(id -u) cwd=$(pwd) job=$KERRIGAN_JOB_ID mode=$BUILD_MODE outlet=$POWER_OUTLET'
        b' secret=[$JOB_SECRET$PDU_PASSWORD$GITHUB_TOKEN]"; cat build.log\n'
    )
    await shell.until("the job failed here")
    workspace = agent.workspaces.path(str(record.workspace))
    uid = record.user if record.user is not None else os.geteuid()
    expected = f"uid={uid} cwd={workspace} job={job} mode=debug outlet=pdu-3:7 secret=[]"
    assert expected in shell.seen.decode(errors="replace")
    for secret in (SECRET, DEVICE_SECRET, TOKEN):
        assert secret not in shell.seen.decode(errors="replace")

    await shell.socket.send_bytes(b"exit\n")
    end = await shell.frame("end")
    assert end == {"type": "end", "reason": "the shell exited", "ok": True}
    [use] = await shell_uses(api)
    assert use.actor == READER
    assert use.before["job"] == job
    assert use.before["host"] == "lab-b-01"
    assert use.after["reason"] == "the shell exited"
    assert use.after["seconds"] >= 0
    await wait_until(lambda: record.id not in agent._shells and record.cgroup is None, timeout=15)
    if record.user is not None:  # taken back from the job's user once the shell closed, as at a job's end
        assert workspace.stat().st_uid == 0


async def test_the_holds_end_closes_the_shell_and_kills_what_it_started(api: Api, agent: Agent) -> None:
    jobs = await _jobs(api)
    job = jobs["boot"]
    record = ended_job(agent, job)
    reservation = await held(api, agent, job, who=ADMIN)
    shell = await open_shell(api, job, ADMIN)
    await shell.frame("open")
    await shell.socket.send_bytes(b'sleep 987 & echo "LEFT$((1+1))=$!."\n')  # the echo is no match
    # The pid whole: the echoed command line has a "." of its own, and the answer may come in pieces.
    while (said := re.search(rb"LEFT2=([0-9]+)\.", shell.seen)) is None:
        await shell.read_one()
    left = int(said.group(1))
    assert process_start_time(left) is not None

    released = await api.call("DELETE", f"/reservations/{reservation}", who=ADMIN)
    assert released.status == 200, released.body

    end = await shell.frame("end")
    assert end["reason"] == f"the hold of job {job} ended"
    await wait_until(lambda: process_start_time(left) is None, timeout=15)
    await wait_until(lambda: record.id not in agent._shells, timeout=15)
    [use] = await shell_uses(api)
    assert use.after["reason"] == f"the hold of job {job} ended"
    after = await api.call("GET", f"/jobs/{job}/shell", who=ADMIN)
    assert (after.status, after.body["error"]["code"]) == (409, "not_held")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_kerrigan_shell_runs_a_command_and_leaves_and_a_stranger_is_told_why_not(
    api: Api, agent: Agent
) -> None:
    jobs = await _jobs(api)
    job = jobs["boot"]
    ended_job(agent, job)
    await held(api, agent, job, who=ADMIN)
    lab = _lab(api)
    admin = lab | {"KERRIGAN_TOKEN": api.tokens[ADMIN]}
    stranger = lab | {"KERRIGAN_TOKEN": api.tokens[OWNER_B]}

    refused = await started("shell", str(job), env=stranger, stdin=asyncio.subprocess.DEVNULL)
    out, err = await asyncio.wait_for(refused.communicate(), 30)
    assert refused.returncode == 1, (out, err)
    assert b"may not open a shell in job" in err
    assert b"(HTTP 403)" in err

    read, write = os.pipe()
    process = await started("shell", str(job), env=admin, stdin=read)
    os.close(read)
    os.write(write, b"echo shell-says-$((6*7))\n")
    assert process.stdout is not None
    seen = b""
    while b"shell-says-42" not in seen:
        seen += await asyncio.wait_for(process.stdout.read(4096), 30)
    os.write(write, b"\x1d")  # Ctrl-] leaves
    os.close(write)
    rest, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, (seen + rest, err)
    assert f"kerrigan shell: connected to job {job}'s sandbox (device dev-b1)".encode() in err
    assert b"kerrigan shell: you left" in err
    [use] = await shell_uses(api)
    assert use.after["reason"] == "you left"


def probes_of(agent: Agent, base: Path, other: Path, token: Path, job: int) -> list[tuple[str, str]]:
    """What a hostile person's shell tries: each should be refused (what it reads is there: root reads it)."""
    work, me = agent.settings.work_dir, os.getpid()
    record = agent.records.folder(str(job)) / "record.json"
    for there in (other / "secret.txt", record, token, base / "devices.yml"):
        assert there.read_text(encoding="utf-8")
    return [
        ("other-workspace", f"cat {other}/secret.txt"),
        ("other-workspace-list", f"ls {other}"),
        ("other-workspace-write", f"touch {other}/planted"),
        ("record", f"cat {record}"),  # the held job's own
        ("records-list", f"ls {work}/jobs"),
        ("token", f"cat {token}"),
        ("devices-file", f"cat {base}/devices.yml"),
        ("agent-environ", f"cat /proc/{me}/environ"),
        ("agent-cmdline", f"cat /proc/{me}/cmdline"),
        ("agent-fds", f"ls /proc/{me}/fd"),
        ("agent-memory", f"head -c1 /proc/{me}/mem"),
        ("agent-signal", f"kill -0 {me}"),
        ("work-list", f"ls {work}"),
        ("write-work", f"touch {work}/planted"),
        ("write-base", f"touch {base}/planted"),
        ("write-etc", "touch /etc/kerrigan-planted"),
        ("write-usr", "touch /usr/local/kerrigan-planted"),
        ("become-root", "unshare -r cat /etc/shadow"),
        # And what it may: its own workspace, its own /tmp (the controls: a refusal above is no accident).
        ("own-workspace", "cat build.log && touch mine"),
        ("own-tmp", "touch /tmp/mine"),
    ]


async def test_a_shell_cannot_reach_another_jobs_workspace_the_agents_files_or_write_outside_its_own(
    api: Api, agent: Agent, base: Path
) -> None:
    if agent.isolation.users is None:
        pytest.skip(f"this machine does not run jobs as users of their own: {agent.isolation.missing}")
    jobs = await _jobs(api)
    job = jobs["boot"]
    record = ended_job(agent, job)
    token = agent.settings.work_dir.parent / "runner-token"  # as /etc/kerrigan/runner-token
    token.touch(mode=0o600)
    token.write_text("kgr_the_runner_token\n", encoding="utf-8")
    # Another job's workspace: one running as its own user (a neighbouring uid) and with a secret.
    other = agent.workspaces.mark_used("octo-firmware-other", agent.clock())
    (other / "secret.txt").write_text("the other job's secret\n", encoding="utf-8")
    assert record.user is not None
    give_to(other, record.user + 1 if record.user + 1 <= agent.isolation.users.last else record.user - 1)
    probes = probes_of(agent, base, other, token, job)
    script = agent.workspaces.path(str(record.workspace)) / "probe.sh"
    script.write_text(
        "".join(
            f"if {{ {command}; }} >/dev/null 2>&1; then echo '{name} DONE'; else echo '{name} denied'; fi\n"
            for name, command in probes
        ),
        encoding="utf-8",
    )
    await held(api, agent, job, who=ADMIN)
    shell = await open_shell(api, job, ADMIN)
    await shell.frame("open")
    await shell.socket.send_bytes(b"sh probe.sh > probe.out 2>&1; echo PROBED$((1+1))\n")
    await shell.until("PROBED2")

    workspace = agent.workspaces.path(str(record.workspace))
    said = (workspace / "probe.out").read_text(encoding="utf-8").splitlines()
    expected = [f"{name} denied" for name, _ in probes[:-2]] + ["own-workspace DONE", "own-tmp DONE"]
    assert said == expected
    for planted in (other / "planted", agent.settings.work_dir / "planted", base / "planted"):
        assert not planted.exists()
    assert not Path("/etc/kerrigan-planted").exists()
    assert not Path("/tmp/mine").exists()  # its /tmp was its own
    assert (workspace / "mine").stat().st_uid == record.user
    await shell.socket.close()
    await wait_until(lambda: record.id not in agent._shells, timeout=15)
    assert workspace.stat().st_uid == 0  # taken back from the job's user


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_shell_without_a_keystroke_for_the_idle_time_ends(idle_api: Api, base: Path) -> None:
    api = idle_api
    async with running_agent(api, base) as agent:
        job = (await _jobs(api))["boot"]
        record = ended_job(agent, job)
        await held(api, agent, job, who=ADMIN)
        shell = await open_shell(api, job, ADMIN)
        await shell.frame("open")
        end = await shell.frame("end")  # the shell's prompt is no keystroke: it idles
        assert end == {"type": "end", "reason": "no keystroke for 1 s: the shell was idle", "ok": True}
        await wait_until(lambda: record.id not in agent._shells and record.cgroup is None, timeout=15)
        [use] = await shell_uses(api)
        assert use.after["reason"] == "no keystroke for 1 s: the shell was idle"


async def test_no_shell_where_the_job_ran_as_the_agents_own_user(api: Api, agent: Agent) -> None:
    job = (await _jobs(api))["boot"]
    record = ended_job(agent, job)
    record.user = None  # as on a host that does not run jobs as users of their own
    await held(api, agent, job, who=ADMIN)
    shell = await open_shell(api, job, ADMIN)
    await shell.frame("open")
    end = await shell.frame("end")
    assert end["ok"] is False
    assert end["reason"] == (
        f"job {job} ran as the agent's own user on this host (it does not run jobs as users of their own): "
        "no shell is opened there"
    )
    assert record.cgroup is None
    assert not (agent.area(record.id) / "home").exists()


async def test_a_shell_never_runs_as_the_uid_a_later_job_of_the_host_runs_as_now(
    api: Api, agent: Agent, base: Path
) -> None:
    # The failed job's uid was free from its end until a hold kept its workspace: a job the host accepted
    # meanwhile got it (the lowest free one). A shell as that uid would own the other job's workspace and
    # files, and see and signal its processes.
    job = (await _jobs(api))["boot"]
    record = ended_job(agent, job)
    assert record.user is not None
    workspace = agent.workspaces.path(str(record.workspace))
    os.chown(workspace / "build.log", record.user, record.user)  # the job's own files are its user's
    other = JobRecord("8888", {"id": "8888", "task": "other"}, state="running", workspace="octo-other")
    agent.allocate_user(other)
    assert other.user == record.user  # what the host does: the same uid, for a job that runs now
    assert other.user is not None
    other_workspace = agent.workspaces.mark_used("octo-other", agent.clock())
    (other_workspace / "secret.txt").write_text("the other job's secret\n", encoding="utf-8")
    give_to(other_workspace, other.user)
    agent.jobs[other.id] = other
    try:
        await held(api, agent, job, who=ADMIN)
        shell = await open_shell(api, job, ADMIN)
        await shell.frame("open")
        await shell.socket.send_bytes(
            f'if cat {other_workspace}/secret.txt >/dev/null 2>&1; then echo "OTHER-$((1+1))-READ"; '
            f'else echo "OTHER-$((1+1))-DENIED uid=$(id -u)."; fi\n'.encode()
        )
        # The answer whole: the echoed command line has a "." of its own, and it may come in pieces.
        while (answer := re.search(rb"OTHER-2-(READ|DENIED uid=([0-9]+)\.)", shell.seen)) is None:
            await shell.read_one()
        said = answer.group(1).decode()
        assert said.startswith("DENIED"), said
        uid = int(answer.group(2))
        assert uid != other.user
        assert record.user == uid  # the held job's own now, on its record: emptied by a restarted agent
        assert {r.id: r.user for r in agent.records.load_all()}[record.id] == uid
        assert (workspace / "build.log").stat().st_uid == uid  # the job's files: the shell's uid's
        await shell.socket.close()
        await wait_until(lambda: record.id not in agent._shells and record.cgroup is None, timeout=15)
    finally:
        del agent.jobs[other.id]


async def test_a_file_the_job_linked_into_its_workspace_is_not_given_to_its_user_by_the_shell(
    api: Api, agent: Agent, base: Path
) -> None:
    # A job may hard-link into its workspace any file of the filesystem it can read and write (or any
    # at all where fs.protected_hardlinks is off): chowning the workspace's files as the shell opens
    # would give the job's user a file that is not its own (/etc/passwd on such a host).
    job = (await _jobs(api))["boot"]
    record = ended_job(agent, job)
    victim = base / "lab-b-01" / "not-the-jobs"
    victim.write_text("root's\n", encoding="utf-8")
    victim.chmod(0o666)  # one the job could link with protected_hardlinks on
    workspace = agent.workspaces.path(str(record.workspace))
    os.link(victim, workspace / "linked")  # as the job did, as its user
    assert record.user is not None
    os.chown(workspace / "build.log", record.user, record.user)  # the job's own files are its user's
    await held(api, agent, job, who=ADMIN)
    shell = await open_shell(api, job, ADMIN)
    await shell.frame("open")
    await shell.socket.send_bytes(b'cat build.log; echo "LOOKED-$((1+1))"\n')
    await shell.until("LOOKED-2")
    assert "the job failed here" in shell.seen.decode(errors="replace")
    assert victim.stat().st_uid == 0  # still root's
    await shell.socket.close()
    await wait_until(lambda: record.id not in agent._shells and record.cgroup is None, timeout=15)
