"""A job that failed on a *suspect* device (:mod:`kerrigan.core.flaky`) gets one more attempt on a peer
that is not suspect (DESIGN.md, "A lab problem is not a code failure"; the manifest's ``retry: {suspect:
N}``, 1 by default, 0 turns it off).

A suspect retry is decided when the job fails, with the device's numbers as they are then (the failure
itself counted); the new attempt may go only to a device that matches the task and is neither where it
failed nor suspect for the task. When no such device exists, the job fails as it would have, and its
check run says why it was not retried.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kerrigan.core.lifecycle import REPOSITORY_REASONS, FailureClass, JobState, RetryPolicy


class SuspectRetry(enum.StrEnum):
    """What became of a job that failed on a device suspect for its task."""

    RETRIED = "retried"  # another attempt, on a peer that is not suspect
    NO_PEER = "no_peer"  # no device that is neither the failing board nor suspect can run the task
    SPENT = "spent"  # the task's suspect retries (``retry.suspect``) are spent


@dataclass(frozen=True, slots=True)
class SuspectFailure:
    """A failure on a suspect device: the device's numbers for the task when it failed, and what became
    of the job."""

    device: str
    runs: int
    failures: int
    retry: SuspectRetry

    def words(self) -> str:
        """``failed on modalix-redbox, suspect: 8 of 10 failed this week``."""
        return f"failed on {self.device}, suspect: {self.failures} of {self.runs} failed this week"


# The failures a suspect device may explain: the test's own, and the lab's after its budget.
_EXPLAINED = frozenset({FailureClass.TEST, FailureClass.INFRASTRUCTURE})


def suspect_retry(
    policy: RetryPolicy,
    state: JobState,
    klass: FailureClass | None,
    reason: str | None,
    *,
    spent: int,
    peers: Collection[str],
) -> SuspectRetry | None:
    """What becomes of a job that ended in ``state`` on a device suspect for its task; ``None`` when the
    rule does not apply (``retry.suspect`` is 0, the job did not fail, or failed in a way no device
    explains: a job its host could not start for what the commit holds, a secret the repository deleted).

    ``spent`` are the task's suspect retries already made; ``peers`` the devices the new attempt may go to
    (:func:`unsuspected_peers`)."""
    if policy.suspect < 1 or state is not JobState.FAILED:
        return None
    if klass not in _EXPLAINED or reason in REPOSITORY_REASONS:
        return None
    if spent >= policy.suspect:
        return SuspectRetry.SPENT
    return SuspectRetry.RETRIED if peers else SuspectRetry.NO_PEER


def unsuspected_peers(
    candidates: Iterable[str], failed_on: Collection[str], suspects: Collection[str]
) -> tuple[str, ...]:
    """The devices a suspect retry may go to: those that match the task, less where it failed (each of a
    gang's devices) and every device suspect for the task."""
    return tuple(device for device in candidates if device not in failed_on and device not in suspects)
