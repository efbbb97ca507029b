"""A repository's secrets: named like GitHub Actions secrets, encrypted at rest with Fernet under
``KERRIGAN_SECRETS_KEY``, decrypted only for what a job names.

A row holds the ciphertext, a digest of the key that encrypted it (so rotation finds rows under older keys),
and who set it when. Nothing here puts a value into a message, a log line, the audit log or a ``repr``.
Secrets belong to a repository by GitHub's id of it, so a rename or a reinstall keeps them; the name a
caller gives is looked up among the repositories Kerrigan's App is installed on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.core.lifecycle import SECRET_MISSING as _SECRET_MISSING
from kerrigan.core.lifecycle import JobState
from kerrigan.core.masking import secret_problem
from kerrigan.core.variable_names import name_problem
from kerrigan.store.audit import Change, record
from kerrigan.store.installations import Repository, find_repository
from kerrigan.store.inventory import ConflictError, NotFoundError
from kerrigan.store.jobs.holders import owned_job
from kerrigan.store.models import JobRow, SecretRow, SessionRow
from kerrigan.store.transitions import move_job, settle_session

MAX_SECRETS: Final = 100  # per repository, as GitHub Actions allows
MAX_VALUE_BYTES: Final = 48 * 1024  # GitHub Actions' limit on a secret
HIDDEN: Final = "***"  # what the audit log shows for a value


class SecretError(ValueError):
    """A secret's name or value that cannot be stored; the message names the rule, never the value."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field  # "name" or "value"


class SecretsKeyError(Exception):
    """``KERRIGAN_SECRETS_KEY`` is unset, or no longer holds the key a stored secret was encrypted under."""


def validate_name(text: str) -> str:
    """The secret name ``text`` as stored (upper-case), or a :class:`SecretError`: GitHub Actions' rules
    (letters, digits and ``_``, not starting with a digit, nor with ``GITHUB_``) and not ``KERRIGAN_``
    (the rule itself is :func:`kerrigan.core.variable_names.name_problem`, which manifests use too)."""
    problem = name_problem(text)
    if problem is not None:
        raise SecretError(problem, "name")
    return text.upper()


def validate_value(name: str, value: str) -> str:
    """``value`` when the secret ``name`` may hold it, or a :class:`SecretError` (the size, never the text):
    at most 48 KiB, and long enough for the masker to hide it in a job's output."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate, which JSON can carry
        raise SecretError(f"secret {name}: its value is not valid Unicode text", "value") from None
    if size > MAX_VALUE_BYTES:
        raise SecretError(
            f"secret {name}: its value is {size} bytes long; a secret holds at most {MAX_VALUE_BYTES} "
            "(48 KiB)",
            "value",
        )
    if "\x00" in value:
        raise SecretError(
            f"secret {name}: its value holds a NUL character, which a job's environment cannot", "value"
        )
    problem = secret_problem(name, value)
    if problem is not None:
        raise SecretError(problem, "value")
    return value


def key_id(key: str) -> str:
    """A digest naming a Fernet key in a row and in messages, from which the key cannot be recovered."""
    return hashlib.sha256(b"kerrigan secrets key\x00" + key.encode("ascii")).hexdigest()[:16]


@dataclass(frozen=True)
class Keyring:
    """The Fernet keys of ``KERRIGAN_SECRETS_KEY``: the first encrypts, every one decrypts."""

    keys: tuple[str, ...] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise SecretsKeyError(
                "secrets need KERRIGAN_SECRETS_KEY: set it to a Fernet key "
                "(`kerrigan secrets new-key` makes one)"
            )

    @property
    def current(self) -> str:
        """The id of the key that encrypts."""
        return key_id(self.keys[0])

    def ids(self) -> frozenset[str]:
        """The ids of every key held."""
        return frozenset(key_id(key) for key in self.keys)

    def _fernet(self) -> MultiFernet:
        return MultiFernet([Fernet(key) for key in self.keys])

    def encrypt(self, value: str) -> str:
        """``value`` as a Fernet token under the first key."""
        return self._fernet().encrypt(value.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """The value of a token under any key held; :class:`InvalidToken` when none opens it."""
        return self._fernet().decrypt(token.encode("ascii")).decode("utf-8")

    def rotate(self, token: str) -> str:
        """The same value as a token under the first key."""
        return self._fernet().rotate(token.encode("ascii")).decode("ascii")


@dataclass(frozen=True, slots=True)
class SecretInfo:
    """What may be shown of a secret: its name, who set it and when."""

    name: str
    set_by: str
    set_at: datetime


async def list_secrets(
    session: AsyncSession, repository: Repository, *, after: str | None = None, limit: int | None = None
) -> list[SecretInfo]:
    """The repository's secrets in name order (those after the name ``after``, at most ``limit``), never
    their values."""
    query = (
        select(SecretRow.name, SecretRow.set_by, SecretRow.set_at)
        .where(SecretRow.repository_id == repository.github_id)
        .order_by(SecretRow.name)
        .limit(limit)
    )
    if after is not None:
        query = query.where(SecretRow.name > after)
    return [SecretInfo(name, by, at) for name, by, at in await session.execute(query)]


async def secret_names(session: AsyncSession, full_name: str) -> frozenset[str]:
    """The names of the secrets set for the repository ``owner/name`` (none when Kerrigan does not know
    it)."""
    try:
        repository = await find_repository(session, full_name)
    except NotFoundError:
        return frozenset()
    names = await session.scalars(
        select(SecretRow.name).where(SecretRow.repository_id == repository.github_id)
    )
    return frozenset(names)


async def set_secret(
    session: AsyncSession, keys: Keyring, repository: Repository, name: str, value: str, *, change: Change
) -> bool:
    """Store ``value`` as the secret ``name`` (validated here), encrypted; whether it is new. Audited
    without the value. A :class:`ConflictError` when it would be the repository's 101st."""
    name = validate_name(name)
    validate_value(name, value)
    row = await session.scalar(
        select(SecretRow).where(SecretRow.repository_id == repository.github_id, SecretRow.name == name)
    )
    if row is None and await _count(session, repository) >= MAX_SECRETS:
        raise ConflictError(
            f"{repository.full_name} has {MAX_SECRETS} secrets, the most a repository may hold"
        )
    ciphertext = keys.encrypt(value)
    if row is None:
        session.add(
            SecretRow(
                repository_id=repository.github_id,
                name=name,
                ciphertext=ciphertext,
                key_id=keys.current,
                set_by=change.actor,
                set_at=change.at,
            )
        )
    else:
        row.ciphertext, row.key_id, row.set_by, row.set_at = ciphertext, keys.current, change.actor, change.at
    kind, before = (ChangeKind.ADD, None) if row is None else (ChangeKind.CHANGE, HIDDEN)
    await record(session, change, FieldChange(kind, "secret", repository.full_name, name, before, HIDDEN))
    await session.flush()
    return row is None


