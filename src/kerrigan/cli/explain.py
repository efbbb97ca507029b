"""``kerrigan explain``: why each task of a manifest can or cannot run on the lab's devices."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING

from kerrigan.cli.api_client import ApiRefusedError, api_call, api_call_text, api_options
from kerrigan.cli.database import with_database
from kerrigan.cli.settings import load_settings
from kerrigan.cli.usage import UsageError, read_input
from kerrigan.core.explain import EXIT_CODE_HEADER, explain, explanation_json, invalid_input, render_text
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
    if args.inventory is None and (args.url or os.environ.get("KERRIGAN_URL")):
        return _explain_by_api(args, read_input(args.manifest, "manifest"), repository)
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


def _explain_by_api(args: argparse.Namespace, text: str, repository: str | None) -> int:
    """The live lab's answer (``POST /api/v1/explain``), printed as the command prints its own."""
    body: dict[str, object] = {"manifest": text, "path": args.manifest}
    if repository is not None:
        body["repository"] = repository
    try:
        if args.format == "json":
            document = asyncio.run(api_call(args, "POST", "/explain", body=body))
            code = document.pop("exit_code", 2)
            json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
            sys.stdout.write("\n")
            return code if isinstance(code, int) else 2
        answer, headers = asyncio.run(api_call_text(args, "POST", "/explain", {"format": "text"}, body))
    except ApiRefusedError as exc:
        print(f"kerrigan explain: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return 2
    sys.stdout.write(answer)
    code = headers.get(EXIT_CODE_HEADER, "2")
    return int(code) if code in ("0", "1", "2") else 2


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
        description="Resolve every task of MANIFEST against INVENTORY (without it: the live lab, through its "
        "API when --url or KERRIGAN_URL says where it is, with --token or KERRIGAN_TOKEN; else the lab's "
        "database, KERRIGAN_DATABASE_URL; either way with each device's health, maintenance, host pause and "
        "presence as the server sees them now) and explain each decision. "
        "Exit status: 0 every task has an eligible device, 1 some task has none, 2 invalid input.",
    )
    explain_cmd.add_argument(
        "--inventory", metavar="INVENTORY", help="inventory file (YAML); without it, the live lab"
    )
    explain_cmd.add_argument("manifest", metavar="MANIFEST", help="workflow manifest (YAML)")
    explain_cmd.add_argument("--format", choices=("text", "json"), default="text")
    explain_cmd.add_argument(
        "--repository",
        metavar="OWNER/NAME",
        help="explain for a session of this repository: pools whose repositories list does not admit it "
        "are rejected (without it, no pool's list is applied)",
    )
    api_options(explain_cmd)
    explain_cmd.set_defaults(handler=_explain)
