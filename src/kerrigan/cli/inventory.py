"""``kerrigan inventory import|export``: the inventory as code, merged into the lab's database."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from kerrigan.cli.database import with_database
from kerrigan.cli.settings import load_settings
from kerrigan.cli.usage import UsageError, actor_name, read_input
from kerrigan.core.explain import EXIT_INVALID
from kerrigan.core.inventory_file import inventory_document, parse_inventory

if TYPE_CHECKING:
    from kerrigan.store.database import Database


EXIT_CONFLICT = 1  # an import refused: the file and the database changed the same fields differently


def _import_actor(name: str | None) -> str:
    return actor_name(name, "importing")


def _inventory_import(args: argparse.Namespace) -> int:
    from kerrigan.core.inventory_file import DocumentError
    from kerrigan.core.inventory_merge import merge_inventory
    from kerrigan.store.audit import Change
    from kerrigan.store.inventory import ConflictError, NotFoundError, StaleError, apply_diff, load_inventory
    from kerrigan.store.inventory_imports import last_import, record_import

    result = parse_inventory(read_input(args.file, "inventory"), args.file)
    if result.inventory is None:
        for problem in result.errors:
            print(f"error: {problem}", file=sys.stderr)
        print(f"{len(result.errors)} error(s); nothing was changed", file=sys.stderr)
        return EXIT_INVALID
    desired = result.inventory
    actor = _import_actor(args.actor)

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            try:
                base = await last_import(session)
            except DocumentError as exc:
                raise UsageError(f"the stored last import cannot be read: {exc}") from None
            current = await load_inventory(session)
            plan = merge_inventory(
                base.inventory if base else None, desired, current, prune=args.prune, force=args.force
            )
            for field_change in plan.diff.changes:
                print(field_change)
            for conflict in plan.conflicts:
                print(conflict)
            counts = ", ".join(f"{count} {name}" for name, count in plan.diff.counts().items())
            if plan.conflicts and not args.force:
                await session.rollback()
                since = (
                    f"since the last import ({base.imported_at:%Y-%m-%d %H:%M} UTC by {base.actor})"
                    if base
                    else "(there is no earlier import to merge against: every field where they differ "
                    "counts, see `kerrigan inventory export`)"
                )
                print(
                    ("dry run: " if args.dry_run else "")
                    + f"{len(plan.conflicts)} conflict(s): the file and the database changed these "
                    f"differently {since}; nothing was changed. Make the file agree, or pass --force to "
                    "apply the file's values",
                    file=sys.stderr,
                )
                return EXIT_CONFLICT
            forced = f"; {len(plan.conflicts)} conflict(s) resolved the file's way (--force)"
            forced = forced if plan.conflicts else ""
            if args.dry_run:
                await session.rollback()
                would = f"would apply {counts}" if plan.diff else "no changes to apply"
                print(f"dry run: {would}{forced}; nothing was changed")
                return 0
            change = Change(actor, database.clock())
            try:
                await apply_diff(session, plan.merged, plan.diff, change)
            except (ConflictError, NotFoundError, StaleError) as exc:
                raise UsageError(f"cannot apply the file: {exc}; nothing was changed") from None
            await record_import(session, plan.next_base, change)
        if not plan.diff:
            print("no changes: the database already has every change the file makes")
        else:
            print(f"applied: {counts}{forced}")
        return 0

    return asyncio.run(with_database(load_settings(), work))


def _inventory_export(args: argparse.Namespace) -> int:
    import yaml

    from kerrigan.store.inventory import load_inventory

    async def work(database: Database) -> int:
        async with database.sessions() as session:
            document = inventory_document(await load_inventory(session))
        if args.format == "json":
            json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            yaml.safe_dump(document, sys.stdout, sort_keys=False, allow_unicode=True, width=110)
        return 0

    return asyncio.run(with_database(load_settings(), work))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``inventory import`` and ``inventory export``."""
    inventory_cmd = commands.add_parser("inventory", help="inventory as code").add_subparsers(
        dest="inventory_command", required=True, metavar="ACTION"
    )
    import_cmd = inventory_cmd.add_parser(
        "import",
        help="merge an inventory file into the database: what the file changed since the last import",
        description="Apply what FILE changed since the last import; fields changed in the database since "
        "keep their value, and a field both changed differently is a conflict, which refuses the import "
        "unless --force. Exit status: 0 applied (or a clean dry run), 1 conflicts, 2 invalid input.",
    )
    import_cmd.add_argument("file", metavar="FILE")
    import_cmd.add_argument(
        "--dry-run", action="store_true", help="print the changes and the conflicts, change nothing"
    )
    import_cmd.add_argument(
        "--prune", action="store_true", help="also remove what the file dropped since the last import"
    )
    import_cmd.add_argument(
        "--force", action="store_true", help="apply the file's value where the database changed it too"
    )
    import_cmd.add_argument(
        "--actor", metavar="NAME", help="who the audit log names (default: the user running the command)"
    )
    import_cmd.set_defaults(handler=_inventory_import)
    export_cmd = inventory_cmd.add_parser("export", help="write the inventory in the file format")
    export_cmd.add_argument("--format", choices=("yaml", "json"), default="yaml")
    export_cmd.set_defaults(handler=_inventory_export)
