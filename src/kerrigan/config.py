"""Configuration from the environment (all names prefixed ``KERRIGAN_``), as DESIGN.md's contract lists it.

:meth:`Settings.from_env` takes the mapping to read, so tests pass a dict and nothing is read at import time.
A missing or malformed setting raises :class:`ConfigError` with one line naming it. The same settings may
sit in an env file (``kerrigan.env``, which ``kerrigan setup`` writes): :func:`parse_env_file` reads its
text and :func:`with_env_file` lays the environment over it, so the environment wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization

from kerrigan.core.lifecycle import LAB_CONCLUSIONS, Conclusion
from kerrigan.core.logins import is_login
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES, MAX_COUNT

PREFIX: Final = "KERRIGAN_"
DEFAULT_DATABASE_URL: Final = "sqlite+aiosqlite:///./kerrigan.db"
_DATABASE_SCHEMES: Final = ("sqlite+aiosqlite", "postgresql+asyncpg")
OUTPUT_MAX_LEAST: Final = 1024  # below a kilobyte not even an error message would fit
MAX_RETENTION_DAYS: Final = 36500
_RETENTION: Final = (("HISTORY_DAYS", "history_days"), ("OUTPUT_DAYS", "output_days"))


class ConfigError(ValueError):
    """A setting is missing or malformed; the message is one line naming it."""


ENV_FILE: Final = "kerrigan.env"  # read from the working directory by the commands that use the settings
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES: Final = {"\\": "\\", '"': '"', "n": "\n", "$": "$", "`": "`"}


def parse_env_file(text: str, source: str = ENV_FILE) -> dict[str, str]:
    """The ``NAME=value`` lines of an env file, in the part of systemd's ``EnvironmentFile=`` syntax that
    kerrigan.service and a POSIX shell read alike: blank lines and ``#`` or ``;`` comments; a value bare (its
    surrounding spaces dropped), in single quotes (taken as written) or in double quotes (backslash escapes
    ``\\``, ``"``, ``n``, ``$`` and a backquote). A later line wins over an earlier one. Any other line is a
    :class:`ConfigError` naming ``source`` and the line's number."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        where = f"{source}:{number}"
        name, equals, value = stripped.partition("=")
        name = name.strip()
        if not equals:
            raise ConfigError(f"{where}: expected NAME=value, not {stripped[:40]!r}")
        if not _ENV_NAME.fullmatch(name):
            hint = " (leave out `export`)" if name.startswith("export ") else ""
            raise ConfigError(f"{where}: {name[:40]!r} is not a variable name{hint}")
        values[name] = _env_value(value.strip(), where)
    return values


def _env_value(value: str, where: str) -> str:
    if not value or value[0] not in "'\"":
        return value
    quote = value[0]
    if quote == "'":
        if len(value) < 2 or not value.endswith("'") or "'" in value[1:-1]:
            raise ConfigError(f"{where}: a value opened with ' must end with ' (and hold none)")
        return value[1:-1]
    found: list[str] = []
    index = 1
    while index < len(value):
        char = value[index]
        if char == "\\" and index + 1 < len(value):
            following = value[index + 1]
            found.append(_ESCAPES.get(following, "\\" + following))
            index += 2
            continue
        if char == '"':
            if index != len(value) - 1:
                raise ConfigError(f"{where}: text after the closing quote of the value")
            return "".join(found)
        found.append(char)
        index += 1
    raise ConfigError(f'{where}: a value opened with " must end with "')


def read_env_file(path: Path) -> dict[str, str]:
    """The settings in the env file at ``path``; none when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    return parse_env_file(text, str(path))


def with_env_file(environ: Mapping[str, str], file_values: Mapping[str, str]) -> dict[str, str]:
    """The environment laid over an env file's values: a variable set in the environment wins, even empty
    (so ``KERRIGAN_X= kerrigan serve`` can blank out a file's setting)."""
    return {**file_values, **environ}


def _http_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{PREFIX}{name} must be an http(s) URL, not {value!r}")
    return value.rstrip("/")


QUARANTINE_MODES: Final = ("off", "suspect")
LOG_FORMATS: Final = ("auto", "json", "text")
LOG_LEVELS: Final = ("debug", "info", "warning", "error")


def log_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` of ``KERRIGAN_<name>`` when it is one of ``choices`` (in any case); else a ConfigError."""
    if value.lower() not in choices:
        raise ConfigError(f"{PREFIX}{name} must be one of {', '.join(choices)}, not {value[:40]!r}")
    return value.lower()


def _workers(text: str | None, metrics_port: str | None) -> dict[str, object]:
    """``KERRIGAN_WORKERS``: how many ``kerrigan worker`` processes ``kerrigan serve`` starts, or ``none``
    (deliveries and check runs are left to workers run apart, such as a Deployment of their own); and
    ``KERRIGAN_WORKER_METRICS_PORT``, where the first of them serves its metrics (the next, one port up)."""
    values: dict[str, object] = {}
    if text is not None and text.lower() == "none":
        values.update(workers=0, process_deliveries=False)
    elif text is not None:
        if (number := _whole_number(text, 0, 32)) is None:
            raise ConfigError(
                f"{PREFIX}WORKERS must be a whole number from 0 to 32 or none, not {text[:40]!r}"
            )
        values["workers"] = number
    if metrics_port is not None:
        if (port := _whole_number(metrics_port, 1, 65535 - 32)) is None:
            raise ConfigError(
                f"{PREFIX}WORKER_METRICS_PORT must be a port number from 1 to {65535 - 32}, "
                f"not {metrics_port[:40]!r}"
            )
        values["worker_metrics_port"] = port
    return values


def _operations(token: str | None, log_format: str | None, log_level: str | None) -> dict[str, object]:
    """``KERRIGAN_METRICS_TOKEN``, ``KERRIGAN_LOG_FORMAT`` and ``KERRIGAN_LOG_LEVEL``, when set."""
    values: dict[str, object] = {}
    if token is not None:
        values["metrics_token"] = token
    if log_format is not None:
        values["log_format"] = log_choice("LOG_FORMAT", log_format, LOG_FORMATS)
    if log_level is not None:
        values["log_level"] = log_choice("LOG_LEVEL", log_level, LOG_LEVELS)
    return values


def _public_read(text: str | None) -> dict[str, object]:
    """``KERRIGAN_PUBLIC_READ``, when set: 0 or 1."""
    if text is None:
        return {}
    if text not in ("0", "1"):
        raise ConfigError(f"{PREFIX}PUBLIC_READ must be 0 or 1, not {text!r}")
    return {"public_read": text == "1"}


def _secrets_keys(text: str | None) -> dict[str, object]:
    """``KERRIGAN_SECRETS_KEY``, when set: Fernet keys, comma-separated; the first encrypts, all decrypt.
    A key that is not one is named by its place in the list, never shown."""
    if text is None:
        return {}
    keys = tuple(key.strip() for key in text.split(","))
    for number, key in enumerate(keys, 1):
        try:
            Fernet(key)
        except ValueError:
            where = f"key {number} of {len(keys)}" if len(keys) > 1 else "it"
            raise ConfigError(
                f"{PREFIX}SECRETS_KEY must be Fernet keys (32 url-safe base64-encoded bytes), "
                f"comma-separated; {where} is not one (make one with `kerrigan secrets new-key`)"
            ) from None
    return {"secrets_keys": keys}


def _quarantine(text: str | None) -> dict[str, object]:
    """``KERRIGAN_QUARANTINE``, when set: ``off`` or ``suspect``."""
    if text is None:
        return {}
    if text not in QUARANTINE_MODES:
        modes = ", ".join(QUARANTINE_MODES)
        raise ConfigError(f"{PREFIX}QUARANTINE must be one of {modes}, not {text[:40]!r}")
    return {"quarantine": text}


def _lab_conclusion(text: str | None) -> dict[str, object]:
    """``KERRIGAN_LAB_CONCLUSION``, when set: ``action_required`` or ``neutral``."""
    if text is None:
        return {}
    choices = {conclusion.value: conclusion for conclusion in LAB_CONCLUSIONS}
    if text not in choices:
        raise ConfigError(f"{PREFIX}LAB_CONCLUSION must be one of {', '.join(choices)}, not {text[:40]!r}")
    return {"lab_conclusion": choices[text]}


@dataclass(frozen=True)
class Settings:
    """Everything Kerrigan reads from its environment."""

    database_url: str = DEFAULT_DATABASE_URL
    admins: frozenset[str] = frozenset()
    # Who may sign in to the web pages (docs/ui.md): members of these organizations and these logins, with
    # the admins and the pools' owners. Both empty: the accounts the App is installed on decide.
    allowed_orgs: frozenset[str] = frozenset()
    allowed_logins: frozenset[str] = frozenset()
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str = "http://127.0.0.1:8080"
    github_api_url: str = "https://api.github.com"
    github_url: str = "https://github.com"
    github_app_id: str | None = None
    github_private_key: str | None = field(default=None, repr=False)
    webhook_secret: str | None = field(default=None, repr=False)
    github_client_id: str | None = None
    github_client_secret: str | None = field(default=None, repr=False)
    session_secret: str | None = field(default=None, repr=False)
    public_read: bool = False
    workers: int | None = None  # worker processes; None: 0 (in-process) on SQLite, 1 on PostgreSQL
    process_deliveries: bool = True  # False (KERRIGAN_WORKERS=none): only `kerrigan worker` processes do
    worker_metrics_port: int | None = None  # the first worker serve starts serves /metrics there, the next +1
    runner_lease_s: int = 60  # a runner host's leases expire this long after its last heartbeat
    delivery_lease_s: float = 30.0  # a worker's claim of a webhook delivery, renewed every third of it
    output_max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES  # a job's output stored; the rest is cut, and marked
    history_days: int = 90  # completed sessions (and their jobs) older are deleted; 0 keeps them
    output_days: int = 14  # job output older is deleted, the job kept; 0 keeps it
    quarantine: str = "off"  # "suspect": a suspect device is set bad (no jobs) until put back
    # A session that failed only for the lab's reasons ends so (DESIGN.md, "A lab problem is not a code
    # failure"): action_required blocks a merge on a required check, neutral lets it through.
    lab_conclusion: Conclusion = Conclusion.ACTION_REQUIRED
    metrics_token: str | None = field(default=None, repr=False)  # a bearer token /metrics then asks for
    log_format: str = "auto"  # json, text, or auto: text on a terminal, JSON otherwise
    log_level: str = "info"  # debug, info, warning or error
    # Fernet keys secrets are encrypted under: the first encrypts, every one decrypts (rotation); empty:
    # secrets cannot be set.
    secrets_keys: tuple[str, ...] = field(default=(), repr=False)
    reservation_max_s: int = 8 * 3600  # the longest a person may reserve a device for
    reservations_per_user: int = 2  # reservations a person may hold or wait for at once
    hold_s: int = 1800  # how long "Hold board" reserves a failed job's board(s) for its clicker
    console_idle_s: int = 900  # a person's console session without a keystroke this long ends

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read the ``KERRIGAN_`` settings from ``environ``; unset ones keep their defaults."""

        def get(name: str) -> str | None:
            value = environ.get(PREFIX + name)
            return value.strip() if value is not None and value.strip() else None

        values: dict[str, object] = {}
        if (url := get("DATABASE_URL")) is not None:
            scheme = url.split("://", 1)[0] if "://" in url else ""
            if scheme not in _DATABASE_SCHEMES:
                raise ConfigError(
                    f"{PREFIX}DATABASE_URL must start with sqlite+aiosqlite:// or postgresql+asyncpg://, "
                    f"not {scheme + '://' if scheme else repr(url)}"
                )
            values["database_url"] = url
        for name, attribute in (
            ("ADMINS", "admins"),
            ("ALLOWED_ORGS", "allowed_orgs"),
            ("ALLOWED_LOGINS", "allowed_logins"),
        ):
            if (text := get(name)) is not None:
                values[attribute] = _logins(name, text)
        if (host := get("HOST")) is not None:
            values["host"] = host
        if (port := get("PORT")) is not None:
            if (number := _whole_number(port, 1, 65535)) is None:
                raise ConfigError(f"{PREFIX}PORT must be a port number from 1 to 65535, not {port[:40]!r}")
            values["port"] = number
        for name, attribute in (
            ("PUBLIC_URL", "public_url"),
            ("GITHUB_API_URL", "github_api_url"),
            ("GITHUB_URL", "github_url"),
        ):
            if (value := get(name)) is not None:
                values[attribute] = _http_url(name, value)
        if "public_url" not in values:
            values["public_url"] = f"http://{values.get('host', cls.host)}:{values.get('port', cls.port)}"
        for name, attribute in (
            ("GITHUB_APP_ID", "github_app_id"),
            ("WEBHOOK_SECRET", "webhook_secret"),
            ("GITHUB_CLIENT_ID", "github_client_id"),
            ("GITHUB_CLIENT_SECRET", "github_client_secret"),
            ("SESSION_SECRET", "session_secret"),
        ):
            if (value := get(name)) is not None:
                values[attribute] = value
        app_id = values.get("github_app_id")
        if app_id is not None and _whole_number(str(app_id), 1, 2**63 - 1) is None:
            raise ConfigError(f"{PREFIX}GITHUB_APP_ID must be a number, not {str(app_id)[:40]!r}")
        values["github_private_key"] = _private_key(get("GITHUB_PRIVATE_KEY"), get("GITHUB_PRIVATE_KEY_PATH"))
        values.update(_workers(get("WORKERS"), get("WORKER_METRICS_PORT")))
        values.update(_quarantine(get("QUARANTINE")))
        values.update(_lab_conclusion(get("LAB_CONCLUSION")))
        values.update(_operations(get("METRICS_TOKEN"), get("LOG_FORMAT"), get("LOG_LEVEL")))
        if (lease := get("RUNNER_LEASE_S")) is not None:
            if (number := _whole_number(lease, 2, 3600)) is None:
                raise ConfigError(
                    f"{PREFIX}RUNNER_LEASE_S must be whole seconds from 2 to 3600, not {lease[:40]!r}"
                )
            values["runner_lease_s"] = number
        if (delivery_lease := get("DELIVERY_LEASE_S")) is not None:
            values["delivery_lease_s"] = _positive_seconds("DELIVERY_LEASE_S", delivery_lease)
        if (output_max := get("OUTPUT_MAX_BYTES")) is not None:
            if (number := _whole_number(output_max, OUTPUT_MAX_LEAST, MAX_COUNT)) is None:
                raise ConfigError(
                    f"{PREFIX}OUTPUT_MAX_BYTES must be whole bytes from {OUTPUT_MAX_LEAST} to {MAX_COUNT}, "
                    f"not {output_max[:40]!r}"
                )
            values["output_max_bytes"] = number
        values.update(
            {key: _retention_days(name, days) for name, key in _RETENTION if (days := get(name)) is not None}
        )
        values.update(_public_read(get("PUBLIC_READ")))
        values.update(_secrets_keys(get("SECRETS_KEY")))
        values.update(_reservations(get("RESERVATION_MAX_S"), get("RESERVATIONS_PER_USER")))
        if (hold := get("HOLD_S")) is not None:
            if (number := _whole_number(hold, 60, 30 * 86_400)) is None:
                raise ConfigError(
                    f"{PREFIX}HOLD_S must be whole seconds from 60 to 2592000 (30 days), not {hold[:40]!r}"
                )
            values["hold_s"] = number
        values.update(_console_idle(get("CONSOLE_IDLE_S")))
        return _hold_within_reservations(cls(**values))  # type: ignore[arg-type]


def _hold_within_reservations(settings: Settings) -> Settings:
    """``settings``, unless a hold (a reservation) would last longer than a person may reserve a board."""
    if settings.hold_s > settings.reservation_max_s:
        raise ConfigError(
            f"{PREFIX}HOLD_S ({settings.hold_s} s) must not exceed {PREFIX}RESERVATION_MAX_S "
            f"({settings.reservation_max_s} s): a hold is a reservation; lower the first or raise the second"
        )
    return settings


def _logins(name: str, text: str) -> frozenset[str]:
    """``KERRIGAN_<name>``: GitHub logins (or organization names, which follow the same rule),
    comma-separated, lower-cased (GitHub ignores their case)."""
    logins = {login.strip() for login in text.split(",") if login.strip()}
    bad = sorted(login for login in logins if not is_login(login))
    if bad:
        what = "an organization" if name == "ALLOWED_ORGS" else "a GitHub login"
        raise ConfigError(f"{PREFIX}{name} holds {bad[0][:40]!r}, which is not {what}")
    return frozenset(login.lower() for login in logins)


def _console_idle(idle: str | None) -> dict[str, int]:
    """``console_idle_s`` from ``KERRIGAN_CONSOLE_IDLE_S``, if it is set."""
    if idle is None:
        return {}
    if (number := _whole_number(idle, 10, 86_400)) is None:
        raise ConfigError(f"{PREFIX}CONSOLE_IDLE_S must be whole seconds from 10 to 86400, not {idle[:40]!r}")
    return {"console_idle_s": number}


def _whole_number(text: str, low: int, high: int) -> int | None:
    """``text`` as a whole number from ``low`` to ``high``, or None: only ASCII digits count (``str.isdigit``
    takes ``²``, which ``int`` refuses) and never so many that ``int`` would refuse them."""
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        return None
    number = int(text)
    return number if low <= number <= high else None


def _reservations(max_s: str | None, per_user: str | None) -> dict[str, int]:
    values = {}
    if max_s is not None:
        if (number := _whole_number(max_s, 60, 30 * 86_400)) is None:
            raise ConfigError(
                f"{PREFIX}RESERVATION_MAX_S must be whole seconds from 60 to 2592000 (30 days), "
                f"not {max_s[:40]!r}"
            )
        values["reservation_max_s"] = number
    if per_user is not None:
        if (number := _whole_number(per_user, 1, 100)) is None:
            raise ConfigError(
                f"{PREFIX}RESERVATIONS_PER_USER must be a whole number from 1 to 100, not {per_user[:40]!r}"
            )
        values["reservations_per_user"] = number
    return values


def _retention_days(name: str, value: str) -> int:
    if (number := _whole_number(value, 0, MAX_RETENTION_DAYS)) is None:
        raise ConfigError(
            f"{PREFIX}{name} must be whole days from 0 (keep forever) to {MAX_RETENTION_DAYS}, "
            f"not {value[:40]!r}"
        )
    return number


def _positive_seconds(name: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"{PREFIX}{name} must be a positive number of seconds, not {value!r}")
    return seconds


def _private_key(text: str | None, path: str | None) -> str | None:
    if text is not None and path is not None:
        raise ConfigError(f"set {PREFIX}GITHUB_PRIVATE_KEY or {PREFIX}GITHUB_PRIVATE_KEY_PATH, not both")
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{PREFIX}GITHUB_PRIVATE_KEY_PATH {path}: {exc.strerror}") from None
    if text is not None:
        try:
            serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            where = f"{PREFIX}GITHUB_PRIVATE_KEY_PATH {path}" if path else f"{PREFIX}GITHUB_PRIVATE_KEY"
            raise ConfigError(f"{where} is not a PEM private key without a passphrase") from None
    return text
