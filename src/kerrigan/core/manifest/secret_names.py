"""The secrets a manifest names, held against the ones its repository has: a task that names a secret
nobody set would run without it (or fail in a way that says nothing), so the manifest is refused at once
with an error on the secret's line, before any board is leased."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from kerrigan.core.manifest.model import ManifestResult
from kerrigan.core.yamlsource import Problem


def unset_secrets(result: ManifestResult, known: Collection[str], repository: str) -> ManifestResult:
    """``result`` with an error on the line of each secret a task names that ``repository`` does not have
    (``known``: its secrets' names, upper-case); such a manifest has no workflow. Each name is reported once,
    where it is first written."""
    if result.workflow is None:
        return result
    seen: set[str] = set()
    problems: list[Problem] = []
    for task in result.workflow.tasks:
        for name, origin in zip(task.secrets, task.secret_origins, strict=False):
            if name in known or name in seen:
                continue
            seen.add(name)
            problems.append(
                Problem(
                    result.file,
                    origin.line,
                    1,
                    origin.field,
                    f"secret {name} is not set for {repository}: a repository admin or writer sets it with "
                    f"`kerrigan secrets set {repository} {name}` (docs/secrets.md)",
                )
            )
    if not problems:
        return result
    return dataclasses.replace(result, workflow=None, errors=(*result.errors, *problems))
