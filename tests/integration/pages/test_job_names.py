"""A matrix job is spelled on the pages as its check run spells it: ``flash-test (family=nrf52)``."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from tests.integration.api.history_rows import Run, add_session
from tests.integration.pages.conftest import READER, Site

KEY = "flash-test[family=nrf52,sdk=2.2]"
NAME = "flash-test (family=nrf52, sdk=2.2)"


def _text(page: str) -> str:
    """What a reader sees: the page without its tags and attributes."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


async def test_pages_spell_a_matrix_job_as_its_check_run_does(
    site: Site, browser: Callable[..., Any]
) -> None:
    async with site.database.sessions() as session, session.begin():
        session_id, [job] = await add_session(
            session, site.database.clock(), runs=[Run(KEY, device="modalix-bluebox", output=("ok\n",))]
        )
    reader = await browser(READER)
    for path in (
        f"/sessions/{session_id}",
        "/devices/modalix-bluebox",
        f"/sessions/{session_id}/jobs/{job}/output",
    ):
        status, page = await reader.get(path)
        assert status == 200, path
        seen = _text(page)
        assert NAME in seen, path
        assert KEY not in seen, path
