"""A repository's writers manage its secrets through an API token: the server asks GitHub (the stand-in) for
the login's permission, as ``/kerrigan`` commands are checked."""

from __future__ import annotations

from cryptography.fernet import Fernet

from kerrigan.store.database import Database
from kerrigan.store.installations import find_repository
from kerrigan.store.tokens import create_token
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import REPO, Harness, StartApp, settings_for, webhook

VALUE = "vpn-key-of-the-lab-0123456789"


def _asked(github: GitHubStandIn, path_end: str) -> list[str]:
    return [r.path for r in github.requests if r.method == "GET" and r.path.endswith(path_end)]


async def test_a_writer_on_github_sets_a_secret_and_a_reader_is_refused(
    lab_db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    client = await start_app(settings_for(lab_db, github, secrets_keys=(Fernet.generate_key().decode(),)))
    harness = Harness(client, github, lab_db)
    # The App's installation on octo (its repositories among them): Kerrigan now knows the repository.
    assert await harness.deliver("installation", webhook("installation-created")) == 202
    await harness.settle()
    github.set_permission(REPO, "maintainer", "write")
    github.set_permission(REPO, "visitor", "read")
    async with lab_db.sessions() as session, session.begin():
        tokens = {
            login: await create_token(session, login, lab_db.clock()) for login in ("maintainer", "visitor")
        }

    def auth(login: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[login]}"}

    path = f"/api/v1/repositories/{REPO}/secrets/LAB_VPN_KEY"
    written = await client.put(path, json={"value": VALUE}, headers=auth("maintainer"))
    assert written.status == 201, await written.text()
    refused = await client.put(path, json={"value": VALUE}, headers=auth("visitor"))
    assert refused.status == 403
    assert "read" in (await refused.json())["error"]["message"]  # its role on GitHub, named
    listed = await client.get(f"/api/v1/repositories/{REPO}/secrets", headers=auth("maintainer"))
    assert [item["name"] for item in (await listed.json())["items"]] == ["LAB_VPN_KEY"]
    assert VALUE not in await listed.text()
    asked = harness.requests("GET", "/collaborators/maintainer/permission")
    assert asked  # GitHub was asked, as the installation


async def test_a_repository_of_an_installation_no_event_told_of_is_found_on_github_and_remembered(
    lab_db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    # No installation event was delivered: the App was installed before Kerrigan's database existed.
    client = await start_app(settings_for(lab_db, github, secrets_keys=(Fernet.generate_key().decode(),)))
    github.set_permission(REPO, "maintainer", "write")
    async with lab_db.sessions() as session, session.begin():
        token = await create_token(session, "maintainer", lab_db.clock())
    auth = {"Authorization": f"Bearer {token}"}
    written = await client.put(
        f"/api/v1/repositories/{REPO.upper()}/secrets/LAB_VPN_KEY", json={"value": VALUE}, headers=auth
    )
    assert written.status == 201, await written.text()
    assert [(r.method, r.path, r.status) for r in github.requests[:2]] == [
        ("GET", f"/repos/{REPO.upper()}/installation", 200),
        ("POST", "/app/installations/1/access_tokens", 201),
    ]
    async with lab_db.sessions() as session:
        found = await find_repository(session, REPO)
    assert (found.full_name, found.installation_id) == (REPO, 1)  # as GitHub spells it
    asked = len(_asked(github, "/installation"))
    listed = await client.get(f"/api/v1/repositories/{REPO}/secrets", headers=auth)
    assert [item["name"] for item in (await listed.json())["items"]] == ["LAB_VPN_KEY"]
    assert len(_asked(github, "/installation")) == asked  # remembered: not asked again


async def test_a_repository_github_does_not_know_is_404_and_asked_once_in_a_while(
    lab_db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    client = await start_app(settings_for(lab_db, github))
    async with lab_db.sessions() as session, session.begin():
        token = await create_token(session, "maintainer", lab_db.clock())
    auth = {"Authorization": f"Bearer {token}"}
    for _ in range(3):
        missing = await client.get("/api/v1/repositories/octo/elsewhere/secrets", headers=auth)
        assert missing.status == 404
        assert "not installed on a repository octo/elsewhere" in (await missing.json())["error"]["message"]
    assert len(_asked(github, "/repos/octo/elsewhere/installation")) == 1
