"""The manifest's ``artifacts``: what a job takes from the workflow run that triggered its session
(``download``) and what it leaves with Kerrigan (``upload``).

``download`` lists ``{workflow_run: NAME, path: FOLDER}``: the artifact ``NAME`` of the GitHub Actions run
that triggered the session, unpacked into ``FOLDER`` of the workspace (default: its top) before the command
runs. ``upload`` is a glob or a list of globs (:mod:`.paths`) of files the runner host sends to Kerrigan once
the command has ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import yaml

from kerrigan.core.manifest.paths import folder_parts, folder_problem, read_globs
from kerrigan.core.printable import is_printable
from kerrigan.core.quoting import quote
from kerrigan.core.yamlsource import SourceReader, is_null, join_field

ARTIFACT_KEYS: Final = ("download", "upload")
DOWNLOAD_KEYS: Final = ("workflow_run", "path")
MAX_DOWNLOADS: Final = 10
MAX_ARTIFACT_NAME: Final = 255


@dataclass(frozen=True, slots=True)
class Download:
    """An artifact of the triggering workflow run, and the workspace folder it is unpacked into."""

    name: str
    path: str = "."


@dataclass(frozen=True, slots=True)
class Artifacts:
    """A task's ``artifacts``."""

    download: tuple[Download, ...] = ()
    upload: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.download or self.upload)

    def as_dict(self) -> dict[str, object]:
        """As the store keeps it and the offer carries it."""
        return {
            "download": [{"name": item.name, "path": item.path} for item in self.download],
            "upload": list(self.upload),
        }


def read_artifacts(r: SourceReader, node: yaml.Node, field: str) -> Artifacts:
    """The ``artifacts`` at ``node``; every problem recorded in ``r``."""
    if is_null(node):
        r.error(node, field, "is empty: give download, upload or both, or leave artifacts out")
        return Artifacts()
    config = r.mapping(node, field, ARTIFACT_KEYS)
    if config is None:
        return Artifacts()
    downloads: list[Download] = []
    if "download" in config:
        listed = config["download"][1]
        items = r.sequence(listed, field + ".download") or []
        if len(items) > MAX_DOWNLOADS:
            r.error(listed, field + ".download", f"lists {len(items)}; the limit is {MAX_DOWNLOADS}")
            items = []
        for index, item in enumerate(items):
            found = _download(r, item, join_field(field + ".download", index))
            if found is not None:
                downloads.append(found)
    upload = read_globs(r, config["upload"][1], field + ".upload") if "upload" in config else ()
    return Artifacts(tuple(downloads), upload)


def _download(r: SourceReader, node: yaml.Node, field: str) -> Download | None:
    entry = r.mapping(node, field, DOWNLOAD_KEYS)
    if entry is None:
        return None
    if "workflow_run" not in entry:
        r.error(node, field + ".workflow_run", "is required: the name of the artifact in the triggering run")
        return None
    name = r.string(entry["workflow_run"][1], field + ".workflow_run")
    if name is None:
        return None
    if len(name) > MAX_ARTIFACT_NAME or not is_printable(name) or any(c in name for c in '"/\\:<>|*?'):
        r.error(
            entry["workflow_run"][1],
            field + ".workflow_run",
            f"{quote(name)} is not an artifact name: 1-{MAX_ARTIFACT_NAME} printable characters, none of "
            '" / \\ : < > | * ?',
        )
        return None
    path = "."
    if "path" in entry:
        written = r.string(entry["path"][1], field + ".path")
        if written is None:
            return None
        # Every part is looked at: a path of dots and slashes alone ("..", "./..") climbs out as well.
        problem = folder_problem(written)
        if problem is not None:
            r.error(entry["path"][1], field + ".path", problem)
            return None
        path = "/".join(folder_parts(written)) or "."
    return Download(name, path)
