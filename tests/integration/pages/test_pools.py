"""The pool list and the pool editor, through a browser that signs in with GitHub and posts plain forms.

The lab is ``fixtures/inventory/lab.yml``: octocat owns sdk-2-2-som and sdk-2-2-pcie, hubot owns sdk-2-1-som,
admin is a System Admin, rita only reads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest

from kerrigan.store.audit import Change, list_audit
from kerrigan.store.inventory import get_pool, load_inventory
from kerrigan.store.label_keys import put_label_key
from tests.integration.pages.conftest import (
    ADMIN,
    OTHER_OWNER,
    OWNER,
    READER,
    Browser,
    Site,
    needs_chromium,
    on_sqlite_only,
)

POOL = "sdk-2-2-som"  # octocat's
EDITOR = f"/pools/{POOL}"
LAB_POOLS = {"sdk-2-2-som", "sdk-2-1-som", "sdk-2-2-pcie", "default"}

_POST_FORM = re.compile(r'<form method="post" action="([^"]+)"')


def post_forms(page: str) -> list[str]:
    """Where the page's POST forms go, sign-out excepted (every signed-in page has that one)."""
    return [html.unescape(action) for action in _POST_FORM.findall(page) if action != "/logout"]


def field_error(page: str, error_id: str) -> str | None:
    """The text of the field error with this id, or None."""
    found = re.search(rf'<p class="field-error" id="{re.escape(error_id)}"[^>]*>([^<]*)</p>', page)
    return html.unescape(found[1]) if found else None


def input_value(page: str, input_id: str) -> str:
    """The value an input with this id shows."""
    found = re.search(rf'<input [^>]*id="{re.escape(input_id)}"[^>]*value="([^"]*)"', page)
    assert found, f"no input {input_id}"
    return html.unescape(found[1])


async def snapshot(site: Site) -> tuple[object, ...]:
    """The stored inventory and the audit log: a refused edit leaves both as they were."""
    async with site.database.sessions() as session:
        return await load_inventory(session), await list_audit(session, limit=1000)


def listed_pools(page: str) -> set[str]:
    return set(re.findall(r'<tr id="pool-([^"]+)">', page))


# -- the list --------------------------------------------------------------------------------------


async def test_the_pool_list_shows_owners_labels_tags_and_device_counts_by_state(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.get("/pools")
    assert status == 200
    assert listed_pools(page) == LAB_POOLS
    row = re.search(r'<tr id="pool-sdk-2-2-pcie">(.*?)</tr>', page, re.S)
    assert row
    counts = dict(re.findall(r'data-state="(\w+)">(\d+)<', row[1]))
    assert counts == {"available": "2", "maintenance": "0", "offline": "0", "retired": "1"}
    assert "octocat, mona" in row[1]
    assert ">form_factor=pcie</a>" in row[1]
    assert ">2.2.0-pcie-devkits</a>" in row[1]
    som = re.search(r'<tr id="pool-sdk-2-2-som">(.*?)</tr>', page, re.S)
    assert som
    assert dict(re.findall(r'data-state="(\w+)">(\d+)<', som[1]))["maintenance"] == "1"
    assert '<form method="get" action="/pools"' in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("label=form_factor=som", {"sdk-2-2-som", "sdk-2-1-som"}),
        ("label=form_factor=som&tag=2.2.0-som-devkits", {"sdk-2-2-som"}),
        ("label=purpose=ci&label=sdk=2.2.0", {"sdk-2-2-pcie"}),
        ("tag=ga-firmware", {"sdk-2-2-som", "sdk-2-1-som"}),
        ("label=kerrigan.firmware_channel=beta", {"sdk-2-2-pcie"}),
        ("tag=GA-Firmware", {"sdk-2-2-som", "sdk-2-1-som"}),
        ("label=sdk=9.9.9", set()),
        ("label=&tag=", LAB_POOLS),  # the GET form's empty inputs
    ],
)
async def test_the_pool_list_filters_by_label_and_tag(
    site: Site, browser: Callable[..., Any], query: str, expected: set[str]
) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.get(f"/pools?{query}")
    assert status == 200
    assert listed_pools(page) == expected


