"""The runner agent against a real server and the GitHub stand-in, on loopback, in one event loop.

A push starts ``hil-smoke`` (two tasks whose commands are scripts in the pushed commit); an agent per
runner host takes the offers, fetches the commit's tarball with the offer's repository-scoped token, runs
the scripts and reports; the check run completes with both jobs' output.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kerrigan.core.device_status import HostPause
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.host_capacity import HostLimits
from kerrigan.runner.agent import Agent, AgentSettings, process_start_time
from kerrigan.runner.records import JobRecord, JobRecords
from kerrigan.runner.workspaces import WorkspaceStore
from kerrigan.store.jobs import output
from kerrigan.store.models import JobRow
from kerrigan.store.runners import host_report
from kerrigan.store.tokens import create_token
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import OTHER_SHA, REPO, Harness
from tests.integration.runner.agents import (
    AgentFactory,
    big_claim_commit,
    completed,
    job_rows,
    markers,
    smoke_commit,
    start_both,
    tokens,
)
from tests.unit.runner.sysfs import write_sysfs


async def test_a_push_runs_on_the_agents_and_the_check_run_ends_success_with_both_outputs(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    [run] = await harness.push_commit(smoke_commit())

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    summary = final["output"]["summary"]
    assert "smoke on " in summary
    assert "token set" in summary
    assert f"boot {REPO}@{OTHER_SHA}" in summary
    rows = await job_rows(harness)
    assert [(row.state, row.exit_status) for row in rows] == [("succeeded", 0), ("succeeded", 0)]
    assert all(row.cpus for row in rows)  # the CPU set each was pinned to is on record
    for row in rows:
        assert row.accounting is not None
        use = row.accounting["reservation_use"]
        assert use["vcpus"] == row.vcpus
        assert use["wall_s"] > 0
        assert use["average_use_ppm"] >= 0
    # The tarball was fetched with a token limited to the repository.
    tarballs = harness.requests("GET", f"/tarball/{OTHER_SHA}")
    assert tarballs
    for request in tarballs:
        token = request.headers["Authorization"].split()[1]
        assert harness.github.token_scopes[token] == frozenset({"firmware"})


async def test_a_failing_script_fails_the_check_run_with_its_exit_status_and_output(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    [run] = await harness.push_commit(
        smoke_commit(boot="#!/bin/sh\necho 'no console on uart0' >&2\nexit 3\n")
    )

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    assert "no console on uart0" in final["output"]["summary"]
    assert sorted(row.exit_status for row in await job_rows(harness)) == [0, 3]


async def test_the_agent_reports_health_and_resources_by_name_in_heartbeats(
    harness: Harness, agents: AgentFactory
) -> None:
    hosts = await tokens(harness, "lab-a-01")
    agent = agents("lab-a-01", hosts["lab-a-01"], limits=HostLimits(max_weight=6, max_queue_depth=3))

    async def reported() -> bool:
        async with harness.database.sessions() as session:
            report = await host_report(session, "lab-a-01")
        return report is not None and report.health is not None

    await harness.wait_until(reported)
    async with harness.database.sessions() as session:
        report = await host_report(session, "lab-a-01")
    assert report is not None
    assert report.health is not None
    assert report.resources["max_weight"] == 6
    assert report.resources["max_queue_depth"] == 3
    assert report.resources["vcpus"] == agent.allocator.limit
    assert report.device_states
    assert set(report.device_states.values()) == {"present"}
    assert report.health["underused_reservations"] == []
    # The server shows it: the API gives the host's resources by name and the agent's health.
    async with harness.database.sessions() as session, session.begin():
        api_token = await create_token(session, "octocat", harness.database.clock())
    response = await harness.client.get(
        "/api/v1/hosts/lab-a-01", headers={"Authorization": f"Bearer {api_token}"}
    )
    shown = await response.json()
    assert shown["online"] is True
    assert shown["resources"]["max_weight"] == 6
    assert shown["health"]["admission_refusals"] == {}
    assert shown["health"]["running"] == 0


async def test_a_cancelled_session_stops_the_whole_process_group_and_ends_cancelled(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    await start_both(harness, agents, kill_grace_s=1.0)
    # Both scripts leave a child behind that ignores SIGTERM; cancelling must still end everything. The
    # jobs run as their own users with a private /tmp: each writes its child's pid in its workspace.
    hang = "#!/bin/sh\n(trap '' TERM; sleep 300) & echo $! >> children\necho started\nsleep 300\n"
    [run] = await harness.push_commit(smoke_commit(smoke=hang, boot=hang))

    async def both_running() -> bool:
        return [row.state for row in await job_rows(harness)] == ["running", "running"] and len(
            markers(tmp_path, "children")
        ) == 2

    await harness.wait_until(both_running, timeout=30)
    [session] = await harness.sessions()
    from kerrigan.store.jobs import request_cancel

    async with harness.database.sessions() as db, db.begin():
        await request_cancel(db, session.id, harness.database.clock())

    await completed(harness, run)
    assert harness.github.check_runs[run["id"]]["conclusion"] == "cancelled"
    assert [row.state for row in await job_rows(harness)] == ["cancelled", "cancelled"]
    for pid in [pid for path in markers(tmp_path, "children") for pid in path.read_text().split()]:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


async def test_output_is_uploaded_while_the_job_runs(harness: Harness, agents: AgentFactory) -> None:
    await start_both(harness, agents)
    slow = "#!/bin/sh\necho first line\nsleep 3\necho second line\n"
    await harness.push_commit(smoke_commit(smoke=slow, boot=slow))

    async def first_line_uploaded() -> bool:
        rows = await job_rows(harness)
        if not rows:
            return False
        async with harness.database.sessions() as session:
            chunks = await output(session, rows[0].pk)
        return any("first line" in data for _, data in chunks) and rows[0].state == "running"

    await harness.wait_until(first_line_uploaded, timeout=30)


def test_job_environment_carries_the_offer_and_not_the_agents_settings() -> None:
    from kerrigan.runner.agent import job_environment

    offer = {
        "id": "7",
        "repository": REPO,
        "sha": OTHER_SHA,
        "device": "modalix-bluebox",
        "board": "modalix",
        "labels": {"sdk": "2.2.0"},
        "workflow_run_id": 99,
        "github": {"token": "ghs_x", "api_url": "http://github.test"},
    }
    env = job_environment(offer, (2, 3), {"PATH": "/bin", "KERRIGAN_RUNNER_TOKEN": "kgr_secret"})
    assert "KERRIGAN_RUNNER_TOKEN" not in env
    assert env["GITHUB_TOKEN"] == "ghs_x"
    assert env["GITHUB_REPOSITORY"] == REPO
    assert env["GITHUB_SHA"] == OTHER_SHA
    assert env["GITHUB_API_URL"] == "http://github.test"
    assert env["KERRIGAN_WORKFLOW_RUN_ID"] == "99"
    assert env["KERRIGAN_DEVICE_ID"] == "modalix-bluebox"
    assert env["KERRIGAN_DEVICE_BOARD"] == "modalix"
    assert json.loads(env["KERRIGAN_DEVICE_LABELS"]) == {"sdk": "2.2.0"}
    assert env["KERRIGAN_CPUS"] == "2-3"
    assert env["PATH"] == "/bin"


async def test_a_claim_no_host_can_fit_fails_at_once_naming_the_hosts_cpus(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    # Both hosts report two CPUs: a claim of four is never matched (the dispatcher never leases such a
    # device), and the check run fails at once with the reason, nothing leased, accepted or fetched.
    hosts = await tokens(harness, "lab-a-01", "lab-a-02")
    started = [
        agents(host, token, sysfs_root=write_sysfs(tmp_path / f"{host}-cpu", [[0], [1]], online="0-1"))
        for host, token in hosts.items()
    ]

    async def reported() -> bool:
        async with harness.database.sessions() as session:
            from sqlalchemy import select

            from kerrigan.store.models import RunnerHostRow

            rows = (await session.scalars(select(RunnerHostRow).where(RunnerHostRow.id.in_(hosts)))).all()
            return len(rows) == 2 and all(row.resources.get("vcpus") == 2 for row in rows)

    await harness.wait_until(reported, timeout=30)
    [run] = await harness.push_commit(big_claim_commit(4))

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    assert "needs 4 vCPUs; runner host lab-a-01 has 2 allocatable" in final["output"]["summary"]
    assert harness.requests("GET", f"/tarball/{OTHER_SHA}") == []
    assert sum(agent.refusals.get("runner_full", 0) for agent in started) == 0
    assert all(agent.jobs == {} for agent in started)  # nothing was offered


async def test_disk_full_wire_refusal_carries_tag_and_bytes_before_upload(
    harness: Harness, agents: AgentFactory
) -> None:
    floor = 1 << 60  # more than any disk: every offer is refused
    await start_both(harness, agents, disk=DiskPolicy(floor_bytes=floor))
    await harness.push_commit(big_claim_commit(1))

    async def refused() -> bool:
        rows = await job_rows(harness)
        return bool(rows) and rows[0].reason == "runner_disk_full"

    await harness.wait_until(refused, timeout=30)
    [row] = await job_rows(harness)
    assert row.detail is not None
    assert row.detail.endswith(f"bytes free, floor {floor} bytes")
    assert harness.requests("GET", f"/tarball/{OTHER_SHA}") == []  # refused before any download


async def test_upload_fetch_and_setup_do_not_spend_queue_wait_budget(
    harness: Harness, tmp_path: Path
) -> None:
    # Accepted an hour ago, fetched two seconds ago: the wait the heartbeat reports is the two seconds.
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings("http://127.0.0.1:9", "kgr_x", "lab-a-01", tmp_path, systemd_scope="never")
        now = 1_000_000.0
        agent = Agent(settings, http, clock=lambda: now)
        agent.jobs["7"] = JobRecord(
            "7", {"claim": {"vcpus": 2}}, "waiting", accepted_at=now - 3600, ready_at=now - 2
        )
        agent.jobs["8"] = JobRecord("8", {"claim": {"vcpus": 2}}, "accepted", accepted_at=now - 3600)
        assert agent.heartbeat_body()["waiting"] == {"7": 2000}


async def test_recorded_live_cpu_sets_reregister_after_restart(harness: Harness, tmp_path: Path) -> None:
    # A job still running when its agent died: the new agent registers its recorded CPUs again, so the
    # next claim does not land on them, and follows the job to its end.
    sysfs = write_sysfs(tmp_path / "cpu", [[0, 4], [1, 5], [2, 6], [3, 7]], online="0-7")
    hosts = await tokens(harness, "lab-a-01")
    work = tmp_path / "work"
    still_running = await asyncio.create_subprocess_exec("sleep", "30", start_new_session=True)
    records = JobRecords(work)
    records.save(
        JobRecord(
            "41", {"claim": {"vcpus": 2}}, "running", accepted_at=1.0, cpus=[1, 5], pid=still_running.pid
        )
    )
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(
            str(harness.client.make_url("")),
            hosts["lab-a-01"],
            "lab-a-01",
            work,
            sysfs_root=sysfs,
            systemd_scope="never",
            disk=DiskPolicy(0),
        )
        agent = Agent(settings, http)
        agent.recover()
        assert agent.allocator.allocations() == {"41": (1, 5)}
        assert agent.allocator.allocate("next", 2) == (2, 6)  # not the recorded pair
        agent.allocator.release("next")
        still_running.kill()
        await still_running.wait()

        async def ended() -> bool:
            record = agent.jobs["41"]
            return record.state == "ended" and record.reported

        await harness.wait_until(ended, timeout=20)
        assert agent.allocator.allocations() == {}
        assert agent.jobs["41"].accounting is None  # no launcher result: absent, never zero


async def test_a_claim_is_resolved_by_name_and_unknown_resources_are_skipped_with_a_warning(
    harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Seed 001 on the agent: the offer's claim is keyed by name; an unknown name is a warning, not a
    # failure, and a claim without vcpus is refused invalid_claim.
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(str(harness.client.make_url("")), "kgr_unknown", "lab-a-01", tmp_path)
        agent = Agent(settings, http)
        with caplog.at_level("WARNING", logger="kerrigan.runner.admission"):
            await agent._offered({"id": "900", "claim": {"gpu_slices": 2}})
        assert agent.refusals == {"invalid_claim": 1}
        assert "claim resource 'gpu_slices' skipped: no such resource in this catalog" in caplog.text


async def test_without_a_token_the_job_fails_instead_of_running_stale_files(
    harness: Harness, agents: AgentFactory
) -> None:
    # GitHub refuses every installation token for a while: the offer's repository cannot be fetched,
    # and the job must not run whatever an earlier job left in its workspace.
    # The agents start only once the fault is in place: a job accepted before it would have its token.
    hosts = await tokens(harness, "lab-a-01", "lab-a-02")
    [run] = await harness.push_commit(smoke_commit())
    harness.github.fail_next("POST", r"/access_tokens$", 403, times=100)
    for host, token in hosts.items():
        agents(host, token)

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    assert "the server gave no token to fetch the repository with" in final["output"]["summary"]
    assert harness.requests("GET", f"/tarball/{OTHER_SHA}") == []


async def test_a_fetch_github_keeps_failing_is_retried_on_another_device_to_a_green_check_run(
    harness: Harness, agents: AgentFactory
) -> None:
    # GitHub fails the first tarball download past the runner's retries (none here): that attempt ends
    # source_unavailable, the lab's failure, and its retry, kept off the device that failed it, fetches
    # and runs the task. (A 404 is GitHub's refusal, the same everywhere: not retried, as the test of it
    # in test_runner_github_faults.py says.)
    harness.github.fail_next("GET", r"/tarball/", 502, times=1)
    await start_both(harness, agents, github_retry_s=0.0)
    [run] = await harness.push_commit(smoke_commit())

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    rows = await job_rows(harness)
    [failed] = [row for row in rows if row.state == "retried"]
    assert (failed.reason, failed.failure_class) == ("source_unavailable", "infrastructure")
    [retry] = [row for row in rows if row.retry_of == failed.pk]
    assert (retry.state, retry.attempt) == ("succeeded", 2)
    assert retry.device_id != failed.device_id
    assert "source_unavailable" in final["output"]["summary"]


async def test_a_job_the_server_has_ended_is_stopped_on_the_host_without_a_report(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    # The server gave the job up (its lease expired while the server was away, say): at the next
    # heartbeat the agent learns it no longer holds it and stops it, and reports nothing over the
    # server's decision.
    await start_both(harness, agents, kill_grace_s=0.5)
    hang = "#!/bin/sh\necho $$ >> pids\nsleep 300\n"  # in the job's workspace
    await harness.push_commit(smoke_commit(smoke=hang, boot=hang))

    async def both_running() -> bool:
        rows = await job_rows(harness)
        started = [pid for path in markers(tmp_path, "pids") for pid in path.read_text().split()]
        return [row.state for row in rows] == ["running", "running"] and len(started) == 2

    await harness.wait_until(both_running, timeout=30)
    [first, second] = await job_rows(harness)
    async with harness.database.sessions() as session, session.begin():
        from kerrigan.store.leases import release_lease

        assert first.device_id is not None
        await release_lease(session, first.device_id, first.pk)
        row = await session.get(JobRow, first.pk)
        assert row is not None
        row.state, row.reason = "failed", "runner_lost"

    pids = [int(pid) for path in markers(tmp_path, "pids") for pid in path.read_text().split()]

    async def one_stopped() -> bool:
        return sum(1 for pid in pids if not Path(f"/proc/{pid}").exists()) == 1

    await harness.wait_until(one_stopped, timeout=20)
    rows = {row.pk: row for row in await job_rows(harness)}
    assert (rows[first.pk].state, rows[first.pk].reason) == ("failed", "runner_lost")  # not overwritten
    assert rows[second.pk].state == "running"


async def test_a_launch_that_fails_ends_the_job_and_frees_its_cpus(
    harness: Harness, agents: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await start_both(harness, agents)

    async def no_processes_left(*args: object, **kwargs: object) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr("kerrigan.runner.processes.asyncio.create_subprocess_exec", no_processes_left)
    [run] = await harness.push_commit(smoke_commit())

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    assert "the job could not be started: [Errno 24] Too many open files" in final["output"]["summary"]
    assert all(agent.allocator.allocations() == {} for agent in started)


async def test_records_on_disk_never_hold_the_github_token_and_bad_offers_do_not_stop_the_agent(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    hosts = await tokens(harness, "lab-a-01", "lab-a-02")
    started = [agents(host, token) for host, token in hosts.items()]
    await started[0]._offered({"id": "not-a-number", "claim": {"vcpus": 2}})  # logged, nothing else
    [run] = await harness.push_commit(smoke_commit())

    await completed(harness, run)
    assert harness.github.check_runs[run["id"]]["conclusion"] == "success"
    records = list(tmp_path.glob("*/jobs/*/record.json"))
    assert records
    for record in records:
        assert "ghs_" not in record.read_text(encoding="utf-8")
    # The jobs pass through the work dir to their workspaces; the agent's records are its own.
    work_mode = 0o711 if started[0].isolation.users is not None else 0o700
    assert all((tmp_path / host).stat().st_mode & 0o777 == work_mode for host in hosts)
    assert all((tmp_path / host / "jobs").stat().st_mode & 0o777 == 0o700 for host in hosts)


async def test_health_counts_admission_refusals_without_acceptance(harness: Harness, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(str(harness.client.make_url("")), "kgr_unknown", "lab-a-01", tmp_path)
        agent = Agent(settings, http)
        await agent._offered({"id": "901", "claim": {"vcpus": 0}})
        await agent._offered({"id": "902", "claim": {"vcpus": agent.allocator.limit + 1}})
        assert agent.health()["admission_refusals"] == {"runner_full": 2}
        assert agent.jobs == {}
        assert not (tmp_path / "jobs").exists()  # nothing recorded


async def test_disk_admission_protects_canonical_alias_through_job_insertion(
    harness: Harness, tmp_path: Path
) -> None:
    # Admission runs before the job's record exists: the workspace the incoming job will use (by its
    # canonical name) is protected anyway, while another idle workspace is evicted.
    async with aiohttp.ClientSession() as http:
        probe = WorkspaceStore(tmp_path)
        tmp_path.mkdir(exist_ok=True)
        floor = probe.free_bytes() + (1 << 30)  # always under the floor: evict everything allowed
        settings = AgentSettings(
            str(harness.client.make_url("")),
            "kgr_x",
            "lab-a-01",
            tmp_path,
            disk=DiskPolicy(floor_bytes=floor),
        )
        agent = Agent(settings, http)
        offer = {"id": "903", "repository": REPO, "task": "smoke-som", "claim": {"vcpus": 1}}
        incoming = agent._workspace_name(offer)
        long_ago = time.time() - 3 * 3600
        for name in (incoming, "octo-other--build"):
            (agent.workspaces.mark_used(name, long_ago) / "data").write_bytes(b"x" * 4096)
        refusal = await asyncio.to_thread(agent._admit_disk, incoming)
        assert refusal is not None
        assert refusal["floor_bytes"] == floor
        assert (tmp_path / "workspaces" / incoming / "data").exists()
        assert not (tmp_path / "workspaces" / "octo-other--build").exists()


async def test_disk_full_reaches_run_and_prepare_callers_with_known_reason_and_detail(
    harness: Harness, agents: AgentFactory
) -> None:
    # The refusal's reason and bytes reach the check run (the run's caller) while the job waits again.
    floor = 1 << 60
    await start_both(harness, agents, disk=DiskPolicy(floor_bytes=floor))
    [run] = await harness.push_commit(big_claim_commit(1))

    async def shown() -> bool:
        summary = harness.github.check_runs[run["id"]]["output"]["summary"]
        return "runner_disk_full: " in summary and f"floor {floor} bytes" in summary

    await harness.wait_until(shown, timeout=30)
    assert harness.github.check_runs[run["id"]]["status"] == "queued"
    # Each host that says no is held by Kerrigan for a minute, so the job is not offered straight back to
    # it (a loop of offers and refusals as fast as the hosts poll): it goes to the other, which says no too.
    pauses: dict[str, HostPause | None] = {}

    async def both_held() -> bool:
        async with harness.database.sessions() as session:
            for host in ("lab-a-01", "lab-a-02"):
                report = await host_report(session, host)
                assert report is not None
                pauses[host] = report.pause
        return all(pause is not None for pause in pauses.values())

    await harness.wait_until(both_held, timeout=30)
    for pause in pauses.values():
        assert pause is not None
        assert pause.by == "kerrigan"
        assert pause.until is not None
        assert pause.reason.startswith("it refused a job runner_disk_full (")
        assert (pause.until - pause.since).total_seconds() == 60
    [row] = await job_rows(harness)
    assert row.state == "queued"  # and offered to neither while they are held


async def test_a_job_past_its_timeout_is_stopped_and_the_check_run_times_out(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents, kill_grace_s=0.5)
    manifest = (
        "name: slow\n"
        "on: {push: {branches: [main]}}\n"
        "scheduling:\n"
        "  labels: {sdk: '2.2.0', form_factor: som}\n"
        "tasks:\n"
        "  - id: soak\n"
        "    run: ./scripts/soak.sh\n"
        "    vcpus: 1\n"
        "    timeout_s: 1\n"
    )
    soak = "#!/bin/sh\necho soaking\nsleep 60\necho never\n"
    [run] = await harness.push_commit({".kerrigan/workflows/slow.yml": manifest, "scripts/soak.sh": soak})

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "timed_out"
    assert "soaking" in final["output"]["summary"]
    assert "never" not in final["output"]["summary"]
    [row] = await job_rows(harness)
    assert (row.state, row.reason) == ("timed_out", "timed_out")  # an ended state of its own (core.lifecycle)


async def test_a_gap_the_server_reports_is_filled_by_sending_again_from_where_it_is(
    harness: Harness, tmp_path: Path
) -> None:
    # The agent believes two pages went (say its record was saved just before a crash that lost the
    # answers); the server has none: it answers "gap" with the page it expects, and the agent sends again
    # from there, so every page arrives once and in order.
    hosts = await tokens(harness, "lab-a-01")
    async with aiohttp.ClientSession() as http:
        settings = AgentSettings(str(harness.client.make_url("")), hosts["lab-a-01"], "lab-a-01", tmp_path)
        agent = Agent(settings, http)
        await agent.server.register({}, {})
        await harness.push_commit(smoke_commit())

        async def offered() -> list[dict[str, Any]]:
            offers: list[dict[str, Any]] = (await agent.server.poll(0))["offers"]
            return offers

        await harness.wait_until(lambda: _non_empty(offered), timeout=10)
        [offer] = await offered()
        job_id = str(offer["id"])
        await agent.server.job(job_id, "accept")
        await agent.server.job(job_id, "start")
        record = JobRecord(job_id, offer, "running", accepted_at=time.time())
        agent.records.save(record)
        agent.records.output_path(job_id).write_bytes(b"".join(b"line %d\n" % n for n in range(3)))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("kerrigan.runner.records.PAGE_BYTES", 7)  # one line a page
            agent.records.cut_pages(record, final=True)
        assert record.next_page == 3
        record.uploaded = 2
        assert await agent._upload(record)
        async with harness.database.sessions() as session:
            chunks = await output(session, int(job_id))
        assert chunks == [(0, "line 0\n"), (1, "line 1\n"), (2, "line 2\n")]


async def _non_empty(read: Callable[[], Awaitable[list[Any]]]) -> bool:
    return bool(await read())


ESCAPE = (
    "#!/bin/sh\n"
    "setsid sleep 987654 &\n"  # out of the job's session and process group
    "echo $! > escapee\n"  # in its workspace
    "echo launched\n"
    "sleep 300\n"
)


async def test_an_escaping_job_dies_whole_before_its_end_is_reported_when_its_launcher_died(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    hosts = await tokens(harness, "lab-a-01")
    agent = agents("lab-a-01", hosts["lab-a-01"])
    if agent.isolation.cgroups.name is None:
        pytest.skip(f"no cgroup for jobs on this machine: {', '.join(agent.isolation.missing)}")
    await harness.push_commit(smoke_commit(smoke=ESCAPE, boot=ESCAPE))

    async def launched() -> tuple[int, int, int] | None:
        for row in await job_rows(harness):
            record = agent.jobs.get(str(row.pk))
            if row.state != "running" or record is None or record.pid is None:
                continue
            async with harness.database.sessions() as session:
                if any("launched" in data for _, data in await output(session, row.pk)):
                    [escapee] = markers(tmp_path, "escapee")
                    return row.pk, record.pid, int(escapee.read_text())
        return None

    job, launcher, escapee = await wait_until(launched, timeout=30)
    assert process_start_time(escapee) is not None
    os.kill(launcher, signal.SIGKILL)  # the launcher dies: its subreaper cannot end the escapee

    async def ended() -> tuple[bool] | None:
        rows = {row.pk: row for row in await job_rows(harness)}
        # Looked at in this order: once the server has the end, what the job left must already be gone.
        if rows[job].state in ("leased", "accepted", "running"):
            return None
        return (process_start_time(escapee) is None,)

    assert await wait_until(ended, timeout=30) == (True,)
    assert agent.jobs[str(job)].cgroup is None  # emptied and removed


async def test_a_job_whose_launcher_was_killed_ends_runner_lost_the_labs_failure_not_the_tests(
    harness: Harness, agents: AgentFactory
) -> None:
    # A host restart kills what runs there; the agent then has no result for the job, and its end is
    # unknown: the lab's failure (runner_lost, retried), never the test's (found by soak_lab_week).
    hosts = await tokens(harness, "lab-a-01")
    agent = agents("lab-a-01", hosts["lab-a-01"])
    await harness.push_commit(smoke_commit(smoke="#!/bin/sh\necho launched\nsleep 300\n"))

    async def launched() -> tuple[int, int] | None:
        for row in await job_rows(harness):
            record = agent.jobs.get(str(row.pk))
            if row.state != "running" or record is None or record.pid is None:
                continue
            async with harness.database.sessions() as session:
                if any("launched" in data for _, data in await output(session, row.pk)):
                    return row.pk, record.pid
        return None

    job, launcher = await wait_until(launched, timeout=30)
    os.kill(launcher, signal.SIGKILL)

    async def ended() -> JobRow | None:
        row = next(row for row in await job_rows(harness) if row.pk == job)
        return None if row.state in ("leased", "accepted", "running") else row

    row = await wait_until(ended, timeout=30)
    assert (row.reason, str(row.failure_class)) == ("runner_lost", "infrastructure")
    assert row.state == "retried"  # its retries remain: it runs again, the check run is not red
