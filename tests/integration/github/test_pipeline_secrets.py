"""Secrets through the harness and real agents: handed to a job at acceptance, in its environment, masked in
its output (also when a value is printed in two pieces), nowhere on GitHub, in the store or on the runner
host after the job; a secret named but not set fails the job before it starts, naming it."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Final

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.installations import add_repositories, find_repository, upsert_installation
from kerrigan.store.models import JobLogRow, JobResultRow
from kerrigan.store.secrets import Keyring, delete_secret, set_secret
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import (
    INSTALLATION,
    REPO,
    Harness,
    StartApp,
    push_payload,
    settings_for,
)
from tests.integration.runner.agents import AgentFactory, completed, job_rows, start_both

KEY: Final = Fernet.generate_key().decode()
VALUE: Final = "vpn-key-5f2b9c1e7d3a"
MANIFEST: Final = """\
name: secret
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: vpn
    run: ./scripts/vpn.sh
    vcpus: 1
    secrets: [lab_vpn_key]
    results: "results/*.xml"
"""
# The whole value once, then in two writes a moment apart (two pages of output, likely), then its length.
VPN: Final = """\
#!/bin/sh
echo "whole: $LAB_VPN_KEY"
printf 'split: %s' "$(printf '%s' "$LAB_VPN_KEY" | cut -c1-8)"
sleep 0.4
printf '%s\\n' "$(printf '%s' "$LAB_VPN_KEY" | cut -c9-)"
echo "length: ${#LAB_VPN_KEY}"
mkdir -p results
cat > results/vpn.xml <<XML
<testsuite><testcase classname="tests.test_vpn" name="test_login">
<failure message="key $LAB_VPN_KEY refused">tests/test_vpn.py:7: key $LAB_VPN_KEY refused</failure>
</testcase></testsuite>
XML
"""


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, start_app: StartApp) -> Harness:
    """The harness with KERRIGAN_SECRETS_KEY set and octo/firmware installed."""
    client = await start_app(settings_for(lab_db, github, secrets_keys=(KEY,)))
    async with lab_db.sessions() as session, session.begin():
        installation = await upsert_installation(session, INSTALLATION, "octo", lab_db.clock())
        await add_repositories(session, installation, [(4242, REPO)])
    return Harness(client, github, lab_db)


async def set_vpn_key(harness: Harness) -> None:
    database = harness.database
    async with database.sessions() as session, session.begin():
        repository = await find_repository(session, REPO)
        await set_secret(
            session,
            Keyring((KEY,)),
            repository,
            "LAB_VPN_KEY",
            VALUE,
            change=Change("alice", database.clock()),
        )


def files_holding(folder: Path, text: str) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and text.encode() in path.read_bytes()]


async def test_a_secret_is_in_the_jobs_environment_and_masked_everywhere_it_could_show(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    await set_vpn_key(harness)
    await start_both(harness, agents)
    files = {".kerrigan/workflows/secret.yml": MANIFEST, "scripts/vpn.sh": VPN}
    [run] = await harness.push_commit(files)
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    async with harness.database.sessions() as session:
        stored = "".join((await session.scalars(select(JobLogRow.data).order_by(JobLogRow.seq))).all())
    assert "whole: ***" in stored
    assert "split: ***" in stored
    assert f"length: {len(VALUE)}" in stored  # the job had the whole value
    for piece in (VALUE, VALUE[:8] + VALUE[8:]):
        assert piece not in stored
    assert VALUE not in str(final)  # also not in the results table nor the failure's annotation
    [annotation] = final["output"]["annotations"]
    assert annotation["message"] == "key *** refused"
    assert VALUE[8:] not in stored  # not even the second half of the split write
    # Nothing of it left on the runner hosts but what the job itself wrote into its workspace.
    assert [path for path in files_holding(tmp_path, VALUE) if "workspaces" not in path.parts] == []
    page = await (await harness.client.get(f"/api/v1/jobs/{(await job_rows(harness))[0].pk}/output")).text()
    assert VALUE not in page


async def test_a_secret_named_but_not_set_fails_the_push_at_once_on_its_line(harness: Harness) -> None:
    files = {".kerrigan/workflows/secret.yml": MANIFEST, "scripts/vpn.sh": VPN}
    [run] = await harness.push_commit(files)
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    [annotation] = [a for a in final["output"]["annotations"] if a["annotation_level"] == "failure"]
    assert (annotation["path"], annotation["start_line"]) == (".kerrigan/workflows/secret.yml", 9)
    assert annotation["message"].startswith(
        "tasks[0].secrets[0]: secret LAB_VPN_KEY is not set for octo/firmware: a repository admin or writer "
        "sets it with `kerrigan secrets set octo/firmware LAB_VPN_KEY`"
    )
    assert await job_rows(harness) == [], "no job was made, so no board was leased"


async def test_a_secret_deleted_after_the_push_still_fails_the_job_before_it_starts_naming_it(
    harness: Harness, agents: AgentFactory
) -> None:
    await set_vpn_key(harness)
    files = {".kerrigan/workflows/secret.yml": MANIFEST, "scripts/vpn.sh": VPN}
    [run] = await harness.push_commit(files)
    database = harness.database
    async with database.sessions() as session, session.begin():  # deleted between the push and the accept
        await delete_secret(
            session, await find_repository(session, REPO), "LAB_VPN_KEY", Change("alice", database.clock())
        )
    await start_both(harness, agents)
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    [row] = await job_rows(harness)
    assert (row.state, row.reason, row.started_at) == ("refused_before_start", "secret_missing", None)
    assert (
        row.detail
        == "secret LAB_VPN_KEY is not set for octo/firmware: `kerrigan secrets set octo/firmware LAB_VPN_KEY`"
    )
    assert "secret LAB_VPN_KEY is not set" in final["output"]["summary"]


PASS: Final = "pa'ss\"w<rd>&42"  # a test's secret, with every character XML escapes
ENCODED_MANIFEST: Final = MANIFEST.replace("secrets: [lab_vpn_key]", "secrets: [lab_vpn_key, lab_pass]")
# The values written as XML lets one write them: character references, split by CDATA sections and
# comments, the named entities (&apos; is one the agent's escaped forms do not cover).
ENCODED: Final = """\
#!/bin/sh
mkdir -p results
python3 - <<'PY'
import os
key, password = os.environ["LAB_VPN_KEY"], os.environ["LAB_PASS"]
half = len(key) // 2
decimal = "".join(f"&#{ord(c)};" for c in key)
hexadecimal = "".join(f"&#x{ord(c):x};" for c in key)
named = password.replace("&", "&amp;").replace("'", "&apos;").replace('"', "&quot;").replace("<", "&lt;")
named = named.replace(">", "&gt;")
text = f"<![CDATA[{key[:half]}]]><![CDATA[{key[half:]}]]> {key[:half]}<!-- -->{key[half:]} {named}"
with open("results/encoded.xml", "w") as results:
    results.write(
        f'<testsuite name="{decimal}"><testcase classname="{hexadecimal}" name="{decimal}">'
        f'<failure message="{named} {decimal}" type="{named}">{text}</failure>'
        f"<system-out>{text}</system-out><system-err>{named}</system-err></testcase>"
        f'<testcase name="t2"><skipped message="{hexadecimal}"/></testcase></testsuite>'
    )
