"""A completing update whose answer was lost is not sent again whole: GitHub adds up annotations, so what
it shows decides what is left to send (:meth:`CheckRunBody.unsent`)."""

from __future__ import annotations

from typing import Any

from kerrigan.github.checks import CheckRunBody


def annotation(line: int) -> dict[str, Any]:
    return {
        "path": "tests/test_uart.py",
        "start_line": line,
        "end_line": line,
        "annotation_level": "failure",
        "message": f"failed at {line}",
    }


OWN = [annotation(1), annotation(2)]  # the resolution's: they went with the create
FAILED = tuple(annotation(100 + n) for n in range(120))  # the failed tests': 50 with the update, then 50, 20
BODY = CheckRunBody(
    {
        "status": "completed",
        "conclusion": "failure",
        "output": {"title": "1 job failed", "summary": "the summary", "annotations": OWN},
    },
    (),
    FAILED,
)


def shown(count: Any, *, summary: str = "the summary", conclusion: str = "failure") -> dict[str, Any]:
    """The check run as GitHub answers it: the count of its annotations, not the annotations."""
    output = {"title": "1 job failed", "summary": summary, "annotations_count": count}
    return {"status": "completed", "conclusion": conclusion, "output": output}


def sent(body: CheckRunBody | None) -> list[dict[str, Any]]:
    assert body is not None
    return [
        *body.fields["output"].get("annotations", []),
        *(a for batch in body.more_annotations for a in batch),
    ]


def test_a_check_run_github_shows_unfinished_gets_the_whole_update() -> None:
    body = BODY.unsent({"status": "in_progress", "conclusion": None, "output": {"annotations_count": 2}})
    assert sent(body) == list(FAILED)
    assert body is not None
    assert len(body.fields["output"]["annotations"]) == 50  # GitHub takes 50 a request
    assert [len(batch) for batch in body.more_annotations] == [50, 20]


def test_an_update_github_did_whole_is_not_sent_again() -> None:
    assert BODY.unsent(shown(2 + 120)) is None


def test_an_update_done_in_part_sends_only_the_annotations_github_lacks() -> None:
    # The completing request (50) and one more batch (50) were done; the last 20 were not.
    assert sent(BODY.unsent(shown(2 + 100))) == list(FAILED[100:])


def test_another_body_shown_means_this_one_was_not_done() -> None:
    # A short body (after a refusal) or an older version: same status, different words.
    for other in (shown(2 + 120, summary="short"), shown(2 + 120, conclusion="success")):
        assert sent(BODY.unsent(other)) == list(FAILED)


def test_a_count_github_leaves_out_or_beyond_reason_is_read_safely() -> None:
    assert sent(BODY.unsent(shown(None))) == list(FAILED)
    assert BODY.unsent(shown(10_000)) is None
    assert sent(BODY.unsent(shown(0))) == list(FAILED)
