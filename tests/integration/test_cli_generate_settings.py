"""``kerrigan generate-settings`` as a deployment's first start runs it: a real process, an env file on disk.

The settings Kerrigan can make itself (the secrets key, the metrics token, the session secret) are made
once and kept: a value already in the file is never changed, since losing the secrets key loses every
stored secret."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from kerrigan.config import Settings, read_env_file

NAMES = ("KERRIGAN_SECRETS_KEY", "KERRIGAN_METRICS_TOKEN", "KERRIGAN_SESSION_SECRET")


def generate(cwd: Path, *args: str, **environment: str) -> subprocess.CompletedProcess[str]:
    environ = {name: value for name, value in os.environ.items() if not name.startswith("KERRIGAN_")}
    return subprocess.run(
        [sys.executable, "-m", "kerrigan", "generate-settings", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ | environment,
        timeout=60,
        check=False,
    )


def test_a_first_start_makes_each_setting_in_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    done = generate(tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "kerrigan.env"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    values = read_env_file(out)
    assert sorted(values) == sorted(NAMES)
    settings = Settings.from_env(values)  # the key is a Fernet key, the rest accepted as they are
    assert settings.secrets_keys
    Fernet(values["KERRIGAN_SECRETS_KEY"])
    assert len(values["KERRIGAN_METRICS_TOKEN"]) >= 43  # 32 random bytes, URL-safe
    assert len(values["KERRIGAN_SESSION_SECRET"]) >= 64
    for name in NAMES:
        assert name in done.stdout
        assert values[name] not in done.stdout + done.stderr  # names, never values


def test_a_later_start_changes_nothing(tmp_path: Path) -> None:
    assert generate(tmp_path).returncode == 0
    before = (tmp_path / "kerrigan.env").read_bytes()
    again = generate(tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "kerrigan.env").read_bytes() == before
    assert "already" in again.stdout


def test_values_in_the_file_are_kept_and_only_the_missing_ones_added(tmp_path: Path) -> None:
    out = tmp_path / "kerrigan.env"
    key = Fernet.generate_key().decode()
    text = (
        f"# the App's settings\nKERRIGAN_GITHUB_APP_ID=123\nKERRIGAN_SECRETS_KEY={key}\n"
        "KERRIGAN_METRICS_TOKEN=\n"
    )
    out.write_text(text)
    out.chmod(0o640)
    done = generate(tmp_path)
    assert done.returncode == 0, done.stderr
    written = out.read_text()
    assert written.startswith(text)  # every line as it was
    values = read_env_file(out)
    assert values["KERRIGAN_SECRETS_KEY"] == key
    assert values["KERRIGAN_GITHUB_APP_ID"] == "123"
    assert values["KERRIGAN_METRICS_TOKEN"]  # set empty: made now
    assert values["KERRIGAN_SESSION_SECRET"]
    assert "KERRIGAN_SECRETS_KEY" not in done.stdout.split("already")[0]
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the owner's choice of mode is kept


def test_a_value_the_environment_gives_is_kept_as_given(tmp_path: Path) -> None:
    token = "t0k3n-" + "x" * 40
    done = generate(
        tmp_path, "--env-file", str(tmp_path / "state" / "kerrigan.env"), KERRIGAN_METRICS_TOKEN=token
    )
    assert done.returncode == 2  # no such folder
    (tmp_path / "state").mkdir()
    done = generate(
        tmp_path, "--env-file", str(tmp_path / "state" / "kerrigan.env"), KERRIGAN_METRICS_TOKEN=token
    )
    assert done.returncode == 0, done.stderr
    assert read_env_file(tmp_path / "state" / "kerrigan.env")["KERRIGAN_METRICS_TOKEN"] == token
    assert not (tmp_path / "kerrigan.env").exists()


def test_a_file_kerrigan_cannot_read_is_one_line_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "kerrigan.env"
    out.write_text("KERRIGAN_GITHUB_APP_ID=1\nexport KERRIGAN_X=2\n")
    done = generate(tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"kerrigan generate-settings: {out}:2: 'export KERRIGAN_X' is not a variable name "
        "(leave out `export`)"
    ]
    assert out.read_text() == "KERRIGAN_GITHUB_APP_ID=1\nexport KERRIGAN_X=2\n"


def test_a_value_from_the_environment_that_would_be_another_line_is_refused(tmp_path: Path) -> None:
    done = generate(tmp_path, KERRIGAN_METRICS_TOKEN="token\nKERRIGAN_DATABASE_URL=sqlite+aiosqlite:///x.db")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "kerrigan generate-settings: KERRIGAN_METRICS_TOKEN in the environment holds"
    )
    assert "sqlite" not in done.stderr  # the value is not shown
    assert not (tmp_path / "kerrigan.env").exists()