PY
"""


def strings_in(value: Any) -> list[str]:
    """Every string in a JSON document, keys too."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(text for item in value.values() for text in strings_in(item))]
    if isinstance(value, list | tuple):
        return [text for item in value for text in strings_in(item)]
    return []


async def test_secrets_written_as_xml_encodes_them_are_masked_once_the_file_is_parsed(
    lab_db: Database, github: GitHubStandIn, start_app: StartApp, agents: AgentFactory
) -> None:
    github.repositories[REPO].private = False  # the page is read without signing in: a public repository's
    client = await start_app(settings_for(lab_db, github, secrets_keys=(KEY,), public_read=True))
    harness = Harness(client, github, lab_db)
    async with lab_db.sessions() as session, session.begin():
        installation = await upsert_installation(session, INSTALLATION, "octo", lab_db.clock())
        await add_repositories(session, installation, [(4242, REPO)])
        repository = await find_repository(session, REPO)
        for name, value in (("LAB_VPN_KEY", VALUE), ("LAB_PASS", PASS)):
            await set_secret(
                session, Keyring((KEY,)), repository, name, value, change=Change("alice", lab_db.clock())
            )
    await start_both(harness, agents)
    [run] = await harness.push_commit(
        {".kerrigan/workflows/secret.yml": ENCODED_MANIFEST, "scripts/vpn.sh": ENCODED}
    )
    await completed(harness, run)
    async with lab_db.sessions() as session:
        stored = (await session.scalars(select(JobResultRow.report))).all()
    sent = [request.body for request in github.requests if "check-runs" in request.path]
    [session] = await harness.sessions()
    answer = await client.get(f"/sessions/{session.id}")
    assert answer.status == 200
    page = html.unescape(await answer.text())
    for value in (VALUE, PASS):
        assert not [text for text in strings_in(stored) if value in text], "in job_results"
        assert not [text for text in strings_in(sent) if value in text], "sent to GitHub"
        assert value not in page, "on the session page"
    [report] = stored
    assert [case["n"] for case in report["cases"]] == ["***", "t2"]  # read, and masked
    assert report["cases"][0]["m"] == "*** ***"
    assert "*** *** ***" in report["cases"][0]["d"]


WAITS: Final = """\
#!/bin/sh
mkdir -p results
printf '<testsuite><testcase name="%s"><failure message="%s"/></testcase></testsuite>' \\
  "$LAB_VPN_KEY" "$LAB_VPN_KEY" > results/key.xml
while [ ! -e go ]; do sleep 0.1; done
"""


async def test_results_of_a_job_whose_secret_was_deleted_meanwhile_keep_counts_and_no_text(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    await set_vpn_key(harness)
    await start_both(harness, agents)
    github = harness.github
    github.add_commit(REPO, "b" * 40, {".kerrigan/workflows/secret.yml": MANIFEST, "scripts/vpn.sh": WAITS})
    assert await harness.deliver("push", push_payload("b" * 40)) == 202

    async def waiting() -> bool:
        return bool(list(tmp_path.glob("*/workspaces/*/results/key.xml")))

    await harness.wait_until(waiting)
    database = harness.database
    async with database.sessions() as session, session.begin():
        repository = await find_repository(session, REPO)
        await delete_secret(session, repository, "LAB_VPN_KEY", Change("alice", database.clock()))
    [results] = list(tmp_path.glob("*/workspaces/*/results/key.xml"))
    (results.parent.parent / "go").touch()
    await harness.settle()
    [run] = list(github.check_runs.values())
    await completed(harness, run)
    async with database.sessions() as session:
        [report] = (await session.scalars(select(JobResultRow.report))).all()
    assert report["counts"][:2] == [0, 1]
    assert report["cases"] == []
    assert report["problems"] == [
        [
            "the tests are counted, and none of their names or text kept: secret LAB_VPN_KEY of "
            "octo/firmware is no longer set, so the job's secrets could not be hidden in them",
            None,
            None,
        ]
    ]
    assert VALUE not in str(github.check_runs)
