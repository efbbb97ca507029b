"""The ``kerrigan`` command: :func:`build_parser` names every subcommand, each module here holds a group of
them (``serve``, ``runner``, ``sessions``, ``setup``...), and :func:`main` runs one."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kerrigan import __version__
from kerrigan.cli import (
    console,
    device,
    explain,
    generated_settings,
    inventory,
    lab,
    power,
    reservations,
    runner,
    secrets,
    serve,
    sessions,
    setup,
    shell,
)
from kerrigan.cli.usage import UsageError
from kerrigan.core.explain import EXIT_INVALID

EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a tool SIGPIPE ended

__all__ = ["UsageError", "build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="kerrigan", description="Hardware-in-the-loop test sessions on a lab of devkits."
    )
    parser.add_argument("--version", action="version", version=f"kerrigan {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    explain.add_parser(commands)
    serve.add_parsers(commands)  # demo, serve, worker
    lab.add_parsers(commands)  # db, tokens, runners
    runner.add_parser(commands)
    sessions.add_parser(commands)
    reservations.add_parsers(commands)
    power.add_parser(commands)  # a reserved board's power, through the server
    console.add_parser(commands)  # a reserved board's console, through the server
    shell.add_parser(commands)  # a shell in a held job's sandbox, through the server
    inventory.add_parser(commands)
    secrets.add_parser(commands)
    setup.add_parser(commands)
    generated_settings.add_parser(commands)
    device.add_parser(commands)  # device power, inside a job
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
        # The reader went away (``| head``): stop quietly with the status a tool killed by SIGPIPE has,
        # as other command-line tools do; what is still buffered goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return status


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())
