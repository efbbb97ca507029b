"""Repository secrets in the store: encrypted at rest, audited without values, rotated between keys, and
handed out only by name; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Final

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from kerrigan.config import ConfigError, Settings
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.installations import add_repositories, upsert_installation
from kerrigan.store.inventory import ConflictError, NotFoundError
from kerrigan.store.models import SecretRow
from kerrigan.store.secrets import (
    MAX_SECRETS,
    Keyring,
    Repository,
    SecretError,
    SecretsKeyError,
    delete_secret,
    find_repository,
    key_id,
    list_secrets,
    rotate_secrets,
    secrets_for,
    set_secret,
    validate_name,
    validate_value,
)

REPO: Final = "Octo/Firmware"
REPO_ID: Final = 4242
VALUE: Final = "vpn-key-5f2b9c1e7d"  # searched for in everything the store hands out
KEY_A: Final = Fernet.generate_key().decode()
KEY_B: Final = Fernet.generate_key().decode()


async def _installed(db: Database, full_name: str = REPO, github_id: int = REPO_ID) -> Repository:
    async with db.sessions() as session, session.begin():
        installation = await upsert_installation(session, 77, "octo", db.clock())
        await add_repositories(session, installation, [(github_id, full_name)])
        return await find_repository(session, full_name)


async def _set(db: Database, keys: Keyring, name: str, value: str = VALUE, actor: str = "alice") -> bool:
    async with db.sessions() as session, session.begin():
        repository = await find_repository(session, REPO)
        return await set_secret(session, keys, repository, name, value, change=Change(actor, db.clock()))


async def _for(db: Database, keys: Keyring, *names: str, repository: str = REPO) -> dict[str, str]:
    async with db.sessions() as session:
        return await secrets_for(session, repository, names, keys=keys)


async def _rows(db: Database) -> list[SecretRow]:
    async with db.sessions() as session:
        return list((await session.scalars(select(SecretRow).order_by(SecretRow.name))).all())


async def test_a_secret_is_stored_encrypted_under_the_first_key_and_read_back_by_name(db: Database) -> None:
    await _installed(db)
    keys = Keyring((KEY_A,))
    assert await _set(db, keys, "lab_vpn_key") is True
    [row] = await _rows(db)
    assert row.name == "LAB_VPN_KEY"
    assert VALUE not in row.ciphertext
    assert Fernet(KEY_A.encode()).decrypt(row.ciphertext.encode()).decode() == VALUE
    assert row.key_id == key_id(KEY_A) == keys.current
    assert KEY_A not in row.key_id
    assert (row.repository_id, row.set_by, row.set_at) == (REPO_ID, "alice", db.clock())
    assert await _for(db, keys, "LAB_VPN_KEY", "Lab_Vpn_Key") == {"LAB_VPN_KEY": VALUE, "Lab_Vpn_Key": VALUE}


async def test_names_differing_only_in_case_are_one_secret_replaced_not_added(db: Database) -> None:
    await _installed(db)
    keys = Keyring((KEY_A,))
    await _set(db, keys, "TOKEN")
    assert await _set(db, keys, "token", "a-second-value", actor="bob") is False
    [row] = await _rows(db)
    assert row.set_by == "bob"
    assert await _for(db, keys, "TOKEN") == {"TOKEN": "a-second-value"}


async def test_every_set_and_delete_is_audited_and_no_entry_holds_the_value(db: Database) -> None:
    repository = await _installed(db)
    keys = Keyring((KEY_A,))
    await _set(db, keys, "TOKEN")
    await _set(db, keys, "TOKEN", VALUE + "-2")
    async with db.sessions() as session, session.begin():
        await delete_secret(session, repository, "token", Change("carol", db.clock()))
    async with db.sessions() as session:
        entries = await list_audit(session)
    assert [
        (e.actor, e.action, e.subject_type, e.subject_id, e.field, e.before, e.after) for e in entries
    ] == [
        ("carol", "remove", "secret", REPO, "TOKEN", "***", None),
        ("alice", "change", "secret", REPO, "TOKEN", "***", "***"),
        ("alice", "add", "secret", REPO, "TOKEN", None, "***"),
    ]
    assert VALUE not in repr(entries)
    assert await _rows(db) == []


async def test_the_audit_log_holds_the_longest_repository_name_github_allows(db: Database) -> None:
    # A 39-character owner and a 100-character name: past the 63 characters audit subjects once had.
    long_name = f"{'o' * 39}/{'n' * 100}"
    repository = await _installed(db, long_name, 99)
    async with db.sessions() as session, session.begin():
        await set_secret(
            session, Keyring((KEY_A,)), repository, "TOKEN", VALUE, change=Change("a", db.clock())
        )
    async with db.sessions() as session:
        [entry] = await list_audit(session)
    assert entry.subject_id == long_name


async def test_deleting_a_secret_the_repository_does_not_have_is_not_found(db: Database) -> None:
    repository = await _installed(db)
    async with db.sessions() as session, session.begin():
        with pytest.raises(NotFoundError, match="Octo/Firmware has no secret NOPE"):
            await delete_secret(session, repository, "nope", Change("alice", db.clock()))


async def test_a_repository_kerrigan_is_not_installed_on_is_not_found(db: Database) -> None:
    await _installed(db)
    async with db.sessions() as session:
        with pytest.raises(NotFoundError, match="not installed on a repository octo/other"):
            await find_repository(session, "octo/other")
        assert (await find_repository(session, "OCTO/firmware")).full_name == REPO


async def test_secrets_for_leaves_out_names_not_set_and_repositories_not_installed(db: Database) -> None:
    await _installed(db)
    keys = Keyring((KEY_A,))
    await _set(db, keys, "TOKEN")
    assert await _for(db, keys, "TOKEN", "MISSING") == {"TOKEN": VALUE}
    assert await _for(db, keys, "TOKEN", repository="octo/other") == {}
    assert await _for(db, keys) == {}


async def test_secrets_for_decrypts_only_the_names_asked(db: Database) -> None:
    await _installed(db)
    keys = Keyring((KEY_A,))
    await _set(db, keys, "TOKEN")
    await _set(db, keys, "OTHER")
    async with db.sessions() as session, session.begin():
        row = await session.scalar(select(SecretRow).where(SecretRow.name == "OTHER"))
        assert row is not None
        row.ciphertext = "not-a-fernet-token"  # would fail if it were decrypted
    assert await _for(db, keys, "TOKEN") == {"TOKEN": VALUE}
    with pytest.raises(SecretsKeyError, match="secret OTHER of Octo/Firmware"):
        await _for(db, keys, "OTHER")


async def test_a_renamed_repository_keeps_its_secrets(db: Database) -> None:
    await _installed(db)
    keys = Keyring((KEY_A,))
    await _set(db, keys, "TOKEN")
    await _installed(db, "octo/firmware-ng", REPO_ID)  # GitHub's id is the same: a rename
    assert await _for(db, keys, "TOKEN", repository="octo/firmware-ng") == {"TOKEN": VALUE}
    assert await _for(db, keys, "TOKEN") == {}


async def test_secrets_are_listed_by_name_with_who_set_them_and_never_a_value(db: Database) -> None:
    repository = await _installed(db)
    keys = Keyring((KEY_A,))
    for name in ("ZETA", "ALPHA", "MID"):
        await _set(db, keys, name)
    async with db.sessions() as session:
        listed = await list_secrets(session, repository)
        page = await list_secrets(session, repository, after="ALPHA", limit=1)
    assert [(s.name, s.set_by) for s in listed] == [("ALPHA", "alice"), ("MID", "alice"), ("ZETA", "alice")]
    assert [s.name for s in page] == ["MID"]
    assert VALUE not in repr(listed)


async def test_a_repository_holds_at_most_a_hundred_secrets(db: Database) -> None:
    await _installed(db)
    keys = Keyring((KEY_A,))
    for number in range(MAX_SECRETS):
        await _set(db, keys, f"S{number}")
    assert await _set(db, keys, "S0", "replacing-is-fine") is False
    with pytest.raises(ConflictError, match="100 secrets"):
        await _set(db, keys, "ONE_MORE")


async def test_rotation_re_encrypts_under_the_first_key_and_the_old_key_can_then_go(db: Database) -> None:
    await _installed(db)
    await _set(db, Keyring((KEY_A,)), "TOKEN")
    await _set(db, Keyring((KEY_A,)), "OTHER", "other-value-123")
    both = Keyring((KEY_B, KEY_A))
    assert await _for(db, both, "TOKEN") == {"TOKEN": VALUE}  # the old key still decrypts
    await _set(db, both, "NEWER", "newer-value-123")  # the new key encrypts
    async with db.sessions() as session, session.begin():
        done = await rotate_secrets(session, both)
    assert (done.rotated, done.current) == (2, 1)
    assert {row.key_id for row in await _rows(db)} == {key_id(KEY_B)}
    only_new = Keyring((KEY_B,))
    assert await _for(db, only_new, "TOKEN", "OTHER", "NEWER") == {
        "TOKEN": VALUE,
        "OTHER": "other-value-123",
        "NEWER": "newer-value-123",
    }
    async with db.sessions() as session, session.begin():
        assert (await rotate_secrets(session, only_new)).rotated == 0


async def test_rotation_without_the_old_key_changes_nothing_and_names_the_key(db: Database) -> None:
    await _installed(db)
    await _set(db, Keyring((KEY_A,)), "TOKEN")
    before = [(row.ciphertext, row.key_id) for row in await _rows(db)]
    only_new = Keyring((KEY_B,))
    async with db.sessions() as session, session.begin():
        with pytest.raises(SecretsKeyError, match=f"1 secret.* under key.* {key_id(KEY_A)}") as caught:
            await rotate_secrets(session, only_new)
    assert KEY_A not in str(caught.value)
    assert [(row.ciphertext, row.key_id) for row in await _rows(db)] == before
    with pytest.raises(SecretsKeyError, match=f"encrypted under key {key_id(KEY_A)}"):
        await _for(db, only_new, "TOKEN")


# -- names and values, as GitHub Actions names secrets ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stored"), [("lab_vpn_key", "LAB_VPN_KEY"), ("_X", "_X"), ("a1", "A1"), ("N" * 100, "N" * 100)]
)
def test_valid_names_are_stored_upper_case(text: str, stored: str) -> None:
    assert validate_name(text) == stored


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("", "1 to 100 characters"),
        ("N" * 101, "1 to 100 characters"),
        ("1PASSWORD", "not starting with a digit"),
        ("LAB-KEY", "letters, digits and '_'"),
        ("LAB KEY", "letters, digits and '_'"),
        ("CLÉ", "letters, digits and '_'"),
        ("github_token", "may not start with GITHUB_"),
        ("Kerrigan_Device_ID", "may not start with KERRIGAN_"),
    ],
)
def test_names_github_would_refuse_or_kerrigan_sets_itself_are_refused(text: str, rule: str) -> None:
    with pytest.raises(SecretError, match=rule) as caught:
        validate_name(text)
    assert caught.value.field == "name"


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("q7z!k", "5 bytes long; a masked secret needs at least 8"),
        ("x" * (48 * 1024 + 1), "49153 bytes long; a secret holds at most 49152"),
        ("nul-in-\x00-the-middle", "NUL character"),
        ("lone-surrogate-\ud800-here", "not valid Unicode"),
    ],
)
def test_values_the_masker_could_not_hide_or_a_job_could_not_hold_are_refused(value: str, rule: str) -> None:
    with pytest.raises(SecretError, match=rule) as caught:
        validate_value("TOKEN", value)
    assert caught.value.field == "value"
    assert value not in str(caught.value)


def test_a_value_of_exactly_48_kib_with_newlines_is_kept_whole() -> None:
    value = ("-----BEGIN KEY-----\n" + "k" * (48 * 1024 - 38) + "\n-----END KEY-----")[: 48 * 1024]
    assert validate_value("TOKEN", value) == value


# -- the key: KERRIGAN_SECRETS_KEY --------------------------------------------------------------------------


def test_without_a_key_secrets_cannot_be_encrypted_and_the_error_says_what_to_set() -> None:
    with pytest.raises(SecretsKeyError, match="secrets need KERRIGAN_SECRETS_KEY"):
        Keyring(())


def test_the_settings_take_a_comma_separated_list_of_fernet_keys_and_never_show_them() -> None:
    settings = Settings.from_env({"KERRIGAN_SECRETS_KEY": f" {KEY_B} , {KEY_A} "})
    assert settings.secrets_keys == (KEY_B, KEY_A)
    assert KEY_A not in repr(settings)
    assert KEY_B not in repr(Keyring(settings.secrets_keys))
    assert Settings.from_env({}).secrets_keys == ()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("not-a-key", "it is not one"),
        (f"{KEY_A},{KEY_A[:-4]}", "key 2 of 2 is not one"),
        (f"{KEY_A},", "key 2"),
    ],
)
def test_a_malformed_key_stops_start_up_with_one_line_that_does_not_echo_it(text: str, where: str) -> None:
    with pytest.raises(ConfigError, match=f"KERRIGAN_SECRETS_KEY must be Fernet keys.*; {where}") as caught:
        Settings.from_env({"KERRIGAN_SECRETS_KEY": text})
    message = str(caught.value)
    assert "\n" not in message
    assert KEY_A[:20] not in message
    assert "not-a-key" not in message
