"""Every real GitHub payload still routes as it did before payloads were read through typed accessors.

Each example of ``../shared/github-payloads/examples`` is delivered as GitHub sends it, and once more made to
speak of ``octo/firmware`` (installation 1, its head commit :data:`SHA`), so that the routes go past their
first checks; what the delivery did (its error, the sessions made, the calls to GitHub) is compared with what
it did before.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from kerrigan.store.installations import repositories
from tests.integration.github.conftest import INSTALLATION, REPO, SHA, SHARED_PAYLOADS, Harness

EXAMPLES = SHARED_PAYLOADS / "examples"
ABSENT = f"{SHARED_PAYLOADS} is absent (a fresh clone has no ../shared): real payloads not checked"
_SHA_KEYS = {"head_sha", "after", "sha"}


def _examples() -> list[Any]:
    if not EXAMPLES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=ABSENT), id="absent")]
    return [
        pytest.param(path, id=str(path.relative_to(EXAMPLES))) for path in sorted(EXAMPLES.glob("*/*.json"))
    ]


def _ours(value: Any) -> Any:
    """The payload made to speak of octo/firmware at SHA: its names, installation and head commits."""
    if isinstance(value, list):
        return [_ours(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key == "full_name" and isinstance(item, str) and "/" in item:
            out[key] = REPO
        elif key in _SHA_KEYS and isinstance(item, str) and re.fullmatch(r"[0-9a-f]{40}", item):
            out[key] = SHA
        else:
            out[key] = _ours(item)
    if isinstance(out.get("installation"), dict):
        out["installation"] = out["installation"] | {"id": INSTALLATION}
    return out


class Outcome(NamedTuple):
    """What a delivery did: its answer, the sessions made, the repositories stored, the calls to GitHub."""

    status: int
    sessions: int
    repositories: tuple[tuple[str, int], ...]
    calls: tuple[str, ...]


# Reading octo/firmware's workflows: the listing, then each manifest of the fixture repository.
FIRMWARE_READS = (
    "GET /repos/octo/firmware manifests",
    *(
        f"GET /repos/octo/firmware manifests/{name}.yml"
        for name in (
            "hil-smoke",
            "legacy",
            "org-class",
            "select-device",
            "select-pool",
            "task-refinement",
            "typo",
            "waiting",
        )
    ),
)

# Recorded from the routes as they were before the typed accessors; each example as sent, then as ours.
EXPECTED: dict[str, tuple[Outcome, Outcome]] = {
    "check_run/requested_action.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "check_run/rerequested.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "check_suite/rerequested.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "installation/created.payload.json": (
        Outcome(202, 0, (("Codertocat/Hello-World", 957387),), ()),
        Outcome(202, 0, (("octo/firmware", 1),), ()),
    ),
    "installation/deleted.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "installation_repositories/added.payload.json": (
        Outcome(202, 0, (("Codertocat/Space", 957387),), ()),
        Outcome(202, 0, (("octo/firmware", 1),), ()),
    ),
    "issue_comment/created.with-installation.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "issue_comment/edited.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "merge_group/checks_requested.payload.json": (
        Outcome(
            202,
            0,
            (),
            (
                "GET /repos/octo-org/octo-repo manifests",
                "POST /app/installations/N/access_tokens",
            ),
        ),
        Outcome(
            202,
            1,
            (),
            (
                "GET /repos/octo-org/octo-repo manifests",
                *FIRMWARE_READS,
                "POST /app/installations/N/access_tokens",
                "POST /repos/octo/firmware/check-runs",
            ),
        ),
    ),
    "ping/with-app_id.payload.json": (
        Outcome(200, 0, (), ()),
        Outcome(200, 0, (), ()),
    ),
    "pull_request/synchronize.payload.json": (
        Outcome(
            202,
            0,
            (),
            (
                "GET /repos/Codertocat/Hello-World manifests",
                "POST /app/installations/N/access_tokens",
            ),
        ),
        Outcome(
            202,
            0,
            (),
            (
                "GET /repos/Codertocat/Hello-World manifests",
                *FIRMWARE_READS,
                "POST /app/installations/N/access_tokens",
            ),
        ),
    ),
    "push/payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "push/with-installation.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "workflow_run/completed.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
    "workflow_run/requested.payload.json": (
        Outcome(202, 0, (), ()),
        Outcome(202, 0, (), ()),
    ),
}


def _calls(harness: Harness) -> tuple[str, ...]:
    """The calls made to GitHub, numbers written ``N`` and the manifests folder ``manifests``."""
    shapes = {
        re.sub(r"/\d+/", "/N/", f"{r.method} {r.path}").replace("/contents/.kerrigan/workflows", " manifests")
        for r in harness.github.requests
    }
    return tuple(sorted(shapes))


async def _outcome(harness: Harness, event: str, payload: dict[str, Any]) -> Outcome:
    status = await harness.deliver(event, payload)
    await harness.settle()
    errors = [d.error for d in await harness.deliveries() if d.error]
    assert errors == []
    async with harness.database.sessions() as session:
        stored = tuple(sorted(await repositories(session)))
    return Outcome(status, len(await harness.sessions()), stored, _calls(harness))


@pytest.mark.parametrize("example", _examples())
async def test_real_payload_routes_as_before(harness: Harness, example: Path) -> None:
    payload = json.loads(example.read_text(encoding="utf-8"))
    event = example.parent.name
    as_sent = await _outcome(harness, event, payload)
    ours = await _outcome(harness, event, _ours(payload))
    assert (as_sent, ours) == EXPECTED[str(example.relative_to(EXAMPLES))]


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=ABSENT)
def test_every_real_payload_has_a_recorded_outcome() -> None:
    assert {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("*/*.json")} == set(EXPECTED)
