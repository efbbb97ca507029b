"""Settings from the environment: defaults, and one clear line for each mistake."""

from __future__ import annotations

import pytest

from kerrigan.config import DEFAULT_DATABASE_URL, ConfigError, Settings
from kerrigan.testing.github import generate_app_key

BROKEN_KEY = (
    "-----BEGIN PRIVATE KEY-----\\nnot a key\\n-----END PRIVATE KEY-----"  # a literal \\n, as env files do
)


def test_defaults_need_no_environment() -> None:
    settings = Settings.from_env({})
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert (settings.host, settings.port, settings.public_url) == ("127.0.0.1", 8080, "http://127.0.0.1:8080")
    assert settings.workers is None
    assert settings.delivery_lease_s == 30
    assert settings.output_max_bytes == 64 * 1024 * 1024


def test_the_output_cap_is_whole_bytes() -> None:
    assert Settings.from_env({"KERRIGAN_OUTPUT_MAX_BYTES": "1048576"}).output_max_bytes == 1024 * 1024


@pytest.mark.parametrize(("value", "seconds"), [("45", 45.0), ("2.5", 2.5), (" 10 ", 10.0)])
def test_the_delivery_lease_is_a_positive_number_of_seconds(value: str, seconds: float) -> None:
    assert Settings.from_env({"KERRIGAN_DELIVERY_LEASE_S": value}).delivery_lease_s == seconds


def test_admins_are_a_comma_separated_list_compared_without_case() -> None:
    assert Settings.from_env({"KERRIGAN_ADMINS": "Alice, bob ,"}).admins == frozenset({"alice", "bob"})


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"KERRIGAN_DATABASE_URL": "mysql://x"}, "KERRIGAN_DATABASE_URL"),
        ({"KERRIGAN_PORT": "eighty"}, "KERRIGAN_PORT"),
        ({"KERRIGAN_PORT": "70000"}, "KERRIGAN_PORT"),
        ({"KERRIGAN_PORT": "²"}, "KERRIGAN_PORT"),  # str.isdigit() says yes, int() says no
        ({"KERRIGAN_PORT": "9" * 5000}, "KERRIGAN_PORT"),  # more digits than int() takes
        ({"KERRIGAN_WORKERS": "³"}, "KERRIGAN_WORKERS"),
        ({"KERRIGAN_RUNNER_LEASE_S": "1" * 5000}, "KERRIGAN_RUNNER_LEASE_S"),
        ({"KERRIGAN_ADMINS": "not a login"}, "KERRIGAN_ADMINS"),
        ({"KERRIGAN_PUBLIC_URL": "ftp://x"}, "KERRIGAN_PUBLIC_URL"),
        ({"KERRIGAN_GITHUB_APP_ID": "abc"}, "KERRIGAN_GITHUB_APP_ID"),
        ({"KERRIGAN_WORKERS": "-1"}, "KERRIGAN_WORKERS"),
        ({"KERRIGAN_PUBLIC_READ": "yes"}, "KERRIGAN_PUBLIC_READ"),
        ({"KERRIGAN_QUARANTINE": "flaky"}, "KERRIGAN_QUARANTINE"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "0"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "-30"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "thirty"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "nan"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "inf"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "64MiB"}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "100"}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "²"}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "9" * 5000}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        (
            {"KERRIGAN_GITHUB_PRIVATE_KEY": BROKEN_KEY},
            "KERRIGAN_GITHUB_PRIVATE_KEY",
        ),
        ({"KERRIGAN_GITHUB_PRIVATE_KEY_PATH": "/no/such/key.pem"}, "KERRIGAN_GITHUB_PRIVATE_KEY_PATH"),
    ],
)
def test_a_malformed_setting_is_one_line_naming_it(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env(environ)
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)


def test_quarantine_is_off_unless_asked() -> None:
    assert Settings.from_env({}).quarantine == "off"
    assert Settings.from_env({"KERRIGAN_QUARANTINE": "suspect"}).quarantine == "suspect"


def test_a_valid_private_key_is_read_from_the_environment() -> None:
    private, _ = generate_app_key()
    assert Settings.from_env({"KERRIGAN_GITHUB_PRIVATE_KEY": private}).github_private_key == private.strip()
