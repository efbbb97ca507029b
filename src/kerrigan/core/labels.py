"""Label keys, values and tags: normalisation and validation.

The rules are DESIGN.md's "Labels and inventory": keys and tags are 1-63 characters of ``a-z 0-9 . _ -``
(stored lowercase), values are 1-63 printable characters, and the ``kerrigan.`` prefix is reserved for the
labels Kerrigan generates (no key or tag a person writes may use it).
"""

from __future__ import annotations

import re
from typing import Final

from kerrigan.core.printable import is_printable
from kerrigan.core.quoting import quote as _quote_cut

MAX_LENGTH: Final = 63


def _quote(text: str) -> str:
    # Whole up to a few times the limit, so a near miss shows as written; cut short beyond (megabytes).
    return _quote_cut(text, shown=4 * MAX_LENGTH)


RESERVED_PREFIX: Final = "kerrigan."

IMPLICIT_POOL_KEYS: Final = (
    "kerrigan.pool_id",
    "kerrigan.pool_name",
    "kerrigan.firmware_channel",
    "kerrigan.firmware_base_version",
)
IMPLICIT_DEVICE_KEYS: Final = (
    "kerrigan.target_id",
    "kerrigan.board",
    "kerrigan.target_type",
    "kerrigan.os_type",
    "kerrigan.host",
)
IMPLICIT_KEYS: Final = IMPLICIT_POOL_KEYS + IMPLICIT_DEVICE_KEYS
HOST_KEY: Final = "kerrigan.host"
"""A device's runner host; also the one label a runner host has (what a task with ``board: none`` asks)."""


def _any_case(text: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in text)


# The rules as patterns, for documents (the REST API's states them; tests hold the functions below to them).
STORED_NAME_PATTERN: Final = "[a-z0-9._-]{1,63}"
"""A key or tag as stored: lowercase (an id too)."""
_NAME: Final = re.compile(STORED_NAME_PATTERN)
USER_NAME_PATTERN: Final = f"(?!{_any_case(RESERVED_PREFIX)})[A-Za-z0-9._-]{{1,63}}"
"""A key or tag a person writes: any case, not in the reserved namespace."""
STORED_USER_KEY_PATTERN: Final = f"(?!{re.escape(RESERVED_PREFIX)}){STORED_NAME_PATTERN}"
"""A key a person writes, in its stored form (a map can hold no two keys that differ in case only)."""
REQUESTED_KEY_PATTERN: Final = (
    f"(?:(?!{re.escape(RESERVED_PREFIX)}){STORED_NAME_PATTERN}|{'|'.join(map(re.escape, IMPLICIT_KEYS))})"
)
"""A key a workflow or a reservation asks for, stored form: a person's key or one Kerrigan generates."""
_FORBIDDEN = re.compile(r"[^a-z0-9._-]")


class LabelError(ValueError):
    """A label key, value or tag broke a rule; the message names the offender and the rule.

    ``subject`` says which part was at fault: ``"key"``, ``"value"`` or ``"tag"``.
    """

    def __init__(self, message: str, subject: str = "key") -> None:
        super().__init__(message)
        self.subject = subject


def normalise_key(key: str) -> str:
    """Keys are case-insensitive: compare and store them lowercase."""
    return key.lower()


def normalise_tag(tag: str) -> str:
    """Tags follow the keys' rule: compared and stored lowercase."""
    return tag.lower()


def is_reserved(key: str) -> bool:
    """Whether ``key`` lies in the namespace Kerrigan generates."""
    return normalise_key(key).startswith(RESERVED_PREFIX)


def is_pool_scoped(key: str) -> bool:
    """Keys decided by the pool alone: pool-level filtering looks at these before any device."""
    return key.startswith(("kerrigan.pool_", "kerrigan.firmware_"))


def _check_name(kind: str, raw: str, normalised: str, subject: str) -> None:
    if not normalised:
        raise LabelError(f"{kind} must not be empty", subject)
    if len(normalised) > MAX_LENGTH:
        raise LabelError(
            f"{kind} {_quote(raw)} is {len(normalised)} characters long; the limit is {MAX_LENGTH}", subject
        )
    bad = _FORBIDDEN.search(normalised)
    if bad is not None:
        raise LabelError(
            f"{kind} {_quote(raw)} contains {bad.group()!r}; "
            "only lowercase letters, digits, '.', '_' and '-' are allowed",
            subject,
        )


def validate_key(key: str) -> str:
    """Return the normalised form of a label key, or raise :class:`LabelError`."""
    normalised = normalise_key(key)
    _check_name("label key", key, normalised, "key")
    return normalised


def validate_user_key(key: str) -> str:
    """Validate a key a person writes on a pool or device: the reserved prefix is refused."""
    normalised = validate_key(key)
    if normalised.startswith(RESERVED_PREFIX):
        raise LabelError(
            f"label key {_quote(key)} uses the reserved prefix {RESERVED_PREFIX!r}; "
            "Kerrigan generates those labels and they cannot be set by hand"
        )
    return normalised


def validate_requested_key(key: str) -> str:
    """Validate a key a workflow asks for: reserved keys are allowed, but only those Kerrigan generates."""
    normalised = validate_key(key)
    if normalised.startswith(RESERVED_PREFIX) and normalised not in IMPLICIT_KEYS:
        raise LabelError(
            f"label key {_quote(key)} is not a label Kerrigan generates; "
            f"the reserved keys are {', '.join(IMPLICIT_KEYS)}"
        )
    return normalised


def validate_value(value: str, *, key: str | None = None) -> str:
    """Return ``value`` unchanged if it is a valid label value, or raise :class:`LabelError`."""
    where = f" of label {_quote(key)}" if key else ""
    if not value:
        raise LabelError(f"value{where} must not be empty", "value")
    if len(value) > MAX_LENGTH:
        raise LabelError(f"value{where} is {len(value)} characters long; the limit is {MAX_LENGTH}", "value")
    if not is_printable(value):
        raise LabelError(f"value{where} {_quote(value)} contains a non-printable character", "value")
    return value


def validate_tag(tag: str) -> str:
    """Return the normalised form of a tag, or raise :class:`LabelError`. The reserved prefix is refused
    as for label keys: Kerrigan generates no tags, so a ``kerrigan.`` tag could only pass for one of its
    own labels."""
    normalised = normalise_tag(tag)
    _check_name("tag", tag, normalised, "tag")
    if normalised.startswith(RESERVED_PREFIX):
        raise LabelError(
            f"tag {_quote(tag)} uses the reserved prefix {RESERVED_PREFIX!r}; "
            "Kerrigan keeps that namespace for the labels it generates and it cannot be set by hand",
            "tag",
        )
    return normalised


def is_valid_name(name: str) -> bool:
    """Whether ``name`` is already a normalised key, tag or identifier."""
    return _NAME.fullmatch(name) is not None


def slugify(text: str) -> str:
    """The ``kerrigan.pool_name`` form of a display name: ``SDK 2.2 SoM`` -> ``sdk-2-2-som``."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:MAX_LENGTH].rstrip("-")
