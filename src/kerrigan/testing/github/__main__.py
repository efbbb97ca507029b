"""``python -m kerrigan.testing.github``: run the stand-in on loopback until stopped, printing its address."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path

from kerrigan.testing.github.server import GitHubStandIn

ROLES = ("admin", "maintain", "write", "triage", "read")


async def serve(arguments: list[str]) -> None:
    """Parse the command line, start the stand-in with one repository, print its URL and wait."""
    parser = argparse.ArgumentParser(
        prog="python -m kerrigan.testing.github",
        description="Run the GitHub stand-in on loopback until stopped.",
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--app-id", default="4242")
    parser.add_argument("--public-key", type=Path, required=True, help="the App's public key (PEM file)")
    parser.add_argument("--repository", default="octo/firmware")
    parser.add_argument("--installation", type=int, default=1)
    parser.add_argument("--public", action="store_true", help="the repository is public (default: private)")
    parser.add_argument("--workflows", type=Path, help="a folder of manifests served at every commit")
    parser.add_argument(
        "--files", type=Path, help="a folder whose files (all of them, by relative path) are every commit's"
    )
    parser.add_argument(
        "--artifact",
        action="append",
        default=[],
        metavar="RUN_ID:NAME:FOLDER",
        help="an artifact of workflow run RUN_ID: a zip of FOLDER's files (may be given again)",
    )
    parser.add_argument(
        "--permission",
        action="append",
        default=[],
        metavar="LOGIN:ROLE",
        help="LOGIN's permission on the repository: admin, maintain, write, triage or read (may be given "
        "again); GitHub says any other login is no collaborator",
    )
    args = parser.parse_args(arguments)
    stand_in = GitHubStandIn(args.app_id, public_key=args.public_key.read_text(encoding="utf-8"))
    stand_in.add_installation(args.installation, args.repository.split("/")[0])
    stand_in.add_repository(args.repository, args.installation, private=not args.public)
    files: dict[str, str | bytes] = {}
    if args.files:
        files |= {
            path.relative_to(args.files).as_posix(): path.read_bytes()
            for path in sorted(args.files.rglob("*"))
            if path.is_file()
        }
    if args.workflows:
        files |= {
            f".kerrigan/workflows/{path.name}": path.read_bytes()
            for path in sorted(args.workflows.glob("*.yml"))
        }
    if files:
        stand_in.add_commit(args.repository, "*", files)
    for artifact in args.artifact:
        run_id, name, folder = artifact.split(":", 2)
        root = Path(folder)
        contents = {
            p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
        }
        stand_in.add_artifact(args.repository, int(run_id), name, contents)
    for granted in args.permission:
        login, _, role = granted.partition(":")
        if not login or role not in ROLES:
            parser.error(f"--permission takes LOGIN:ROLE, ROLE one of {', '.join(ROLES)}: not {granted!r}")
        stand_in.set_permission(args.repository, login, role)
    await stand_in.start(args.port)
    print(stand_in.url, flush=True)  # noqa: T201 -- the caller reads the address from here
    await asyncio.Event().wait()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(sys.argv[1:]))