async def test_a_filter_can_be_dropped_and_the_others_stay(site: Site, browser: Callable[..., Any]) -> None:
    rita: Browser = await browser(READER)
    _, page = await rita.get("/pools?label=form_factor=som&tag=2.2.0-som-devkits")
    drop = re.search(r'<a class="drop" href="([^"]+)" aria-label="drop the filter 2.2.0-som-devkits"', page)
    assert drop
    _, page = await rita.get(html.unescape(drop[1]))
    assert listed_pools(page) == {"sdk-2-2-som", "sdk-2-1-som"}
    assert '<input type="hidden" name="label" value="form_factor=som">' in page


async def test_a_malformed_filter_is_shown_next_to_its_input_and_the_others_still_apply(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.get("/pools?label=sdk&tag=ga-firmware")
    assert status == 400
    assert field_error(page, "error-filters-label") == "label filter 'sdk' must look like key=value"
    assert input_value(page, "filter-label") == "sdk"
    assert listed_pools(page) == {"sdk-2-2-som", "sdk-2-1-som"}


# -- the editor: owners --------------------------------------------------------------------------------


async def test_an_owner_adds_a_label_and_sees_it(site: Site, browser: Callable[..., Any]) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(
        f"{EDITOR}/labels", {"key": "Owner_Team", "value": "BSP team"}, csrf_from=EDITOR
    )
    assert status == 200
    assert f"Label owner_team=BSP team set on pool {POOL}." in html.unescape(page)
    row = re.search(r'<tr id="label-owner_team">(.*?)</tr>', page, re.S)
    assert row, "the new label has its own editable row"
    assert 'value="BSP team"' in row[1]
    async with site.database.sessions() as session:
        stored = await get_pool(session, POOL)
        audit = await list_audit(session, pool_id=POOL, limit=1)
    assert stored.pool.labels["owner_team"] == "BSP team"
    assert [(e.actor, e.action, e.field, e.after) for e in audit] == [
        (OWNER, "add", "labels.owner_team", "BSP team")
    ]


async def test_an_owner_changes_a_label_and_an_empty_value_removes_it(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(f"{EDITOR}/labels/purpose", {"value": "nightly"}, csrf_from=EDITOR)
    assert status == 200
    assert 'value="nightly"' in re.search(r'<tr id="label-purpose">(.*?)</tr>', page, re.S)[1]  # type: ignore[index]
    status, page = await octocat.post(f"{EDITOR}/labels/purpose", {"value": ""}, csrf_from=EDITOR)
    assert status == 200
    assert 'id="label-purpose"' not in page
    status, page = await octocat.post(f"{EDITOR}/labels/sdk/delete", {}, csrf_from=EDITOR)
    assert status == 200
    async with site.database.sessions() as session:
        assert (await get_pool(session, POOL)).pool.labels == {"form_factor": "som"}


async def test_an_owner_adds_and_removes_tags(site: Site, browser: Callable[..., Any]) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(f"{EDITOR}/tags", {"tag": "Nightly.Lab"}, csrf_from=EDITOR)
    assert status == 200
    assert '<span class="tag">nightly.lab</span>' in page
    status, page = await octocat.post(f"{EDITOR}/tags/ga-firmware/delete", {}, csrf_from=EDITOR)
    assert status == 200
    async with site.database.sessions() as session:
        assert (await get_pool(session, POOL)).pool.tags == {"2.2.0-som-devkits", "nightly.lab"}


@pytest.mark.parametrize(
    ("path", "form", "error_id", "rule", "kept"),
    [
        (
            "labels",
            {"key": "kerrigan.board", "value": "modalix"},
            "error-label-add-key",
            "label key 'kerrigan.board' uses the reserved prefix 'kerrigan.'; "
            "Kerrigan generates those labels and they cannot be set by hand",
            {"new-label-key": "kerrigan.board", "new-label-value": "modalix"},
        ),
        (
            "labels",
            {"key": "form factor", "value": "som"},
            "error-label-add-key",
            "label key 'form factor' contains ' '; "
            "only lowercase letters, digits, '.', '_' and '-' are allowed",
            {"new-label-key": "form factor"},
        ),
        (
            "labels",
            {"key": "k" * 64, "value": "x"},
            "error-label-add-key",
            f"label key {'k' * 64!r} is 64 characters long; the limit is 63",
            {"new-label-key": "k" * 64},
        ),
        (
            "labels",
            {"key": "notes", "value": "v" * 64},
            "error-label-add-value",
            "value of label 'notes' is 64 characters long; the limit is 63",
            {"new-label-key": "notes", "new-label-value": "v" * 64},
        ),
        (
            "labels",
            {"key": "notes", "value": ""},
            "error-label-add-value",
            "value of label 'notes' must not be empty",
            {"new-label-key": "notes"},
        ),
        (
            "labels/sdk",
            {"value": "2.2\t0"},
            "error-label-sdk-value",
            "value of label 'sdk' '2.2\\t0' contains a non-printable character",
            {},
        ),
        (
            "tags",
            {"tag": "uart debug"},
            "error-tag-add-tag",
            "tag 'uart debug' contains ' '; only lowercase letters, digits, '.', '_' and '-' are allowed",
            {"new-tag": "uart debug"},
        ),
    ],
)
async def test_a_broken_rule_is_shown_next_to_its_field_with_the_input_kept_and_changes_nothing(
    site: Site,
    browser: Callable[..., Any],
    path: str,
    form: dict[str, str],
    error_id: str,
    rule: str,
    kept: dict[str, str],
) -> None:
    octocat: Browser = await browser(OWNER)
    before = await snapshot(site)
    status, page = await octocat.post(f"{EDITOR}/{path}", dict(form), csrf_from=EDITOR)
    assert status == 400
    assert field_error(page, error_id) == rule
    assert f'aria-describedby="{error_id}"' in page
    assert "Nothing was changed." in page
    for input_id, value in kept.items():
        assert input_value(page, input_id) == value
    assert await snapshot(site) == before


async def test_an_unapproved_key_is_refused_to_an_owner_with_the_approved_keys_named(
    site: Site, browser: Callable[..., Any]
) -> None:
    async with site.database.sessions() as session, session.begin():
        await put_label_key(session, "sdk", "SDK release", Change(ADMIN, site.database.clock()))
        await put_label_key(session, "purpose", "what the pool is for", Change(ADMIN, site.database.clock()))
    octocat: Browser = await browser(OWNER)
    _, page = await octocat.get(EDITOR)
    assert '<option value="sdk">SDK release</option>' in page
    assert "Only these keys may be added or changed." in page
    before = await snapshot(site)
    status, page = await octocat.post(f"{EDITOR}/labels", {"key": "rack", "value": "r1"}, csrf_from=EDITOR)
    assert status == 400
    assert field_error(page, "error-label-add-key") == (
        "label key 'rack' is not an approved key; approved keys: purpose, sdk"
    )
    assert input_value(page, "new-label-key") == "rack"
    assert await snapshot(site) == before
    admin: Browser = await browser(ADMIN)
    status, _ = await admin.post(f"{EDITOR}/labels", {"key": "rack", "value": "r1"}, csrf_from=EDITOR)
    assert status == 200  # admins may use any key


async def test_implicit_labels_are_read_only_and_marked_implicit(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    _, page = await octocat.get(EDITOR)
    implicit = re.search(r'<table class="labels implicit">(.*?)</table>', page, re.S)
    assert implicit
    rows = re.findall(
        r'<span class="label implicit">([^<]+)</span></td><td><code>([^<]+)</code></td>'
        r'<td class="source">implicit, read-only</td>',
        implicit[1],
    )
    assert rows == [
        ("kerrigan.pool_id", POOL),
        ("kerrigan.pool_name", "sdk-2-2-som"),
        ("kerrigan.firmware_channel", "ga"),
        ("kerrigan.firmware_base_version", "2.2.0"),
    ]
    assert not [action for action in post_forms(page) if "kerrigan." in action]


async def test_an_owner_sees_label_and_tag_forms_but_not_firmware_or_owners(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    _, page = await octocat.get(EDITOR)
    forms = post_forms(page)
    assert f"{EDITOR}/labels" in forms
    assert f"{EDITOR}/labels/sdk" in forms
    assert f"{EDITOR}/labels/sdk/delete" in forms
    assert f"{EDITOR}/tags" in forms
    assert f"{EDITOR}/tags/ga-firmware/delete" in forms
    assert f"{EDITOR}/firmware" not in forms
    assert f"{EDITOR}/owners" not in forms
    before = await snapshot(site)
    status, page = await octocat.post(
        f"{EDITOR}/firmware", {"channel": "beta", "base_version": "9"}, csrf_from=EDITOR
    )
    assert status == 403
    assert "may not change firmware of pool sdk-2-2-som: owners edit only labels, tags and the health" in page
    assert f"{EDITOR}/health-check/edit" in forms
    status, _ = await octocat.post(f"{EDITOR}/owners", {"owners": "octocat, mallory"}, csrf_from=EDITOR)
    assert status == 403
    assert await snapshot(site) == before


# -- the editor: others --------------------------------------------------------------------------------

FORGED_POSTS = [
    ("labels", {"key": "owner_team", "value": "x"}),
    ("labels/sdk", {"value": "9.9.9"}),
    ("labels/sdk/delete", {}),
    ("tags", {"tag": "mine"}),
    ("tags/ga-firmware/delete", {}),
    ("firmware", {"channel": "beta", "base_version": "9"}),
    ("owners", {"owners": "hubot"}),
]


@pytest.mark.parametrize("login", [OTHER_OWNER, READER])
async def test_a_user_who_may_not_edit_sees_no_forms_and_a_forged_post_is_refused(
    site: Site, browser: Callable[..., Any], login: str
) -> None:
    user: Browser = await browser(login)
    status, page = await user.get(EDITOR)
    assert status == 200
    assert post_forms(page) == []
    assert "You can read this pool." in page
    before = await snapshot(site)
    for path, form in FORGED_POSTS:
        status, page = await user.post(f"{EDITOR}/{path}", dict(form), csrf_from=EDITOR)
        assert status == 403, path
        assert f"{login} may not" in page, path
    assert await snapshot(site) == before


async def test_the_other_owner_edits_their_own_pool(site: Site, browser: Callable[..., Any]) -> None:
    hubot: Browser = await browser(OTHER_OWNER)
    _, page = await hubot.get("/pools/sdk-2-1-som")
    assert "/pools/sdk-2-1-som/labels" in post_forms(page)


async def test_a_post_without_this_sessions_csrf_token_is_refused(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    before = await snapshot(site)
    status, page = await octocat.post(f"{EDITOR}/labels", {"key": "a", "value": "b", "csrf": "forged"})
    assert status == 403
    assert "the form is stale or was not sent from this site" in page
    assert await snapshot(site) == before


async def test_an_unknown_pool_is_a_404_page(site: Site, browser: Callable[..., Any]) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.get("/pools/no-such-pool")
    assert status == 404
    assert "no pool &#39;no-such-pool&#39;" in page


# -- the editor: admins ----------------------------------------------------------------------------


async def test_an_admin_edits_the_firmware_policy_and_the_implicit_labels_follow(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    _, page = await admin.get(EDITOR)
    assert {f"{EDITOR}/firmware", f"{EDITOR}/owners", f"{EDITOR}/labels"} <= set(post_forms(page))
    status, page = await admin.post(
        f"{EDITOR}/firmware", {"channel": "beta", "base_version": "2.3.0"}, csrf_from=EDITOR
    )
    assert status == 200
    assert '<span class="label implicit">kerrigan.firmware_channel</span></td><td><code>beta</code>' in page
    assert input_value(page, "firmware-base-version") == "2.3.0"
    status, page = await admin.post(
        f"{EDITOR}/firmware", {"channel": "", "base_version": "2.3.0"}, csrf_from=EDITOR
    )
    assert status == 200
    assert "kerrigan.firmware_channel" not in page.split('id="implicit"')[1].split("</table>")[0]
    async with site.database.sessions() as session:
        stored = await get_pool(session, POOL)
        audit = await list_audit(session, pool_id=POOL, actor=ADMIN)
    assert (stored.pool.firmware.channel, stored.pool.firmware.base_version) == (None, "2.3.0")
    assert {e.field for e in audit} == {"firmware.channel", "firmware.base_version"}


async def test_an_admin_edits_the_owners_and_a_new_owner_gets_the_forms(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    status, page = await admin.post(f"{EDITOR}/owners", {"owners": "octocat,  hubot"}, csrf_from=EDITOR)
    assert status == 200
    assert input_value(page, "owners-input") == "octocat, hubot"
    hubot: Browser = await browser(OTHER_OWNER)
    _, page = await hubot.get(EDITOR)
    assert f"{EDITOR}/labels" in post_forms(page)
    assert f"{EDITOR}/owners" not in post_forms(page)


@pytest.mark.parametrize(
    ("path", "form", "error_id", "rule", "kept"),
    [
        (
            "owners",
            {"owners": "octocat, not_a login!"},
            "error-owners-owners",
            "'not_a' is not a GitHub login",
            ("owners-input", "octocat, not_a login!"),
        ),
        (
            "firmware",
            {"channel": "c" * 64, "base_version": "2.2.0"},
            "error-firmware-channel",
            "value of label 'firmware channel' is 64 characters long; the limit is 63",
            ("firmware-channel", "c" * 64),
        ),
        (
            "firmware",
            {"channel": "ga", "base_version": "2.2\x010"},
            "error-firmware-base_version",
            "value of label 'firmware base_version' '2.2\\x010' contains a non-printable character",
            ("firmware-base-version", "2.2\x010"),
        ),
    ],
)
async def test_an_admins_broken_rule_is_shown_next_to_the_field_and_changes_nothing(
    site: Site,
    browser: Callable[..., Any],
    path: str,
    form: dict[str, str],
    error_id: str,
    rule: str,
    kept: tuple[str, str],
) -> None:
    admin: Browser = await browser(ADMIN)
    before = await snapshot(site)
    status, page = await admin.post(f"{EDITOR}/{path}", dict(form), csrf_from=EDITOR)
    assert status == 400
    assert field_error(page, error_id) == rule
    assert input_value(page, kept[0]) == kept[1]
    assert await snapshot(site) == before


# -- in a real browser -------------------------------------------------------------------------------


@needs_chromium
@on_sqlite_only
async def test_in_a_browser_an_owner_adds_a_label_is_refused_a_reserved_key_and_sees_the_label_on_a_device(
    site: Site, tab: Callable[..., Any]
) -> None:
    octocat = await tab(OWNER)
    page = await octocat.open(EDITOR)
    await page.get_by_label("Key", exact=True).fill("bench")
    await page.get_by_label("Value", exact=True).fill("3")
    await page.get_by_role("button", name="Add label").click()
    await page.wait_for_url(f"{site.base}{EDITOR}")
    assert await page.get_by_label("value of bench").input_value() == "3"
    await octocat.shoot("pool-editor-label-added")
    await page.get_by_label("Key", exact=True).fill("kerrigan.board")
    await page.get_by_label("Value", exact=True).fill("modalix")
    await page.get_by_role("button", name="Add label").click()
    error = page.locator("#error-label-add-key")
    assert "uses the reserved prefix 'kerrigan.'" in await error.inner_text()
    assert await page.get_by_label("Key", exact=True).input_value() == "kerrigan.board"
    await octocat.shoot("pool-editor-reserved-key")
    page = await octocat.open("/devices/modalix-bluebox")
    row = page.locator("#effective-labels tr", has_text="bench")
    assert " ".join((await row.inner_text()).split()) == "bench 3 pool"
    assert await page.get_by_text("Device labels refine pool labels.").is_visible()
    await octocat.shoot("device-effective-labels")


@needs_chromium
@on_sqlite_only
async def test_in_a_browser_another_owner_finds_no_controls_and_a_forged_post_is_refused(
    site: Site, tab: Callable[..., Any]
) -> None:
    hubot = await tab(OTHER_OWNER)
    page = await hubot.open(EDITOR)
    assert await page.locator('form[method="post"]:not([action="/logout"])').count() == 0
    assert await page.get_by_role("button", name="Add label").count() == 0
    await hubot.shoot("pool-editor-other-owner")
    token = await page.locator('form[action="/logout"] input[name="csrf"]').get_attribute("value")
    assert token
    before = await snapshot(site)
    response = await page.request.post(
        f"{site.base}{EDITOR}/labels", form={"csrf": token, "key": "owner_team", "value": "mine"}
    )
    assert response.status == 403
    assert "hubot may not edit pool sdk-2-2-som" in await response.text()
    assert await snapshot(site) == before
