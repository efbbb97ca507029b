"""Annotations on the manifest's lines: its errors and warnings, and did-you-mean hints."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kerrigan.core.explain import TaskExplanation
from kerrigan.core.manifest import ManifestResult
from kerrigan.core.yamlsource import Problem


def _annotation(problem: Problem, level: str, title: str) -> dict[str, Any]:
    return {
        "path": problem.file,
        "start_line": problem.line,
        "end_line": problem.line,
        "annotation_level": level,
        "title": title,
        "message": (f"{problem.field}: " if problem.field else "") + problem.message,
    }


def manifest_annotations(manifest: ManifestResult) -> list[dict[str, Any]]:
    """Errors as ``failure`` and warnings (deprecations, a fork's ``priority: gate``) as ``warning``
    annotations on the manifest's lines."""
    return [_annotation(p, "failure", "Manifest error") for p in manifest.errors] + [
        _annotation(p, "warning", "Manifest warning") for p in manifest.warnings
    ]


def hint_annotations(file: str, tasks: Iterable[TaskExplanation]) -> list[dict[str, Any]]:
    """Did-you-mean hints as ``notice`` annotations on the lines of the requested keys and tags."""
    return [
        {
            "path": file,
            "start_line": hint.line,
            "end_line": hint.line,
            "annotation_level": "notice",
            "title": f"Task {item.task.id}: nothing has this",
            "message": f"{hint.field}: {hint.message}",
        }
        for item in tasks
        for hints in (
            [res.hints for _, res in item.resolutions()] + ([item.hosts.hints] if item.hosts else [])
        )
        for hint in hints
    ]
