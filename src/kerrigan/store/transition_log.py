"""Each committed move of a session or a job, one line of the log at info.

The store notes the moves as facts (:mod:`kerrigan.store.signals`); once their transaction commits, this
listener writes them with ``session_id``, ``job_id`` and ``repository`` as fields. What the process bound
while it made the move (``delivery_id`` while a webhook delivery is processed, ``runner_host`` in a runner's
request) is on the line too, so one push's or one job's lines can be followed (``jq 'select(.session_id ==
"...")'``). A transaction that rolls back logs nothing: the lines say what happened.
"""

from __future__ import annotations

import logging

from kerrigan.store.signals import Fact, JobMoved, SessionMoved

log = logging.getLogger(__name__)


def log_transition(fact: Fact) -> None:
    """Write a session's or a job's move; other facts are not for the log."""
    match fact:
        case JobMoved(job_id, task_id, session_id, repository, before, after, reason):
            why = f" ({reason})" if reason else ""
            log.info(
                "job %d %s: %s -> %s%s",
                job_id,
                task_id,
                before,
                after,
                why,
                extra={
                    "job_id": str(job_id),
                    **_session_fields(session_id, repository),
                },  # as runners bind it
            )
        case SessionMoved(session_id, repository, before, after, conclusion):
            how = f" ({conclusion})" if conclusion else ""
            log.info(
                "session %s: %s -> %s%s",
                session_id,
                before,
                after,
                how,
                extra=_session_fields(session_id, repository),
            )


def _session_fields(session_id: str, repository: str) -> dict[str, str]:
    return {key: value for key, value in (("session_id", session_id), ("repository", repository)) if value}
