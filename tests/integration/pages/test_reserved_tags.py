"""A tag under ``kerrigan.`` is refused by the pool and device forms, next to the field, as a reserved
label key is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.pages.conftest import ADMIN, OWNER, Browser, Site
from tests.integration.pages.test_pools import field_error, input_value, snapshot

RULE = (
    "tag {tag!r} uses the reserved prefix 'kerrigan.'; "
    "Kerrigan keeps that namespace for the labels it generates and it cannot be set by hand"
)


@pytest.mark.parametrize(
    ("who", "page", "tag"),
    [
        (OWNER, "/pools/sdk-2-2-som", "kerrigan.x"),
        (ADMIN, "/pools/sdk-2-2-som", "Kerrigan.Pool_Id"),
        (OWNER, "/devices/modalix-bluebox", "kerrigan.x"),
    ],
)
async def test_a_reserved_tag_is_refused_by_the_form_next_to_its_field_and_changes_nothing(
    site: Site, browser: Callable[..., Any], who: str, page: str, tag: str
) -> None:
    user: Browser = await browser(who)
    before = await snapshot(site)
    status, answer = await user.post(f"{page}/tags", {"tag": tag}, csrf_from=page)
    assert status == 400
    assert field_error(answer, "error-tag-add-tag") == RULE.format(tag=tag)
    assert input_value(answer, "new-tag") == tag
    assert "Nothing was changed." in answer
    assert await snapshot(site) == before
