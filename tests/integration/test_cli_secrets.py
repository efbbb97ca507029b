"""``kerrigan secrets`` as an operator runs it: real processes on the lab's database (SQLite always,
PostgreSQL when asked for the round trip), the value on standard input and never in the output."""

from __future__ import annotations

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
from kerrigan.store.installations import add_repositories, upsert_installation
from kerrigan.store.secrets import Keyring, secrets_for

REPO: Final = "Octo/Firmware"
VALUE: Final = "vpn-key-5f2b9c1e7d-never-printed"
KEY_A: Final = Fernet.generate_key().decode()
KEY_B: Final = Fernet.generate_key().decode()

# A process takes a second or so to start: what the database cannot change runs on SQLite only.
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


class Kerrigan:
    """``kerrigan`` pointed at one database, with only the ``KERRIGAN_`` settings given."""

    def __init__(self, database_url: str, cwd: Path) -> None:
        self.database_url, self.cwd = database_url, cwd
        self.outputs: list[str] = []

    def __call__(
        self, *args: str, stdin: str = "", keys: str | None = KEY_A
    ) -> subprocess.CompletedProcess[str]:
        environ = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
        environ["KERRIGAN_DATABASE_URL"] = self.database_url
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
