"""The settings a command runs with: ``kerrigan.env`` in the working directory, the environment over it,
and the command's own flags over both."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kerrigan.cli.usage import UsageError
from kerrigan.config import ENV_FILE, ConfigError, Settings, read_env_file, with_env_file


def load_settings(flags: Mapping[str, str] | None = None) -> Settings:
    """The settings; ``flags`` are ``KERRIGAN_`` names the command line set. A mistake is a UsageError."""
    try:
        environ = with_env_file(os.environ, read_env_file(Path(ENV_FILE)))
        return Settings.from_env({**environ, **(flags or {})})
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
