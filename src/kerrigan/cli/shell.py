"""``kerrigan shell JOB``: a shell in a held job's sandbox on its runner host (its user, namespaces and
workspace, its environment without secrets), for the person holding its board (Hold board, ``kerrigan
reserve --job``) while the hold lasts, and System Admins; through the lab's server (``GET
/api/v1/jobs/{id}/shell``, a WebSocket; docs/reservations.md).

As ``kerrigan console``: what the shell prints goes to stdout, what you type to the shell (stdin in raw
mode when it is a terminal); Ctrl-] leaves. Exit status: 0 when you left or the session ended as sessions
do (the shell exited, idle, the hold ended); 1 when refused (the server's message is printed) or failed; 2
usage and connection errors.
"""

from __future__ import annotations

import argparse

from kerrigan.cli.api_client import api_options
from kerrigan.cli.console import run_session


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan shell``."""
    shell = commands.add_parser(
        "shell",
        help="a shell in a held job's sandbox on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN); Ctrl-] leaves",
        description="Open a shell in the sandbox of a job whose board you hold (Hold board, `kerrigan "
        "reserve --job ID`; System Admins: any held job), on its runner host: the job's user, namespaces "
        "and workspace, its environment without secrets. Ctrl-] leaves. Exit status: 0 left or ended, 1 "
        "refused or failed (the reason is printed), 2 usage or connection error.",
    )
    shell.add_argument("job", metavar="JOB", type=int, help="the job's id (as `kerrigan sessions` shows it)")
    api_options(shell)
    shell.set_defaults(handler=_shell)


def _shell(args: argparse.Namespace) -> int:
    return run_session(args, f"/jobs/{args.job}/shell", "shell", f"a shell in job {args.job}'s sandbox")
