"""Workspace paths and globs in a manifest (``results``, the artifacts a job uploads, the folder an artifact
it downloads is unpacked into): relative to the job's workspace, never out of it.

A glob uses ``*`` within a folder, ``**`` across folders and ``?`` for one character, as Python's
``Path.glob`` reads them. It may not be absolute, climb out with ``..``, hold NUL or a backslash, or be
longer than :data:`MAX_GLOB` characters; at most :data:`MAX_GLOBS` in one key.

A folder follows the same rules and is no glob; ``.`` (or nothing) is the workspace's top. The runner
host checks the folder an offer names with the same function before it writes anything there: the offer
may come from a manifest stored before a rule was added.
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
    problem = _outside(glob)
    if problem is None and not glob.strip("/."):
        return f"{quote(glob)} names no file"
    return problem


def folder_problem(folder: str) -> str | None:
    """Why ``folder`` is not a folder of a workspace (``.`` and ``""`` are its top), or None."""
    problem = _outside(folder)
    if problem is None and any(mark in folder for mark in "*?["):
        return f"{quote(folder)} is a glob: give the folder to unpack into"
    return problem


def folder_parts(folder: str) -> tuple[str, ...]:
    """The folders on the way from the workspace's top to ``folder`` (``.`` and empty parts dropped);
    call it on a folder :func:`folder_problem` found nothing wrong with."""
    return tuple(part for part in folder.split("/") if part not in ("", "."))


def _outside(path: str) -> str | None:
    """Why ``path`` may reach outside the workspace (or is too long to be looked at), or None."""
    if len(path) > MAX_GLOB:
        return f"is {len(path)} characters; the limit is {MAX_GLOB}"
    if "\0" in path or "\\" in path:
        return f"{quote(path)} holds a NUL or a backslash: write folders with '/'"
    if path.startswith(("/", "~")):
        return f"{quote(path)} is absolute: paths are relative to the job's workspace (the repository)"
    if ".." in path.split("/"):
        return f"{quote(path)} climbs out of the workspace with '..'"
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
