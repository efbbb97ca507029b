"""The manifest's ``tasks``: each task's id, command, claims and requirements (the session's refined by
its own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from kerrigan.core.labels import is_valid_name
from kerrigan.core.manifest.model import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_VCPUS,
    MAX_TASKS,
    Scheduling,
    Task,
    TaskType,
)
from kerrigan.core.manifest.requirements import read_requirements
from kerrigan.core.quoting import quote
from kerrigan.core.requirements import Requirements, refine
from kerrigan.core.yamlsource import SourceReader, join_field, line_of

TASK_KEYS: Final = ("id", "type", "run", "vcpus", "timeout_s", "requirements")


def read_tasks(
    r: SourceReader,
    root: yaml.Node,
    top: Mapping[str, tuple[yaml.Node, yaml.Node]],
    scheduling: Scheduling | None,
) -> list[Task]:
    """The valid tasks, every problem of the others recorded in ``r``."""
    if "tasks" not in top:
        r.error(root, "tasks", "is required: list at least one task")
        return []
    node = top["tasks"][1]
    items = r.sequence(node, "tasks")
    if items is None:
        return []
    if not items:
        r.error(node, "tasks", "must list at least one task")
    if len(items) > MAX_TASKS:
        r.error(node, "tasks", f"lists {len(items)} tasks; the limit is {MAX_TASKS}")
        return []
    session = scheduling.requirements if scheduling else Requirements()
    tasks: list[Task] = []
    first_line: dict[str, int] = {}
    for index, item in enumerate(items):
        task_id, task = _task(r, item, join_field("tasks", index), session)
        if task_id is None:
            continue
        if task_id in first_line:
            r.error(
                item,
                join_field("tasks", index) + ".id",
                f"duplicate task id {task_id!r} (first on line {first_line[task_id]})",
            )
            continue
        first_line[task_id] = line_of(item)
        if task is not None:
            tasks.append(task)
    return tasks


def _task(
    r: SourceReader, node: yaml.Node, field: str, session: Requirements
) -> tuple[str | None, Task | None]:
    """The task's id (when readable) and the task (when valid)."""
    config = r.mapping(node, field, TASK_KEYS)
    if config is None:
        return None, None
    errors_before = len(r.errors)
    task_id: str | None = None
    if "id" not in config:
        r.error(node, field + ".id", "is required")
    else:
        task_id = r.string(config["id"][1], field + ".id")
        if task_id is not None and not is_valid_name(task_id):
            r.error(
                config["id"][1],
                field + ".id",
                f"{quote(task_id)} is not a valid id: 1-63 of lowercase letters, digits, '.', '_' and '-'",
            )
            task_id = None
    task_type = TaskType.COMMAND
    if "type" in config:
        chosen = r.choice(config["type"][1], field + ".type", TaskType)
        task_type = TaskType(chosen) if chosen else task_type
    run: str | None = None
    if "run" not in config:
        r.error(node, field + ".run", "is required for a command task")
    else:
        run = r.string(config["run"][1], field + ".run")
    vcpus = DEFAULT_VCPUS
    if "vcpus" in config:
        vcpus = r.integer(config["vcpus"][1], field + ".vcpus", minimum=1, maximum=256) or vcpus
    timeout_s = DEFAULT_TIMEOUT_S
    if "timeout_s" in config:
        timeout_s = (
            r.integer(config["timeout_s"][1], field + ".timeout_s", minimum=1, maximum=7 * 24 * 3600)
            or timeout_s
        )
    own = Requirements()
    if "requirements" in config:
        own = read_requirements(r, config["requirements"][1], field + ".requirements")
    requirements, conflicts = refine(session, own)
    for conflict in conflicts:
        task_origin = conflict.task.origins[0]
        r.error_at(task_origin.line, task_origin.field, conflict.message())
    if len(r.errors) > errors_before or task_id is None or run is None:
        return task_id, None
    return task_id, Task(task_id, run, task_type, vcpus, timeout_s, requirements, line_of(node))
