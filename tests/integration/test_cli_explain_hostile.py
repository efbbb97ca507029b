"""``kerrigan explain`` on hostile manifests (a real process): a manifest error, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "fixtures" / "inventory" / "lab.yml"
TASK = "name: hostile\non: push\ntasks:\n  - id: smoke\n    run: ./smoke.sh\n"


def explain(manifest: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kerrigan.cli", "explain", "--inventory", str(LAB), str(manifest), *options],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param(
            TASK + "    vcpus: " + "9" * 5000 + "\n",
            6,
            "tasks[0].vcpus: 999…9 (5000 digits) is too large: at most 256",
            id="vcpus-5000-digits",
        ),
        pytest.param(
            TASK + "    vcpus: true\n",
            6,
            "tasks[0].vcpus: must be a whole number, not 'true'",
            id="vcpus-bool",
        ),
        pytest.param(
            "name: hostile\non: push\ntasks: &t [*t]\n",
            3,
            "this alias stands for a part of the manifest that holds it: no end to it",
            id="alias-loop",
        ),
    ],
)
def test_a_hostile_manifest_is_an_error_on_its_line_with_exit_status_2(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    manifest = tmp_path / "hostile.yml"
    manifest.write_text(text, encoding="utf-8")
    done = explain(manifest)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    assert f"hostile.yml:{line}:" in done.stdout + done.stderr
    assert message in done.stdout + done.stderr


def test_the_json_report_of_a_huge_integer_carries_the_error_with_path_and_line(tmp_path: Path) -> None:
    manifest = tmp_path / "hostile.yml"
    manifest.write_text(TASK + "    timeout_s: " + "9" * 5000 + "\n", encoding="utf-8")
    done = explain(manifest, "--format", "json")
    assert (done.returncode, done.stderr) == (2, "")
    [error] = json.loads(done.stdout)["errors"]
    assert (error["path"], error["line"], error["field"]) == (str(manifest), 6, "tasks[0].timeout_s")
    assert error["message"] == "999…9 (5000 digits) is too large: at most 604800"
