"""The job launcher run as the agent runs it: a real subprocess leading its own session."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

LAUNCH = (sys.executable, "-m", "kerrigan.runner.launch")
GRACE_S = "0.5"
PYTHON = shlex.quote(sys.executable)
# Burns 0.3 s of CPU time in one process, then runs the statement given after it.
BURN = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3: pass\n"


def launch_command(result: Path, command: str, *, cpus: str | None = None) -> list[str]:
    pinning = ["--cpus", cpus] if cpus is not None else []
    return [*LAUNCH, "--result", str(result), *pinning, "--grace-s", GRACE_S, "--", "sh", "-c", command]


def run(
    tmp_path: Path, command: str, *, cpus: str | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``sh -c command`` under the launcher, as the leader of a new session, and wait for it."""
    result = tmp_path / "result.json"
    finished = subprocess.run(
        launch_command(result, command, cpus=cpus),
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
        check=False,
    )
    return finished, result


def read_result(path: Path) -> dict[str, Any]:
    found = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(found, dict)
    return found


def burn_then(statement: str) -> str:
    """A Python command, quoted for ``sh``, that burns CPU and then runs ``statement``."""
    return f"{PYTHON} -c {shlex.quote(BURN + statement)}"


def live_in_session(session: int) -> list[int]:
    """Processes of ``session`` still alive (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, _pgrp, sid = stat[stat.rfind(")") + 2 :].split()[:4]
        if int(sid) == session and state != "Z":
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie waiting to be reaped counts as ended)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat[stat.rfind(")") + 2 :].startswith("Z")


def communicate(process: subprocess.Popen[str]) -> str:
    """Wait for the launcher and return its output; on a timeout, end its whole group before failing."""
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return output


@pytest.mark.parametrize("status", [0, 1, 3, 42, 255])
def test_the_commands_exit_status_passes_through(tmp_path: Path, status: int) -> None:
    finished, result = run(tmp_path, f"exit {status}")
    assert finished.returncode == status
    assert read_result(result)["exit_status"] == status


def test_a_command_killed_by_a_signal_exits_as_the_shell_reports_it(tmp_path: Path) -> None:
    finished, result = run(tmp_path, "kill -KILL $$")
    assert finished.returncode == 128 + signal.SIGKILL
    assert read_result(result)["exit_status"] == -signal.SIGKILL


def test_the_result_holds_exit_status_cpu_and_wall_time_and_nothing_half_written(tmp_path: Path) -> None:
    finished, result = run(tmp_path, burn_then("print('done')"))
    assert finished.returncode == 0
    assert finished.stdout == "done\n"
    found = read_result(result)
    assert set(found) == {"exit_status", "cpu_s", "wall_s"}
    assert found["exit_status"] == 0
    assert found["cpu_s"] >= 0.3
    assert found["wall_s"] >= 0.3
    assert [path.name for path in tmp_path.iterdir()] == ["result.json"]


def test_an_idle_command_uses_little_cpu(tmp_path: Path) -> None:
    _, result = run(tmp_path, "sleep 0.3")
    found = read_result(result)
    assert found["wall_s"] >= 0.3
    assert 0 <= found["cpu_s"] < 0.2


def test_cpu_time_includes_grandchildren_the_command_waited_for(tmp_path: Path) -> None:
    # The shell waits for the burning Python (a grandchild of the launcher), then runs something else.
    finished, result = run(tmp_path, f"{burn_then('pass')}; {burn_then('pass')}; true")
    assert finished.returncode == 0
    assert read_result(result)["cpu_s"] >= 0.6


def test_cpu_time_includes_orphans_the_command_left(tmp_path: Path) -> None:
    # The orphan burns CPU, says so, and sleeps on after the shell has exited without waiting for it.
    marker = tmp_path / "burnt"
    orphan = burn_then(f"open({str(marker)!r}, 'w').close()\ntime.sleep(300)")
    finished, result = run(
        tmp_path, f"{orphan} & echo $!; while [ ! -e {shlex.quote(str(marker))} ]; do sleep 0.05; done"
    )
    assert finished.returncode == 0
    assert read_result(result)["cpu_s"] >= 0.3
    assert gone(int(finished.stdout))


@pytest.mark.parametrize(
    "background",
    [
        pytest.param("sleep 300 &", id="plain"),
        pytest.param("(trap '' TERM; sleep 300) &", id="ignores-sigterm"),
        pytest.param("(sleep 300 & sleep 300 & wait) &", id="with-children-of-its-own"),
    ],
)
def test_children_left_running_are_gone_when_the_launcher_exits(tmp_path: Path, background: str) -> None:
    started = time.monotonic()
    process = subprocess.Popen(
        launch_command(tmp_path / "result.json", f"{background} echo $!; exit 7"),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    output = communicate(process)
    assert process.returncode == 7
    assert time.monotonic() - started < 10  # SIGKILL follows the 0.5 s grace; it does not wait for sleep 300
    assert gone(int(output))
    assert live_in_session(process.pid) == []
    assert read_result(tmp_path / "result.json")["exit_status"] == 7


def test_sigterm_to_the_group_ends_the_command_and_the_result_is_still_written(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    process = subprocess.Popen(
        launch_command(result, "echo started; sleep 300; echo not reached"),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "started\n"
    os.killpg(process.pid, signal.SIGTERM)
    assert communicate(process) == ""
    assert process.returncode == 128 + signal.SIGTERM
    found = read_result(result)
    assert found["exit_status"] == -signal.SIGTERM
    assert found["wall_s"] >= 0
    assert found["cpu_s"] >= 0
    assert live_in_session(process.pid) == []


AFFINITY = "import os; print(sorted(os.sched_getaffinity(0)))"


@pytest.mark.parametrize("cpu", sorted({0, max(os.sched_getaffinity(0))} & os.sched_getaffinity(0)))
def test_cpus_pins_the_command_and_its_children(tmp_path: Path, cpu: int) -> None:
    command = f"{PYTHON} -c {shlex.quote(AFFINITY)}; grep Cpus_allowed_list /proc/self/status"
    finished, _ = run(tmp_path, command, cpus=str(cpu))
    assert finished.returncode == 0
    assert finished.stdout.splitlines() == [f"[{cpu}]", f"Cpus_allowed_list:\t{cpu}"]


def test_without_cpus_the_command_keeps_the_affinity_it_was_started_with(tmp_path: Path) -> None:
    finished, _ = run(tmp_path, f"{PYTHON} -c {shlex.quote(AFFINITY)}")
    assert finished.stdout == f"{sorted(os.sched_getaffinity(0))}\n"


def test_a_command_that_does_not_exist_exits_127(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    finished = subprocess.run(
        [*LAUNCH, "--result", str(result), "--grace-s", GRACE_S, "--", "/nonexistent/kerrigan-no-such-tool"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert finished.returncode == 127
    # The command's process says so on its output (stdout and stderr are one pipe, copied to stdout).
    assert "cannot run '/nonexistent/kerrigan-no-such-tool'" in finished.stdout
    assert read_result(result)["exit_status"] == 127


def test_a_command_the_shell_cannot_find_exits_127(tmp_path: Path) -> None:
    finished, result = run(tmp_path, "kerrigan-no-such-tool --flag")
    assert finished.returncode == 127
    assert read_result(result)["exit_status"] == 127


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace_period_with_what_it_left(
    tmp_path: Path,
) -> None:
    # The command ignores SIGTERM and has a child in a session of its own (out of the process group):
    # the launcher itself, not a SIGKILL to the group (which would take the launcher too and lose the
    # accounting), ends them both once the grace period is over.
    result = tmp_path / "result.json"
    escaped = tmp_path / "escaped.pid"
    command = f"trap '' TERM; setsid sleep 300 & echo $! > {escaped}; echo started; sleep 300"
    process = subprocess.Popen(
        launch_command(result, command), stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "started\n"
    os.killpg(process.pid, signal.SIGTERM)
    began = time.monotonic()
    communicate(process)
    assert time.monotonic() - began < float(GRACE_S) + 5
    found = read_result(result)  # the launcher lived to account
    assert found["exit_status"] == -signal.SIGKILL
    assert gone(int(escaped.read_text()))


def run_logged(tmp_path: Path, command: str, *extra: str) -> tuple[int, bytes]:
    """Run the launcher as the agent does, its stdout and stderr the job's log file: its status, the log."""
    log = tmp_path / "output.log"
    argv = [*LAUNCH, "--result", str(tmp_path / "result.json"), "--grace-s", GRACE_S, *extra]
    with log.open("ab") as out:
        status = subprocess.run(
            [*argv, "--", "sh", "-c", command],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
            start_new_session=True,
            check=False,
        ).returncode
    return status, log.read_bytes()


