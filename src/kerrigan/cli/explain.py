"""``kerrigan explain``: why each task of a manifest can or cannot run on the lab's devices."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from kerrigan.cli.database import with_database
from kerrigan.cli.settings import load_settings
from kerrigan.cli.usage import UsageError, read_input
from kerrigan.core.explain import explain, explanation_json, invalid_input, render_text
from kerrigan.core.inventory import Inventory, RepositoryGlobError, validate_repository
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.manifest import parse_manifest

if TYPE_CHECKING:
    from kerrigan.store.database import Database


def _explain(args: argparse.Namespace) -> int:
    repository: str | None = args.repository
    if repository is not None:
        try:
            validate_repository(repository)
        except RepositoryGlobError as exc:
            raise UsageError(f"--repository: {exc}") from None
    manifest = parse_manifest(read_input(args.manifest, "manifest"), args.manifest)
    if args.inventory is None:  # the lab as the server sees it now: health, maintenance, pauses, presence
        explanation = explain(manifest, _stored_inventory(), repository=repository)
    else:
        inventory_result = parse_inventory(read_input(args.inventory, "inventory"), args.inventory)
        if inventory_result.inventory is None:
            explanation = invalid_input(manifest, inventory_result.errors)
        else:
            explanation = explain(manifest, inventory_result.inventory, repository=repository)
    if args.format == "json":
        json.dump(explanation_json(explanation), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(explanation))
    return explanation.exit_code


def _stored_inventory() -> Inventory:
    """The inventory in the lab's database (``KERRIGAN_DATABASE_URL``), with its live state."""
    from kerrigan.store.inventory import load_inventory

    found: list[Inventory] = []

    async def work(database: Database) -> int:
        async with database.sessions() as session:
            found.append(await load_inventory(session))
        return 0

    asyncio.run(with_database(load_settings(), work))
    return found[0]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``explain``."""
    explain_cmd = commands.add_parser(
        "explain",
        help="resolve a workflow manifest against an inventory file (or the lab's database) and say why",
        description="Resolve every task of MANIFEST against INVENTORY (without it: the lab's database, "
        "KERRIGAN_DATABASE_URL, with each device's health, maintenance, host pause and presence as the "
        "server sees them now) and explain each decision. "
        "Exit status: 0 every task has an eligible device, 1 some task has none, 2 invalid input.",
    )
    explain_cmd.add_argument(
        "--inventory", metavar="INVENTORY", help="inventory file (YAML); without it, the lab's database"
    )
    explain_cmd.add_argument("manifest", metavar="MANIFEST", help="workflow manifest (YAML)")
    explain_cmd.add_argument("--format", choices=("text", "json"), default="text")
    explain_cmd.add_argument(
        "--repository",
        metavar="OWNER/NAME",
        help="explain for a session of this repository: pools whose repositories list does not admit it "
        "are rejected (without it, no pool's list is applied)",
    )
    explain_cmd.set_defaults(handler=_explain)
