"""The served OpenAPI document tells the truth: schemathesis generates requests from it (a bounded, seeded
run on SQLite) and every answer must be one the document lists, in the shape it gives, and never a 5xx;
and a request the document calls valid is never refused for its form (a 400).

The server runs in a thread of its own, on loopback, with the small lab of ``conftest`` and alice's
System Admin token on every request, so the generated requests reach the handlers rather than stop at
sign-in. Each operation gets :data:`EXAMPLES` cases, derandomized: the same requests every run.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from schemathesis import Case
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.testing.clock import FakeClock
from kerrigan.web.api.openapi import document
from kerrigan.web.state import DATABASE
from tests.integration.api.conftest import ADMIN, seed_lab

EXAMPLES = 8  # per operation: 43 operations make a few hundred requests


@dataclass
class Served:
    """The server's base URL and alice's token."""

    base: str
    token: str


@pytest.fixture(scope="module")
def served(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("openapi") / "kerrigan.db"
    shutil.copy(sqlite_template, path)
    settings = Settings(database_url=f"sqlite+aiosqlite:///{path}", admins=frozenset({ADMIN}))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def start() -> None:
        app = create_app(settings, clock=FakeClock())
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"] = runner
        state["port"] = runner.addresses[0][1]
        state["tokens"] = await seed_lab(app[DATABASE])

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(state["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="openapi-server", daemon=True)
    thread.start()
    assert ready.wait(30), "the server did not start"
    try:
        yield Served(f"http://127.0.0.1:{state['port']}", state["tokens"][ADMIN])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def beyond_a_schema(case: Case) -> bool:
    """Whether the case holds a value whose rule no schema can state, so a valid-looking one may be refused
    (a 400 naming it): a cursor is good only when this server gave it out, an ``until`` only when it is in
    the future. The document says both in words; such a case is held to every other check."""
    query = case.query or {}
    body = case.body if isinstance(case.body, dict) else {}
    return "cursor" in query or body.get("until") not in (None, "")


# Operations from the document the server serves (a test below holds the served one to it).
# A valid request may still be refused for what the lab holds, and the document says how: 404 a missing
# subject, 409 a conflict, 412 an If-Match naming a version that is not the current one, 422 a body naming
# what the lab does not have. Never 400, which is for the form.
CONFIG = SchemathesisConfig.from_str(
    "[checks.positive_data_acceptance]\n"
    'expected-statuses = ["2xx", "401", "403", "404", "409", "412", "422"]\n'
)
OPERATIONS = [
    result.ok() for result in schemathesis.openapi.from_dict(document(), config=CONFIG).get_all_operations()
]


def test_the_served_document_is_the_one_generated_from(served: Served) -> None:
    with urllib.request.urlopen(f"{served.base}/api/v1/openapi.json", timeout=30) as answer:
        assert json.load(answer) == json.loads(json.dumps(document()))


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_every_answer_is_one_the_document_gives(operation: Any, served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.token}"}

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def answered_as_documented(case: Case) -> None:
        response = case.call(base_url=f"{served.base}/api/v1", headers=headers)
        assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code}"
        checks = [status_code_conformance, content_type_conformance, response_schema_conformance]
        if not beyond_a_schema(case):
            checks.append(positive_data_acceptance)
        case.validate_response(response, checks=checks)

    answered_as_documented()
