"""``installation`` and ``installation_repositories``: keep the list of installations and repositories."""

from __future__ import annotations

from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.github.sessions import GitHubApp
from kerrigan.store.installations import (
    add_repositories,
    delete_installation,
    remove_repositories,
    upsert_installation,
)

router = Router()


def _repositories(items: list[dict[str, Any]] | None) -> list[tuple[int, str]]:
    return [(int(item["id"]), str(item["full_name"])) for item in items or []]


@router.register("installation")
async def on_installation(event: Event, app: GitHubApp) -> None:
    """Created, deleted, suspended, unsuspended or new permissions accepted."""
    data = event.data
    installation = data["installation"]
    action = data.get("action")
    account = str((installation.get("account") or {}).get("login", ""))
    async with app.database.sessions() as db, db.begin():
        if action == "deleted":
            await delete_installation(db, int(installation["id"]))
            return
        pk = await upsert_installation(
            db, int(installation["id"]), account, app.database.clock(), suspended=action == "suspend"
        )
        if action == "created":
            await add_repositories(db, pk, _repositories(data.get("repositories")))


@router.register("installation_repositories")
async def on_installation_repositories(event: Event, app: GitHubApp) -> None:
    """Repositories added to or removed from an installation."""
    data = event.data
    installation = data["installation"]
    account = str((installation.get("account") or {}).get("login", ""))
    async with app.database.sessions() as db, db.begin():
        pk = await upsert_installation(db, int(installation["id"]), account, app.database.clock())
        await add_repositories(db, pk, _repositories(data.get("repositories_added")))
        await remove_repositories(
            db, [repo_id for repo_id, _ in _repositories(data.get("repositories_removed"))]
        )
