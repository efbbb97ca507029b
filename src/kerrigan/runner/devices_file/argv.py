"""A command in a devices file: a list of the program and its arguments, run without a shell."""

from __future__ import annotations

import yaml

from kerrigan.core.yamlsource import SourceReader, is_null, join_field


def read_argv(r: SourceReader, node: yaml.Node, where: str) -> tuple[str, ...] | None:
    """The command at ``node``: a non-empty list of strings, the first naming the program, none holding a
    NUL (None, with the problem recorded, when it is not one)."""
    if isinstance(node, yaml.ScalarNode) and not is_null(node):
        r.error(node, where, "must be a list of the command and its arguments (run without a shell)")
        return None
    argv = []
    for item, item_field, text in r.strings(node, where, scalar_ok=False, allow_empty=True):
        if "\0" in text:
            r.error(item, item_field, "must not hold a NUL character")
            return None
        argv.append(text)
    if not argv:
        if isinstance(node, yaml.SequenceNode) and not node.value:
            r.error(node, where, "must name the command to run")
        return None
    if not argv[0]:
        r.error(node, join_field(where, 0), "must name the command to run")
        return None
    if isinstance(node, yaml.SequenceNode) and len(argv) != len(node.value):
        return None  # an item that is not a string: recorded by r.strings
    return tuple(argv)
