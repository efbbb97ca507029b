"""What ``kerrigan setup`` writes: the App's settings in an env file and its private key beside it, both
readable by their owner alone."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kerrigan.cli.setup.conversion import AppCredentials
from kerrigan.cli.usage import UsageError

GITHUB_URL = "https://github.com"
GITHUB_API_URL = "https://api.github.com"


def key_path_for(out: Path) -> Path:
    """Where the private key goes beside the settings file: ``kerrigan.env`` -> ``kerrigan.pem``."""
    key = out.with_suffix(".pem")
    return key if key != out else out.with_name(out.name + ".key.pem")


def refuse_to_overwrite(paths: Iterable[Path], *, force: bool) -> None:
    """A UsageError unless every path is free (or ``force``) and its folder can be written to."""
    for path in paths:
        if path.exists() and not force:
            raise UsageError(f"{path} exists: pass --force to replace it, or --out another file")
        if path.is_dir():
            raise UsageError(f"{path} is a directory")
        folder = path.parent
        if not folder.is_dir():
            raise UsageError(f"{folder}: no such directory")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{folder}: cannot write there")


def settings_text(
    credentials: AppCredentials,
    *,
    key_path: Path,
    public_url: str,
    github_url: str,
    api_url: str,
    session_secret: str,
) -> str:
    """The env file's text (systemd's ``EnvironmentFile=`` syntax, which ``kerrigan serve`` reads)."""
    lines = [
        f"# The GitHub App {credentials.name} ({credentials.html_url}), written by `kerrigan setup`.",
        "# It holds secrets: keep it readable by Kerrigan's user alone. The environment wins over it.",
        f"KERRIGAN_GITHUB_APP_ID={credentials.id}",
        f"KERRIGAN_GITHUB_PRIVATE_KEY_PATH={key_path}",
    ]
    if credentials.webhook_secret is not None:
        lines.append(f"KERRIGAN_WEBHOOK_SECRET={credentials.webhook_secret}")
    lines += [
        f"KERRIGAN_GITHUB_CLIENT_ID={credentials.client_id}",
        f"KERRIGAN_GITHUB_CLIENT_SECRET={credentials.client_secret}",
        f"KERRIGAN_SESSION_SECRET={session_secret}",
        f"KERRIGAN_PUBLIC_URL={public_url}",
    ]
    if github_url != GITHUB_URL or api_url != GITHUB_API_URL:
        lines += [f"KERRIGAN_GITHUB_URL={github_url}", f"KERRIGAN_GITHUB_API_URL={api_url}"]
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path`` with mode 0600 from the start; an existing file only when ``force``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    descriptor = os.open(path, flags, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)  # a file replaced with --force keeps no wider mode it had
        file.write(text)


def write_settings(out: Path, key: Path, settings: str, pem: str, *, force: bool) -> None:
    """The key, then the settings that point at it; the key is taken back if the settings cannot be
    written, so that a failure leaves nothing behind."""
    write_private(key, pem, force=force)
    try:
        write_private(out, settings, force=force)
    except OSError:
        key.unlink(missing_ok=True)
        raise
