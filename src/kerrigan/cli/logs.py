"""The one place the command line sets up logging (:func:`kerrigan.logs.configure_logging`)."""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING

from kerrigan.cli.usage import UsageError

if TYPE_CHECKING:
    from kerrigan.config import Settings


def configure_logging(args_or_settings: argparse.Namespace | Settings) -> None:
    """Log to standard error as ``KERRIGAN_LOG_FORMAT`` and ``KERRIGAN_LOG_LEVEL`` say, never writing a
    secret the process holds: the server's and worker's from their settings, the runner's token."""
    # Imported by the commands that log, not by every command (``kerrigan explain`` starts in a blink).
    from kerrigan.config import LOG_FORMATS, LOG_LEVELS, ConfigError, Settings, log_choice
    from kerrigan.logs import configure_logging as configure

    if isinstance(args_or_settings, Settings):
        settings = args_or_settings
        log_format, level = settings.log_format, settings.log_level
        secrets = [
            settings.webhook_secret,
            settings.github_client_secret,
            settings.session_secret,
            settings.metrics_token,
            _password(settings.database_url),
            *(settings.github_private_key or "").splitlines(),
        ]
    else:  # the runner agent, which reads flags and its token, not the server's settings
        try:
            log_format = log_choice(
                "LOG_FORMAT", os.environ.get("KERRIGAN_LOG_FORMAT") or "auto", LOG_FORMATS
            )
            level = log_choice("LOG_LEVEL", os.environ.get("KERRIGAN_LOG_LEVEL") or "info", LOG_LEVELS)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        secrets = [getattr(args_or_settings, "token", None) or os.environ.get("KERRIGAN_RUNNER_TOKEN")]
    configure(
        log_format,
        level=logging.getLevelNamesMapping()[level.upper()],
        secrets=[secret for secret in secrets if secret and "PRIVATE KEY" not in secret],
    )


def _password(url: str) -> str | None:
    """The password of a database URL (``postgresql+asyncpg://user:password@host/db``), if it has one."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        password = make_url(url).password
    except ArgumentError:
        return None
    return str(password) if password else None
