"""``installation`` and ``installation_repositories``: keep the list of installations and repositories."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.github.github_app import GitHubApp
from kerrigan.github.payload import Payload
from kerrigan.store.installations import (
    add_repositories,
    delete_installation,
    remove_repositories,
    upsert_installation,
)

router = Router()


def _repositories(data: Payload, name: str) -> list[tuple[int, str]]:
    return [(item.integer("id"), item.string("full_name", max_length=200)) for item in data.objects(name)]


def _account(installation: Payload) -> str:
    account = installation.optional_object("account")
    return (account.optional_string("login", max_length=100) if account is not None else None) or ""


@router.register("installation")
async def on_installation(event: Event, app: GitHubApp) -> None:
    """Created, deleted, suspended, unsuspended or new permissions accepted."""
    data = Payload(event.data)
    installation = data.object("installation")
    installation_id = installation.integer("id")
    action = data.optional_string("action")
    account = _account(installation)
    added = _repositories(data, "repositories") if action == "created" else []
    async with app.database.sessions() as db, db.begin():
        if action == "deleted":
            await delete_installation(db, installation_id)
            return
        pk = await upsert_installation(
            db, installation_id, account, app.database.clock(), suspended=action == "suspend"
        )
        if action == "created":
            await add_repositories(db, pk, added)


@router.register("installation_repositories")
async def on_installation_repositories(event: Event, app: GitHubApp) -> None:
    """Repositories added to or removed from an installation."""
    data = Payload(event.data)
    installation = data.object("installation")
    installation_id = installation.integer("id")
    account = _account(installation)
    added = _repositories(data, "repositories_added")
    removed = [repo_id for repo_id, _ in _repositories(data, "repositories_removed")]
    async with app.database.sessions() as db, db.begin():
        pk = await upsert_installation(db, installation_id, account, app.database.clock())
        await add_repositories(db, pk, added)
        await remove_repositories(db, removed)
