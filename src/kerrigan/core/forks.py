"""What a fork's manifest may decide: its own sessions, nothing beyond them.

A fork writes the manifest its pull request (or a workflow run of its commit) runs, so every setting in it
is the fork author's. Those that reach other sessions are scoped here: a fork's branch is named with its
owner (``mona:main``, as GitHub labels it), so ``{branch}`` never expands to the repository's own branch;
its concurrency group only ever meets sessions of the same fork (the store keeps the owner with each
session); and ``priority: gate``, which puts work before everyone's and holds runner hosts for it, is the
repository's own to ask for: a fork's session runs as ``normal``.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from kerrigan.core.manifest import ManifestResult, Priority
from kerrigan.core.yamlsource import Problem

# The owner of a fork GitHub no longer knows (its repository was deleted): GitHub's own name for a deleted
# account, which no one can sign up as, so no living fork shares its scope.
GONE: Final = "ghost"
MAX_BRANCH: Final = 255  # sessions.head_branch
GATE_MESSAGE: Final = (
    "priority gate is the repository's own to ask for: a fork's session runs as normal (after the gate "
    "work and reservations of the lab, in turn with the repository's other work)"
)


def fork_branch(owner: str, branch: str | None) -> str | None:
    """A fork's branch as Kerrigan names it: ``<owner>:<branch>``, so it is never the repository's own (git
    allows no ``:`` in a branch's name), cut to what a session stores."""
    return None if branch is None else f"{owner}:{branch}"[:MAX_BRANCH]


def for_fork(manifest: ManifestResult) -> ManifestResult:
    """The manifest as a fork's session follows it: ``priority: gate`` lowered to ``normal``, with a
    warning on the scheduling block's line saying so. Everything else applies as written."""
    workflow = manifest.workflow
    if workflow is None or workflow.scheduling.priority is not Priority.GATE:
        return manifest
    scheduling = dataclasses.replace(workflow.scheduling, priority=Priority.NORMAL)
    warning = Problem(manifest.file, workflow.scheduling.line, 1, "scheduling.priority", GATE_MESSAGE)
    return dataclasses.replace(
        manifest,
        workflow=dataclasses.replace(workflow, scheduling=scheduling),
        warnings=(*manifest.warnings, warning),
    )
