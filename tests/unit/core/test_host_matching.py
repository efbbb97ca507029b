"""A task with ``board: none`` is matched against runner hosts, not devices: online, not paused, its vCPUs
fitting what the host reported, its ``kerrigan.host`` one of those asked; every other host rejected with
each reason, in the diagnostics' words."""

from __future__ import annotations

from datetime import UTC, datetime

from kerrigan.core.device_status import HostPause
from kerrigan.core.inventory import Device, Inventory, Pool, RunnerHost
from kerrigan.core.matching import Outcome, ReasonKind, resolve_hosts
from kerrigan.core.requirements import Requirements
from kerrigan.testing import builders

OPEN = Pool("lab-a", "Lab A")
SECRET = Pool("secret", "Secret project", repositories=("octo/secret-*",))
NOTHING = Requirements({}, ())
UNTIL = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)


def device(device_id: str, host: str, pool: str = "lab-a") -> Device:
    return Device(device_id, pool, "modalix", "devkit", "linux", host)


def lab(*hosts: RunnerHost, devices: tuple[Device, ...] = ()) -> Inventory:
    return Inventory((OPEN, SECRET), devices, hosts)


def texts(hosts: Inventory, requested: Requirements = NOTHING, **kwargs: object) -> dict[str, list[str]]:
    res = resolve_hosts(requested, hosts, **kwargs)  # type: ignore[arg-type]
    return {verdict.host: [reason.text for reason in verdict.reasons] for verdict in res.rejected}


def test_every_online_unpaused_host_that_fits_the_claim_is_eligible_in_id_order() -> None:
    inventory = lab(RunnerHost("lab-b-01", vcpus=16), RunnerHost("lab-a-01", vcpus=16))
    res = resolve_hosts(NOTHING, inventory, vcpus=8)
    assert res.eligible == ("lab-a-01", "lab-b-01")
    assert res.rejected == ()
    assert res.outcome is Outcome.ELIGIBLE
    assert res.summary() == "2/2 runner hosts available"


def test_a_host_of_a_device_that_no_hosts_entry_lists_is_a_runner_host_too() -> None:
    inventory = lab(RunnerHost("lab-a-01"), devices=(device("dev-1", "lab-c-07"),))
    assert resolve_hosts(NOTHING, inventory).eligible == ("lab-a-01", "lab-c-07")


def test_offline_paused_and_too_small_hosts_are_rejected_with_every_reason() -> None:
    pause = HostPause("kernel upgrade", "octocat", None, UNTIL)
    inventory = lab(
        RunnerHost("lab-a-01", online=False, vcpus=2, pause=pause),
        RunnerHost("lab-a-02", vcpus=2),
        RunnerHost("lab-a-03", online=False, vcpus=16),
        RunnerHost("lab-a-04", vcpus=16),
    )
    res = resolve_hosts(NOTHING, inventory, vcpus=8)
    assert {v.host: [r.text for r in v.reasons] for v in res.rejected} == {
        "lab-a-01": [
            "runner host lab-a-01 paused by octocat until 2026-12-01 18:00: kernel upgrade",
            "runner host lab-a-01 offline",
            "needs 8 vCPUs; runner host lab-a-01 has 2 allocatable",
        ],
        "lab-a-02": ["needs 8 vCPUs; runner host lab-a-02 has 2 allocatable"],
        "lab-a-03": ["runner host lab-a-03 offline"],
    }
    assert [v.never for v in res.rejected] == [True, True, False]
    assert res.eligible == ("lab-a-04",)
    kinds = {r.kind for v in res.rejected for r in v.reasons}
    assert kinds == {ReasonKind.HOST_PAUSED, ReasonKind.HOST_OFFLINE, ReasonKind.HOST_VCPUS}


def test_kerrigan_host_asks_for_some_hosts_one_of_as_labels_work() -> None:
    inventory = lab(RunnerHost("lab-a-01"), RunnerHost("lab-a-02"), RunnerHost("lab-b-01"))
    asked = builders.requirements({"kerrigan.host": ["lab-a-02", "lab-b-01"]})
    res = resolve_hosts(asked, inventory)
    assert res.eligible == ("lab-a-02", "lab-b-01")
    mismatch = "kerrigan.host expected one of [lab-a-02, lab-b-01], got lab-a-01"
    assert texts(inventory, asked) == {"lab-a-01": [mismatch]}
    assert res.summary() == "2/3 runner hosts available: 1 kerrigan.host expected one of [lab-a-02, lab-b-01]"


def test_no_host_that_can_ever_run_it_is_unschedulable_and_a_busy_lab_waits() -> None:
    small = lab(RunnerHost("lab-a-01", vcpus=2), RunnerHost("lab-a-02", vcpus=4))
    assert resolve_hosts(NOTHING, small, vcpus=8).outcome is Outcome.UNSCHEDULABLE
    down = lab(RunnerHost("lab-a-01", online=False, vcpus=16), RunnerHost("lab-a-02", vcpus=4))
    assert resolve_hosts(NOTHING, down, vcpus=8).outcome is Outcome.WAITING
    assert resolve_hosts(NOTHING, Inventory(), vcpus=2).outcome is Outcome.UNSCHEDULABLE


def test_a_host_whose_agent_has_not_reported_its_cpus_is_not_yet_whatever_the_claim() -> None:
    # A job that holds no board runs on the host itself: one no agent has spoken for (a host only an
    # inventory names) would hold it until its lease ran out.
    inventory = lab(RunnerHost("lab-a-01"), RunnerHost("lab-a-02", vcpus=4))
    for claim in (1, 2, 8):
        assert texts(inventory, vcpus=claim)["lab-a-01"] == ["runner host lab-a-01 has not reported its CPUs"]
    assert resolve_hosts(NOTHING, inventory, vcpus=2).eligible == ("lab-a-02",)
    assert resolve_hosts(NOTHING, lab(RunnerHost("lab-a-01")), vcpus=2).outcome is Outcome.WAITING
    assert resolve_hosts(NOTHING, inventory).eligible == ("lab-a-01", "lab-a-02")  # no claim checked


def test_a_host_whose_every_board_is_in_pools_the_repository_may_not_use_refuses_it() -> None:
    inventory = lab(
        RunnerHost("build-01"),  # drives no board: any repository's
        RunnerHost("lab-a-01"),
        RunnerHost("lab-s-01"),
        RunnerHost("lab-x-01"),
        devices=(
            device("open-1", "lab-a-01"),
            device("secret-1", "lab-s-01", "secret"),
            device("secret-2", "lab-x-01", "secret"),
            device("open-2", "lab-x-01"),
        ),
    )
    refused = "repository octo/firmware may not use runner host lab-s-01 (none of its pools admits it)"
    assert texts(inventory, repository="octo/firmware") == {"lab-s-01": [refused]}
    assert texts(inventory, repository="octo/secret-radio") == {}
    assert texts(inventory) == {}  # no repository (explain without --repository): no list applied
    res = resolve_hosts(NOTHING, inventory, repository="octo/firmware")
    assert [v.never for v in res.rejected] == [True]


def test_a_requested_host_no_runner_host_is_gets_a_did_you_mean() -> None:
    inventory = lab(RunnerHost("lab-a-01"), RunnerHost("lab-b-01"))
    res = resolve_hosts(builders.requirements({"kerrigan.host": "lab-a-10"}), inventory)
    assert [hint.message for hint in res.hints] == ["no runner host is lab-a-10; did you mean 'lab-a-01'?"]
    assert res.outcome is Outcome.UNSCHEDULABLE
