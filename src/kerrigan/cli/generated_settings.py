"""``kerrigan generate-settings``: the settings Kerrigan can make itself, made once and kept in an env file.

A deployment's first start runs it (compose's ``settings`` service, the systemd unit's ``ExecStartPre``):
``KERRIGAN_SECRETS_KEY`` (a Fernet key), ``KERRIGAN_METRICS_TOKEN`` and ``KERRIGAN_SESSION_SECRET``, each
unless the file sets it already. A value in the file is never changed: losing the secrets key loses every
stored secret, and a new session secret signs everyone out.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from kerrigan.cli.usage import UsageError
from kerrigan.config import ENV_FILE, PREFIX, ConfigError, read_env_file


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")


# Each setting, and how a new value is made. The token and the secret are URL-safe: any header or file
# takes them as they are.
MADE: Final[Mapping[str, Callable[[], str]]] = {
    f"{PREFIX}SECRETS_KEY": _fernet_key,
    f"{PREFIX}METRICS_TOKEN": lambda: secrets.token_urlsafe(32),
    f"{PREFIX}SESSION_SECRET": lambda: secrets.token_hex(32),
}


# What a value may hold to be written bare, read the same by Kerrigan, systemd and a shell: every value
# made here, Fernet keys and lists of them, and any token of the usual alphabets.
_BARE: Final = re.compile(r"[A-Za-z0-9._~+/=:@,%-]+")


def missing_lines(present: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The settings ``present`` lacks (or sets empty), each with its value and where it came from: the
    environment's when it gives one (so a value chosen for the first start is the one kept), else new. A
    value from the environment that could not be written as one bare line is a UsageError naming it."""
    added: dict[str, tuple[str, str]] = {}
    for name, make in MADE.items():
        if present.get(name, "").strip():
            continue
        given = environ.get(name, "").strip()
        if given and not _BARE.fullmatch(given):
            raise UsageError(
                f"{name} in the environment holds a space, quote, newline or other character an env file "
                "cannot keep as it is: choose one of letters, digits and ._~+/=:@,%-"
            )
        added[name] = (given, "from the environment") if given else (make(), "new")
    return added


def _write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once (a crash leaves the old file or the new, never half), with
    the old file's mode, or 0600 for a new one."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    descriptor, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), mode)
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        Path(staged).replace(path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


def generate_settings(args: argparse.Namespace) -> int:
    """Add the missing settings to the file; print their names (never their values)."""
    path = Path(args.env_file).absolute()
    if not path.parent.is_dir():
        raise UsageError(f"{path.parent}: no such directory")
    try:
        present = read_env_file(path)
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    added = missing_lines(present, os.environ)
    if not added:
        print(f"{path} already sets {', '.join(MADE)}: nothing to add")
        return 0
    if text and not text.endswith("\n"):
        text += "\n"
    if not text:
        text = (
            "# Settings Kerrigan made itself (kerrigan generate-settings). Keep this file: it holds the key\n"
        )
        text += "# of every stored secret. Readable by Kerrigan's user alone; the environment wins over it.\n"
    text += "".join(f"{name}={value}\n" for name, (value, _) in added.items())
    try:
        _write(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    print(f"{path}: added " + ", ".join(f"{name} ({origin})" for name, (_, origin) in added.items()))
    kept = [name for name in MADE if name not in added]
    if kept:
        print(f"{path} already sets {', '.join(kept)}: kept")
    sys.stdout.flush()
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``generate-settings``."""
    command = commands.add_parser(
        "generate-settings",
        help="make the secrets key, metrics token and session secret once, and keep them in an env file",
        description="Add to the env file each of KERRIGAN_SECRETS_KEY (a Fernet key), "
        "KERRIGAN_METRICS_TOKEN and KERRIGAN_SESSION_SECRET that it does not set: the environment's value "
        "when it gives one, else a new one. A value already in the file is never changed. A new file is "
        "mode 0600. Prints the names it added, never the values. Exit status: 0 done, 2 the file cannot "
        "be read or written.",
    )
    command.add_argument(
        "--env-file",
        default=ENV_FILE,
        metavar="FILE",
        help=f"the file (default: ./{ENV_FILE}, which the other commands read)",
    )
    command.set_defaults(handler=generate_settings)