STRETCH = """\
import os
print('before', flush=True)
try:
    os.ftruncate(1, 128 << 20)
except OSError as err:
    print('refused', err.strerror, flush=True)
print('after', flush=True)
"""


def test_the_command_writes_to_a_pipe_it_cannot_stretch_and_its_log_holds_what_it_wrote(
    tmp_path: Path,
) -> None:
    status, log = run_logged(tmp_path, f"{PYTHON} -c {shlex.quote(STRETCH)}; echo to-stderr >&2")
    assert status == 0
    assert log == b"before\nrefused Invalid argument\nafter\nto-stderr\n"


def test_output_past_the_cap_is_dropped_with_one_notice_and_the_command_is_not_held_up(
    tmp_path: Path,
) -> None:
    flood = "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done > " + shlex.quote(str(tmp_path / "done"))
    status, log = run_logged(tmp_path, flood, "--output-max-bytes", "100000")
    assert status == 0
    assert (tmp_path / "done").exists()  # the rest was read and dropped: the command ran to its end
    notice = (
        b"\n[kerrigan: output cut at 100000 bytes on the runner host (--output-max-bytes); "
        b"the rest was not kept]\n"
    )
    assert log == b"x" * 100000 + notice


def test_a_user_namespace_is_given_only_to_a_command_run_as_a_user(tmp_path: Path) -> None:
    # Root in a namespace that maps every id keeps its power over the host's files: never the command's.
    finished = subprocess.run(
        [*LAUNCH, "--result", str(tmp_path / "result.json"), "--user-namespace", "--", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert finished.returncode == 2
    assert "--user-namespace runs the command as a --user only" in finished.stderr
    assert not (tmp_path / "result.json").exists()
