"""The manifest parser: a workflow file's text to a :class:`Workflow`, or every problem with it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

import yaml

from kerrigan.core.manifest.environment import read_env
from kerrigan.core.manifest.files import too_large, utf8_size
from kerrigan.core.manifest.model import MAX_NODES, ManifestResult, Scheduling, Task, Workflow
from kerrigan.core.manifest.policies import read_concurrency, read_retry
from kerrigan.core.manifest.scheduling import read_scheduling
from kerrigan.core.manifest.tasks import read_tasks
from kerrigan.core.manifest.triggers import read_triggers
from kerrigan.core.printable import is_printable
from kerrigan.core.yamlsource import Problem, SourceReader

TOP_KEYS: Final = ("name", "on", "env", "scheduling", "concurrency", "retry", "tasks")


def parse_manifest(text: str, file: str) -> ManifestResult:
    """Parse a manifest's text; ``file`` is the path shown in every problem. A text over the size limit is
    that one error, unread."""
    oversize = too_large(utf8_size(text))
    if oversize is not None:
        return ManifestResult(file, None, None, (Problem(file, 1, 1, "", oversize),), ())
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
        if scheduling is not None:
            scheduling = _room_for_gangs(r, top, scheduling, tasks)
        if not r.errors and triggers is not None and scheduling is not None:
            assert name is not None  # no errors means the name was read
            workflow = Workflow(name, file, triggers, scheduling, tuple(tasks), concurrency, retry)
    return ManifestResult(file, name, workflow, r.sorted_errors(), r.sorted_warnings())


def _room_for_gangs(
    r: SourceReader, top: Mapping[str, tuple[yaml.Node, yaml.Node]], scheduling: Scheduling, tasks: list[Task]
) -> Scheduling:
    """A session must be able to hold its largest gang at once: ``max_devkits`` left to its default grows
    to the most roles a task names; one set lower is an error on that task's line."""
    largest = max(tasks, key=lambda task: len(task.devices), default=None)
    if largest is None or len(largest.devices) <= scheduling.max_devkits:
        return scheduling
    node = top.get("scheduling")
    given = (
        node is not None
        and isinstance(node[1], yaml.MappingNode)
        and any(isinstance(key, yaml.ScalarNode) and key.value == "max_devkits" for key, _ in node[1].value)
    )
    if not given:
        return replace(scheduling, max_devkits=len(largest.devices))
    index = _written_index(top["tasks"][1], largest.task_id)
    r.error_at(
        largest.devices[0].line,  # its first role's
        f"tasks[{index}].devices",
        f"task {largest.task_id} takes {len(largest.devices)} devices at once, but scheduling.max_devkits "
        f"(line {scheduling.line}) lets the session hold {scheduling.max_devkits}; "
        f"set max_devkits to {len(largest.devices)} or more",
    )
    return scheduling


def _written_index(node: yaml.Node, task_id: str) -> int:
    """Where the task ``task_id`` is written in ``tasks`` (its jobs say nothing of the tasks before it that
    made none, for their errors)."""
    for index, item in enumerate(node.value if isinstance(node, yaml.SequenceNode) else ()):
        if isinstance(item, yaml.MappingNode) and any(
            isinstance(key, yaml.ScalarNode)
            and key.value == "id"
            and getattr(value, "value", None) == task_id
            for key, value in item.value
        ):
            return index
    return 0


def _name(r: SourceReader, root: yaml.Node, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> str | None:
    if "name" not in top:
        r.error(root, "name", "is required: the check run is named after it")
        return None
    node = top["name"][1]
    name = r.string(node, "name")
    if name is not None and (len(name) > 100 or not is_printable(name)):
        r.error(node, "name", "must be 1-100 printable characters on one line")
        return None
    return name
