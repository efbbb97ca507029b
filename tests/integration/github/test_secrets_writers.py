"""A repository's writers manage its secrets through an API token: the server asks GitHub (the stand-in) for
the login's permission, as ``/kerrigan`` commands are checked."""

from __future__ import annotations

from cryptography.fernet import Fernet

from kerrigan.store.database import Database
from kerrigan.store.tokens import create_token
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import REPO, Harness, StartApp, settings_for, webhook

VALUE = "vpn-key-of-the-lab-0123456789"


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
