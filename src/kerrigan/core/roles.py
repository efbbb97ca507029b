"""Who may change what, exactly as the seed says.

System Admins (the logins in ``KERRIGAN_ADMINS``) edit everything. Pool owners edit the labels and tags of
their own pools and of the devices in them, and nothing else. Everyone else reads. Nobody writes a
``kerrigan.`` label: that rule lives with the label rules and holds for admins too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kerrigan.core.inventory import Pool
from kerrigan.core.labels import LabelError, validate_user_key, validate_value


class UnapprovedKeyError(LabelError):
    """The key is valid but not in the registry of approved keys, and the caller is not an admin."""


@dataclass(frozen=True, slots=True)
class Principal:
    """A signed-in GitHub login and whether it is a System Admin."""

    login: str
    admin: bool = False


def may_administer(principal: Principal) -> bool:
    """Create, delete and edit pools and devices beyond labels and tags; set device states; approve keys."""
    return principal.admin


OWNER_STATES: Final = frozenset({"available", "maintenance"})  # the states a pool's owners may set


def may_set_state(principal: Principal, pool: Pool, state: str) -> bool:
    """Put a device of ``pool`` in ``state``: admins any state; the pool's owners available or maintenance
    (taking a board out for a fix and back; retiring one or saying it is offline stays the admins')."""
    if principal.admin:
        return True
    return state in OWNER_STATES and principal.login.lower() in {owner.lower() for owner in pool.owners}


def may_edit_labels(principal: Principal, pool: Pool) -> bool:
    """Edit labels and tags of ``pool`` and of the devices in it (GitHub logins ignore case)."""
    return principal.admin or principal.login.lower() in {owner.lower() for owner in pool.owners}


def may_check_health(principal: Principal, pool: Pool) -> bool:
    """Ask for a health check of a device of ``pool``: admins and the pool's owners."""
    return may_edit_labels(principal, pool)


def check_label(
    key: str, value: str, *, approved: Mapping[str, str], principal: Principal
) -> tuple[str, str | None]:
    """The normalised key and value of a label edit (value ``None`` removes the label).

    An empty value removes the label. While the registry of approved keys is empty any valid key may be
    used; once it has entries, only admins may use a key it does not list.
    """
    normalised = validate_user_key(key)
    if value == "":
        return normalised, None
    checked = validate_value(value, key=normalised)
    if approved and normalised not in approved and not principal.admin:
        raise UnapprovedKeyError(
            f"label key {normalised!r} is not an approved key; approved keys: {', '.join(sorted(approved))}",
            "key",
        )
    return normalised, checked
