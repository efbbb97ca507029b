"""``kerrigan secrets set|list|delete|rotate|new-key``: a repository's secrets, on the lab's own database.

A value comes from standard input (one trailing newline dropped, as ``echo`` and a heredoc add one; typed
without echo on a terminal) and is never printed: not by ``list``, nor in any message. A repository the
database does not know is looked up on GitHub when the App is configured here (installed before the
database existed), and remembered.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from kerrigan.cli.database import with_database
from kerrigan.cli.settings import load_settings
from kerrigan.cli.usage import UsageError, actor_name, first_line
from kerrigan.config import Settings
from kerrigan.core.inventory import RepositoryGlobError, validate_repository

if TYPE_CHECKING:
    from kerrigan.store.database import Database
    from kerrigan.store.installations import Repository
    from kerrigan.store.secrets import Keyring

GITHUB_ATTEMPTS = 2  # a person waits: GitHub's passing errors are tried again once, not for minutes
GITHUB_WAIT_S = 10.0

# Read one byte over the most a value may hold (and its newline), so a longer one is told apart.
_MAX_INPUT = 48 * 1024 + 3


def _repository(text: str) -> str:
    try:
        return validate_repository(text)
    except RepositoryGlobError as exc:
        raise UsageError(f"REPOSITORY: {exc}") from None


def _name(text: str) -> str:
    from kerrigan.store.secrets import SecretError, validate_name

    try:
        return validate_name(text)
    except SecretError as exc:
        raise UsageError(f"NAME: {exc}") from None


def _actor(name: str | None) -> str:
    return actor_name(name, "setting it")


async def _installed(database: Database, settings: Settings, repository: str) -> Repository:
    """The installed repository: the database's, else GitHub's (when the App is configured here), which
    is then remembered; a UsageError in one line when neither knows it or GitHub cannot be asked."""
    import aiohttp

    from kerrigan.github.client import GitHubClient, InstallationTokens
    from kerrigan.github.installations import RepositoryDiscovery
    from kerrigan.store.installations import DiscoveryError, installed_repository
    from kerrigan.store.inventory import NotFoundError

    app_id, key = settings.github_app_id, settings.github_private_key
    # The client's retry warnings would go to stderr beside the one line this command says on failure.
    logging.getLogger("kerrigan.github").addHandler(logging.NullHandler())
    async with aiohttp.ClientSession() as http:
        discover = None
        if app_id and key:
            client = GitHubClient(
                http, base_url=settings.github_api_url, max_attempts=GITHUB_ATTEMPTS, max_wait_s=GITHUB_WAIT_S
            )
            try:
                discover = RepositoryDiscovery(client, InstallationTokens(client, app_id, key))
            except ValueError as exc:  # the key is not an RSA private key
                raise UsageError(f"the GitHub App's private key cannot be used: {first_line(exc)}") from None
        try:
            return await installed_repository(database, repository, discover)
        except NotFoundError as exc:
            if discover is None:
                raise UsageError(
                    f"{exc} that this database knows of, and GitHub cannot be asked here: set "
                    "KERRIGAN_GITHUB_APP_ID and the App's private key to look it up"
                ) from None
            raise UsageError(f"{exc} (GitHub says so too)") from None
        except DiscoveryError as exc:
            raise UsageError(
                f"cannot ask GitHub whether Kerrigan's App is installed on {repository}: {exc}"
            ) from None


def _keys() -> Keyring:
    from kerrigan.store.secrets import Keyring, SecretsKeyError

    try:
        return Keyring(load_settings().secrets_keys)
    except SecretsKeyError as exc:
        raise UsageError(str(exc)) from None


def _value(name: str) -> str:
    """The value on standard input, or typed without echo when it is a terminal."""
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass(f"value of {name}: ")
    raw = sys.stdin.buffer.read(_MAX_INPUT)
    if len(raw) == _MAX_INPUT:
        raise UsageError(f"the value of {name} on standard input is over 48 KiB, the most a secret holds")
    raw = raw.removesuffix(b"\n").removesuffix(b"\r") if raw.endswith(b"\n") else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"the value of {name} on standard input is not UTF-8 text (byte {exc.start})"
        ) from None


def _secrets_set(args: argparse.Namespace) -> int:
    from kerrigan.store.audit import Change
    from kerrigan.store.secrets import SecretError, set_secret, validate_value

    repository, name, actor = _repository(args.repository), _name(args.name), _actor(args.actor)
    settings = load_settings()
    keys = _keys()
    value = _value(name)
    try:
        validate_value(name, value)  # before the database is opened: a mistake costs no connection
    except SecretError as exc:
        raise UsageError(str(exc)) from None

    async def work(database: Database) -> int:
        found = await _installed(database, settings, repository)
        async with database.sessions() as session, session.begin():
            created = await set_secret(
                session, keys, found, name, value, change=Change(actor, database.clock())
            )
        print(f"{'created' if created else 'replaced'} secret {name} of {found.full_name}")
        return 0

    return asyncio.run(with_database(settings, work))


def _secrets_list(args: argparse.Namespace) -> int:
    from kerrigan.store.secrets import list_secrets

    repository = _repository(args.repository)
    settings = load_settings()

    async def work(database: Database) -> int:
        found = await _installed(database, settings, repository)
        async with database.sessions() as session:
            secrets = await list_secrets(session, found)
        if not secrets:
            print(f"{found.full_name} has no secrets", file=sys.stderr)
            return 0
        width = max(len(secret.name) for secret in secrets)
        for secret in secrets:
            print(f"{secret.name:<{width}}  set by {secret.set_by} at {secret.set_at:%Y-%m-%d %H:%M:%S} UTC")
        return 0

    return asyncio.run(with_database(settings, work))


def _secrets_delete(args: argparse.Namespace) -> int:
    from kerrigan.store.audit import Change
    from kerrigan.store.inventory import NotFoundError
    from kerrigan.store.secrets import delete_secret

    repository, name, actor = _repository(args.repository), _name(args.name), _actor(args.actor)
    settings = load_settings()

    async def work(database: Database) -> int:
        found = await _installed(database, settings, repository)
        async with database.sessions() as session, session.begin():
            try:
                await delete_secret(session, found, name, Change(actor, database.clock()))
            except NotFoundError as exc:
                raise UsageError(str(exc)) from None
        print(f"deleted secret {name} of {found.full_name}")
        return 0

    return asyncio.run(with_database(settings, work))


def _secrets_rotate(args: argparse.Namespace) -> int:
    from kerrigan.store.secrets import SecretsKeyError, rotate_secrets

    keys = _keys()

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            try:
                done = await rotate_secrets(session, keys)
            except SecretsKeyError as exc:
                raise UsageError(f"nothing was rotated: {exc}") from None
        print(f"{done.rotated} secret(s) re-encrypted under key {keys.current}; {done.current} already were")
        return 0

    return asyncio.run(with_database(load_settings(), work))


def _secrets_new_key(args: argparse.Namespace) -> int:
    from cryptography.fernet import Fernet

    print(Fernet.generate_key().decode("ascii"))
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``secrets set``, ``list``, ``delete``, ``rotate`` and ``new-key``."""
    secrets_cmd = commands.add_parser(
        "secrets", help="repository secrets, encrypted under KERRIGAN_SECRETS_KEY"
    ).add_subparsers(dest="secrets_command", required=True, metavar="ACTION")
    actor_help = "who the audit log names (default: the user running the command)"

    set_cmd = secrets_cmd.add_parser(
        "set",
        help="set a secret from standard input (one trailing newline dropped)",
        description="Store the value on standard input as the secret NAME of REPOSITORY (owner/name), "
        "encrypted; a secret of that name (in any case) is replaced. On a terminal the value is typed "
        "without echo.",
    )
    set_cmd.add_argument("repository", metavar="REPOSITORY", help="owner/name")
    set_cmd.add_argument("name", metavar="NAME", help="letters, digits and _ (stored upper-case)")
    set_cmd.add_argument("--actor", metavar="NAME", help=actor_help)
    set_cmd.set_defaults(handler=_secrets_set)

    list_cmd = secrets_cmd.add_parser("list", help="a repository's secrets: names, who set them, when")
    list_cmd.add_argument("repository", metavar="REPOSITORY", help="owner/name")
    list_cmd.set_defaults(handler=_secrets_list)

    delete_cmd = secrets_cmd.add_parser("delete", help="delete a secret")
    delete_cmd.add_argument("repository", metavar="REPOSITORY", help="owner/name")
    delete_cmd.add_argument("name", metavar="NAME")
    delete_cmd.add_argument("--actor", metavar="NAME", help=actor_help)
    delete_cmd.set_defaults(handler=_secrets_delete)

    secrets_cmd.add_parser(
        "rotate",
        help="re-encrypt every secret under the first key of KERRIGAN_SECRETS_KEY",
        description="Re-encrypt every secret not yet under the first key of KERRIGAN_SECRETS_KEY with it; "
        "the other keys of the list must open them. See docs/secrets.md.",
    ).set_defaults(handler=_secrets_rotate)
    secrets_cmd.add_parser("new-key", help="print a new Fernet key for KERRIGAN_SECRETS_KEY").set_defaults(
        handler=_secrets_new_key
    )
