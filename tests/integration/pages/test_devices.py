"""The device page: labels by origin with the refinement note, editable device labels and tags, and the state
with its history from the audit log.

``davinci-old-01`` (pool sdk-2-1-som, hubot's) overrides its pool's ``sdk=2.1.1`` with ``sdk=2.1.0``;
``modalix-bluebox`` (pool sdk-2-2-som, octocat's) adds ``uart=enabled`` and the tag ``uart-debug``;
``modalix-greenbox`` was stored in maintenance, "reflashing the bootloader".
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from kerrigan.store.audit import list_audit
from kerrigan.store.inventory import get_device
from kerrigan.testing.clock import FakeClock
from tests.integration.pages.conftest import ADMIN, OTHER_OWNER, OWNER, READER, Browser, Site
from tests.integration.pages.test_pools import field_error, input_value, post_forms, snapshot

BLUEBOX = "/devices/modalix-bluebox"  # in octocat's pool
GREENBOX = "/devices/modalix-greenbox"

_EFFECTIVE_ROW = re.compile(
    r'<span class="label(?: implicit)?">([^<]+)</span></td>\s*<td><code>([^<]+)</code></td>\s*'
    r'<td class="source" data-source="([^"]+)">(.*?)</td>',
    re.S,
)


def effective_labels(page: str) -> dict[str, tuple[str, str, str]]:
    """The effective-labels table: key -> (value, source, what the source cell says)."""
    table = re.search(r'<table class="labels effective" id="effective-labels">(.*?)</table>', page, re.S)
    assert table, "no effective labels"
    return {
        key: (html.unescape(value), source, re.sub(r"<[^>]+>", "", html.unescape(said)))
        for key, value, source, said in _EFFECTIVE_ROW.findall(table[1])
    }


def history(page: str) -> list[list[str]]:
    """The state history table's rows, as the text of their cells."""
    table = re.search(r'<table class="history">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert table, "no state history"
    rows = re.findall(r"<tr>(.*?)</tr>", table[1], re.S)
    return [
        [
            " ".join(html.unescape(re.sub(r"<[^>]+>", "", cell)).split())
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in rows
    ]


async def test_the_device_page_shows_effective_labels_with_their_sources_and_the_refinement_note(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.get("/devices/davinci-old-01")
    assert status == 200
    assert "Device labels refine pool labels." in page
    labels = effective_labels(page)
    assert labels == {
        "form_factor": ("som", "pool", "pool"),
        "purpose": ("ci", "pool", "pool"),
        "sdk": ("2.1.0", "device override", "device override (pool had 2.1.1)"),
        "kerrigan.pool_id": ("sdk-2-1-som", "implicit", "implicit"),
        "kerrigan.pool_name": ("sdk-2-1-som", "implicit", "implicit"),
        "kerrigan.firmware_channel": ("ga", "implicit", "implicit"),
        "kerrigan.firmware_base_version": ("2.1.1", "implicit", "implicit"),
        "kerrigan.target_id": ("davinci-old-01", "implicit", "implicit"),
        "kerrigan.board": ("davinci", "implicit", "implicit"),
        "kerrigan.target_type": ("devkit", "implicit", "implicit"),
        "kerrigan.os_type": ("rtos", "implicit", "implicit"),
        "kerrigan.host": ("lab-b-01", "implicit", "implicit"),
    }
    assert '<span class="label implicit">kerrigan.board</span>' in page
    explicit = re.search(r'<tr id="label-sdk">(.*?)</tr>', page, re.S)
    assert explicit
    assert "overrides the pool's <code>2.1.1</code>" in explicit[1]


async def test_an_owner_edits_device_labels_and_sees_them_take_effect(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(
        f"{BLUEBOX}/labels", {"key": "sdk", "value": "2.2.1"}, csrf_from=BLUEBOX
    )
    assert status == 200
    assert effective_labels(page)["sdk"] == ("2.2.1", "device override", "device override (pool had 2.2.0)")
    assert effective_labels(page)["uart"] == ("enabled", "device", "device")
    status, page = await octocat.post(f"{BLUEBOX}/labels/sdk/delete", {}, csrf_from=BLUEBOX)
    assert status == 200
    assert effective_labels(page)["sdk"] == ("2.2.0", "pool", "pool")  # the pool's value applies again
    status, page = await octocat.post(f"{BLUEBOX}/labels/uart", {"value": "disabled"}, csrf_from=BLUEBOX)
    assert status == 200
    assert effective_labels(page)["uart"] == ("disabled", "device", "device")
    async with site.database.sessions() as session:
        audit = await list_audit(session, device_id="modalix-bluebox")
    assert [(e.actor, e.field, e.before, e.after) for e in audit[:3]] == [
        (OWNER, "labels.uart", "enabled", "disabled"),
        (OWNER, "labels.sdk", "2.2.1", None),
        (OWNER, "labels.sdk", None, "2.2.1"),
    ]


async def test_an_owner_adds_and_removes_device_tags_and_the_pools_stay(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(f"{BLUEBOX}/tags", {"tag": "bench-3"}, csrf_from=BLUEBOX)
    assert status == 200
    assert f"{BLUEBOX}/tags/bench-3/delete" in post_forms(page)
    assert "/pools/sdk-2-2-som/tags/ga-firmware/delete" not in post_forms(page)  # the pool's, read-only here
    status, _ = await octocat.post(f"{BLUEBOX}/tags/uart-debug/delete", {}, csrf_from=BLUEBOX)
    assert status == 200
    async with site.database.sessions() as session:
        stored = await get_device(session, "modalix-bluebox")
    assert stored.device.tags == {"bench-3"}
    assert stored.pool.tags == {"2.2.0-som-devkits", "ga-firmware"}


@pytest.mark.parametrize(
    ("path", "form", "error_id", "rule"),
    [
        (
            "labels",
            {"key": "kerrigan.pool_id", "value": "default"},
            "error-label-add-key",
            "label key 'kerrigan.pool_id' uses the reserved prefix 'kerrigan.'; "
            "Kerrigan generates those labels and they cannot be set by hand",
        ),
        (
            "labels/uart",
            {"value": "x" * 64},
            "error-label-uart-value",
            "value of label 'uart' is 64 characters long; the limit is 63",
        ),
        (
            "tags",
            {"tag": "uart/debug"},
            "error-tag-add-tag",
            "tag 'uart/debug' contains '/'; only lowercase letters, digits, '.', '_' and '-' are allowed",
        ),
    ],
)
async def test_a_broken_rule_on_a_device_is_shown_next_to_its_field_and_changes_nothing(
    site: Site, browser: Callable[..., Any], path: str, form: dict[str, str], error_id: str, rule: str
) -> None:
    octocat: Browser = await browser(OWNER)
    before = await snapshot(site)
    status, page = await octocat.post(f"{BLUEBOX}/{path}", dict(form), csrf_from=BLUEBOX)
    assert status == 400
    assert field_error(page, error_id) == rule
    assert await snapshot(site) == before


async def test_the_reserved_key_keeps_what_was_typed(site: Site, browser: Callable[..., Any]) -> None:
    octocat: Browser = await browser(OWNER)
    _, page = await octocat.post(
        f"{BLUEBOX}/labels", {"key": "kerrigan.board", "value": "davinci"}, csrf_from=BLUEBOX
    )
    assert input_value(page, "new-label-key") == "kerrigan.board"
    assert input_value(page, "new-label-value") == "davinci"


FORGED_POSTS = [
    ("labels", {"key": "rack", "value": "r1"}),
    ("labels/uart", {"value": "off"}),
    ("labels/uart/delete", {}),
    ("tags", {"tag": "mine"}),
    ("tags/uart-debug/delete", {}),
    ("state", {"state": "offline", "reason": "mine now"}),
]


@pytest.mark.parametrize("login", [OTHER_OWNER, READER])
async def test_a_user_who_may_not_edit_the_device_sees_no_forms_and_a_forged_post_is_refused(
    site: Site, browser: Callable[..., Any], login: str
) -> None:
    user: Browser = await browser(login)
    status, page = await user.get(BLUEBOX)
    assert status == 200
    assert post_forms(page) == [f"{BLUEBOX}/reserve"]  # anyone signed in may reserve a board; no more
    before = await snapshot(site)
    for path, form in FORGED_POSTS:
        status, page = await user.post(f"{BLUEBOX}/{path}", dict(form), csrf_from=BLUEBOX)
        assert status == 403, path
        assert f"{login} may not" in page, path
    assert await snapshot(site) == before


async def test_an_owner_puts_a_board_into_maintenance_until_a_time_but_cannot_retire_it(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    octocat: Browser = await browser(OWNER)
    _, page = await octocat.get(BLUEBOX)
    assert f"{BLUEBOX}/state" in post_forms(page)
    options = re.findall(
        r'<option value="([a-z]+)"', page.split('id="state-select"')[1].split("</select>")[0]
    )
    assert options == ["available", "maintenance"]
    before = await snapshot(site)
    status, page = await octocat.post(
        f"{BLUEBOX}/state", {"state": "retired", "reason": "dead UART", "until": ""}, csrf_from=BLUEBOX
    )
    assert status == 403
    assert "only System Admins may" in page
    status, page = await octocat.post(
        f"{BLUEBOX}/state",
        {"state": "maintenance", "reason": "reflashing", "until": "2020-01-01T00:00:00Z"},
        csrf_from=BLUEBOX,
    )
    assert status == 400
    assert "is not in the future" in (field_error(page, "error-state-until") or "")
    assert await snapshot(site) == before
    until = (clock() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, page = await octocat.post(
        f"{BLUEBOX}/state",
        {"state": "maintenance", "reason": "reflashing", "until": until},
        csrf_from=BLUEBOX,
    )
    assert status == 200
    async with site.database.sessions() as session:
        stored = await get_device(session, "modalix-bluebox")
    note = stored.device.state_note
    assert (stored.device.state.value, note.reason, note.by, note.until) == (
        "maintenance",
        "reflashing",
        "octocat",
        (clock() + timedelta(hours=2)).replace(microsecond=0),
    )


async def test_the_state_its_reason_and_the_state_history_from_the_audit_log(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    admin: Browser = await browser(ADMIN)
    _, page = await admin.get(GREENBOX)
    assert history(page) == [
        ["2026-11-29 12:00:00 UTC", "test", "created maintenance", "reflashing the bootloader"]
    ]
    clock.advance(3600)
    status, page = await admin.post(
        f"{GREENBOX}/state", {"state": "available", "reason": ""}, csrf_from=GREENBOX
    )
    assert status == 200
    assert "Device modalix-greenbox is now available." in page
    clock.advance(60)
    await admin.post(
        f"{GREENBOX}/state", {"state": "available", "reason": "back in rack 3"}, csrf_from=GREENBOX
    )
    clock.advance(60)
    await admin.post(f"{GREENBOX}/labels", {"key": "rack", "value": "3"}, csrf_from=GREENBOX)  # not a state
    clock.advance(60)
    status, page = await admin.post(
        f"{GREENBOX}/state", {"state": "offline", "reason": "lab power work"}, csrf_from=GREENBOX
    )
    assert status == 200
    assert '<h1>modalix-greenbox <span class="state-offline">offline</span></h1>' in page
    assert re.search(r"<dt>Reason</dt><dd>lab power work</dd>", page)
    assert re.search(
        rf'<dt>Since</dt><dd>2026-11-29 13:03:00 UTC <span class="muted">by</span> {ADMIN}</dd>', page
    )
    assert history(page) == [
        ["2026-11-29 13:03:00 UTC", ADMIN, "available → offline", "lab power work"],
        ["2026-11-29 13:01:00 UTC", ADMIN, "available (reason changed)", "back in rack 3"],
        ["2026-11-29 13:00:00 UTC", ADMIN, "maintenance → available", "none given"],
        ["2026-11-29 12:00:00 UTC", "test", "created maintenance", "reflashing the bootloader"],
    ]


async def test_an_unknown_state_is_shown_next_to_the_state_field(
    site: Site, browser: Callable[..., Any]
) -> None:
    admin: Browser = await browser(ADMIN)
    before = await snapshot(site)
    status, page = await admin.post(
        f"{GREENBOX}/state", {"state": "broken", "reason": "x"}, csrf_from=GREENBOX
    )
    assert status == 400
    assert (
        field_error(page, "error-state-state")
        == "state must be one of available, maintenance, offline, retired"
    )
    assert input_value(page, "state-reason") == "x"
    assert await snapshot(site) == before


async def test_an_unknown_device_is_a_404_page(site: Site, browser: Callable[..., Any]) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.get("/devices/no-such-device")
    assert status == 404
    assert "no device &#39;no-such-device&#39;" in page
