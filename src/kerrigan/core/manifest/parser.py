"""The manifest parser: a workflow file's text to a :class:`Workflow`, or every problem with it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from kerrigan.core.manifest.environment import read_env
from kerrigan.core.manifest.model import MAX_NODES, ManifestResult, Workflow
from kerrigan.core.manifest.policies import read_concurrency, read_retry
from kerrigan.core.manifest.scheduling import read_scheduling
from kerrigan.core.manifest.tasks import read_tasks
from kerrigan.core.manifest.triggers import read_triggers
from kerrigan.core.yamlsource import SourceReader

TOP_KEYS: Final = ("name", "on", "env", "scheduling", "concurrency", "retry", "tasks")


def parse_manifest(text: str, file: str) -> ManifestResult:
    """Parse a manifest's text; ``file`` is the path shown in every problem."""
    r = SourceReader(file)
    name: str | None = None
    workflow: Workflow | None = None
    root = r.compose(text, "manifest", max_nodes=MAX_NODES)
    top = r.mapping(root, "", TOP_KEYS) if root is not None else None
    if root is not None and top is not None:
        name = _name(r, root, top)
        triggers = read_triggers(r, root, top)
        scheduling = read_scheduling(r, top)
        concurrency = read_concurrency(r, top)
        retry = read_retry(r, top)
        env = read_env(r, top["env"][1], "env") if "env" in top else {}
        tasks = read_tasks(r, root, top, scheduling, env)
        if not r.errors and triggers is not None and scheduling is not None:
            assert name is not None  # no errors means the name was read
            workflow = Workflow(name, file, triggers, scheduling, tuple(tasks), concurrency, retry)
    return ManifestResult(file, name, workflow, r.sorted_errors(), r.sorted_warnings())


def _name(r: SourceReader, root: yaml.Node, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> str | None:
    if "name" not in top:
        r.error(root, "name", "is required: the check run is named after it")
        return None
    node = top["name"][1]
    name = r.string(node, "name")
    if name is not None and (len(name) > 100 or not name.isprintable()):
        r.error(node, "name", "must be 1-100 printable characters on one line")
        return None
    return name
