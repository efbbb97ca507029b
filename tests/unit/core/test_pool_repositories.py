"""Which repositories may use a pool: its globs in matching, explain and the inventory file."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from kerrigan.core.explain import explain, explanation_json, render_text
from kerrigan.core.inventory import (
    Inventory,
    RepositoryGlobError,
    repository_matches,
    validate_repository,
    validate_repository_glob,
)
from kerrigan.core.inventory_diff import ChangeKind, diff_inventories
from kerrigan.core.inventory_file import inventory_document, parse_inventory
from kerrigan.core.manifest import parse_manifest
from kerrigan.core.matching import Outcome, ReasonKind, resolve
from kerrigan.github.checks import SessionContext, resolution_body
from kerrigan.testing.builders import device, pool, requirements


def lab(*globs: str) -> Inventory:
    """lab-a (listing ``globs``) with two devices, lab-b (no list) with one."""
    return Inventory(
        pools=(
            dataclasses.replace(pool("lab-a", labels={"sdk": "2.2.0"}), repositories=globs),
            pool("lab-b", labels={"sdk": "2.1.1"}),
        ),
        devices=(
            device("a1", "lab-a"),
            device("a2", "lab-a", host="lab-a-02"),
            device("b1", "lab-b", host="lab-b-01"),
        ),
    )


# -- globs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "repository", "admitted"),
    [
        ("octo-lab/*", "octo-lab/firmware", True),
        ("octo-lab/*", "octo-lab/x.y_z-1", True),
        ("octo-lab/*", "octo/firmware", False),
        ("octo-lab/firmware", "octo-lab/firmware", True),
        ("octo-lab/firmware", "octo-lab/firmware-old", False),
        ("Octo-Lab/FirmWare", "octo-lab/firmware", True),  # GitHub names ignore case
        ("octo-lab/firmware", "OCTO-LAB/Firmware", True),
        ("*/firmware", "anyone/firmware", True),
        ("octo-lab/fw-?", "octo-lab/fw-1", True),
        ("octo-lab/fw-?", "octo-lab/fw-12", False),
        ("octo-*/fw", "octo-lab/fw", True),
        ("octo/fw.x", "octo/fwax", False),  # "." is a character, not a wildcard
    ],
)
def test_a_glob_matches_owner_and_name_ignoring_case(glob: str, repository: str, admitted: bool) -> None:
    assert repository_matches(validate_repository_glob(glob), repository) is admitted


@pytest.mark.parametrize(
    "glob",
    [
        "",
        "octo-lab",
        "octo-lab/",
        "/firmware",
        "octo/lab/fw",
        "octo lab/fw",
        "octo_lab/fw",
        "octo/fw!",
        "a/" + "b" * 199,
    ],
)
def test_a_malformed_glob_is_refused_with_the_rule(glob: str) -> None:
    with pytest.raises(RepositoryGlobError, match="is not a repository glob: owner/name"):
        validate_repository_glob(glob)


@pytest.mark.parametrize("name", ["octo/*", "octo", "octo/a/b", ""])
def test_a_session_repository_has_no_wildcards(name: str) -> None:
    with pytest.raises(RepositoryGlobError, match="is not a repository"):
        validate_repository(name)


# -- matching --------------------------------------------------------------------------------------


def test_a_repository_a_glob_admits_uses_the_pool() -> None:
    res = resolve(requirements({"sdk": "2.2.0"}), lab("octo-lab/*"), repository="octo-lab/firmware")
    assert [d.id for d in res.eligible] == ["a1", "a2"]
    assert res.eligible_pools == ("lab-a", "lab-b")  # sdk is checked per device, not per pool
    assert res.rejected_pools == ()


def test_a_repository_no_glob_admits_is_rejected_at_pool_level_and_on_each_device_never() -> None:
    res = resolve(requirements({"sdk": "2.2.0"}), lab("octo-lab/*"), repository="octo/other")
    assert res.eligible == ()
    assert res.eligible_pools == ("lab-b",)
    [verdict] = res.rejected_pools
    assert verdict.pool == "lab-a"
    assert [r.text for r in verdict.reasons] == ["repository octo/other may not use pool lab-a"]
    rejected = {v.id: v for v in res.rejected}
    for device_id in ("a1", "a2"):
        assert [r.text for r in rejected[device_id].reasons] == [
            "repository octo/other may not use pool lab-a"
        ]
        assert rejected[device_id].never
        assert rejected[device_id].reasons[0].kind is ReasonKind.REPOSITORY_REFUSED
    assert [r.text for r in rejected["b1"].reasons] == ["sdk expected 2.2.0, got 2.1.1"]
    assert res.outcome is Outcome.UNSCHEDULABLE


def test_refused_devices_are_summarised_in_one_histogram_row_with_their_pools() -> None:
    inventory = lab("octo-lab/*")
    inventory = dataclasses.replace(
        inventory,
        pools=(*inventory.pools[:1], dataclasses.replace(inventory.pools[1], repositories=("x/y",))),
    )
    res = resolve(requirements(), inventory, repository="octo/other")
    [row] = res.histogram
    assert (row.rule, row.count, row.permanent) == ("repository octo/other may not use their pool", 3, True)
    assert dict(row.got) == {"lab-a": 2, "lab-b": 1}
    assert res.summary() == "0/3 devices available: 3 repository octo/other may not use their pool"


def test_a_refused_pool_keeps_its_other_pool_level_reasons_after_the_repository() -> None:
    res = resolve(requirements({"kerrigan.pool_id": "lab-b"}), lab("octo-lab/*"), repository="octo/other")
    [verdict] = res.rejected_pools
    assert [r.text for r in verdict.reasons] == [
        "repository octo/other may not use pool lab-a",
        "kerrigan.pool_id=lab-a did not match lab-b",
    ]


def test_a_pool_without_a_list_admits_every_repository() -> None:
    res = resolve(requirements({"sdk": "2.1.1"}), lab("octo-lab/*"), repository="anyone/anything")
    assert [d.id for d in res.eligible] == ["b1"]


def test_the_repository_is_matched_ignoring_case() -> None:
    res = resolve(requirements({"sdk": "2.2.0"}), lab("Octo-Lab/Firmware"), repository="octo-lab/FIRMWARE")
    assert [d.id for d in res.eligible] == ["a1", "a2"]


def test_without_a_repository_no_list_is_applied() -> None:
    res = resolve(requirements({"sdk": "2.2.0"}), lab("octo-lab/*"))
    assert [d.id for d in res.eligible] == ["a1", "a2"]


def test_a_refused_pool_that_is_also_busy_is_never_rather_than_waiting() -> None:
    res = resolve(requirements({"sdk": "2.2.0"}), lab("octo-lab/*"), frozenset({"a1"}), repository="octo/x")
    assert res.outcome is Outcome.UNSCHEDULABLE


# -- explain ---------------------------------------------------------------------------------------

MANIFEST = """\
name: smoke
on:
  push: {branches: [main]}
