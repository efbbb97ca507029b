"""Names of what a job finds in its environment: the manifest's ``env`` names and repository secrets.

Both are shell-variable names (letters, digits and ``_``, not starting with a digit), at most
:data:`MAX_NAME` characters, and neither starts with ``GITHUB_`` (GitHub's own) nor ``KERRIGAN_`` (the
variables Kerrigan gives a job), in any case. A secret's name is stored upper-case, as GitHub Actions
stores it; an ``env`` name is kept as written (the environment is case-sensitive).
"""

from __future__ import annotations

import re
from typing import Final

MAX_NAME: Final = 100
RESERVED_PREFIXES: Final = ("GITHUB_", "KERRIGAN_")  # GitHub's own, and the variables Kerrigan gives a job
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def name_problem(text: str, what: str = "secret name") -> str | None:
    """Why ``text`` cannot be a ``what`` (``secret name``, ``environment name``), or ``None``."""
    shown = repr(text[:MAX_NAME])
    article = "an" if what[:1] in tuple("aeiou") else "a"
    if not 1 <= len(text) <= MAX_NAME:
        return f"{article} {what} is 1 to {MAX_NAME} characters, not {len(text)}"
    if _NAME.fullmatch(text) is None:
        return f"{shown} is not {article} {what}: letters, digits and '_', not starting with a digit"
    for prefix in RESERVED_PREFIXES:
        if text.upper().startswith(prefix):
            return f"{shown} is not {article} {what}: names may not start with {prefix}"
    return None


def secret_name(text: str) -> str:
    """The secret name ``text`` as stored (upper-case), or :class:`ValueError` naming the rule."""
    problem = name_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text.upper()
