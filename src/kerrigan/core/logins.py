"""GitHub logins as Kerrigan takes them: in ``KERRIGAN_ADMINS``, pool owners, the inventory file, the API.

A login is 1 to 39 ASCII letters, digits and hyphens, not starting with a hyphen (GitHub's own rule also
forbids a trailing or doubled hyphen, but older accounts have them, so those pass).
"""

from __future__ import annotations

import re
from typing import Final

MAX_LOGIN: Final = 39
LOGIN_PATTERN: Final = f"[A-Za-z0-9][A-Za-z0-9-]{{0,{MAX_LOGIN - 1}}}"
_LOGIN: Final = re.compile(LOGIN_PATTERN)


def is_login(text: str) -> bool:
    """Whether ``text`` can be a GitHub login."""
    return _LOGIN.fullmatch(text) is not None
