"""``kerrigan setup``: register the GitHub App through GitHub's manifest flow and write its settings
(:mod:`kerrigan.cli.setup.flow`; imported when the command runs, not by every command)."""

from __future__ import annotations

import argparse

from kerrigan.config import ENV_FILE

DEFAULT_PORT = 8765  # app.yml's redirect_url names it


def _setup(args: argparse.Namespace) -> int:
    from kerrigan.cli.setup.flow import setup

    return setup(args)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``setup``."""
    setup_cmd = commands.add_parser(
        "setup",
        help="register the GitHub App from app.yml (GitHub's manifest flow) and write its settings",
        description="Open a local page that posts app.yml to GitHub as an App manifest, receive the code "
        "GitHub sends back, convert it into the App's id, private key, webhook secret and OAuth client, "
        "and write them to --out (the key beside it, mode 0600). Exit status: 0 written, 1 GitHub did not "
        "hand them over (nothing written), 2 a usage error.",
    )
    setup_cmd.add_argument(
        "--github-url",
        metavar="URL",
        help="GitHub's web address (default: KERRIGAN_GITHUB_URL or github.com)",
    )
    setup_cmd.add_argument(
        "--github-api-url",
        metavar="URL",
        help="GitHub's API (default: KERRIGAN_GITHUB_API_URL, api.github.com, or GHES's URL/api/v3)",
    )
    setup_cmd.add_argument(
        "--public-url",
        metavar="URL",
        help="Kerrigan's address as GitHub reaches it (default: KERRIGAN_PUBLIC_URL); webhooks go to "
        "URL/webhooks/github",
    )
    setup_cmd.add_argument("--name", help="the App's name, unique on GitHub (default: app.yml's)")
    setup_cmd.add_argument("--org", metavar="ORG", help="register the App for this organization, not for you")
    setup_cmd.add_argument(
        "--port", default=str(DEFAULT_PORT), help=f"the local page's port (default {DEFAULT_PORT}; 0: any)"
    )
    setup_cmd.add_argument(
        "--out", default=ENV_FILE, metavar="FILE", help=f"the settings file (default: ./{ENV_FILE})"
    )
    setup_cmd.add_argument("--force", action="store_true", help="replace --out and its key if they exist")
    setup_cmd.add_argument("--no-browser", action="store_true", help="print the page's address, open nothing")
    setup_cmd.add_argument(
        "--manifest", metavar="FILE", help="another manifest than the app.yml Kerrigan ships"
    )
    setup_cmd.set_defaults(handler=_setup)
