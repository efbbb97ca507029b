"""Who may open ``kerrigan shell`` in a held job's sandbox (:mod:`kerrigan.core.job_shell`): the person whose
hold lasts and System Admins; a stranger a 403 naming what they lack; a job no hold holds now a 409."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kerrigan.core.job_shell import HoldOfJob, shell_holder, shell_refusal
from kerrigan.core.reservations import ReservationState
from kerrigan.core.roles import Principal

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
RITA = Principal("rita", admin=False)
OLGA = Principal("olga", admin=False)
ALICE = Principal("alice", admin=True)
LASTS = HoldOfJob("Rita", ReservationState.ACTIVE, NOW + timedelta(minutes=30))


def test_the_holder_in_any_case_and_an_admin_may_while_the_hold_lasts() -> None:
    assert shell_holder([LASTS], NOW) == "Rita"
    assert shell_refusal(RITA, 7, [LASTS], NOW) is None
    assert shell_refusal(ALICE, 7, [LASTS], NOW) is None


def test_a_stranger_is_403_naming_what_they_lack_held_or_not() -> None:
    for holds in ([LASTS], []):
        refused = shell_refusal(OLGA, 7, holds, NOW)
        assert refused is not None
        assert (refused.status, refused.code) == (403, "forbidden")
        said = "olga may not open a shell in job 7's sandbox: you do not hold its board"
        assert refused.message.startswith(said)


def test_a_hold_past_its_end_or_waiting_is_no_hold_409() -> None:
    past = HoldOfJob("rita", ReservationState.ACTIVE, NOW)
    waiting = HoldOfJob("rita", ReservationState.WAITING, None)
    assert shell_holder([past, waiting], NOW) is None
    refused = shell_refusal(RITA, 7, [past], NOW)
    assert refused is not None
    assert (refused.status, refused.code) == (409, "not_held")
    assert "job 7 is not held now" in refused.message
    refused = shell_refusal(RITA, 7, [waiting], NOW)
    assert refused is not None
    assert "waits for the board" in refused.message
    refused = shell_refusal(ALICE, 7, [], NOW)
    assert refused is not None
    assert refused.status == 409