scheduling:
  labels: {sdk: "2.2.0"}
tasks:
  - id: smoke
    run: ./smoke.sh
"""


def test_explain_for_a_refused_repository_shows_the_reason_in_text_and_json() -> None:
    explanation = explain(parse_manifest(MANIFEST, "m.yml"), lab("octo-lab/*"), repository="octo/other")
    assert explanation.exit_code == 1
    document = explanation_json(explanation)
    assert document["repository"] == "octo/other"
    assert document["repositories_not_checked"] == []
    [task] = document["tasks"]  # type: ignore[misc]
    assert task["rejected_pools"] == [
        {"pool": "lab-a", "reasons": ["repository octo/other may not use pool lab-a"]}
    ]
    text = render_text(explanation)
    assert "repository octo/other\n" in text
    assert "rejected pool     lab-a: repository octo/other may not use pool lab-a" in text
    assert (
        "repository octo/other may not use their pool  [never]  (got lab-a \N{MULTIPLICATION SIGN}2)" in text
    )
    assert "not checked" not in text


def test_explain_without_a_repository_says_once_that_the_lists_were_not_checked() -> None:
    explanation = explain(parse_manifest(MANIFEST, "m.yml"), lab("octo-lab/*"))
    assert explanation.exit_code == 0
    document = explanation_json(explanation)
    assert (document["repository"], document["repositories_not_checked"]) == (None, ["lab-a"])
    text = render_text(explanation)
    warning = (
        "warning: repositories: not checked (no --repository given); "
        "pool lab-a admits only the repositories listed"
    )
    assert text.count(warning) == 1
    assert text.count("not checked") == 1


def test_explain_without_a_repository_or_any_list_says_nothing_about_repositories() -> None:
    explanation = explain(parse_manifest(MANIFEST, "m.yml"), lab())
    assert explanation_json(explanation)["repositories_not_checked"] == []
    assert "repositor" not in render_text(explanation)


# -- the inventory file ----------------------------------------------------------------------------

INVENTORY = """\
pools:
  - id: lab-a
    repositories: [octo-lab/*, octo-lab/firmware, Octo-Lab/Firmware]
    devices:
      - {id: a1, board: modalix, host: lab-a-01}
  - id: lab-b
    devices:
      - {id: b1, board: modalix, host: lab-b-01}
"""


def test_the_inventory_file_reads_repositories_once_each_and_writes_them_back() -> None:
    result = parse_inventory(INVENTORY, "lab.yml")
    assert result.errors == ()
    assert result.inventory is not None
    lab_a, lab_b = result.inventory.pools
    assert lab_a.repositories == ("octo-lab/*", "octo-lab/firmware")  # the same name twice, in two cases
    assert lab_b.repositories == ()
    document = inventory_document(result.inventory)
    pools = document["pools"]
    assert isinstance(pools, list)
    assert pools[0]["repositories"] == ["octo-lab/*", "octo-lab/firmware"]
    assert "repositories" not in pools[1]
    again = parse_inventory(yaml.safe_dump(document, sort_keys=False), "again.yml")
    assert again.inventory == result.inventory


BAD_INVENTORY = """\
pools:
  - id: lab-a
  - id: lab-b
  - id: lab-c
    repositories:
      - octo-lab/*
      - octo lab/firmware
      - 42
  - id: lab-d
    repositories: octo-lab/*
"""


def test_a_bad_glob_in_the_inventory_file_is_placed_by_field_and_line() -> None:
    result = parse_inventory(BAD_INVENTORY, "lab.yml")
    assert result.inventory is None
    placed = {(p.field, p.line): p.message for p in result.errors}
    assert set(placed) == {
        ("pools[2].repositories[1]", 7),
        ("pools[2].repositories[2]", 8),
        ("pools[3].repositories", 10),
    }
    assert placed["pools[2].repositories[1]", 7].startswith("'octo lab/firmware' is not a repository glob")
    assert all(str(p).startswith("lab.yml:") for p in result.errors)


def test_too_many_globs_in_the_inventory_file_is_an_error() -> None:
    globs = "".join(f"      - octo/r{n}\n" for n in range(101))
    result = parse_inventory(f"pools:\n  - id: lab-a\n    repositories:\n{globs}", "lab.yml")
    assert [(p.field, p.line, p.message) for p in result.errors] == [
        ("pools[0].repositories", 4, "101 globs; at most 100")
    ]


def test_the_diff_shows_a_changed_repositories_list_before_and_after() -> None:
    before = lab("octo-lab/*")
    after = lab("octo-lab/firmware")
    [change] = diff_inventories(before, after).changes
    assert (change.kind, change.subject_id, change.field) == (ChangeKind.CHANGE, "lab-a", "repositories")
    assert (change.before, change.after) == (["octo-lab/*"], ["octo-lab/firmware"])


def test_pools_whose_every_device_fails_are_shown_apart_from_where_the_task_could_run() -> None:
    res = resolve(requirements({"sdk": "2.2.0"}), lab("octo-lab/*"), repository="octo-lab/firmware")
    assert res.pools_by_eligibility == ((("lab-a", 2),), ("lab-b",))
    text = render_text(explain(parse_manifest(MANIFEST, "m.yml"), lab("octo-lab/*")))
    assert "  eligible pools    lab-a (2 eligible)\n" in text
    assert "  none match in     lab-b  (pools whose every device fails)\n" in text
    refused = render_text(explain(parse_manifest(MANIFEST, "m.yml"), lab("octo-lab/*"), repository="octo/x"))
    assert "  eligible pools    (none)\n" in refused
    assert "  none match in     lab-b" in refused


def test_the_check_run_names_the_pools_where_no_device_matches_apart() -> None:
    context = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")
    explanation = explain(parse_manifest(MANIFEST, "m.yml"), lab("octo-lab/*"))
    summary = resolution_body(explanation, context).fields["output"]["summary"]
    assert "- **Eligible pools:** `lab-a` (2 eligible)\n" in summary
    assert "- **No device matches in:** `lab-b`\n" in summary
