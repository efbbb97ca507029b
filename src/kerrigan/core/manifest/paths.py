"""Workspace paths and globs in a manifest (``results``, and the artifacts a job uploads): relative to the
job's workspace, never out of it.

A glob uses ``*`` within a folder, ``**`` across folders and ``?`` for one character, as Python's
``Path.glob`` reads them. It may not be absolute, climb out with ``..``, hold NUL or a backslash, or be
longer than :data:`MAX_GLOB` characters; at most :data:`MAX_GLOBS` in one key.
"""

from __future__ import annotations

from typing import Final

import yaml

from kerrigan.core.quoting import quote
from kerrigan.core.yamlsource import SourceReader, is_null

MAX_GLOBS: Final = 20
MAX_GLOB: Final = 300


def glob_problem(glob: str) -> str | None:
    """Why ``glob`` cannot name files of a workspace, or None."""
    if len(glob) > MAX_GLOB:
        return f"is {len(glob)} characters; the limit is {MAX_GLOB}"
    if "\0" in glob or "\\" in glob:
        return f"{quote(glob)} holds a NUL or a backslash: write folders with '/'"
    if glob.startswith(("/", "~")):
        return f"{quote(glob)} is absolute: paths are relative to the job's workspace (the repository)"
    if ".." in glob.split("/"):
        return f"{quote(glob)} climbs out of the workspace with '..'"
    if not glob.strip("/."):
        return f"{quote(glob)} names no file"
    return None


def read_globs(r: SourceReader, node: yaml.Node, field: str) -> tuple[str, ...]:
    """A glob or a list of them, each checked, none twice; every problem recorded in ``r``."""
    if is_null(node):
        r.error(node, field, "is empty: give a glob such as results/*.xml, or leave the key out")
        return ()
    found: dict[str, None] = {}
    for item, item_field, text in r.strings(node, field):
        problem = glob_problem(text)
        if problem is not None:
            r.error(item, item_field, problem)
        else:
            found[text] = None
    if len(found) > MAX_GLOBS:
        r.error(node, field, f"lists {len(found)} globs; the limit is {MAX_GLOBS}")
        return ()
    return tuple(found)
