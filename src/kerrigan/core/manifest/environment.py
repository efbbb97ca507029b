"""The manifest's ``env``: names and values a job finds in its environment, in the workflow and per task.

A name follows :mod:`kerrigan.core.variable_names` (a shell-variable name, not ``GITHUB_…`` nor
``KERRIGAN_…``). A value is any scalar's text as written (``115200`` stays ``"115200"``, ``yes`` stays
``"yes"``), at most :data:`MAX_ENV_VALUE` characters, without NUL. A task's ``env`` is laid over the
workflow's: the task wins. In a task with a matrix, ``{matrix.KEY}`` in a value is the combination's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import yaml

from kerrigan.core.matrix import Template, TemplateError, parse_template
from kerrigan.core.variable_names import name_problem
from kerrigan.core.yamlsource import SourceReader, describe, is_null, join_field

MAX_ENV: Final = 100  # names in one env block
MAX_ENV_VALUE: Final = 4096


def read_env(
    r: SourceReader, node: yaml.Node, field: str, keys: Sequence[str] | None = None
) -> dict[str, Template]:
    """The ``env`` mapping at ``node`` (``field``: ``env``, ``tasks[0].env``), each value a template over
    the task's matrix ``keys`` (``None``: no matrix); every problem recorded in ``r``."""
    if is_null(node):
        return {}
    entries = r.mapping(node, field)
    if entries is None:
        return {}
    if len(entries) > MAX_ENV:
        r.error(node, field, f"sets {len(entries)} names; the limit is {MAX_ENV}")
        return {}
    env: dict[str, Template] = {}
    for name, (key_node, value_node) in entries.items():
        name_field = join_field(field, name)
        problem = name_problem(name, "environment name")
        if problem is not None:
            r.error(key_node, name_field, problem)
            continue
        if not isinstance(value_node, yaml.ScalarNode) or is_null(value_node):
            r.error(value_node, name_field, f"must be a string, not {describe(value_node)}")
            continue
        text = str(value_node.value)
        if len(text) > MAX_ENV_VALUE:
            r.error(value_node, name_field, f"is {len(text):,} characters; the limit is {MAX_ENV_VALUE:,}")
            continue
        if "\0" in text:
            r.error(value_node, name_field, "must not hold a NUL character")
            continue
        try:
            env[name] = parse_template(text, keys)
        except TemplateError as err:
            r.error(value_node, name_field, str(err))
    return env
