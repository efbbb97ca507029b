"""``/explain``: a pasted manifest resolved against the stored lab by ``kerrigan explain``'s engine."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from kerrigan.core.explain import explain, explanation_json
from kerrigan.core.manifest import parse_manifest
from kerrigan.store.inventory import load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.web.api.explain import DEFAULT_PATH
from kerrigan.web.pages import explain as explain_page
from tests.integration.github.conftest import INSTALLATION, MANIFESTS
from tests.integration.held_calls import HeldCalls
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import device_links, rows, table, text

Open = Callable[..., Any]


def manifest(name: str) -> str:
    return (MANIFESTS / name).read_text(encoding="utf-8")


async def explained(site: Site, browser: Open, text_: str, **fields: str) -> tuple[int, str]:
    reader = await browser(READER)
    return await reader.post("/explain", {"manifest": text_, **fields})


async def test_a_typo_gets_did_you_mean_hints_on_its_lines(site: Site, browser: Open) -> None:
    status, page = await explained(site, browser, manifest("typo.yml"))

    assert status == 200
    words = text(page)
    assert "unschedulable: no device can ever match" in words
    assert "0/12 devices available: 12 form-factor missing, 12 tag uart-debgu missing" in words
    # Every pool admits the task and none has a device for it: shown apart, not as "0 eligible".
    assert (
        "Eligible pools none: no device matches in any pool No device matches in default , sdk-2-1-som , "
        "sdk-2-2-pcie , sdk-2-2-som (they admit the task; every device of theirs fails it)"
    ) in words
    assert "(0 eligible)" not in words
    assert (
        "line 6 , scheduling.labels.form-factor : no device has the label 'form-factor'; "
        "did you mean 'form_factor'?"
    ) in words
    assert (
        "line 7 , scheduling.tags[0] : no device has the tag 'uart-debgu'; did you mean 'uart-debug'?"
        in words
    )
    assert "Nearest misses" in words
    # The pasted manifest, line by line: the hinted lines are marked and carry their advice.
    line_6 = re.search(r'<li id="L6" class="hinted">(.*?)</li>', page, re.S)
    assert line_6
    assert "form-factor: som" in line_6[1]
    assert "did you mean &#39;form_factor&#39;?" in line_6[1]
    assert '<a href="#L6">line 6</a>' in page
    assert 'id="L5">' in page  # an unmarked line


async def test_manifest_errors_are_listed_with_their_lines_and_nothing_is_resolved(
    site: Site, browser: Open
) -> None:
    text_ = manifest("invalid.yml")
    expected = parse_manifest(text_, DEFAULT_PATH)

    status, page = await explained(site, browser, text_)

    assert status == 200
    assert f"The manifest has {len(expected.errors)} errors: nothing was resolved." in text(page)
    shown = rows(page.split('class="problems error"', 1)[1].split("</table>", 1)[0])
    assert len(shown) == len(expected.errors) > 3
    for problem, row in zip(expected.errors, shown, strict=True):
        assert row.startswith(f"{DEFAULT_PATH} {problem.line} {problem.column} {problem.field}")
        assert " ".join(problem.message.split()) in row
        assert re.search(rf'<li id="L{problem.line}" class="problem">', page)
    warnings = rows(page.split('class="problems warning"', 1)[1].split("</table>", 1)[0])
    assert [row.split()[1] for row in warnings] == [str(w.line) for w in expected.warnings]
    assert 'class="task"' not in page


async def test_the_answer_is_the_engines_against_the_stored_inventory(site: Site, browser: Open) -> None:
    text_ = manifest("task-refinement.yml")
    async with site.database.sessions() as db:
        inventory = await load_inventory(db)
        descriptions = await label_keys(db)
    document = explanation_json(explain(parse_manifest(text_, DEFAULT_PATH), inventory), descriptions)

    status, page = await explained(site, browser, text_)

    assert status == 200
    words = text(page)
    tasks = document["tasks"]
    assert isinstance(tasks, list)
    assert len(tasks) == 3
    for index, task in enumerate(tasks, start=1):
        assert task["summary"] in words
        rejected = table(page, f"rejected-{index}")
        assert device_links(rejected) == [verdict["device"] for verdict in task["rejected_devices"]]
        for device in task["selected"]:
            found = inventory.devices_by_id[device]
            assert (
                f"Selected {device} (pool {found.pool_id} , host {found.host} , board {found.board} )"
                in words
            )


async def test_the_filter_keeps_the_rejected_devices_that_match(site: Site, browser: Open) -> None:
    _, page = await explained(site, browser, manifest("typo.yml"), q="maintenance")
    assert device_links(table(page, "rejected-1")) == ["modalix-greenbox"]
    assert "Showing 1 of 12 rejected devices" in text(page)


async def test_the_repository_list_and_the_newest_session_of_the_workflow(site: Site, browser: Open) -> None:
    ran = builders.session("44444444-4444-4444-4444-444444444444", (), repository="octo/lab-tools")
    site.github.add_repository("octo/lab-tools", INSTALLATION, private=False)  # anyone may read it
    async with site.database.sessions() as db, db.begin():
        await create_session(db, ran, site.database.clock())
    reader = await browser(READER)

    _, form = await reader.get("/explain")
    assert '<option value="octo/lab-tools">octo/lab-tools</option>' in form

    status, page = await reader.post(
        "/explain",
        {
            "manifest": "name: w\non: [push]\ntasks:\n  - id: a\n    run: ./a.sh\n",
            "repository": "octo/lab-tools",
        },
    )
    assert status == 200
    assert '<a href="/sessions/44444444-4444-4444-4444-444444444444">' in page
    assert '<option value="octo/lab-tools" selected>' in page

    status, page = await reader.post(
        "/explain", {"manifest": manifest("typo.yml"), "repository": "evil/repo"}
    )
    assert status == 400
    assert "Kerrigan does not know this repository" in page
    assert 'class="task"' not in page


async def test_anonymous_users_are_sent_to_sign_in_and_their_posts_do_nothing(
    site: Site, browser: Open
) -> None:
    anonymous = await browser()
    async with anonymous.http.get(f"{site.base}/explain", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == "/login?next=/explain"
    async with anonymous.http.post(
        f"{site.base}/explain", data={"manifest": manifest("typo.yml")}, allow_redirects=False
    ) as response:
        assert response.status == 302
        assert response.headers["Location"].startswith("/login")


async def test_a_post_without_this_sessions_csrf_token_is_refused(site: Site, browser: Open) -> None:
    reader = await browser(READER)
    for forged in ({}, {"csrf": "forged"}):
        async with reader.http.post(
            f"{site.base}/explain", data={"manifest": manifest("typo.yml"), **forged}
        ) as response:
            assert response.status == 403
            page = await response.text()
        assert "the form is stale or was not sent from this site" in page
        assert "did you mean" not in page


async def test_the_chosen_repository_is_held_against_the_pools_repositories(
    site: Site, browser: Open
) -> None:
    import dataclasses

    from kerrigan.core.inventory_diff import diff_inventories
    from kerrigan.store.audit import Change
    from kerrigan.store.inventory import apply_diff

    ran = builders.session("55555555-5555-5555-5555-555555555555", (), repository="octo/lab-tools")
    site.github.add_repository("octo/lab-tools", INSTALLATION)
    site.github.set_permission("octo/lab-tools", READER, "triage")  # reads it on GitHub
    async with site.database.sessions() as db, db.begin():
        await create_session(db, ran, site.database.clock())
        before = await load_inventory(db)
        pools = tuple(dataclasses.replace(pool, repositories=("octo-lab/*",)) for pool in before.pools)
        after = dataclasses.replace(before, pools=pools)
        await apply_diff(db, after, diff_inventories(before, after), Change("t", site.database.clock()))
    reader = await browser(READER)
    text_ = manifest("task-refinement.yml")

    _, page = await reader.post("/explain", {"manifest": text_, "repository": "octo/lab-tools"})
    assert "repository octo/lab-tools may not use pool" in text(page)

    _, unchecked = await reader.post("/explain", {"manifest": text_})
    assert "may not use pool" not in text(unchecked)


GANG = """\
name: pair
on: {push: {}}
tasks:
  - id: pair
    run: ./pair.sh
    devices:
      dut: {labels: {kerrigan.board: modalix}}
      peer: {labels: {kerrigan.board: davinci}}
  - id: split
    run: ./pair.sh
    devices:
      dut: {labels: {kerrigan.board: modalix, sdk: "2.2.0", form_factor: som}}
      peer: {labels: {kerrigan.board: davinci}}