async def _count(session: AsyncSession, repository: Repository) -> int:
    query = select(func.count()).select_from(SecretRow).where(SecretRow.repository_id == repository.github_id)
    return int(await session.scalar(query) or 0)


async def delete_secret(session: AsyncSession, repository: Repository, name: str, change: Change) -> None:
    """Delete the secret ``name``; a :class:`NotFoundError` when the repository has none of that name."""
    name = validate_name(name)
    row = await session.scalar(
        select(SecretRow).where(SecretRow.repository_id == repository.github_id, SecretRow.name == name)
    )
    if row is None:
        raise NotFoundError(f"{repository.full_name} has no secret {name}")
    await session.delete(row)
    await record(
        session, change, FieldChange(ChangeKind.REMOVE, "secret", repository.full_name, name, HIDDEN, None)
    )
    await session.flush()


async def secrets_for(
    session: AsyncSession, repository: str, names: Iterable[str], *, keys: Keyring
) -> dict[str, str]:
    """The values of the secrets ``names`` (any case) of the repository ``owner/name``, by the name as
    asked, decrypting only those. A name the repository has no secret of (or a repository Kerrigan is not
    installed on) is left out, for the caller to report; a secret under a key ``keys`` no longer holds is a
    :class:`SecretsKeyError` naming it."""
    asked = list(dict.fromkeys(names))
    try:
        found = await find_repository(session, repository)
    except NotFoundError:
        return {}
    wanted = {name.upper(): name for name in asked}
    rows = await session.execute(
        select(SecretRow.name, SecretRow.ciphertext, SecretRow.key_id).where(
            SecretRow.repository_id == found.github_id, SecretRow.name.in_(sorted(wanted))
        )
    )
    values: dict[str, str] = {}
    for name, ciphertext, stored_key in rows:
        try:
            value = keys.decrypt(ciphertext)
        except InvalidToken:
            raise SecretsKeyError(
                f"secret {name} of {found.full_name} was encrypted under key {stored_key}, which "
                "KERRIGAN_SECRETS_KEY does not hold"
            ) from None
        for asked_name in asked:
            if asked_name.upper() == name:
                values[asked_name] = value
    return values


@dataclass(frozen=True, slots=True)
class Rotation:
    """What :func:`rotate_secrets` did: secrets re-encrypted under the first key, and those already were."""

    rotated: int
    current: int


