"""``kerrigan secrets`` as an operator runs it: real processes on the lab's database (SQLite always,
PostgreSQL when asked for the round trip), the value on standard input and never in the output."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
from cryptography.fernet import Fernet

from kerrigan.store.audit import list_audit
from kerrigan.store.database import Database
from kerrigan.store.installations import Repository, add_repositories, find_repository, upsert_installation
from kerrigan.store.inventory import NotFoundError
from kerrigan.store.secrets import Keyring, secrets_for
from kerrigan.testing.github import GitHubStandIn

REPO: Final = "Octo/Firmware"
VALUE: Final = "vpn-key-5f2b9c1e7d-never-printed"
KEY_A: Final = Fernet.generate_key().decode()
KEY_B: Final = Fernet.generate_key().decode()

# A process takes a second or so to start: what the database cannot change runs on SQLite only.
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


class Kerrigan:
    """``kerrigan`` pointed at one database, with only the ``KERRIGAN_`` settings given."""

    def __init__(self, database_url: str, cwd: Path, settings: dict[str, str] | None = None) -> None:
        self.database_url, self.cwd = database_url, cwd
        self.settings = settings or {}
        self.outputs: list[str] = []

    def __call__(
        self, *args: str, stdin: str = "", keys: str | None = KEY_A
    ) -> subprocess.CompletedProcess[str]:
        environ = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
        environ["KERRIGAN_DATABASE_URL"] = self.database_url
        environ.update(self.settings)
        if keys is not None:
            environ["KERRIGAN_SECRETS_KEY"] = keys
        done = subprocess.run(
            [sys.executable, "-m", "kerrigan.cli", "secrets", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            cwd=self.cwd,
            env=environ,
            timeout=60,
        )
        self.outputs += [done.stdout, done.stderr]
        return done


@pytest.fixture
async def kerrigan(db: Database, database_url: str, tmp_path: Path) -> Kerrigan:
    async with db.sessions() as session, session.begin():
        installation = await upsert_installation(session, 77, "octo", db.clock())
        await add_repositories(session, installation, [(4242, REPO)])
    return Kerrigan(database_url, tmp_path)


async def _stored(db: Database, *names: str, keys: str = KEY_A) -> dict[str, str]:
    async with db.sessions() as session:
        return await secrets_for(session, REPO, names, keys=Keyring(tuple(keys.split(","))))


async def test_set_list_and_delete_round_trip_without_ever_printing_the_value(
    kerrigan: Kerrigan, db: Database
) -> None:
    created = kerrigan("set", "octo/firmware", "lab_vpn_key", "--actor", "olga", stdin=VALUE + "\n")
    assert (created.returncode, created.stdout) == (0, "created secret LAB_VPN_KEY of Octo/Firmware\n")
    assert await _stored(db, "LAB_VPN_KEY") == {"LAB_VPN_KEY": VALUE}  # the one newline dropped
    replaced = kerrigan("set", "octo/firmware", "LAB_VPN_KEY", "--actor", "olga", stdin=VALUE + "\n\n")
    assert replaced.stdout == "replaced secret LAB_VPN_KEY of Octo/Firmware\n"
    assert await _stored(db, "LAB_VPN_KEY") == {"LAB_VPN_KEY": VALUE + "\n"}  # only one was dropped
    listed = kerrigan("list", "octo/firmware")
    assert listed.returncode == 0
    assert re.fullmatch(r"LAB_VPN_KEY  set by olga at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n", listed.stdout)
    deleted = kerrigan("delete", "octo/firmware", "lab_vpn_key", "--actor", "olga")
    assert (deleted.returncode, deleted.stdout) == (0, "deleted secret LAB_VPN_KEY of Octo/Firmware\n")
    assert kerrigan("list", "octo/firmware").stderr == "Octo/Firmware has no secrets\n"
    async with db.sessions() as session:
        audit = await list_audit(session)
    assert [(entry.actor, entry.action, entry.field) for entry in audit] == [
        ("olga", "remove", "LAB_VPN_KEY"),
        ("olga", "change", "LAB_VPN_KEY"),
        ("olga", "add", "LAB_VPN_KEY"),
    ]
    assert not [output for output in kerrigan.outputs if VALUE in output]


@sqlite_only
@pytest.mark.parametrize(
    ("args", "stdin", "keys", "message"),
    [
        (
            ("set", REPO, "TOKEN"),
            "q7z!k\n",
            KEY_A,
            "its value is 5 bytes long; a masked secret needs at least 8",
        ),
        (("set", REPO, "TOKEN"), "v" * (48 * 1024 + 8), KEY_A, "over 48 KiB"),
        (("set", REPO, "TOKEN"), VALUE, None, "secrets need KERRIGAN_SECRETS_KEY: set it to a Fernet key"),
        (("set", REPO, "TOKEN"), VALUE, "not-a-key", "KERRIGAN_SECRETS_KEY must be Fernet keys"),
        (("set", REPO, "GITHUB_TOKEN"), VALUE, KEY_A, "NAME: 'GITHUB_TOKEN' is not a secret name"),
        (("set", "octo", "TOKEN"), VALUE, KEY_A, "REPOSITORY: 'octo' is not a repository"),
        (("set", "octo/other", "TOKEN"), VALUE, KEY_A, "not installed on a repository octo/other"),
        (("delete", REPO, "NOPE"), "", KEY_A, "Octo/Firmware has no secret NOPE"),
        (("list", "octo/other"), "", KEY_A, "not installed on a repository octo/other"),
    ],
)
async def test_a_mistake_is_one_line_exit_status_2_and_changes_nothing(
    kerrigan: Kerrigan, db: Database, args: tuple[str, ...], stdin: str, keys: str | None, message: str
) -> None:
    done = kerrigan(*args, stdin=stdin, keys=keys)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stdout == ""
    assert VALUE not in done.stderr
    assert "q7z!k" not in done.stderr
    assert await _stored(db, "TOKEN", "GITHUB_TOKEN") == {}


@sqlite_only
async def test_rotate_re_encrypts_under_the_first_key_once_the_old_one_is_listed_after_it(
    kerrigan: Kerrigan, db: Database
) -> None:
    assert kerrigan("set", REPO, "TOKEN", stdin=VALUE).returncode == 0
    refused = kerrigan("rotate", keys=KEY_B)
    assert refused.returncode == 2
    assert "nothing was rotated: 1 secret(s) are encrypted under key(s)" in refused.stderr
    rotated = kerrigan("rotate", keys=f"{KEY_B},{KEY_A}")
    assert rotated.returncode == 0, rotated.stderr
    assert "1 secret(s) re-encrypted under key" in rotated.stdout
    assert await _stored(db, "TOKEN", keys=KEY_B) == {"TOKEN": VALUE}
    assert not [
        output for output in kerrigan.outputs if KEY_A in output or KEY_B in output or VALUE in output
    ]


@sqlite_only
async def test_new_key_prints_a_fernet_key(kerrigan: Kerrigan) -> None:
    done = kerrigan("new-key", keys=None)
    assert done.returncode == 0
    Fernet(done.stdout.strip().encode())


# -- The App was installed before the database existed: GitHub is asked, and its answer remembered ---------


@pytest.fixture
def installed_before(github: GitHubStandIn) -> GitHubStandIn:
    """``Octo-Lab/Firmware`` of installation 9: GitHub knows it, no event told the database of it."""
    github.add_installation(9, "Octo-Lab")
    github.add_repository("Octo-Lab/Firmware", 9)
    return github


def _app_settings(github: GitHubStandIn) -> dict[str, str]:
    assert github.private_key is not None
    return {
        "KERRIGAN_GITHUB_APP_ID": github.app_id,
        "KERRIGAN_GITHUB_PRIVATE_KEY": github.private_key,
        "KERRIGAN_GITHUB_API_URL": github.url,
    }


def _asked(github: GitHubStandIn) -> list[str]:
    return [f"{r.method} {r.path}" for r in github.requests]


@sqlite_only
async def test_a_repository_no_event_told_of_is_asked_of_github_and_remembered(
    installed_before: GitHubStandIn, db: Database, database_url: str, tmp_path: Path
) -> None:
    github = installed_before
    kerrigan = Kerrigan(database_url, tmp_path, _app_settings(github))
    # The stand-in answers on this test's event loop: the command runs in a thread, not blocking it.
    done = await asyncio.to_thread(kerrigan, "set", "octo-lab/firmware", "LAB_VPN_KEY", stdin=VALUE)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "created secret LAB_VPN_KEY of Octo-Lab/Firmware\n",
        "",
    )
    assert _asked(github)[0] == "GET /repos/octo-lab/firmware/installation"
    token = github.requests[1]
    assert token.path == "/app/installations/9/access_tokens"
    assert token.body == {"repositories": ["firmware"], "permissions": {"metadata": "read"}}
    assert _asked(github)[2] == "DELETE /installation/token"  # its answer was all that was wanted
    async with db.sessions() as session:
        found = await find_repository(session, "OCTO-LAB/firmware")
    assert found == Repository("Octo-Lab/Firmware", github.repositories["Octo-Lab/Firmware"].id, 9)
    async with db.sessions() as session:
        stored = await secrets_for(session, "Octo-Lab/Firmware", ["LAB_VPN_KEY"], keys=Keyring((KEY_A,)))
    assert stored == {"LAB_VPN_KEY": VALUE}
    asked = len(github.requests)
    listed = await asyncio.to_thread(kerrigan, "list", "Octo-Lab/Firmware")
    assert listed.returncode == 0
    assert listed.stdout.startswith("LAB_VPN_KEY  set by ")
    assert len(github.requests) == asked  # remembered: GitHub is not asked again


@sqlite_only
async def test_a_repository_github_does_not_know_either_is_one_line(
    installed_before: GitHubStandIn, db: Database, database_url: str, tmp_path: Path
) -> None:
    kerrigan = Kerrigan(database_url, tmp_path, _app_settings(installed_before))
    done = await asyncio.to_thread(kerrigan, "set", "octo-lab/elsewhere", "TOKEN", stdin=VALUE)
    assert done.returncode == 2
    assert done.stderr == (
        "kerrigan secrets: Kerrigan's App is not installed on a repository octo-lab/elsewhere "
        "(GitHub says so too)\n"
    )
    assert _asked(installed_before) == ["GET /repos/octo-lab/elsewhere/installation"]
    async with db.sessions() as session:
        with pytest.raises(NotFoundError):
            await find_repository(session, "octo-lab/elsewhere")


@sqlite_only
async def test_without_the_app_configured_the_message_says_what_would_look_it_up(
    installed_before: GitHubStandIn, database_url: str, tmp_path: Path
) -> None:
    done = Kerrigan(database_url, tmp_path)("set", "octo-lab/firmware", "TOKEN", stdin=VALUE)
    assert done.returncode == 2
    assert "not installed on a repository octo-lab/firmware that this database knows of" in done.stderr
    assert "set KERRIGAN_GITHUB_APP_ID and the App's private key" in done.stderr
    assert installed_before.requests == []


@sqlite_only
async def test_github_unreachable_is_one_line_naming_what_could_not_be_asked(
    database_url: str, tmp_path: Path, app_key: tuple[str, str]
) -> None:
    settings = {
        "KERRIGAN_GITHUB_APP_ID": "4242",
        "KERRIGAN_GITHUB_PRIVATE_KEY": app_key[0],
        "KERRIGAN_GITHUB_API_URL": "http://127.0.0.1:9",  # the discard port: nothing answers there
    }
    done = Kerrigan(database_url, tmp_path, settings)("set", "octo-lab/firmware", "TOKEN", stdin=VALUE)
    assert done.returncode == 2
    assert done.stderr.startswith(
        "kerrigan secrets: cannot ask GitHub whether Kerrigan's App is installed on octo-lab/firmware: "
    )
    assert done.stderr.count("\n") == 1
