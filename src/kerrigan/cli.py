"""The ``kerrigan`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kerrigan import __version__
from kerrigan.core.explain import (
    EXIT_INVALID,
    explain,
    explanation_json,
    invalid_input,
    render_text,
)
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.manifest import parse_manifest


class UsageError(Exception):
    """A mistake in how the command was called; printed as one line, exit status 2."""


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror}") from None


def _explain(args: argparse.Namespace) -> int:
    inventory_result = parse_inventory(_read(args.inventory, "inventory"), args.inventory)
    manifest = parse_manifest(_read(args.manifest, "manifest"), args.manifest)
    if inventory_result.inventory is None:
        explanation = invalid_input(manifest, inventory_result.errors)
    else:
        explanation = explain(manifest, inventory_result.inventory)
    if args.format == "json":
        json.dump(explanation_json(explanation), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(explanation))
    return explanation.exit_code


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="kerrigan", description="Hardware-in-the-loop test sessions on a lab of devkits."
    )
    parser.add_argument("--version", action="version", version=f"kerrigan {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    explain_cmd = commands.add_parser(
        "explain",
        help="resolve a workflow manifest against an inventory file and say why",
        description="Resolve every task of MANIFEST against INVENTORY and explain each decision. "
        "Exit status: 0 every task has an eligible device, 1 some task has none, 2 invalid input.",
    )
    explain_cmd.add_argument("--inventory", required=True, metavar="INVENTORY", help="inventory file (YAML)")
    explain_cmd.add_argument("manifest", metavar="MANIFEST", help="workflow manifest (YAML)")
    explain_cmd.add_argument("--format", choices=("text", "json"), default="text")
    explain_cmd.set_defaults(handler=_explain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()
    except UsageError as exc:
        print(f"kerrigan {args.command}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID
    return status


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
