"""One check run's body as GitHub is sent it, the check run's name, and where its session comes from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kerrigan.github.checks.actions import CANCEL_ACTION, HOLD_ACTION, RETRY_ACTION
from kerrigan.github.checks.limits import batched

NAME_PREFIX: Final = "kerrigan / "


def check_run_name(workflow: str) -> str:
    """``kerrigan / <workflow name>``."""
    return f"{NAME_PREFIX}{workflow}"


def workflow_of(check_run_name: str) -> str | None:
    """The workflow a check run of ours is for, or ``None`` for someone else's check run."""
    return check_run_name.removeprefix(NAME_PREFIX) if check_run_name.startswith(NAME_PREFIX) else None


@dataclass(frozen=True, slots=True)
class CheckRunBody:
    """What to send GitHub for one check run: the fields, and annotations beyond the first 50.

    GitHub adds up the annotations of every request, so those in ``fields`` go with the create only;
    ``update_annotations`` (a completed check run's failed tests) go with the update that sends this body,
    or with the create when the check run is created with it.
    """

    fields: dict[str, Any]
    more_annotations: tuple[tuple[dict[str, Any], ...], ...] = ()
    update_annotations: tuple[dict[str, Any], ...] = ()

    def with_annotations(self, annotations: list[dict[str, Any]]) -> CheckRunBody:
        """This body carrying ``annotations`` as its own (the first 50 in ``output``, the rest after)."""
        first, more = batched(annotations)
        output = {key: value for key, value in self.fields["output"].items() if key != "annotations"}
        if first:
            output["annotations"] = first
        return CheckRunBody({**self.fields, "output": output}, more)

    def unsent(self, shown: Mapping[str, Any]) -> CheckRunBody | None:
        """What is left to send of this completing body, GitHub showing the check run as ``shown``:
        ``None`` when GitHub has all of it, else the body with the update annotations it lacks.

        GitHub adds up annotations, so an update whose answer was lost is not sent again whole: when GitHub
        shows this body's status, conclusion, title and summary, the update was done, and its annotations
        beyond those the create sent (this body's own) are counted off the ones still to go.
        """
        output = self.fields["output"]
        seen = shown.get("output") or {}
        done = (
            shown.get("status") == "completed"
            and shown.get("conclusion") == self.conclusion
            and seen.get("title") == output["title"]
            and seen.get("summary") == output["summary"]
        )
        if not done:
            return self.with_annotations(list(self.update_annotations))
        created = len(output.get("annotations", ())) + sum(len(batch) for batch in self.more_annotations)
        count = seen.get("annotations_count")
        landed = min(max(count - created, 0), len(self.update_annotations)) if isinstance(count, int) else 0
        if landed == len(self.update_annotations):
            return None
        return self.with_annotations(list(self.update_annotations[landed:]))

    @property
    def conclusion(self) -> str | None:
        """The conclusion, when the body completes the check run."""
        value = self.fields.get("conclusion")
        return str(value) if value is not None else None

    def as_json(self) -> dict[str, Any]:
        """The body as the store keeps it (:func:`body_from_json` reads it back)."""
        return {
            "fields": self.fields,
            "more_annotations": [list(batch) for batch in self.more_annotations],
            "update_annotations": list(self.update_annotations),
        }


@dataclass(frozen=True, slots=True)
class SessionContext:
    """What the check run says about where the session comes from."""

    session_id: str
    details_url: str
    head_sha: str
    event: str
    ref: str | None = None
    queue_position: int | None = None
    approvers: str = "someone with write access to the repository"
    extra: dict[str, str] = field(default_factory=dict)


def body_from_json(stored: Mapping[str, Any]) -> CheckRunBody:
    """A body kept in the store (:meth:`CheckRunBody.as_json`)."""
    more = tuple(tuple(batch) for batch in stored.get("more_annotations", ()))
    return CheckRunBody(dict(stored["fields"]), more, tuple(stored.get("update_annotations", ())))


def compose_body(
    name: str,
    context: SessionContext,
    *,
    status: str,
    title: str,
    summary: str,
    conclusion: str | None = None,
    annotations: list[dict[str, Any]] | None = None,
    holdable: bool = False,
) -> CheckRunBody:
    """A body of the fields every one of ours has: its name, commit, session, and the actions it offers
    (``holdable``: a job failed on a board, which *Hold board* reserves once the check run completed)."""
    first, more = batched(annotations or [])
    output: dict[str, Any] = {"title": title[:255], "summary": summary}
    if first:
        output["annotations"] = first
    fields: dict[str, Any] = {
        "name": check_run_name(name),
        "head_sha": context.head_sha,
        "status": status,
        "details_url": context.details_url,
        "external_id": context.session_id,
        "output": output,
    }
    if conclusion is not None:
        fields["conclusion"] = conclusion
        fields["actions"] = [RETRY_ACTION, HOLD_ACTION] if holdable else [RETRY_ACTION]
    else:
        fields["actions"] = [CANCEL_ACTION]  # queued or in progress: it can still be stopped
    return CheckRunBody(fields, more)
