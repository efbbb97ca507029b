"""``kerrigan serve --port`` over the environment and ``kerrigan.env`` under it, and ``python -m kerrigan``:
real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(**settings: str) -> dict[str, str]:
    environ = {name: value for name, value in os.environ.items() if not name.startswith("KERRIGAN_")}
    return environ | settings


def kerrigan(*args: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kerrigan", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_environment(**settings),
        timeout=60,
        check=False,
    )


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def test_python_dash_m_kerrigan_is_the_command(tmp_path: Path) -> None:
    done = kerrigan("--help", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: kerrigan ")
    assert "setup" in done.stdout


def test_the_port_flag_wins_over_the_environment_and_the_env_file(tmp_path: Path) -> None:
    flag, environment, in_file = _free_port(), _free_port(), _free_port()
    (tmp_path / "kerrigan.env").write_text(
        f"KERRIGAN_DATABASE_URL=sqlite+aiosqlite:///{tmp_path}/lab.db\nKERRIGAN_PORT={in_file}\n"
    )
    upgraded = kerrigan("db", "upgrade", cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    server = subprocess.Popen(
        [sys.executable, "-m", "kerrigan", "serve", "--port", str(flag)],
        cwd=tmp_path,
        env=_environment(KERRIGAN_PORT=str(environment)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not _answers(flag):
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "kerrigan serve did not answer on --port"
            time.sleep(0.1)
        assert not _answers(environment)
        assert not _answers(in_file)
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_a_bad_port_flag_is_one_line(tmp_path: Path) -> None:
    done = kerrigan("serve", "--port", "80000", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "kerrigan serve: --port must be a port number from 1 to 65535, not '80000'\n"


def test_the_env_file_is_read_and_the_environment_wins_over_it(tmp_path: Path) -> None:
    (tmp_path / "kerrigan.env").write_text(
        f"# settings\nKERRIGAN_DATABASE_URL=sqlite+aiosqlite:///{tmp_path}/from-file.db\n"
    )
    assert kerrigan("db", "upgrade", cwd=tmp_path).returncode == 0
    assert (tmp_path / "from-file.db").exists()
    winner = f"sqlite+aiosqlite:///{tmp_path}/from-environment.db"
    assert kerrigan("db", "upgrade", cwd=tmp_path, KERRIGAN_DATABASE_URL=winner).returncode == 0
    assert (tmp_path / "from-environment.db").exists()


def test_a_broken_env_file_is_one_line_naming_its_line(tmp_path: Path) -> None:
    (tmp_path / "kerrigan.env").write_text("KERRIGAN_PORT=8080\nexport KERRIGAN_HOST=0.0.0.0\n")
    done = kerrigan("db", "upgrade", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "kerrigan db: kerrigan.env:2: 'export KERRIGAN_HOST' is not a variable name (leave out `export`)\n"
    )


def test_serve_says_where_it_listens_on_which_database_with_how_many_workers(tmp_path: Path) -> None:
    port = _free_port()
    database = f"sqlite+aiosqlite:///{tmp_path}/lab.db"
    assert kerrigan("db", "upgrade", cwd=tmp_path, KERRIGAN_DATABASE_URL=database).returncode == 0
    server = subprocess.Popen(
        [sys.executable, "-m", "kerrigan", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=_environment(KERRIGAN_DATABASE_URL=database, KERRIGAN_LOG_FORMAT="text"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not _answers(port):
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "kerrigan serve did not answer"
            time.sleep(0.1)
    finally:
        server.terminate()
        errors = server.communicate(timeout=30)[1]
    [line] = [line for line in errors.splitlines() if "listening on" in line]
    assert (
        f"kerrigan serve: listening on http://127.0.0.1:{port}; database {database}; "
        "no worker process: this one handles deliveries"
    ) in line
