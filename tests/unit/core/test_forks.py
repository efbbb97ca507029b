"""What a fork's manifest may decide: its branch is named with its owner, and its gate priority is normal."""

from __future__ import annotations

from kerrigan.core.forks import GATE_MESSAGE, MAX_BRANCH, for_fork, fork_branch
from kerrigan.core.manifest import Priority, parse_manifest

MANIFEST = """name: nightly
on: {{pull_request: {{branches: [main]}}}}
scheduling:
  priority: {priority}
tasks:
  - id: smoke
    run: ./smoke.sh
"""


def test_a_forks_branch_is_its_owners() -> None:
    assert fork_branch("mona", "main") == "mona:main"
    assert fork_branch("mona", None) is None
    assert len(fork_branch("mona", "b" * 255) or "") == MAX_BRANCH


def test_a_forks_gate_priority_becomes_normal_with_a_warning_on_the_scheduling_line() -> None:
    manifest = for_fork(parse_manifest(MANIFEST.format(priority="gate"), "nightly.yml"))
    assert manifest.workflow is not None
    assert manifest.workflow.scheduling.priority is Priority.NORMAL
    [warning] = manifest.warnings
    assert (warning.file, warning.line, warning.field, warning.message) == (
        "nightly.yml",
        3,
        "scheduling.priority",
        GATE_MESSAGE,
    )


def test_other_priorities_and_invalid_manifests_are_left_as_written() -> None:
    for priority in ("normal", "background"):
        manifest = parse_manifest(MANIFEST.format(priority=priority), "nightly.yml")
        assert for_fork(manifest) == manifest
    broken = parse_manifest("name: [", "broken.yml")
    assert for_fork(broken) == broken
