"""GitHub App installations and the repositories each covers, kept current from webhook events, and
learnt from GitHub for a repository no event has told of (the App was installed before the database was
made, or its events were lost)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.database import Database
from kerrigan.store.inventory import NotFoundError
from kerrigan.store.models import InstallationRow, RepositoryRow, SessionRow

_NAMED_AT_MOST = 500  # more names than this are read whole and picked out here (SQLite's variable limit)


@dataclass(frozen=True, slots=True)
class Repository:
    """An installed repository, as GitHub spells its name, with the ids secrets and GitHub need."""

    full_name: str
    github_id: int
    installation_id: int


@dataclass(frozen=True, slots=True)
class Discovered:
    """What GitHub says of a repository's installation: the App's installation (its id, account and
    whether it is suspended) and the repository (its id and its name as GitHub spells it)."""

    installation_id: int
    account: str
    suspended: bool
    repository_id: int
    full_name: str


class DiscoveryError(Exception):
    """GitHub could not be asked (unreachable, or it refused the App); the message says why in one line."""


DiscoverRepository = Callable[[str], Awaitable[Discovered | None]]
"""``owner/name`` -> GitHub's answer (``None``: the App is not installed there); a :class:`DiscoveryError`
when GitHub cannot be asked."""


def _not_installed(full_name: str) -> NotFoundError:
    return NotFoundError(f"Kerrigan's App is not installed on a repository {full_name}")


async def find_repository(session: AsyncSession, full_name: str) -> Repository:
    """The installed repository ``owner/name`` (in any case) the database knows, or a
    :class:`NotFoundError`."""
    row = (
        await session.execute(
            select(RepositoryRow.full_name, RepositoryRow.github_id, InstallationRow.github_id)
            .join(InstallationRow, RepositoryRow.installation_pk == InstallationRow.pk)
            .where(func.lower(RepositoryRow.full_name) == full_name.lower())
            .order_by(RepositoryRow.pk.desc())  # a name GitHub handed to a newer repository: the newer one
            .limit(1)
        )
    ).first()
    if row is None:
        raise _not_installed(full_name)
    return Repository(row[0], int(row[1]), int(row[2]))


async def remember_repository(session: AsyncSession, found: Discovered, at: datetime) -> Repository:
    """Record what GitHub said (the installation and the repository it covers, as an event would have)."""
    pk = await upsert_installation(
        session, found.installation_id, found.account, at, suspended=found.suspended
    )
    await add_repositories(session, pk, [(found.repository_id, found.full_name)])
    return Repository(found.full_name, found.repository_id, found.installation_id)


async def installed_repository(
    database: Database, full_name: str, discover: DiscoverRepository | None
) -> Repository:
    """The installed repository ``owner/name``: the database's, else GitHub's (``discover``), remembered so
    that the next lookup needs no request; a :class:`NotFoundError` when neither knows it (a
    :class:`DiscoveryError` when GitHub could not be asked). Every lookup of a repository by name that
    may ask GitHub goes through here."""
    async with database.sessions() as session:
        try:
            return await find_repository(session, full_name)
        except NotFoundError:
            if discover is None:
                raise
    found = await discover(full_name)  # outside any transaction: GitHub may take its time
    if found is None:
        raise _not_installed(full_name)
    async with database.sessions() as session, session.begin():
        return await remember_repository(session, found, database.clock())


async def upsert_installation(
    session: AsyncSession, github_id: int, account: str, at: datetime, *, suspended: bool = False
) -> int:
    """Create or update an installation; its primary key."""
    row = await session.scalar(select(InstallationRow).where(InstallationRow.github_id == github_id))
    if row is None:
        row = InstallationRow(github_id=github_id, account=account, suspended=suspended, created_at=at)
        session.add(row)
    else:
        row.account = account
        row.suspended = suspended
    await session.flush()
    return row.pk


async def delete_installation(session: AsyncSession, github_id: int) -> None:
    """Forget an installation and its repositories."""
    row = await session.scalar(select(InstallationRow).where(InstallationRow.github_id == github_id))
    if row is not None:
        await session.execute(delete(RepositoryRow).where(RepositoryRow.installation_pk == row.pk))
        await session.delete(row)
        await session.flush()


async def add_repositories(
    session: AsyncSession, installation_pk: int, repositories: Iterable[tuple[int, str]]
) -> None:
    """Record repositories (GitHub id, full name) as covered by an installation."""
    for github_id, full_name in repositories:
        row = await session.scalar(select(RepositoryRow).where(RepositoryRow.github_id == github_id))
        if row is None:
            session.add(
                RepositoryRow(github_id=github_id, full_name=full_name, installation_pk=installation_pk)
            )
        else:
            row.full_name = full_name
            row.installation_pk = installation_pk
    await session.flush()


async def remove_repositories(session: AsyncSession, github_ids: Iterable[int]) -> None:
    """Forget repositories an installation no longer covers."""
    ids = list(github_ids)
    if ids:
        await session.execute(delete(RepositoryRow).where(RepositoryRow.github_id.in_(ids)))
        await session.flush()


async def repositories(session: AsyncSession) -> list[tuple[str, int]]:
    """Every covered repository's full name with its installation's GitHub id."""
    rows = await session.execute(
        select(RepositoryRow.full_name, InstallationRow.github_id)
        .join(InstallationRow, RepositoryRow.installation_pk == InstallationRow.pk)
        .order_by(RepositoryRow.full_name)
    )
    return [(name, int(github_id)) for name, github_id in rows]


async def repository_installations(
    session: AsyncSession, names: Iterable[str] | None = None
) -> dict[str, int]:
    """The installation (GitHub's id) to ask about each repository sessions ran for (of ``names``, or
    every one): the one covering it now, else the newest its sessions came with. A repository known
    neither way is left out."""
    wanted = None if names is None else sorted({name for name in names if name})
    if wanted == []:
        return {}
    ran = select(SessionRow.repository, func.max(SessionRow.installation_id)).where(
        SessionRow.repository != "", SessionRow.installation_id.is_not(None)
    )
    covered = select(RepositoryRow.full_name, InstallationRow.github_id).join(
        InstallationRow, RepositoryRow.installation_pk == InstallationRow.pk
    )
    if wanted is not None and len(wanted) <= _NAMED_AT_MOST:
        ran = ran.where(SessionRow.repository.in_(wanted))
        covered = covered.where(RepositoryRow.full_name.in_(wanted))
    found = {
        str(name): int(number)
        for name, number in await session.execute(ran.group_by(SessionRow.repository))
        if number is not None
    }
    found.update({str(name): int(number) for name, number in await session.execute(covered)})
    return found if wanted is None else {name: found[name] for name in wanted if name in found}
