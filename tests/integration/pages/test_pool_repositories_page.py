"""The pool editor's repositories: everyone reads the list, System Admins change it with a plain form.

The lab is ``fixtures/inventory/lab.yml`` (see ``test_pools.py``): octocat owns sdk-2-2-som, admin is a
System Admin, rita only reads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest

from kerrigan.store.audit import list_audit
from kerrigan.store.inventory import get_pool
from tests.integration.pages.conftest import ADMIN, OWNER, READER, Browser, Site
from tests.integration.pages.test_pools import EDITOR, POOL, field_error, post_forms, snapshot

FORM = f"{EDITOR}/repositories"


def textarea(page: str, textarea_id: str) -> str:
    """What a textarea with this id holds."""
    found = re.search(rf'<textarea [^>]*id="{re.escape(textarea_id)}"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, f"no textarea {textarea_id}"
    return html.unescape(found[1])


async def stored_repositories(site: Site) -> tuple[str, ...]:
    async with site.database.sessions() as session:
        return (await get_pool(session, POOL)).pool.repositories


async def test_an_admin_sets_the_repositories_one_glob_a_line_and_the_change_is_audited(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    _, page = await admin.get(EDITOR)
    assert FORM in post_forms(page)
    assert textarea(page, "repositories-input") == ""
    typed = "octo-lab/*\r\n\r\n  octo-lab/firmware \r\n"
    status, page = await admin.post(FORM, {"repositories": typed}, csrf_from=EDITOR)
    assert status == 200
    assert f"Repositories that may use pool {POOL} saved." in page
    assert textarea(page, "repositories-input") == "octo-lab/*\nocto-lab/firmware"
    assert await stored_repositories(site) == ("octo-lab/*", "octo-lab/firmware")
    async with site.database.sessions() as session:
        [entry] = [e for e in await list_audit(session, pool_id=POOL) if e.field == "repositories"]
    assert (entry.actor, entry.before, entry.after) == (ADMIN, [], ["octo-lab/*", "octo-lab/firmware"])


async def test_an_empty_form_lets_every_repository_use_the_pool_again(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    await admin.post(FORM, {"repositories": "octo-lab/*"}, csrf_from=EDITOR)
    status, page = await admin.post(FORM, {"repositories": "\n"}, csrf_from=EDITOR)
    assert status == 200
    assert await stored_repositories(site) == ()
    assert "every installed repository" in page


async def test_a_bad_glob_is_shown_next_to_the_textarea_with_what_was_typed_and_changes_nothing(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    before = await snapshot(site)
    typed = "octo-lab/*\nocto lab/firmware"
    status, page = await admin.post(FORM, {"repositories": typed}, csrf_from=EDITOR)
    assert status == 400
    message = field_error(page, "error-repositories-repositories")
    assert message is not None
    assert message.startswith("'octo lab/firmware' is not a repository glob: owner/name")
    assert textarea(page, "repositories-input") == typed
    assert 'aria-invalid="true"' in page
    assert await snapshot(site) == before


async def test_an_owner_reads_the_repositories_but_gets_no_form(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    await admin.post(FORM, {"repositories": "octo-lab/*"}, csrf_from=EDITOR)
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.get(EDITOR)
    assert status == 200
    assert FORM not in post_forms(page)
    section = re.search(r'<section id="repositories">(.*?)</section>', page, re.S)
    assert section
    assert "<code>octo-lab/*</code>" in section[1]
    assert "System Admins change them." in section[1]


@pytest.mark.parametrize("login", [OWNER, READER])
async def test_a_forged_post_by_someone_not_an_admin_is_refused_and_changes_nothing(
    site: Site, browser: Callable[..., Any], login: str
) -> None:
    user: Browser = await browser(login)
    before = await snapshot(site)
    status, page = await user.post(FORM, {"repositories": f"{login}/*"}, csrf_from=EDITOR)
    assert status == 403
    assert f"{login} may not" in page
    assert await snapshot(site) == before


async def test_a_post_without_this_sessions_csrf_token_is_refused(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    before = await snapshot(site)
    status, page = await admin.post(FORM, {"repositories": "octo-lab/*", "csrf": "forged"})
    assert status == 403
    assert "the form is stale or was not sent from this site" in page
    assert await snapshot(site) == before
