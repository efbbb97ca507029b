"""A task's vCPU claim in matching: a host too small for it is *never*, one that has not reported is *not yet*
(for a claim above the default), and no claim given checks nothing."""

from __future__ import annotations

from kerrigan.core.explain import explain, explanation_json, render_text
from kerrigan.core.inventory import Device, Inventory, Pool, RunnerHost
from kerrigan.core.manifest import parse_manifest
from kerrigan.core.matching import Outcome, ReasonKind, resolve
from kerrigan.core.requirements import Requirements

POOL = Pool("lab-a", "Lab A")


def device(device_id: str, host: str) -> Device:
    return Device(device_id, "lab-a", "modalix", "devkit", "linux", host)


def lab(*hosts: RunnerHost) -> Inventory:
    devices = tuple(device(f"dev-{host.id}", host.id) for host in hosts)
    return Inventory((POOL,), devices, hosts)


NOTHING = Requirements({}, ())


def test_a_claim_over_what_the_host_reported_is_never() -> None:
    res = resolve(NOTHING, lab(RunnerHost("lab-a-01", vcpus=2)), vcpus=8)
    [verdict] = res.rejected
    assert [r.text for r in verdict.reasons] == ["needs 8 vCPUs; runner host lab-a-01 has 2 allocatable"]
    assert verdict.never
    assert verdict.reasons[0].kind is ReasonKind.HOST_VCPUS
    assert res.outcome is Outcome.UNSCHEDULABLE
    assert res.summary() == "0/1 devices available: 1 needs 8 vCPUs; runner host lab-a-01 has 2 allocatable"


def test_a_claim_the_host_fits_passes_and_only_too_small_hosts_are_rejected() -> None:
    inventory = lab(RunnerHost("lab-a-01", vcpus=2), RunnerHost("lab-a-02", vcpus=8))
    res = resolve(NOTHING, inventory, vcpus=8)
    assert [d.id for d in res.eligible] == ["dev-lab-a-02"]
    assert [v.id for v in res.rejected] == ["dev-lab-a-01"]
    assert res.outcome is Outcome.ELIGIBLE


def test_a_host_that_has_not_reported_its_cpus_is_not_yet_for_a_large_claim() -> None:
    res = resolve(NOTHING, lab(RunnerHost("lab-a-01")), vcpus=8)
    [verdict] = res.rejected
    assert [r.text for r in verdict.reasons] == ["runner host lab-a-01 has not reported its CPUs"]
    assert not verdict.never
    assert res.outcome is Outcome.WAITING


def test_a_host_that_has_not_reported_is_taken_to_fit_the_default_claim() -> None:
    inventory = Inventory(
        (POOL,), (device("dev-1", "lab-a-01"), device("dev-2", "unlisted")), (RunnerHost("lab-a-01"),)
    )
    assert len(resolve(NOTHING, inventory, vcpus=2).eligible) == 2
    assert [v.id for v in resolve(NOTHING, inventory, vcpus=3).rejected] == ["dev-1", "dev-2"]


def test_without_a_claim_nothing_is_checked() -> None:
    res = resolve(NOTHING, lab(RunnerHost("lab-a-01", vcpus=2), RunnerHost("lab-a-02")))
    assert len(res.eligible) == 2


def test_the_vcpu_reason_joins_the_others_and_a_single_vcpu_is_singular() -> None:
    inventory = lab(RunnerHost("lab-a-01", online=False, vcpus=0))
    [verdict] = resolve(NOTHING, inventory, vcpus=1).rejected
    assert [r.text for r in verdict.reasons] == [
        "runner host lab-a-01 offline",
        "needs 1 vCPU; runner host lab-a-01 has 0 allocatable",
    ]


MANIFEST = """\
name: big
on: {push: {branches: [main]}}
tasks:
  - id: build
    run: make
    vcpus: 8
"""


def test_explain_checks_each_tasks_claim_only_when_asked() -> None:
    manifest = parse_manifest(MANIFEST, ".kerrigan/workflows/big.yml")
    inventory = lab(RunnerHost("lab-a-01", vcpus=2))
    unchecked = explain(manifest, inventory)
    assert unchecked.tasks[0].resolution.eligible
    checked = explain(manifest, inventory, check_vcpus=True)
    [task] = explanation_json(checked)["tasks"]  # type: ignore[misc]
    assert task["outcome"] == "unschedulable"
    assert task["rejected_devices"] == [
        {
            "device": "dev-lab-a-01",
            "pool": "lab-a",
            "reasons": ["needs 8 vCPUs; runner host lab-a-01 has 2 allocatable"],
            "never": True,
        }
    ]
    assert "needs 8 vCPUs; runner host lab-a-01 has 2 allocatable  [never]" in render_text(checked)
