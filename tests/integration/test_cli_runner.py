"""``kerrigan runner`` and ``kerrigan runner topology`` as an operator runs them: real processes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kerrigan.runner.isolation.users import UserRange
from kerrigan.testing.job_users import spare_job_users
from tests.integration.test_cli_explain import kerrigan
from tests.unit.runner.sysfs import SNAPSHOTS, needs_snapshots, write_sysfs


def test_topology_prints_what_the_agent_reads_and_where_each_claim_goes(tmp_path: Path) -> None:
    # Four cores with two threads each: the first core is kept back, claims take whole pairs first.
    root = write_sysfs(tmp_path / "cpu", [[0, 4], [1, 5], [2, 6], [3, 7]], online="0-7")
    done = kerrigan("runner", "topology", "--sysfs-root", root, "--claims", "2,3,1,9")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "online CPUs:     0-7",
        "physical cores:  4",
        "sibling groups:  0,4 1,5 2,6 3,7",
        "reserved:        0,4",
        "allocatable:     1-3,5-7",
        "claim   2 vCPUs -> CPUs 1,5",
        "claim   3 vCPUs -> CPUs 2-3,6",
        "claim   1 vCPUs -> CPUs 7",
        "claim   9 vCPUs -> refused runner_full: claims 9 vCPUs; this host has 6 allocatable",
    ]


@needs_snapshots
def test_topology_json_on_a_real_two_socket_machine() -> None:
    done = kerrigan(
        "runner", "topology", "--sysfs-root", SNAPSHOTS / "xeon4214_2socket", "--claims", "4,1", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["online"] == "0-47"
    assert report["reserved"] == "0,24"
    assert report["claims"] == [{"claim": 4, "cpus": "1-2,25-26"}, {"claim": 1, "cpus": "3"}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "kerrigan runner: missing --server, --host-id, --token (or KERRIGAN_RUNNER_TOKEN)"),
        (
            ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t", "--max-weight", "0"),
            "kerrigan runner: max_weight must be 1 or more, got 0",
        ),
        (
            ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t", "--github-retry-s", "-1"),
            "kerrigan runner: github_retry_s must be 0 or more, not -1.0",
        ),
        (
            ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t", "--job-users", "10-5"),
            "kerrigan runner: job_users: '10-5' must be ids from 1000 up",
        ),
        (
            ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t", "--job-groups", "nosuch"),
            "kerrigan runner: --job-groups: no group 'nosuch' on this host",
        ),
        (
            ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t", "--unpack-max-files", "0"),
            "kerrigan runner: --unpack-max-files must be 1 or more, not 0",
        ),
        (
            ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t", "--output-max-bytes", "100"),
            "kerrigan runner: --output-max-bytes must be 1024 or more, not 100",
        ),
        (
            ("topology", "--sysfs-root", "/nonexistent/cpu"),
            "kerrigan runner: /nonexistent/cpu: cannot list the CPU folders",
        ),
    ],
)
def test_mistakes_are_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    done = kerrigan("runner", *args)
    assert done.returncode == 2
    assert done.stderr.startswith(message)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_claims_that_are_not_numbers_are_a_usage_error() -> None:
    done = kerrigan("runner", "topology", "--claims", "2,two")
    assert done.returncode == 2
    assert "'2,two' is not a comma-separated list of vCPU counts" in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "kerrigan runner: devices file {path}: no such file"),
        (
            "devices:\n  modalix-redbox:\n    present_if: {command: [probe], timeout_s: 300}\n",
            "kerrigan runner: {path}:3:47: devices.modalix-redbox.present_if.timeout_s: must be 1 to 120",
        ),
        (
            "devices:\n  modalix-bluebox:\n    env: {GITHUB_TOKEN: x}\n",
            "kerrigan runner: {path}:3:11: devices.modalix-bluebox.env.GITHUB_TOKEN: names starting GITHUB_",
        ),
        (
            "devices:\n  modalix-bluebox:\n    console: {serial: {port: /dev/kerrigan-no-such-tty}}\n",
            "kerrigan runner: {path}:3:30: devices.modalix-bluebox.console.serial.port: "
            "'/dev/kerrigan-no-such-tty' does not exist on this host",
        ),
        (
            "devices:\n  modalix-bluebox:\n    console: {url: 'socket://127.0.0.1:4555'}\n"
            "    boot: {ready: 'login:', fail: ['Kernel panic (']}\n",
            "kerrigan runner: {path}:4:36: devices.modalix-bluebox.boot.fail[0]: 'Kernel panic (' is not a "
            "regular expression",
        ),
    ],
)
def test_a_bad_devices_file_stops_the_runner_with_one_line_naming_it(
    tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "devices.yml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    server = ("--server", "http://127.0.0.1:9", "--host-id", "h", "--token", "t")
    done = kerrigan("runner", *server, "--work-dir", tmp_path / "work", "--devices-file", path)
    assert done.returncode == 2
    assert done.stderr.startswith(message.format(path=path))
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@contextlib.contextmanager
def running_agent(work: Path, users: UserRange) -> Iterator[subprocess.Popen[str]]:
    """``kerrigan runner`` with its jobs' users ``users``, once it is past its start (it says how jobs are
    isolated; its server is nowhere, so it then waits for it); stopped on the way out."""
    agent = subprocess.Popen(
        [
            *(sys.executable, "-m", "kerrigan.cli", "runner", *SERVER, "--work-dir", str(work)),
            *("--job-users", str(users), "--systemd-scope", "never", "--free-space-floor-bytes", "0"),
        ],
        env=TOKEN,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stderr is not None
        for line in agent.stderr:
            if "isolated" in line:
                break
        assert agent.poll() is None, f"the agent ended: {agent.returncode}"
        yield agent
    finally:
        agent.terminate()
        agent.communicate(timeout=60)


SERVER = ("--server", "http://127.0.0.1:9", "--host-id", "lab-a-01")
TOKEN = {**os.environ, "KERRIGAN_RUNNER_TOKEN": "kgr_x"}


@pytest.mark.skipif(os.geteuid() != 0, reason="jobs run as users of their own (and lock them) as root only")
def test_a_second_agent_on_job_users_another_holds_refuses_to_start_naming_them(tmp_path: Path) -> None:
    users = spare_job_users()
    with running_agent(tmp_path / "first", users) as first:
        overlapping = UserRange(users.last, users.last + 40)
        done = subprocess.run(
            [
                *(sys.executable, "-m", "kerrigan.cli", "runner", *SERVER),
                *("--work-dir", str(tmp_path / "second"), "--job-users", str(overlapping)),
            ],
            env=TOKEN,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 2
        assert done.stderr == (
            f"kerrigan runner: job users {overlapping} overlap {users}, held by another agent on this host "
            f"(pid {first.pid}, work dir {tmp_path / 'first'}; lock file "
            f"/run/kerrigan-runner/job-users-{users}.lock): give each agent on a host a --job-users range "
            "of its own\n"
        )
        with running_agent(tmp_path / "third", spare_job_users()) as third:
            assert third.poll() is None
