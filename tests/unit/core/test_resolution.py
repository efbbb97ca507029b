"""A session's stored resolution, typed: the ``kerrigan explain`` document read and written back the same,
whatever its tasks are (a gang, ``board: none``, a device task), and a document an older Kerrigan stored
read as far as it goes."""

from __future__ import annotations

import json

from kerrigan.core.diagnostics_store import compact, expand
from kerrigan.core.explain import explain, explanation_json
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import Inventory, Pool, RunnerHost
from kerrigan.core.manifest import parse_manifest
from kerrigan.core.matching import Outcome
from kerrigan.core.resolution import EMPTY, HealthCheckRecord, Resolution
from kerrigan.testing.builders import device

MANIFEST = """\
name: mixed
on: {push: {}}
tasks:
  - id: build
    run: ./build.sh
    board: none
    requirements: {labels: {kerrigan.host: [lab-a-01, lab-b-01]}}
  - id: smoke
    run: ./smoke.sh
    requirements: {labels: {kerrigan.board: modalix}, tags: [uart]}
  - id: pair
    run: ./pair.sh
    devices:
      dut: {labels: {kerrigan.board: modalix}}
      peer: {labels: {kerrigan.board: davinci}}
"""


def lab() -> Inventory:
    return Inventory(
        (Pool("lab-a", "Lab A"),),
        (
            *tuple(device(f"modalix-{n}", "lab-a", host="lab-a-01") for n in range(40)),
            device("davinci-1", "lab-a", host="lab-b-01", board="davinci"),
        ),
        (RunnerHost("lab-a-01"), RunnerHost("lab-b-01", online=False)),
    )


def document() -> dict[str, object]:
    manifest = parse_manifest(MANIFEST, ".kerrigan/workflows/mixed.yml")
    assert manifest.ok, manifest.errors
    explanation = explain(manifest, lab(), repository="octo/fw")
    found: dict[str, object] = json.loads(
        json.dumps(explanation_json(explanation, {"kerrigan.board": "the board"}))
    )
    return found


def test_an_explain_document_is_written_back_as_it_was_read() -> None:
    doc = document()
    resolution = Resolution.from_document(doc)
    assert resolution.to_document() == doc
    assert Resolution.from_document(expand(compact(resolution.to_document()))) == resolution


def test_its_tasks_are_typed_with_their_roles_walked_once() -> None:
    resolution = Resolution.from_document(document())
    build, smoke, pair = resolution.tasks
    assert build.boardless
    assert build.hosts is not None
    assert build.hosts.total == 2
    assert smoke.outcome is Outcome.UNSCHEDULABLE  # no device has the tag
    assert len(smoke.match.rejected_devices) == 41  # every device: none has the tag
    assert [role.role for role in pair.roles] == ["dut", "peer"]
    assert pair.gang is not None
    assert len(list(resolution.matches())) == 5  # three tasks and the gang's two roles
    assert resolution.task("smoke") is smoke
    assert resolution.task("gone") is None


def test_an_older_or_partial_document_reads_as_far_as_it_goes() -> None:
    resolution = Resolution.from_document(
        {"tasks": [{"id": "smoke", "outcome": "later", "rejected_devices": {"compact": 1}}], "retry": {}}
    )
    [task] = resolution.tasks
    assert (task.id, task.outcome, task.match.rejected_devices, task.line) == ("smoke", None, (), None)
    assert Resolution.from_document({}) == EMPTY
    assert not EMPTY.recorded
    assert Resolution.from_document({"errors": [{"message": "bad"}]}).errors[0].line is None


def test_a_health_check_request_round_trips() -> None:
    record = HealthCheckRecord("modalix-1", "asked by hubot", HealthCheck("./check.sh", 3600, 600, 1))
    resolution = Resolution(health_check=record)
    stored = resolution.to_document()
    assert stored == {
        "health_check": {
            "device": "modalix-1",
            "why": "asked by hubot",
            "run": "./check.sh",
            "every": "1h",
            "timeout_s": 600,
            "vcpus": 1,
        }
    }
    assert Resolution.from_document(stored) == resolution
