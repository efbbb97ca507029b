"""``kerrigan explain`` as a user runs it: a real process, the fixtures, the exit codes of DESIGN.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
LAB = FIXTURES / "inventory" / "lab.yml"


def kerrigan(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kerrigan.cli", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )


def explain_json(manifest: str) -> tuple[int, dict[str, object]]:
    done = kerrigan("explain", "--inventory", LAB, FIXTURES / "manifests" / manifest, "--format", "json")
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(
    ("manifest", "code"),
    [
        ("hil-smoke.yml", 0),
        ("select-pool.yml", 0),
        ("select-device.yml", 0),
        ("task-refinement.yml", 0),
        ("legacy.yml", 0),
        ("org-class.yml", 1),
        ("waiting.yml", 1),
        ("typo.yml", 1),
        ("invalid.yml", 2),
    ],
)
def test_exit_code_says_whether_every_task_can_run(manifest: str, code: int) -> None:
    returncode, _ = explain_json(manifest)
    assert returncode == code


def test_json_has_the_design_contract_fields() -> None:
    _, report = explain_json("hil-smoke.yml")
    assert report["workflow"] == "hil-smoke"
    assert report["errors"] == []
    assert report["warnings"] == []
    tasks = report["tasks"]
    assert isinstance(tasks, list)
    assert [task["id"] for task in tasks] == ["smoke-som", "boot-som"]
    for task in tasks:
        assert {
            "id",
            "requested",
            "eligible_pools",
            "rejected_pools",
            "eligible_devices",
            "rejected_devices",
            "selected",
        } <= set(task)
    smoke = tasks[0]
    assert smoke["requested"] == {
        "labels": {"sdk": ["2.2.0"], "form_factor": ["som"]},
        "tags": ["2.2.0-som-devkits", "uart-debug"],
    }
    assert smoke["eligible_devices"] == ["modalix-bluebox", "modalix-redbox"]
    assert smoke["selected"] == ["modalix-bluebox"]
    assert tasks[1]["selected"] == ["modalix-redbox"]  # spread: another host for the second task
    rejected = {entry["device"]: entry for entry in smoke["rejected_devices"]}
    assert rejected["modalix-greenbox"] == {
        "device": "modalix-greenbox",
        "pool": "sdk-2-2-som",
        "reasons": ["device in maintenance"],
        "never": False,
    }
    assert rejected["modalix-old-02"]["reasons"] == [
        "sdk expected 2.2.0, got 2.1.1",
        "tag 2.2.0-som-devkits missing",
        "tag uart-debug missing",
    ]


def test_json_shows_the_seeds_diagnostics_for_a_pool_request() -> None:
    _, report = explain_json("select-pool.yml")
    (task,) = report["tasks"]  # type: ignore[misc]
    assert task["eligible_pools"] == ["sdk-2-2-som"]
    assert {"pool": "default", "reasons": ["kerrigan.pool_id=default did not match sdk-2-2-som"]} in (
        task["rejected_pools"]
    )
    legacy = next(e for e in task["rejected_devices"] if e["device"] == "legacy-02")
    assert legacy["reasons"] == [
        "kerrigan.pool_id=default did not match sdk-2-2-som",
        "uart missing",
        "device offline",
        "runner host lab-b-02 offline",
    ]


def test_json_reports_every_manifest_error_with_path_and_line() -> None:
    code, report = explain_json("invalid.yml")
    assert code == 2
    assert report["tasks"] == []
    errors = report["errors"]
    assert isinstance(errors, list)
    assert len(errors) >= 8
    assert all(error["path"].endswith("invalid.yml") and error["line"] > 0 for error in errors)
    by_field = {error["field"]: error for error in errors}
    assert by_field["scheduling.strategy"]["line"] == 5
    assert "not a label Kerrigan generates" in by_field["scheduling.labels.kerrigan.colour"]["message"]
    assert by_field["tasks[1].id"]["message"] == "duplicate task id 'smoke' (first on line 15)"


def test_legacy_syntax_resolves_with_deprecation_warnings_on_their_lines() -> None:
    code, report = explain_json("legacy.yml")
    assert code == 0
    warnings = report["warnings"]
    assert [(w["field"], w["line"]) for w in warnings] == [  # type: ignore[union-attr]
        ("scheduling.pools", 5),
        ("scheduling.capabilities", 6),
    ]
    (task,) = report["tasks"]  # type: ignore[misc]
    assert task["requested"]["labels"] == {
        "kerrigan.pool_id": ["sdk-2-2-som", "sdk-2-1-som"],
        "uart": ["enabled"],
    }


def test_unschedulable_task_shows_nearest_misses_and_never() -> None:
    _, report = explain_json("org-class.yml")
    (task,) = report["tasks"]  # type: ignore[misc]
    assert task["outcome"] == "unschedulable"
    assert task["nearest_misses"][0] == {
        "device": "modalix-bluebox",
        "pool": "sdk-2-2-som",
        "reasons": ["purpose expected ci, got ga-validation"],
        "never": True,
    }
    assert task["summary"].startswith("0/12 devices available: ")


def test_waiting_task_is_not_yet_rather_than_never() -> None:
    _, report = explain_json("waiting.yml")
    (task,) = report["tasks"]  # type: ignore[misc]
    assert task["outcome"] == "waiting"
    assert task["nearest_misses"][0]["reasons"] == ["runner host lab-b-02 offline"]


def test_typo_gets_did_you_mean_hints_with_manifest_lines() -> None:
    _, report = explain_json("typo.yml")
    (task,) = report["tasks"]  # type: ignore[misc]
    assert task["hints"] == [
        {
            "field": "scheduling.labels.form-factor",
            "line": 6,
            "message": "no device has the label 'form-factor'; did you mean 'form_factor'?",
        },
        {
            "field": "scheduling.tags[0]",
            "line": 7,
            "message": "no device has the tag 'uart-debgu'; did you mean 'uart-debug'?",
        },
    ]


def test_text_output_groups_rejected_devices_by_reason() -> None:
    done = kerrigan("explain", "--inventory", LAB, FIXTURES / "manifests" / "select-pool.yml")
    assert done.returncode == 0
    out = done.stdout
    assert "requested labels  kerrigan.pool_id=sdk-2-2-som  uart=enabled" in out
    assert "eligible pools    sdk-2-2-som (2 eligible)" in out
    assert "rejected pool     default: kerrigan.pool_id=default did not match sdk-2-2-som" in out
    assert "selected          modalix-bluebox" in out
    assert "8  kerrigan.pool_id did not match sdk-2-2-som  [never]" in out
    assert "1  device in maintenance  [not yet]" in out


def test_missing_file_is_one_line_and_exit_2() -> None:
    done = kerrigan("explain", "--inventory", LAB, "no/such/manifest.yml")
    assert done.returncode == 2
    assert done.stderr == "kerrigan explain: manifest no/such/manifest.yml: no such file\n"
    assert done.stdout == ""


def test_invalid_inventory_names_file_and_line_and_resolves_nothing(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yml"
    inventory.write_text(
        "pools:\n"
        "  - id: p\n"
        "    labels: {kerrigan.pool_id: x}\n"
        "    devices:\n"
        "      - {id: d, board: b, host: h, state: broken}\n",
        encoding="utf-8",
    )
    done = kerrigan(
        "explain", "--inventory", inventory, FIXTURES / "manifests" / "hil-smoke.yml", "--format", "json"
    )
    assert done.returncode == 2
    report = json.loads(done.stdout)
    assert report["tasks"] == []
    assert [(e["line"], e["field"]) for e in report["errors"]] == [
        (3, "pools[0].labels.kerrigan.pool_id"),
        (5, "pools[0].devices[0].state"),
    ]
    assert all(e["path"] == str(inventory) for e in report["errors"])


def test_binary_garbage_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yml"
    manifest.write_bytes(b"\xff\xfe\x00garbage")
    done = kerrigan("explain", "--inventory", LAB, manifest)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not UTF-8" in done.stderr


def test_yaml_syntax_error_is_placed_on_its_line(tmp_path: Path) -> None:
    manifest = tmp_path / "broken.yml"
    manifest.write_text("name: x\non: [push\ntasks: []\n", encoding="utf-8")
    done = kerrigan("explain", "--inventory", LAB, manifest, "--format", "json")
    assert done.returncode == 2
    (error,) = json.loads(done.stdout)["errors"]
    assert error["message"].startswith("not valid YAML")
    assert error["line"] == 3


# -- which repositories may use a pool: --repository (issue 11) ---------------------------------------

RESTRICTED_LAB = """\
pools:
  - id: lab-a
    repositories: [octo-lab/*, octo-lab/firmware]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: a1, board: modalix, host: lab-a-01}
  - id: lab-b
    labels: {sdk: "2.1.1"}
    devices:
      - {id: b1, board: modalix, host: lab-b-01}
"""
SDK_MANIFEST = """\
name: smoke
on: [push]
scheduling:
  labels: {sdk: "2.2.0"}
tasks:
  - id: smoke
    run: ./smoke.sh
"""


def restricted(tmp_path: Path) -> tuple[Path, Path]:
    """An inventory whose lab-a admits octo-lab's repositories only, and a manifest only lab-a can run."""
    inventory, manifest = tmp_path / "lab.yml", tmp_path / "smoke.yml"
    inventory.write_text(RESTRICTED_LAB, encoding="utf-8")
    manifest.write_text(SDK_MANIFEST, encoding="utf-8")
    return inventory, manifest


def test_repository_the_pool_does_not_admit_is_never_with_the_reason_in_text(tmp_path: Path) -> None:
    inventory, manifest = restricted(tmp_path)
    done = kerrigan("explain", "--inventory", inventory, manifest, "--repository", "octo/other")
    assert done.returncode == 1
    assert "task smoke: unschedulable" in done.stdout
    assert "rejected pool     lab-a: repository octo/other may not use pool lab-a" in done.stdout
    assert "repository octo/other may not use their pool  [never]" in done.stdout
    assert "not checked" not in done.stdout


def test_repository_the_pool_does_not_admit_is_in_the_json(tmp_path: Path) -> None:
    inventory, manifest = restricted(tmp_path)
    done = kerrigan(
        "explain", "--inventory", inventory, manifest, "--repository", "octo/other", "--format", "json"
    )
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert (report["repository"], report["repositories_not_checked"]) == ("octo/other", [])
    [task] = report["tasks"]
    assert task["rejected_pools"] == [
        {"pool": "lab-a", "reasons": ["repository octo/other may not use pool lab-a"]}
    ]
    assert task["rejected_devices"][0] == {
        "device": "a1",
        "pool": "lab-a",
        "reasons": ["repository octo/other may not use pool lab-a"],
        "never": True,
    }


@pytest.mark.parametrize("repository", ["octo-lab/firmware", "Octo-Lab/Tools"])
def test_repository_a_glob_admits_gets_the_pools_devices(tmp_path: Path, repository: str) -> None:
    inventory, manifest = restricted(tmp_path)
    done = kerrigan("explain", "--inventory", inventory, manifest, "--repository", repository)
    assert done.returncode == 0
    assert "selected          a1" in done.stdout


def test_without_repository_the_lists_are_not_applied_and_the_output_says_so_once(tmp_path: Path) -> None:
    inventory, manifest = restricted(tmp_path)
    done = kerrigan("explain", "--inventory", inventory, manifest)
    assert done.returncode == 0
    warning = (
        "warning: repositories: not checked (no --repository given); "
        "pool lab-a admits only the repositories listed"
    )
    assert done.stdout.count("not checked") == 1
    assert warning in done.stdout
    report = json.loads(kerrigan("explain", "--inventory", inventory, manifest, "--format", "json").stdout)
    assert (report["repository"], report["repositories_not_checked"]) == (None, ["lab-a"])


@pytest.mark.parametrize("repository", ["octo/*", "octo", "octo/a/b", ""])
def test_malformed_repository_is_one_line_and_exit_2(tmp_path: Path, repository: str) -> None:
    inventory, manifest = restricted(tmp_path)
    done = kerrigan("explain", "--inventory", inventory, manifest, "--repository", repository)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("kerrigan explain: --repository: ")
    assert "is not a repository" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_bad_glob_in_the_inventory_is_placed_on_its_line(tmp_path: Path) -> None:
    inventory, manifest = restricted(tmp_path)
    inventory.write_text(RESTRICTED_LAB.replace("octo-lab/firmware", "octo lab/firmware"), encoding="utf-8")
    done = kerrigan("explain", "--inventory", inventory, manifest, "--format", "json")
    assert done.returncode == 2
    [error] = json.loads(done.stdout)["errors"]
    assert (error["field"], error["line"]) == ("pools[0].repositories[1]", 3)
    assert "is not a repository glob" in error["message"]
