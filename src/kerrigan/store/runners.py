"""Runner hosts as the runner protocol sees them: tokens, registrations and heartbeats."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import HostPause, pause_text, when
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.store.audit import KERRIGAN_ACTOR, Change, record
from kerrigan.store.models import RunnerHostRow
from kerrigan.store.signals import Topic, mark
from kerrigan.store.tokens import token_hash

RUNNER_TOKEN_PREFIX = "kgr_"  # noqa: S105 -- a visible prefix, not a secret


@dataclass(frozen=True, slots=True)
class HostReport:
    """What a runner host last said about itself. ``online`` only once its agent has spoken: a host an
    inventory names or ``kerrigan runners create`` makes is offline until its first heartbeat."""

    host: str
    online: bool
    protocol: int | None
    capabilities: frozenset[str]
    resources: Mapping[str, int]
    device_states: Mapping[str, str]
    last_heartbeat_at: datetime | None
    health: Mapping[str, Any] | None = None
    pause: HostPause | None = None  # paused by a person: no new jobs for its devices
    token: bool = False  # whether it has a token (revoked: none)
    token_created_at: datetime | None = None
    token_used_at: datetime | None = None


def _report(row: RunnerHostRow) -> HostReport:
    return HostReport(
        row.id,
        row.online and row.last_heartbeat_at is not None,  # offline until its agent first speaks
        row.protocol,
        frozenset(row.capabilities),
        dict(row.resources),
        dict(row.device_states),
        row.last_heartbeat_at,
        row.health,
        _pause(row),
        row.token_hash is not None,
        row.token_created_at,
        row.token_used_at,
    )


def _pause(row: RunnerHostRow) -> HostPause | None:
    if row.paused_at is None:
        return None
    return HostPause(row.paused_reason or "", row.paused_by or "", row.paused_at, row.paused_until)


async def set_pause(
    session: AsyncSession, host: str, pause: HostPause | None, change: Change
) -> HostReport | None:
    """Pause the host (``pause``) or resume it (None); None when there is no such host. The audit log
    has the change. A pause stops new leases to its devices at once; the jobs running there finish."""
    row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host).with_for_update())
    if row is None:
        return None
    before = _pause(row)
    if before != pause:
        row.paused_reason = pause.reason if pause else None
        row.paused_by = pause.by if pause else None
        row.paused_at = pause.since if pause else None
        row.paused_until = pause.until if pause else None
        words = pause_text(host, pause) if pause else f"runner host {host} active"
        was = pause_text(host, before) if before else f"runner host {host} active"
        await record(session, change, FieldChange(ChangeKind.CHANGE, "host", host, "state", was, words))
        if pause is None:
            mark(session, Topic.DISPATCH)  # its devices may take work again
    return _report(row)


async def hold_after_refusal(session: AsyncSession, host: str, hold: HostPause) -> None:
    """Pause ``host`` as Kerrigan after a capacity refusal (see ``refusal_hold``). A person's pause stands as
    it is, and a hold of Kerrigan's is only ever lengthened."""
    row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host).with_for_update())
    if row is None:
        return
    if row.paused_at is not None and (
        row.paused_by != KERRIGAN_ACTOR
        or row.paused_until is None
        or (hold.until is not None and row.paused_until >= hold.until)
    ):
        return
    await set_pause(session, host, hold, Change(KERRIGAN_ACTOR, hold.since))


async def end_due_pauses(session: AsyncSession, now: datetime) -> list[str]:
    """Hosts whose pause ``until`` has passed are resumed (the audit log names Kerrigan); their ids."""
    hosts = (
        await session.scalars(
            select(RunnerHostRow.id).where(
                RunnerHostRow.paused_at.is_not(None), RunnerHostRow.paused_until <= now
            )
        )
    ).all()
    for host in hosts:
        await set_pause(session, host, None, Change(KERRIGAN_ACTOR, now))
    return list(hosts)


def _token_words(row: RunnerHostRow) -> str | None:
    """The host's token as the audit log names it: by when it was made (never by its text or hash)."""
    if row.token_hash is None:
        return None
    return (
        f"token made {when(row.token_created_at)}"
        if row.token_created_at
        else "a token made before Kerrigan kept the time"
    )


async def create_runner_token(
    session: AsyncSession, host: str, at: datetime, *, actor: str = KERRIGAN_ACTOR
) -> str:
    """A new token for ``host`` (created if unknown); the previous token stops working. The audit log
    names ``actor`` and when each token was made, never a token."""
    token = RUNNER_TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host).with_for_update())
    if row is None:
        row = RunnerHostRow(id=host, online=False, created_at=at)  # online once its runner registers
        session.add(row)
    before = _token_words(row)
    row.token_hash = token_hash(token)
    row.token_created_at, row.token_used_at = at, None
    if row.last_heartbeat_at is None:
        row.online = False  # from now on its runner's heartbeats say whether it is online
    await session.flush()
    kind = ChangeKind.ADD if before is None else ChangeKind.CHANGE
    await record(
        session, Change(actor, at), FieldChange(kind, "host", host, "token", before, _token_words(row))
    )
    return token


