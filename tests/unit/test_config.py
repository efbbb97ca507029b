"""Settings from the environment: defaults, and one clear line for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerrigan.config import (
    DEFAULT_DATABASE_URL,
    ConfigError,
    Settings,
    parse_env_file,
    read_env_file,
    with_env_file,
)
from kerrigan.core.lifecycle import Conclusion
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


def test_who_may_sign_in_is_two_comma_separated_lists_compared_without_case() -> None:
    settings = Settings.from_env(
        {"KERRIGAN_ALLOWED_ORGS": "Octo-Lab, octo ,", "KERRIGAN_ALLOWED_LOGINS": "Guest,rita"}
    )
    assert settings.allowed_orgs == frozenset({"octo-lab", "octo"})
    assert settings.allowed_logins == frozenset({"guest", "rita"})
    default = Settings.from_env({})
    assert default.allowed_orgs == default.allowed_logins == frozenset()  # the installations decide


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
        ({"KERRIGAN_ALLOWED_ORGS": "octo/lab"}, "KERRIGAN_ALLOWED_ORGS"),
        ({"KERRIGAN_ALLOWED_LOGINS": "rita,-guest"}, "KERRIGAN_ALLOWED_LOGINS"),
        ({"KERRIGAN_PUBLIC_URL": "ftp://x"}, "KERRIGAN_PUBLIC_URL"),
        ({"KERRIGAN_GITHUB_APP_ID": "abc"}, "KERRIGAN_GITHUB_APP_ID"),
        ({"KERRIGAN_WORKERS": "-1"}, "KERRIGAN_WORKERS"),
        ({"KERRIGAN_PUBLIC_READ": "yes"}, "KERRIGAN_PUBLIC_READ"),
        ({"KERRIGAN_QUARANTINE": "flaky"}, "KERRIGAN_QUARANTINE"),
        ({"KERRIGAN_LAB_CONCLUSION": "failure"}, "KERRIGAN_LAB_CONCLUSION"),
        ({"KERRIGAN_LAB_CONCLUSION": "success"}, "KERRIGAN_LAB_CONCLUSION"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "0"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "-30"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "thirty"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "nan"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_DELIVERY_LEASE_S": "inf"}, "KERRIGAN_DELIVERY_LEASE_S"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "64MiB"}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "100"}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "²"}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_OUTPUT_MAX_BYTES": "9" * 5000}, "KERRIGAN_OUTPUT_MAX_BYTES"),
        ({"KERRIGAN_RESERVATION_MAX_S": "8h"}, "KERRIGAN_RESERVATION_MAX_S"),
        ({"KERRIGAN_RESERVATION_MAX_S": "10"}, "KERRIGAN_RESERVATION_MAX_S"),
        ({"KERRIGAN_RESERVATIONS_PER_USER": "0"}, "KERRIGAN_RESERVATIONS_PER_USER"),
        ({"KERRIGAN_HOLD_S": "30m"}, "KERRIGAN_HOLD_S"),
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


def test_the_labs_conclusion_is_action_required_unless_neutral_is_asked() -> None:
    assert Settings.from_env({}).lab_conclusion is Conclusion.ACTION_REQUIRED
    chosen = Settings.from_env({"KERRIGAN_LAB_CONCLUSION": "neutral"}).lab_conclusion
    assert chosen is Conclusion.NEUTRAL
    with pytest.raises(ConfigError, match="KERRIGAN_LAB_CONCLUSION must be one of action_required, neutral"):
        Settings.from_env({"KERRIGAN_LAB_CONCLUSION": "failure"})


def test_a_valid_private_key_is_read_from_the_environment() -> None:
    private, _ = generate_app_key()
    assert Settings.from_env({"KERRIGAN_GITHUB_PRIVATE_KEY": private}).github_private_key == private.strip()


# -- kerrigan.env: the env file `kerrigan setup` writes and `kerrigan serve` reads ---------------------------


def test_an_env_file_is_name_value_lines_with_comments_and_optional_quotes() -> None:
    text = (
        "# written by kerrigan setup\n"
        "\n"
        "KERRIGAN_GITHUB_APP_ID=123\n"
        "; a systemd comment\n"
        "KERRIGAN_ADMINS = alice,bob \n"
        "KERRIGAN_WEBHOOK_SECRET='s3cr#t \\n'\n"
        'KERRIGAN_PUBLIC_URL="https://lab.example.com/\\"x\\""\n'
        "KERRIGAN_GITHUB_APP_ID=456\n"
    )
    assert parse_env_file(text) == {
        "KERRIGAN_GITHUB_APP_ID": "456",  # a later line wins
        "KERRIGAN_ADMINS": "alice,bob",
        "KERRIGAN_WEBHOOK_SECRET": "s3cr#t \\n",
        "KERRIGAN_PUBLIC_URL": 'https://lab.example.com/"x"',
    }


def test_the_environment_wins_over_the_env_file() -> None:
    file_values = parse_env_file("KERRIGAN_PORT=9000\nKERRIGAN_HOST=0.0.0.0\nKERRIGAN_ADMINS=alice\n")
    merged = with_env_file({"KERRIGAN_PORT": "9100", "KERRIGAN_ADMINS": ""}, file_values)
    settings = Settings.from_env(merged)
    assert (settings.host, settings.port) == ("0.0.0.0", 9100)
    assert settings.admins == frozenset()  # set empty in the environment: the file's value is not used


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("KERRIGAN_PORT=1\nnot an assignment\n", "lab.env:2: expected NAME=value"),
        ("export KERRIGAN_PORT=1\n", "lab.env:1: 'export KERRIGAN_PORT' is not a variable name (leave out"),
        ("\n\nKERRIGAN-PORT=1\n", "lab.env:3: 'KERRIGAN-PORT' is not a variable name"),
        ("KERRIGAN_WEBHOOK_SECRET='open\n", "lab.env:1: a value opened with ' must end with '"),
        ('KERRIGAN_WEBHOOK_SECRET="open\n', 'lab.env:1: a value opened with " must end with "'),
        ('KERRIGAN_WEBHOOK_SECRET="a"b\n', "lab.env:1: text after the closing quote"),
    ],
)
def test_a_malformed_env_file_line_is_one_line_naming_file_and_line(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_env_file(text, "lab.env")
    assert str(raised.value).startswith(says)
    assert "\n" not in str(raised.value)


def test_a_missing_env_file_holds_no_settings(tmp_path: Path) -> None:
    assert read_env_file(tmp_path / "kerrigan.env") == {}
    (tmp_path / "kerrigan.env").write_bytes(b"KERRIGAN_PORT=\xff\n")
    with pytest.raises(ConfigError, match=r"kerrigan\.env: not UTF-8 text"):
        read_env_file(tmp_path / "kerrigan.env")


def test_workers_none_leaves_deliveries_and_check_runs_to_workers_run_apart() -> None:
    settings = Settings.from_env({"KERRIGAN_WORKERS": "none"})
    assert (settings.workers, settings.process_deliveries) == (0, False)
    assert Settings.from_env({"KERRIGAN_WORKERS": "2"}).process_deliveries is True
    with pytest.raises(ConfigError, match="KERRIGAN_WORKERS must be a whole number from 0 to 32 or none"):
        Settings.from_env({"KERRIGAN_WORKERS": "nobody"})


def test_operations_settings_are_checked_and_the_token_kept_out_of_the_repr() -> None:
    settings = Settings.from_env(
        {
            "KERRIGAN_METRICS_TOKEN": "scrape-token-1",
            "KERRIGAN_LOG_FORMAT": "JSON",
            "KERRIGAN_LOG_LEVEL": "debug",
        }
    )
    assert (settings.metrics_token, settings.log_format, settings.log_level) == (
        "scrape-token-1",
        "json",
        "debug",
    )
    assert "scrape-token-1" not in repr(settings)
    defaults = Settings.from_env({})
    assert (defaults.metrics_token, defaults.log_format, defaults.log_level) == (None, "auto", "info")
    with pytest.raises(ConfigError, match="KERRIGAN_LOG_FORMAT must be one of auto, json, text, not 'xml'"):
        Settings.from_env({"KERRIGAN_LOG_FORMAT": "xml"})
    with pytest.raises(ConfigError, match="KERRIGAN_LOG_LEVEL must be one of debug, info, warning, error"):
        Settings.from_env({"KERRIGAN_LOG_LEVEL": "loud"})


def test_reservations_have_a_longest_duration_and_a_per_person_limit() -> None:
    assert (Settings().reservation_max_s, Settings().reservations_per_user) == (28_800, 2)
    chosen = Settings.from_env({"KERRIGAN_RESERVATION_MAX_S": "3600", "KERRIGAN_RESERVATIONS_PER_USER": "5"})
    assert (chosen.reservation_max_s, chosen.reservations_per_user) == (3600, 5)


def test_a_hold_lasts_half_an_hour_unless_told() -> None:
    assert Settings().hold_s == 1800
    assert Settings.from_env({"KERRIGAN_HOLD_S": "600"}).hold_s == 600


def test_a_hold_may_not_outlast_the_longest_reservation() -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"KERRIGAN_HOLD_S": "7200", "KERRIGAN_RESERVATION_MAX_S": "3600"})
    message = str(raised.value)
    assert "KERRIGAN_HOLD_S (7200 s)" in message
    assert "KERRIGAN_RESERVATION_MAX_S (3600 s)" in message
    # The default hold (30 min) against a shorter longest reservation is refused too: it names both.
    with pytest.raises(ConfigError, match=r"KERRIGAN_HOLD_S .* KERRIGAN_RESERVATION_MAX_S"):
        Settings.from_env({"KERRIGAN_RESERVATION_MAX_S": "600"})
    equal = Settings.from_env({"KERRIGAN_HOLD_S": "3600", "KERRIGAN_RESERVATION_MAX_S": "3600"})
    assert (equal.hold_s, equal.reservation_max_s) == (3600, 3600)


def test_a_console_session_idles_out_after_a_quarter_of_an_hour_unless_told() -> None:
    assert Settings().console_idle_s == 900
    assert Settings.from_env({"KERRIGAN_CONSOLE_IDLE_S": "60"}).console_idle_s == 60
    for bad in ("0", "9", "86401", "1.5", "soon"):
        with pytest.raises(ConfigError, match="KERRIGAN_CONSOLE_IDLE_S must be whole seconds"):
            Settings.from_env({"KERRIGAN_CONSOLE_IDLE_S": bad})
