"""Secrets through the harness and real agents: handed to a job at acceptance, in its environment, masked in
its output (also when a value is printed in two pieces), nowhere on GitHub, in the store or on the runner
host after the job; a secret named but not set fails the job before it starts, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.installations import add_repositories, find_repository, upsert_installation
from kerrigan.store.models import JobLogRow
from kerrigan.store.secrets import Keyring, delete_secret, set_secret
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import REPO, Harness, StartApp, settings_for
from tests.integration.github.test_runner_agent import AgentFactory, completed, job_rows, start_both
from tests.integration.github.test_runner_agent import agents as agents  # noqa: PLC0414 -- a fixture

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
        installation = await upsert_installation(session, 77, "octo", lab_db.clock())
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
