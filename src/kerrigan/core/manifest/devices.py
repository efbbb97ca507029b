"""A task's ``devices``: several devices at once, one per role, all on one runner host (a gang).

.. code-block:: yaml

    devices:
      dut: {labels: {board: modalix}}
      peer: {labels: {board: davinci}, tags: [uart]}

Each role is a requirements block (``labels`` and ``tags``, as in ``requirements``), laid over the task's
own requirements (which every role shares). A role's name becomes part of the job's environment
(``KERRIGAN_DEVICE_DUT_ID``), so it is a short lower-case name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import yaml

from kerrigan.core.quoting import quote
from kerrigan.core.yamlsource import SourceReader, is_null, join_field, line_of

MIN_ROLES: Final = 2
MAX_ROLES: Final = 8
_ROLE: Final = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True, slots=True)
class RoleEntry:
    """A role as written: its name, the field it is read at, and its requirements' node (None: none)."""

    name: str
    field: str
    node: yaml.Node | None
    line: int


def is_role_name(text: str) -> bool:
    """Whether ``text`` may name a role (and so a part of an environment variable's name)."""
    return _ROLE.fullmatch(text) is not None


def read_roles(r: SourceReader, node: yaml.Node, field: str) -> tuple[RoleEntry, ...] | None:
    """The roles of a ``devices`` mapping, in the order written; None (problems recorded) when it is not
    2 to 8 well-named roles, each a requirements block."""
    if is_null(node):
        r.error(node, field, f"names no role; give {MIN_ROLES} to {MAX_ROLES} roles, or leave devices out")
        return None
    config = r.mapping(node, field)
    if config is None:
        return None
    errors_before = len(r.errors)
    roles = []
    for name, (key_node, value_node) in config.items():
        role_field = join_field(field, name)
        if not is_role_name(name):
            r.error(
                key_node,
                role_field,
                f"{quote(name)} is not a role name: 1-32 of lowercase letters, digits and '_', "
                "starting with a letter (it names the job's variable KERRIGAN_DEVICE_<ROLE>_ID)",
            )
            continue
        if not is_null(value_node) and not isinstance(value_node, yaml.MappingNode):
            r.error(
                value_node,
                role_field,
                "must be a requirements block ({labels: {...}, tags: [...]}) or empty",
            )
            continue
        # Its labels and tags are read with the task's requirements, once per combination of a matrix.
        roles.append(
            RoleEntry(name, role_field, None if is_null(value_node) else value_node, line_of(key_node))
        )
    if len(r.errors) > errors_before:
        return None
    if not MIN_ROLES <= len(roles) <= MAX_ROLES:
        r.error(
            node,
            field,
            f"names {len(roles)} role(s); a gang has {MIN_ROLES} to {MAX_ROLES} "
            "(one device is the task's own requirements)",
        )
        return None
    return tuple(roles)