"""


async def test_a_gang_shows_each_roles_verdict_and_whether_one_host_holds_them_all(
    site: Site, browser: Open
) -> None:
    status, page = await explained(site, browser, GANG)

    assert status == 200
    words = text(page)
    assert "A gang: 2 devices at once, all on one runner host." in words
    assert "Runner hosts with a device for every role: lab-b-01 ." in words
    assert "Role dut ready: waiting for dispatch" in words
    assert "Role peer ready: waiting for dispatch" in words
    assert "modalix-old-02" in device_links(page)
    # split: every role matches somewhere, never on one host.
    assert "unschedulable: gang: no runner host holds a device for every role" in words
    assert "gang: no runner host holds a device for every role (never)" in words
    assert "role dut: 2/12 devices available" in words


async def test_the_page_parses_and_resolves_off_the_event_loop_which_answers_meanwhile(
    site: Site, browser: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing = HeldCalls(explain_page.parse_manifest)
    resolving = HeldCalls(explain_page.explain)
    monkeypatch.setattr(explain_page, "parse_manifest", parsing)
    monkeypatch.setattr(explain_page, "explain", resolving)
    reader = await browser(READER)
    posted = asyncio.ensure_future(reader.post("/explain", {"manifest": manifest("hil-smoke.yml")}))
    for held in (parsing, resolving):
        await held.entered()
        status, _ = await reader.get("/readyz")  # answered while the call is held
        assert status == 200
        held.release()
    status, page = await posted
    assert status == 200
    assert "hil-smoke" in text(page)
    assert parsing.threads
    assert resolving.threads
    assert not parsing.on_the_loop
    assert not resolving.on_the_loop
