"""``kerrigan db upgrade|copy``, ``kerrigan tokens create`` and ``kerrigan runners create|list|revoke|
rotate``: commands that act on the lab's database directly."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import TYPE_CHECKING

from kerrigan.cli.columns import columns
from kerrigan.cli.database import with_database
from kerrigan.cli.settings import load_settings
from kerrigan.cli.usage import UsageError, actor_name, first_line

if TYPE_CHECKING:
    from datetime import datetime

    from kerrigan.store.database import Database
    from kerrigan.store.runners import HostReport


def _db_upgrade(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from kerrigan.store.database import Database, current_revision, upgrade

    settings = load_settings()

    async def run() -> str | None:
        database = Database.connect(settings.database_url)
        try:
            await upgrade(database.engine)
            return await current_revision(database.engine)
        except (OSError, SQLAlchemyError) as exc:
            raise UsageError(f"cannot upgrade the database: {first_line(exc)}") from None
        finally:
            await database.close()

    print(f"database at revision {asyncio.run(run())}")
    return 0


EXIT_COUNTS_DIFFER = 1  # the copy ran, and a table holds a different number of rows on each side
TARGET_SCHEMES = ("sqlite+aiosqlite://", "postgresql+asyncpg://")


def _same_database(source: str, target: str) -> bool:
    from pathlib import Path

    from sqlalchemy.engine import make_url

    one, other = make_url(source), make_url(target)
    if one.get_backend_name() == other.get_backend_name() == "sqlite":
        return Path(one.database or "").resolve() == Path(other.database or "").resolve()
    return one.render_as_string(hide_password=False) == other.render_as_string(hide_password=False)


def _db_copy(args: argparse.Namespace) -> int:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from kerrigan.store.database import create_engine
    from kerrigan.store.database_copy import CopyRefusedError, TableCopied, copy_database

    settings = load_settings()
    url = args.to.strip()
    if not url.startswith(TARGET_SCHEMES):
        raise UsageError(f"--to must start with {' or '.join(TARGET_SCHEMES)}")
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        raise UsageError("--to is not a database URL") from None
    if _same_database(settings.database_url, url):
        raise UsageError("--to names the database KERRIGAN_DATABASE_URL names: copy into another one")
    if args.batch < 1:
        raise UsageError(f"--batch must be 1 or more, not {args.batch}")

    def told(done: TableCopied) -> None:
        print(f"{done.table}: {done.copied} rows copied, {done.already} already there", flush=True)

    async def run() -> int:
        source, target = create_engine(settings.database_url), create_engine(url)
        try:
            counts = await copy_database(source, target, batch=args.batch, after_table=told)
        except CopyRefusedError as exc:
            raise UsageError(f"nothing copied: {exc}") from None
        except (OSError, SQLAlchemyError) as exc:
            raise UsageError(
                f"the copy stopped: {first_line(exc)} (run it again: it goes on where it stopped)"
            ) from None
        finally:
            await source.dispose()
            await target.dispose()
        rows = [["TABLE", "SOURCE", "TARGET", ""]]
        rows += [[c.table, str(c.source), str(c.target), "" if c.matches else "differs"] for c in counts]
        print(columns(rows))
        differ = [c.table for c in counts if not c.matches]
        if differ:
            print(
                f"the counts differ in {', '.join(differ)}: was Kerrigan still running? Stop it and run the "
                "copy again",
                file=sys.stderr,
            )
            return EXIT_COUNTS_DIFFER
        total = sum(c.target for c in counts)
        print(f"copied to {shown}: {len(counts)} tables, {total} rows, every count matches")
        return 0

    return asyncio.run(run())


def _tokens_create(args: argparse.Namespace) -> int:
    from kerrigan.store.tokens import create_token

    login = args.login
    if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})", login):
        raise UsageError(f"--login {login!r} is not a GitHub login")
    actor = actor_name(args.actor, "making the token")

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            token = await create_token(session, login, database.clock(), actor=actor)
        print(token)
        return 0

    return asyncio.run(with_database(load_settings(), work))


def _host_id(host: str) -> str:
    if not re.fullmatch(r"[a-z0-9._-]{1,63}", host):
        raise UsageError(
            f"{host!r} is not a runner host id: 1-63 of lowercase letters, digits, '.', '_', '-'"
        )
    return host


def _runners_create(args: argparse.Namespace) -> int:
    from kerrigan.store.runners import create_runner_token

    host, actor = _host_id(args.host), actor_name(args.actor, "making the token")

    async def work(database: Database) -> int:
        from kerrigan.store.inventory import load_inventory

        async with database.sessions() as session, session.begin():
            inventory = await load_inventory(session)
            known = {h.id for h in inventory.hosts} | {d.host for d in inventory.devices if d.host}
            if host not in known and not args.force:
                # A token for a host no device is on does nothing: most likely a typo of a real one.
                listed = ", ".join(sorted(known)) or "none yet"
                raise UsageError(
                    f"the inventory has no runner host {host} (its hosts: {listed}); check the name, or "
                    "pass --force to make a token for a host you are about to add"
                )
            token = await create_runner_token(session, host, database.clock(), actor=actor)
        print(token)
        return 0

    return asyncio.run(with_database(load_settings(), work))


def _time(at: datetime | None, absent: str) -> str:
    from kerrigan.core.device_status import when

    return f"{when(at)} UTC" if at is not None else absent


def _host_row(report: HostReport) -> list[str]:
    state = "online" if report.online else "offline"
    if report.pause is not None:
        state += ", paused"
    if not report.token:
        made, used = "none", ""  # revoked, or never made
    else:
        made, used = (
            _time(report.token_created_at, "before it was kept"),
            _time(report.token_used_at, "never"),
        )
    return [report.host, state, _time(report.last_heartbeat_at, "never"), made, used]


def _runners_list(args: argparse.Namespace) -> int:
    from kerrigan.store.runners import host_reports

    async def work(database: Database) -> int:
        async with database.sessions() as session:
            reports = await host_reports(session)
        if not reports:
            print("no runner hosts: `kerrigan runners create HOST` makes one", file=sys.stderr)
            return 0
        header = ["HOST", "STATE", "LAST HEARTBEAT", "TOKEN MADE", "TOKEN USED"]
        print(columns([header, *(_host_row(report) for report in reports)]))
        return 0

    return asyncio.run(with_database(load_settings(), work))


def _runners_revoke(args: argparse.Namespace) -> int:
    from kerrigan.store.audit import Change
    from kerrigan.store.runners import host_report, revoke_runner_token

    host, actor = _host_id(args.host), actor_name(args.actor, "revoking the token")

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            if await host_report(session, host) is None:
                raise UsageError(f"there is no runner host {host} (`kerrigan runners list` shows them)")
            if not await revoke_runner_token(session, host, Change(actor, database.clock())):
                raise UsageError(f"runner host {host} has no token to revoke")
        print(
            f"revoked the token of {host}: its agent's next call is refused (`kerrigan runners rotate {host}`"
            " makes a new one)"
        )
        return 0

    return asyncio.run(with_database(load_settings(), work))


def _runners_rotate(args: argparse.Namespace) -> int:
    from kerrigan.store.runners import create_runner_token, host_report

    host, actor = _host_id(args.host), actor_name(args.actor, "making the token")

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            if await host_report(session, host) is None:
                raise UsageError(
                    f"there is no runner host {host} (`kerrigan runners list` shows them; "
                    "`kerrigan runners create` makes one)"
                )
            token = await create_runner_token(session, host, database.clock(), actor=actor)
        print(token)
        print(f"the previous token of {host} no longer works: give its agent this one", file=sys.stderr)
        return 0

    return asyncio.run(with_database(load_settings(), work))


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``db``, ``tokens`` and ``runners``."""
    db_cmd = commands.add_parser("db", help="the database schema").add_subparsers(
        dest="db_command", required=True, metavar="ACTION"
    )
    db_cmd.add_parser("upgrade", help="apply migrations (KERRIGAN_DATABASE_URL)").set_defaults(
        handler=_db_upgrade
    )
    copy_cmd = db_cmd.add_parser(
        "copy",
        help="copy every table of KERRIGAN_DATABASE_URL into another database (SQLite to PostgreSQL)",
        description="Copy everything (inventory, sessions, jobs, output, results, secrets still encrypted, "
        "tokens, reservations, the audit log, deliveries...) from the database KERRIGAN_DATABASE_URL names "
        "into an empty one, migrated first to the same revision. Stop Kerrigan first. An interrupted copy "
        "is run again and goes on where it stopped. The row counts of every table are compared at the end "
        "(exit status 1 when they differ). See docs/operations.md.",
    )
    copy_cmd.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="the target: postgresql+asyncpg://... or sqlite+aiosqlite:///...",
    )
    copy_cmd.add_argument("--batch", type=int, default=500, help="rows written in one transaction")
    copy_cmd.set_defaults(handler=_db_copy)

    tokens_cmd = commands.add_parser("tokens", help="API tokens").add_subparsers(
        dest="tokens_command", required=True, metavar="ACTION"
    )
    create_cmd = tokens_cmd.add_parser("create", help="print a new API token for a GitHub login")
    create_cmd.add_argument("--login", required=True, help="the GitHub login the token acts as")
    create_cmd.add_argument(
        "--actor", metavar="NAME", help="who the audit log names (default: the user running the command)"
    )
    create_cmd.set_defaults(handler=_tokens_create)

    runners_cmd = commands.add_parser("runners", help="runner hosts and their tokens").add_subparsers(
        dest="runners_command", required=True, metavar="ACTION"
    )
    actor_help = "who the audit log names (default: the user running the command)"
    runner_create = runners_cmd.add_parser(
        "create", help="print a new token for a runner host (the host's previous token stops working)"
    )
    runner_create.add_argument("host", metavar="HOST", help="the runner host's id, as the inventory names it")
    runner_create.add_argument(
        "--force", action="store_true", help="make it even though the inventory has no such host (yet)"
    )
    runner_create.add_argument("--actor", metavar="NAME", help=actor_help)
    runner_create.set_defaults(handler=_runners_create)
    runners_cmd.add_parser(
        "list", help="every runner host: its state, last heartbeat, and when its token was made and last used"
    ).set_defaults(handler=_runners_list)
    runner_revoke = runners_cmd.add_parser(
        "revoke", help="the host's token stops working now (its agent's next call is refused)"
    )
    runner_revoke.add_argument("host", metavar="HOST")
    runner_revoke.add_argument("--actor", metavar="NAME", help=actor_help)
    runner_revoke.set_defaults(handler=_runners_revoke)
    runner_rotate = runners_cmd.add_parser(
        "rotate", help="print a new token for a known host; its previous token stops working now"
    )
    runner_rotate.add_argument("host", metavar="HOST")
    runner_rotate.add_argument("--actor", metavar="NAME", help=actor_help)
    runner_rotate.set_defaults(handler=_runners_rotate)
