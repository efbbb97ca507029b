"""``kerrigan shell`` attacked (issue 30's review), through the real server and agent as root: what a
hostile shell starts does not outlive it (setsid, double fork, nohup, SIGHUP and SIGTERM ignored, a
disguised name) nor leaves its cgroup, and the links it leaves are never followed when root takes the
workspace, its area and the host's shared folders back, nor when a second shell opens on them."""

from __future__ import annotations

from pathlib import Path

from kerrigan.runner.agent import Agent
from kerrigan.runner.processes import process_start_time
from kerrigan.testing.waiting import wait_until
from tests.integration.api.conftest import ADMIN, Api
from tests.integration.api.test_job_hold_api import _jobs
from tests.integration.api.test_job_shell import agent, base, ended_job, held, open_shell

__all__ = ["agent", "base"]


async def test_nothing_a_shell_starts_outlives_it(api: Api, agent: Agent) -> None:
    job = (await _jobs(api))["boot"]
    record = ended_job(agent, job)
    await held(api, agent, job, who=ADMIN)
    shell = await open_shell(api, job, ADMIN)
    await shell.frame("open")
    script = (
        "trap '' HUP TERM INT\n"
        "setsid sh -c 'trap \"\" HUP TERM; sleep 991 & echo $! > p1' &\n"
        "(sh -c 'sleep 992 & echo $! > p2' &)\n"
        "nohup sleep 993 > /dev/null 2>&1 & echo $! > p3\n"
        "bash -c 'exec -a kworker sleep 994' & echo $! > p4\n"
        "echo $$ > /sys/fs/cgroup/cgroup.procs 2> esc1 || echo esc1-denied >> esc\n"
        "mkdir /sys/fs/cgroup/x 2>/dev/null || echo esc2-denied >> esc\n"
        "unshare -U -r sh -c 'echo $$ > /sys/fs/cgroup/cgroup.procs' 2>/dev/null || echo esc3-denied >> esc\n"
        "sleep 0.5; echo READY$((1+1))\n"
    )
    await shell.socket.send_bytes(script.encode())
    await shell.until("READY2")
    workspace = agent.workspaces.path(str(record.workspace))
    pids = [int((workspace / f"p{n}").read_text()) for n in (1, 2, 3, 4)]
    assert (workspace / "esc").read_text().split() == ["esc1-denied", "esc2-denied", "esc3-denied"]
    for pid in pids:
        assert process_start_time(pid) is not None, pid
    await shell.socket.close()
    await wait_until(lambda: record.id not in agent._shells and record.cgroup is None, timeout=15)
    for pid in pids:
        assert process_start_time(pid) is None, pid


async def test_links_a_shell_leaves_are_not_followed_when_root_takes_things_back(
    api: Api, agent: Agent, base: Path
) -> None:
    job = (await _jobs(api))["boot"]
    record = ended_job(agent, job)
    victim = base / "lab-b-01" / "victim"
    victim.mkdir()
    (victim / "keep").write_text("root's\n", encoding="utf-8")
    await held(api, agent, job, who=ADMIN)
    for attempt in (1, 2):  # the second shell opens on what the first left
        shell = await open_shell(api, job, ADMIN)
        await shell.frame("open")
        script = (
            f"ln -sfn {victim} vlink; ln -sfn {victim}/keep flink; mkdir -p d; ln -sfn {victim} d/in\n"
            f"ln -sfn {victim} $HOME/h; ln -sfn {victim} /tmp/t; ln -sfn {victim}/keep /run/lock/kerrigan-l\n"
            f"mkdir -p /run/lock/kerrigan-d; ln -sfn {victim} /run/lock/kerrigan-d/x\n"
            f"echo DONE{attempt}$((1+1))\n"
        )
        await shell.socket.send_bytes(script.encode())
        await shell.until(f"DONE{attempt}2")
        await shell.socket.close()
        await wait_until(lambda: record.id not in agent._shells and record.cgroup is None, timeout=15)
        assert (victim / "keep").read_text(encoding="utf-8") == "root's\n"
        assert victim.stat().st_uid == 0
        assert (victim / "keep").stat().st_uid == 0
        assert not Path("/run/lock/kerrigan-l").is_symlink()
        assert not Path("/run/lock/kerrigan-d").exists()
        workspace = agent.workspaces.path(str(record.workspace))
        assert workspace.stat().st_uid == 0
        assert (workspace / "vlink").is_symlink()
