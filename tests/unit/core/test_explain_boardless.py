"""``kerrigan explain`` and the check run of a task with ``board: none``: resolved against the runner hosts,
its JSON and text saying which hosts could run it and why each other could not, and no device chosen."""

from __future__ import annotations

import textwrap

from kerrigan.core.explain import EXIT_OK, EXIT_UNMATCHED, explain, explanation_json, render_text
from kerrigan.core.inventory import Inventory, Pool, RunnerHost
from kerrigan.core.manifest import parse_manifest
from kerrigan.core.matching import Outcome
from kerrigan.github.checks import SessionContext, hint_annotations, resolution_body
from kerrigan.testing.builders import device

FILE = ".kerrigan/workflows/pipeline.yml"
PIPELINE = """\
name: pipeline
on: {push: {}}
scheduling:
  labels: {kerrigan.board: modalix}
tasks:
  - id: build
    run: ./build.sh
    board: none
    vcpus: 8
    requirements: {labels: {kerrigan.host: [lab-a-01, lab-a-02, lab-b-01]}}
  - {id: test, run: ./test.sh, needs: build}
"""
CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")


def lab() -> Inventory:
    return Inventory(
        (Pool("lab-a", "Lab A"),),
        (device("modalix-1", "lab-a", host="lab-a-01"), device("modalix-2", "lab-a", host="lab-b-01")),
        (
            RunnerHost("lab-a-01", vcpus=4),
            RunnerHost("lab-a-02", vcpus=16),
            RunnerHost("lab-b-01", online=False, vcpus=16),
            RunnerHost("lab-c-01", vcpus=16),
        ),
    )


def explained(text: str = PIPELINE, inventory: Inventory | None = None):  # type: ignore[no-untyped-def]
    manifest = parse_manifest(text, FILE)
    assert manifest.ok, manifest.errors
    return explain(manifest, inventory or lab(), check_vcpus=True)


def test_a_boardless_task_is_explained_by_its_runner_hosts_in_json() -> None:
    document = explanation_json(explained())
    build, test = document["tasks"]  # type: ignore[misc]
    assert build["board"] == "none"
    assert build["outcome"] == "eligible"
    assert build["summary"] == (
        "1/4 runner hosts available: 1 kerrigan.host expected one of [lab-a-01, lab-a-02, lab-b-01], "
        "1 needs 8 vCPUs; runner host lab-a-01 has 4 allocatable, 1 runner host lab-b-01 offline"
    )
    assert build["requested"] == {
        "labels": {"kerrigan.host": ["lab-a-01", "lab-a-02", "lab-b-01"]},
        "tags": [],
    }
    # No device is considered, none chosen: the device fields are there, empty.
    assert (build["eligible_devices"], build["rejected_devices"], build["selected"]) == ([], [], [])
    assert build["eligible_pools"] == []
    hosts = build["hosts"]
    assert hosts["total"] == 4
    assert hosts["eligible"] == ["lab-a-02"]
    assert hosts["selected"] == "lab-a-02"
    assert hosts["rejected"] == [
        {
            "host": "lab-a-01",
            "reasons": ["needs 8 vCPUs; runner host lab-a-01 has 4 allocatable"],
            "never": True,
        },
        {"host": "lab-b-01", "reasons": ["runner host lab-b-01 offline"], "never": False},
        {
            "host": "lab-c-01",
            "reasons": ["kerrigan.host expected one of [lab-a-01, lab-a-02, lab-b-01], got lab-c-01"],
            "never": True,
        },
    ]
    assert [row["reason"] for row in hosts["histogram"]] == [
        "kerrigan.host expected one of [lab-a-01, lab-a-02, lab-b-01]",
        "needs 8 vCPUs; runner host lab-a-01 has 4 allocatable",
        "runner host lab-b-01 offline",
    ]
    assert "board" not in test
    assert test["selected"] == ["modalix-1"]


def test_explain_exits_by_the_runner_hosts_of_a_boardless_task() -> None:
    assert explained().exit_code == EXIT_OK
    down = Inventory(lab().pools, lab().devices, (RunnerHost("lab-a-02", online=False, vcpus=16),))
    waiting = explained(inventory=down)
    [build, _] = waiting.tasks
    assert build.outcome is Outcome.WAITING
    assert waiting.exit_code == EXIT_UNMATCHED


def test_the_text_output_lists_the_hosts_it_may_run_on_and_why_not_the_others() -> None:
    text = render_text(explained())
    section = text.split("task build: ", 1)[1].split("\n\n", 1)[0]
    assert section.splitlines() == [
        "eligible (1 of 4 runner hosts; board: none, it holds no device)",
        "  requested hosts   kerrigan.host in [lab-a-01, lab-a-02, lab-b-01]",
        "  selected host     lab-a-02",
        "  eligible hosts    lab-a-02",
        "  rejected hosts    3, by reason:",
        "    1  kerrigan.host expected one of [lab-a-01, lab-a-02, lab-b-01]  [never]",
        "         lab-c-01",
        "    1  needs 8 vCPUs; runner host lab-a-01 has 4 allocatable  [never]",
        "         lab-a-01",
        "    1  runner host lab-b-01 offline  [not yet]",
        "         lab-b-01",
    ]


def test_the_check_run_shows_the_hosts_and_no_board() -> None:
    summary = resolution_body(explained(), CONTEXT).fields["output"]["summary"]
    outcome = "ready: waiting for dispatch (no board)"
    assert f"| `build` | {outcome} | 1 of 4 runner hosts (no board) | host `lab-a-02` |" in summary
    assert "No board: it holds no device and runs on a runner host" in summary
    assert "- `lab-b-01`: runner host lab-b-01 offline" in summary
    assert "- **Selected:** runner host `lab-a-02`" in summary


def test_a_boardless_task_no_host_can_ever_run_fails_the_check_run_at_once_saying_so() -> None:
    manifest = textwrap.dedent(
        """\
        name: lint
        on: {push: {}}
        tasks:
          - {id: lint, run: ./l.sh, board: none, vcpus: 32, requirements: {labels: {kerrigan.host: lab-a-1}}}
        """
    )
    explanation = explained(manifest)
    body = resolution_body(explanation, CONTEXT)
    assert (body.fields["status"], body.fields["conclusion"]) == ("completed", "failure")
    assert body.fields["output"]["title"] == "No runner host can ever run lint"
    [hint] = hint_annotations(FILE, explanation.tasks)
    assert hint["message"] == (
        "tasks[0].requirements.labels.kerrigan.host: no runner host is lab-a-1; did you mean 'lab-a-01'?"
    )
    assert hint["start_line"] == 4