async def rotate_secrets(session: AsyncSession, keys: Keyring) -> Rotation:
    """Re-encrypt every secret not under the first key. Nothing changes when one is under a key ``keys``
    does not hold: a :class:`SecretsKeyError` names those keys."""
    rows = (await session.scalars(select(SecretRow).where(SecretRow.key_id != keys.current))).all()
    lost = sorted({row.key_id for row in rows} - keys.ids())
    if lost:
        count = sum(1 for row in rows if row.key_id in lost)
        raise SecretsKeyError(
            f"{count} secret(s) are encrypted under key(s) {', '.join(lost)}, which KERRIGAN_SECRETS_KEY "
            "does not hold: add the old key after the new one, rotate, then drop it"
        )
    for row in rows:
        try:
            row.ciphertext = keys.rotate(row.ciphertext)
        except InvalidToken:  # its key id matched a key held, yet the token does not open: altered
            raise SecretsKeyError(
                f"secret {row.name}: its stored ciphertext does not open under its key"
            ) from None
        row.key_id = keys.current
    await session.flush()
    current = await session.scalar(select(func.count()).select_from(SecretRow)) or 0
    return Rotation(len(rows), int(current) - len(rows))


@dataclass(frozen=True)
class JobSecrets:
    """What an accepted job is handed: the values of the secrets it names (never in a ``repr``), or why it
    gets none (``withheld``: a fork's session its approval gave no secrets)."""

    values: dict[str, str] = field(default_factory=dict, repr=False)
    withheld: tuple[str, ...] = ()
    refused: bool = False  # a secret could not be handed: the job ended refused_before_start


SECRET_MISSING: Final = _SECRET_MISSING  # a reason a job ended, not a secret (core.lifecycle says whose)
SECRETS_UNAVAILABLE: Final = "secrets_unavailable"


async def hand_secrets(
    session: AsyncSession, job_id: str, host: str, at: datetime, *, keys: tuple[str, ...]
) -> JobSecrets:
    """The secrets of the job ``host`` accepted (or runs: a restarted agent asks again), in the caller's
    transaction. A secret it names that its repository does not have, or one no key of
    ``KERRIGAN_SECRETS_KEY`` opens, ends the job ``refused_before_start`` (``secret_missing``,
    ``secrets_unavailable``) before it starts, naming the secret and never a value; nothing is handed then."""
    job = await owned_job(session, job_id, host)
    names = list(job.secrets or ())
    if not names or job.state not in (JobState.ACCEPTED, JobState.RUNNING):
        return JobSecrets()
    run = await session.get(SessionRow, job.session_pk)
    assert run is not None
    if not run.secrets_allowed:
        return JobSecrets(withheld=tuple(names))
    try:
        values = await secrets_for(session, run.repository, names, keys=Keyring(keys))
    except SecretsKeyError as err:
        return JobSecrets(refused=await _refuse(session, job, at, SECRETS_UNAVAILABLE, str(err)))
    missing = [name for name in names if name not in values]
    if missing:
        listed = ", ".join(missing)
        detail = (
            f"secret{'s' * (len(missing) > 1)} {listed} {'are' if len(missing) > 1 else 'is'} not set for "
            f"{run.repository}: `kerrigan secrets set {run.repository} {missing[0]}`"
        )
        return JobSecrets(refused=await _refuse(session, job, at, SECRET_MISSING, detail))
    return JobSecrets(values)


async def given_secrets(
    session: AsyncSession, job_id: str, host: str, *, keys: tuple[str, ...]
) -> dict[str, str]:
    """The values of the secrets the job ``host`` runs (or ran) was handed: what nothing it sends back may
    show. Empty for a job that names none or was handed none (a fork's session approved without
    ``secrets``); a :class:`SecretsKeyError` naming the secret when one it was handed can no longer be read
    (deleted since, or its key dropped), never a value; ``NotYoursError`` for another host's job."""
    job = await owned_job(session, job_id, host)
    names = list(job.secrets or ())
    if not names:
        return {}
    run = await session.get(SessionRow, job.session_pk)
    assert run is not None
    if not run.secrets_allowed:
        return {}
    values = await secrets_for(session, run.repository, names, keys=Keyring(keys))
    missing = [name for name in names if name not in values]
    if missing:
        raise SecretsKeyError(f"secret {', '.join(missing)} of {run.repository} is no longer set")
    return values


async def _refuse(session: AsyncSession, job: JobRow, at: datetime, reason: str, detail: str) -> bool:
    if job.state != JobState.ACCEPTED:
        return False  # running already (a restarted agent asking again): it keeps what it has
    await move_job(session, job, JobState.REFUSED_BEFORE_START, at, reason=reason, detail=detail)
    await settle_session(session, job.session_pk, at)
    return True