async def revoke_runner_token(session: AsyncSession, host: str, change: Change) -> bool:
    """The host's token stops working now, and the host is offline (no agent can speak for it); whether
    it had one. Audited, with the host going offline."""
    row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host).with_for_update())
    if row is None or row.token_hash is None:
        return False
    before = _token_words(row)
    row.token_hash, row.token_created_at, row.token_used_at = None, None, None
    await record(session, change, FieldChange(ChangeKind.REMOVE, "host", host, "token", before, None))
    if row.online:
        row.online = False
        await _record_online(session, host, change, online=False, why="its token was revoked")
    await session.flush()
    return True


@dataclass(frozen=True, slots=True)
class TokenHolder:
    """The runner host a token belongs to, and when the token was last used (to the minute)."""

    host: str
    used_at: datetime | None


TOKEN_USE_GRANULARITY = timedelta(minutes=1)  # a token's last use is written at most once a minute


async def host_for_token(session: AsyncSession, token: str) -> TokenHolder | None:
    """The runner host a live token belongs to."""
    row = (
        await session.execute(
            select(RunnerHostRow.id, RunnerHostRow.token_used_at).where(
                RunnerHostRow.token_hash == token_hash(token)
            )
        )
    ).first()
    return TokenHolder(str(row[0]), row[1]) if row is not None else None


def token_use_due(holder: TokenHolder, now: datetime) -> bool:
    """Whether the token's last use is old enough to be written again."""
    return holder.used_at is None or now - holder.used_at >= TOKEN_USE_GRANULARITY


async def note_token_use(session: AsyncSession, token: str, now: datetime) -> None:
    """The token was used now (a token replaced meanwhile is left alone)."""
    await session.execute(
        update(RunnerHostRow).where(RunnerHostRow.token_hash == token_hash(token)).values(token_used_at=now)
    )


async def _record_online(session: AsyncSession, host: str, change: Change, *, online: bool, why: str) -> None:
    """The audit row of a host going online or offline."""
    before, after = ("offline", "online") if online else ("online", "offline")
    await record(
        session, change, FieldChange(ChangeKind.CHANGE, "host", host, "online", before, f"{after}: {why}")
    )


async def record_report(
    session: AsyncSession,
    host: str,
    at: datetime,
    *,
    resources: Mapping[str, int],
    device_states: Mapping[str, str],
    protocol: int | None = None,
    capabilities: frozenset[str] | None = None,
    health: Mapping[str, Any] | None = None,
) -> HostReport:
    """A registration or heartbeat: the host is online, with these resources and device states."""
    row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host))
    if row is None:
        raise LookupError(f"no runner host {host!r}")
    if not row.online or row.last_heartbeat_at is None:  # a never-heard host was offline, whatever it said
        await _record_online(session, host, Change(KERRIGAN_ACTOR, at), online=True, why="its runner spoke")
    row.online = True
    row.last_heartbeat_at = at
    row.resources = dict(resources)
    row.device_states = dict(device_states)
    if protocol is not None:
        row.protocol = protocol
    if capabilities is not None:
        row.capabilities = sorted(capabilities)
    if health is not None:
        row.health = dict(health)
    await session.flush()
    return _report(row)


async def host_report(session: AsyncSession, host: str) -> HostReport | None:
    """What the host last reported."""
    row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host))
    return _report(row) if row is not None else None


async def host_reports(session: AsyncSession) -> list[HostReport]:
    """What every runner host last reported, by id."""
    rows = await session.scalars(select(RunnerHostRow).order_by(RunnerHostRow.id))
    return [_report(row) for row in rows]


async def mark_silent_hosts_offline(session: AsyncSession, now: datetime, ttl: timedelta) -> list[str]:
    """Hosts whose last heartbeat is older than ``ttl`` go offline; their ids."""
    cutoff = now - ttl
    rows = (
        await session.scalars(
            select(RunnerHostRow.id).where(
                RunnerHostRow.online.is_(True),
                RunnerHostRow.token_hash.is_not(None),  # a host with a runner: its heartbeats decide
                or_(RunnerHostRow.last_heartbeat_at.is_(None), RunnerHostRow.last_heartbeat_at < cutoff),
            )
        )
    ).all()
    if rows:
        await session.execute(update(RunnerHostRow).where(RunnerHostRow.id.in_(rows)).values(online=False))
        silent = f"no heartbeat for {int(ttl.total_seconds())} s"
        for host in rows:
            await _record_online(session, host, Change(KERRIGAN_ACTOR, now), online=False, why=silent)
    return list(rows)
