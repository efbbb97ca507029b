"""The pure rules of a board's power in a person's hands: the actions, who may switch, how an outcome is
worded in the audit log."""

from __future__ import annotations

import pytest

from kerrigan.core.device_power import (
    ActionError,
    Holder,
    PowerAction,
    PowerState,
    RequestState,
    outcome_text,
    power_state,
    read_action,
    refusal,
)
from kerrigan.core.roles import Principal


@pytest.mark.parametrize("action", ["cycle", "on", "off", "status"])
def test_each_action_is_read(action: str) -> None:
    assert read_action(action).value == action


@pytest.mark.parametrize("value", ["reboot", "ON", "", None, 1, True, ["on"], {"action": "on"}])
def test_anything_else_is_refused_naming_the_actions(value: object) -> None:
    with pytest.raises(ActionError, match="action must be one of cycle, on, off, status"):
        read_action(value)


def test_the_holder_and_admins_may_switch_and_nobody_else() -> None:
    held = Holder(login="Rita")
    assert refusal(Principal("rita"), "modalix-bluebox", held) is None  # logins compare without case
    assert refusal(Principal("alice", admin=True), "modalix-bluebox", held) is None
    assert refusal(Principal("alice", admin=True), "modalix-bluebox", Holder(job=7)) is None
    assert refusal(Principal("olga"), "modalix-bluebox", held) == (
        "you do not hold a reservation of modalix-bluebox"
    )
    for holder in (Holder(), Holder(job=7)):
        assert refusal(Principal("rita"), "modalix-bluebox", holder) == (
            "you do not hold a reservation of modalix-bluebox"
        )


def test_a_status_reads_as_on_off_or_unknown() -> None:
    assert [power_state(on) for on in (True, False, None)] == [
        PowerState.ON,
        PowerState.OFF,
        PowerState.UNKNOWN,
    ]


def test_outcomes_as_the_audit_log_words_them() -> None:
    assert outcome_text(RequestState.DONE, PowerState.OFF, "") == "off"
    failed = outcome_text(RequestState.FAILED, None, "the PDU did not answer")
    assert failed == "failed: the PDU did not answer"
    assert outcome_text(RequestState.FAILED, None, "") == "failed"
    assert outcome_text(RequestState.EXPIRED, None, "") == "expired"
    assert {action.value for action in PowerAction} == {"cycle", "on", "off", "status"}
