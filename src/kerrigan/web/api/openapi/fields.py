"""The schemas of what clients send, each built from the rule the server applies (core's, where it lives).

A schema here is as strict as the server, never looser: a request the document calls valid is one the
server takes (a test sends hundreds of generated ones). Where the server is more lenient than a pattern can
say simply (it takes a label key in any case and stores it lowercase), the schema states the form it
stores and says so in its description.
"""

from __future__ import annotations

import enum
from typing import Any, Final

from kerrigan.core.inventory import (
    MAX_REPOSITORY_GLOB,
    REPOSITORY_NAME_PATTERN,
    REPOSITORY_OWNER_PATTERN,
    REPOSITORY_PATTERN,
)
from kerrigan.core.labels import (
    MAX_LENGTH,
    REQUESTED_KEY_PATTERN,
    STORED_NAME_PATTERN,
    STORED_USER_KEY_PATTERN,
    USER_NAME_PATTERN,
)
from kerrigan.core.logins import LOGIN_PATTERN
from kerrigan.core.printable import printable_pattern
from kerrigan.core.reservations import MAX_LABELS, MAX_TAGS

PRINTABLE_NOTE: Final = (
    "printable: no control, format, private-use or surrogate character and no separator but the space "
    "(Unicode 14's Cc, Cf, Co, Cs, Zl, Zp and Zs other than U+0020)"
)


def enum_of(kind: type[enum.Enum], *, nullable: bool = False) -> dict[str, Any]:
    """The values of core's enum ``kind`` (null first when ``nullable``): the document never lists them by
    hand, so a state core adds is in it."""
    values = [member.value for member in kind]
    return {"enum": [None, *values] if nullable else values}


def text(min_length: int, max_length: int, description: str = "") -> dict[str, Any]:
    """``min_length`` to ``max_length`` printable characters."""
    words = f"{min_length}-{max_length} printable characters"
    return {
        "type": "string",
        "pattern": printable_pattern(min_length, max_length),
        "description": f"{description}: {words}" if description else words,
    }


def anchored(pattern: str) -> str:
    """``pattern`` matching a whole string."""
    return f"^(?:{pattern})$"


ID: Final = {
    "type": "string",
    "pattern": anchored(STORED_NAME_PATTERN),
    "description": "an id: 1-63 of lowercase letters, digits, '.', '_' and '-'",
}
LABEL_VALUE: Final = text(1, MAX_LENGTH, "a label value")
LABEL_VALUE_OR_EMPTY: Final = text(0, MAX_LENGTH, "a label value (empty: none)")
USER_NAME: Final = {
    "type": "string",
    "pattern": anchored(USER_NAME_PATTERN),
    "description": "1-63 letters, digits, '.', '_' and '-' in any case (stored lowercase), not starting "
    "with 'kerrigan.'",
}
TAGS: Final = {"type": "array", "items": USER_NAME}
LABELS: Final = {
    "type": "object",
    "propertyNames": {"pattern": anchored(STORED_USER_KEY_PATTERN)},
    "additionalProperties": LABEL_VALUE,
    "description": "label keys to values; the server also takes a key in any case (stored lowercase), "
    "but not two keys that differ only in case",
}
LOGINS: Final = {
    "type": "array",
    "items": {"type": "string", "pattern": anchored(LOGIN_PATTERN)},
    "description": "GitHub logins: 1-39 letters, digits and '-', not starting with '-'",
}
MAX_REQUESTED: Final = min(MAX_LABELS, MAX_TAGS)
REQUESTED_VALUES: Final = {"oneOf": [LABEL_VALUE, {"type": "array", "items": LABEL_VALUE, "minItems": 1}]}
REQUESTED_LABELS: Final = {
    "type": "object",
    "propertyNames": {"pattern": anchored(REQUESTED_KEY_PATTERN)},
    "additionalProperties": REQUESTED_VALUES,
    "maxProperties": MAX_REQUESTED,
    "description": "label keys (the kerrigan. ones Kerrigan generates included) to a value, or a list "
    "meaning any of",
}
REQUESTED_TAGS: Final = {
    "oneOf": [USER_NAME, {"type": "array", "items": USER_NAME, "maxItems": MAX_REQUESTED}],
    "description": "a tag or a list of tags, all required",
}

# In a path or a query: the server refuses a NUL anywhere in them (400) before any route sees it.
NO_NUL: Final = {"type": "string", "pattern": "^[^\\u0000]*$"}
REPOSITORY_OWNER: Final = {
    "type": "string",
    "pattern": anchored(REPOSITORY_OWNER_PATTERN),
    "maxLength": MAX_REPOSITORY_GLOB // 2,
    "description": "the repository's owner: letters, digits and '-' (owner/name at most "
    f"{MAX_REPOSITORY_GLOB} characters)",
}
REPOSITORY_NAME: Final = {
    "type": "string",
    "pattern": anchored(REPOSITORY_NAME_PATTERN),
    "maxLength": MAX_REPOSITORY_GLOB // 2 - 1,
    "description": "the repository's name: letters, digits, '.', '_' and '-'",
}
REPOSITORY: Final = {
    "type": "string",
    "pattern": anchored(REPOSITORY_PATTERN),
    "maxLength": MAX_REPOSITORY_GLOB,
    "description": "owner/name",
}
LABEL_FILTER: Final = {
    "type": "string",
    "pattern": "^[^=\\u0000]+=[^\\u0000]+$",
    "description": "key=value (split at the first '='; the key compared lowercase)",
}
CURSOR: Final = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_-]+$",
    "description": "the next_cursor of the page before, unchanged, with the same filters: a cursor this "
    "server did not give out, or gave out for other filters, is a 400 naming cursor",
}

EVERY_PATTERN: Final = (
    "^(?:(?:[5-9]|[1-9][0-9]{1,4})m|[1-9][0-9]{0,2}h|(?:[1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])d)$"
)
"""A health check's ``every`` as minutes, hours or days, each within 5 minutes to 365 days."""
