"""Real GitHub payloads are accepted, and our own webhook fixtures keep to GitHub's JSON Schemas.

Both come from ``../shared/github-payloads`` (octokit/webhooks), which a fresh clone does not have: the tests
skip then.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from tests.integration.github.conftest import SHARED_PAYLOADS, WEBHOOKS, Harness

EXAMPLES = SHARED_PAYLOADS / "examples"
SCHEMAS = SHARED_PAYLOADS / "schemas"
ABSENT = f"{SHARED_PAYLOADS} is absent (a fresh clone has no ../shared): real payloads not checked"


def _params(folder: Path, pattern: str, *, needs: Path) -> list[Any]:
    """The files of ``folder`` matching ``pattern``, or one skipped case when ``needs`` is absent."""
    if not needs.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=ABSENT), id="absent")]
    return [pytest.param(path, id=str(path.relative_to(folder))) for path in sorted(folder.glob(pattern))]


@functools.cache
def _registry() -> Registry[Any]:
    """Every schema under its ``$id``: the event schemas refer to ``common/*.schema.json`` by those ids."""
    resources = []
    for path in SCHEMAS.rglob("*.schema.json"):
        contents = json.loads(path.read_text(encoding="utf-8"))
        resources.append((contents["$id"], Resource.from_contents(contents, default_specification=DRAFT7)))
    return Registry().with_resources(resources)


def _schema(event: str, action: str | None) -> Draft7Validator:
    path = SCHEMAS / event / f"{action or 'event'}.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    return Draft7Validator(schema, registry=_registry(), format_checker=Draft7Validator.FORMAT_CHECKER)


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=ABSENT)
async def test_every_real_github_payload_is_accepted_and_processed_without_error(
    bare_harness: Harness,
) -> None:
    # One application for all the examples: a fresh one for each would double the time of the suite.
    answers = {}
    for example in sorted(EXAMPLES.glob("*/*.json")):
        event = example.parent.name  # examples/<event>/<action>.payload.json
        payload = json.loads(example.read_text(encoding="utf-8"))
        name = str(example.relative_to(EXAMPLES))
        answers[name] = await bare_harness.deliver(event, payload, delivery_id=name)
    await bare_harness.settle()
    assert answers == {name: 200 if name.startswith("ping/") else 202 for name in answers}
    assert len(answers) >= 10
    errors = {d.delivery_id: d.error for d in await bare_harness.deliveries() if d.error or not d.processed}
    assert errors == {}


@pytest.mark.parametrize("fixture", _params(WEBHOOKS, "*.json", needs=SCHEMAS))
def test_webhook_fixture_matches_github_schema_for_its_event_and_action(fixture: Path) -> None:
    event = fixture.stem.split("-", 1)[0]  # fixtures/webhooks/<event>[-<variant>].json
    payload = json.loads(fixture.read_text(encoding="utf-8"))
    errors = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in _schema(event, payload.get("action")).iter_errors(payload)
    ]
    assert errors == []


def test_every_event_kerrigan_routes_has_a_webhook_fixture() -> None:
    events = {path.stem.split("-", 1)[0] for path in WEBHOOKS.glob("*.json")}
    routed = {
        "push",
        "pull_request",
        "issue_comment",
        "check_run",
        "check_suite",
        "merge_group",
        "workflow_run",
    }
    assert events >= routed | {"installation"}
