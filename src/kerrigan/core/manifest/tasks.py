"""The manifest's ``tasks``: each task's id, command, claims, requirements (the session's refined by its
own), ``env``, ``needs`` and ``matrix``; a task with a matrix becomes one :class:`Task` per combination.

A task with ``board: none`` holds no device: it runs on a runner host. Its requirements may name only
``kerrigan.host`` (the runner hosts it may run on, one of, as labels work); of the session's it takes only
that key, for the session's other labels and tags describe boards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from kerrigan.core.labels import HOST_KEY, is_valid_name
from kerrigan.core.manifest.artifacts import Artifacts, read_artifacts
from kerrigan.core.manifest.devices import RoleEntry, read_roles
from kerrigan.core.manifest.environment import read_env
from kerrigan.core.manifest.model import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_VCPUS,
    MAX_JOBS,
    MAX_TASKS,
    DeviceRole,
    PowerChoice,
    Scheduling,
    Task,
    TaskType,
)
from kerrigan.core.manifest.paths import read_globs
from kerrigan.core.manifest.requirements import Render, read_requirements
from kerrigan.core.matrix import (
    Combination,
    Matrix,
    Template,
    TemplateError,
    expand,
    parse_template,
    read_matrix,
)
from kerrigan.core.quoting import quote
from kerrigan.core.requirements import Origin, Requirements, refine
from kerrigan.core.task_graph import Need, TaskNeeds, validate_needs
from kerrigan.core.variable_names import name_problem
from kerrigan.core.yamlsource import Problem, SourceReader, is_null, join_field, line_of

TASK_KEYS: Final = (
    "id",
    "type",
    "run",
    "vcpus",
    "timeout_s",
    "requirements",
    "env",
    "needs",
    "matrix",
    "results",
    "secrets",
    "artifacts",
    "devices",
    "board",
    "power",
)
BOARD_NONE: Final = "none"  # the one value ``board`` takes
MAX_SECRETS: Final = 100  # a repository holds at most as many


def read_tasks(
    r: SourceReader,
    root: yaml.Node,
    top: Mapping[str, tuple[yaml.Node, yaml.Node]],
    scheduling: Scheduling | None,
    env: Mapping[str, Template] | None = None,
) -> list[Task]:
    """The valid tasks' jobs, every problem of the others recorded in ``r``; ``env`` is the workflow's."""
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
    jobs: list[Task] = []
    graph: list[TaskNeeds] = []
    first_line: dict[str, int] = {}
    for index, item in enumerate(items):
        task_id, needs, expanded = _task(r, item, join_field("tasks", index), session, env or {})
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
        graph.append(TaskNeeds(task_id, line_of(item), needs))
        jobs += expanded
    r.errors += validate_needs(graph, r.file)
    if len(jobs) > MAX_JOBS:
        r.error(node, "tasks", f"make {len(jobs):,} jobs, every matrix expanded; the limit is {MAX_JOBS:,}")
        return []
    return jobs


def _task(
    r: SourceReader, node: yaml.Node, field: str, session: Requirements, workflow_env: Mapping[str, Template]
) -> tuple[str | None, tuple[Need, ...], list[Task]]:
    """The task's id (when readable), its ``needs`` as written, and its jobs (when it is valid)."""
    config = r.mapping(node, field, TASK_KEYS)
    if config is None:
        return None, (), []
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
    vcpus, timeout_s = _claims(r, config, field)
    needs = _needs(r, config["needs"][1], field + ".needs") if "needs" in config else ()
    results = read_globs(r, config["results"][1], field + ".results") if "results" in config else ()
    named = _secrets(r, config["secrets"][1], field + ".secrets") if "secrets" in config else {}
    secrets, secret_origins = tuple(named), tuple(named.values())
    artifacts = Artifacts()
    if "artifacts" in config:
        artifacts = read_artifacts(r, config["artifacts"][1], field + ".artifacts")
    matrix: Matrix | None = None
    if "matrix" in config:
        matrix = read_matrix(r, config["matrix"][1], field + ".matrix", task_id=task_id)
        if matrix is None:  # its problems are recorded; the rest is read as if it had none
            return task_id, needs, []
    roles: tuple[RoleEntry, ...] = ()
    if "devices" in config:
        roles = read_roles(r, config["devices"][1], field + ".devices") or ()
    boardless = "board" in config and _board(r, config, field + ".board")
    power = _power(r, config, field + ".power", boardless=boardless)
    keys = matrix.keys if matrix is not None else None
    env = dict(workflow_env)
    if "env" in config:
        env |= read_env(r, config["env"][1], field + ".env", keys)  # the task's names win
    if len(r.errors) > errors_before or task_id is None or run is None:
        return task_id, needs, []
    jobs = []
    for combination in expand(matrix):
        own = config.get("requirements")
        read = _job_requirements(
            r,
            own and own[1],
            field,
            session,
            roles=roles,
            keys=keys,
            combination=combination,
            boardless=boardless,
        )
        if read is None:
            return task_id, needs, []
        requirements, devices = read
        values = combination.values()
        jobs.append(
            Task(
                combination.key(task_id),
                run,
                task_type,
                vcpus,
                timeout_s,
                requirements,
                line_of(node),
                tuple((name, template.render(values)) for name, template in env.items()),
                tuple(need.task_id for need in needs),
                combination,
                results,
                secrets,
                artifacts,
                devices,
                secret_origins,
                boardless,
                power,
            )
        )
    return task_id, needs, jobs


Entries = Mapping[str, tuple[yaml.Node, yaml.Node]]


def _claims(r: SourceReader, config: Entries, field: str) -> tuple[int, int]:
    """The task's ``vcpus`` and ``timeout_s``: the defaults where not given (or not valid: recorded)."""
    vcpus = DEFAULT_VCPUS
    if "vcpus" in config:
        vcpus = r.integer(config["vcpus"][1], field + ".vcpus", minimum=1, maximum=256) or vcpus
    timeout_s = DEFAULT_TIMEOUT_S
    if "timeout_s" in config:
        maximum = 7 * 24 * 3600
        timeout_s = (
            r.integer(config["timeout_s"][1], field + ".timeout_s", minimum=1, maximum=maximum) or timeout_s
        )
    return vcpus, timeout_s


def _board(r: SourceReader, config: Entries, field: str) -> bool:
    """``board: none``: whether the task holds no device (False, the problem recorded, for anything else,
    and for a task that also names ``devices``)."""
    node = config["board"][1]
    what = "the task holds no device and runs on a runner host"
    if is_null(node):
        r.error(node, field, f"needs a value: none ({what}), or leave it out")
        return False
    text = r.string(node, field)
    if text == BOARD_NONE and "devices" in config:
        r.error(
            node,
            field,
            "a task with board: none holds no device, so it cannot also name devices (a gang); "
            "leave one of them out",
        )
    if text is None or text == BOARD_NONE:
        return text is not None
    if text.lower() == BOARD_NONE:
        r.error(node, field, f"{quote(text)} is not a value of board: write none, in lower case")
        return False
    board = text if is_valid_name(text) else "BOARD"
    r.error(
        node,
        field,
        f"{quote(text)} is not a value of board: the only one is none ({what}); to ask for a board, "
        f"write requirements: {{labels: {{kerrigan.board: {board}}}}}",
    )
    return False


def _power(r: SourceReader, config: Entries, field: str, *, boardless: bool) -> PowerChoice:
    """``power``: ``cycle`` (the default) or ``keep``; any value is an error on a ``board: none`` task,
    which holds no board whose power the agent could cycle or keep."""
    if "power" not in config:
        return PowerChoice.CYCLE
    node = config["power"][1]
    chosen = r.choice(node, field, PowerChoice)
    if chosen is not None and boardless:
        r.error(
            node,
            field,
            "a task with board: none holds no board whose power could be cycled or kept; leave power out",
        )
    return PowerChoice(chosen) if chosen else PowerChoice.CYCLE


def _secrets(r: SourceReader, node: yaml.Node, field: str) -> dict[str, Origin]:
    """``secrets``: names of the repository's secrets (any case; stored upper-case, as GitHub does), each
    with where it is written."""
    if is_null(node):
        return {}
    names: dict[str, Origin] = {}
    for item, item_field, text in r.strings(node, field):
        problem = name_problem(text)
        if problem is not None:
            r.error(item, item_field, problem)
        elif (name := text.upper()) in names:
            r.error(item, item_field, f"secret {name} is listed twice (first on line {names[name].line})")
        else:
            names[name] = Origin(item_field, line_of(item))
    if len(names) > MAX_SECRETS:
        r.error(node, field, f"names {len(names)} secrets; the limit is {MAX_SECRETS}")
        return {}
    return names


def _needs(r: SourceReader, node: yaml.Node, field: str) -> tuple[Need, ...]:
    """``needs``: a task id, or a list of them (checked against the other tasks once all are read)."""
    if is_null(node):
        return ()
    return tuple(
        Need(text, line_of(item), item.start_mark.column + 1, item_field)
        for item, item_field, text in r.strings(node, field)
    )


def _job_requirements(
    r: SourceReader,
    own: yaml.Node | None,
    field: str,
    session: Requirements,
    *,
    roles: tuple[RoleEntry, ...],
    keys: tuple[str, ...] | None,
    combination: Combination,
    boardless: bool = False,
) -> tuple[Requirements, tuple[DeviceRole, ...]] | None:
    """A job's requirements and, for a gang, each role's (the role's own over the task's); None when
    there is a problem (recorded in ``r``). A boardless job's are its runner hosts': ``kerrigan.host``
    alone, the session's value of it refined by its own."""
    if boardless:
        session = Requirements({HOST_KEY: session.labels[HOST_KEY]} if HOST_KEY in session.labels else {})
    requirements = _requirements(
        r,
        own,
        field + ".requirements",
        session,
        keys=keys,
        combination=combination,
        hosts_only=boardless,
    )
    if requirements is None:
        return None
    devices = []
    for role in roles:
        required = _requirements(r, role.node, role.field, requirements, keys=keys, combination=combination)
        if required is None:
            return None
        devices.append(DeviceRole(role.name, required, role.line))
    return requirements, tuple(devices)


def _requirements(
    r: SourceReader,
    node: yaml.Node | None,
    field: str,
    session: Requirements,
    *,
    keys: tuple[str, ...] | None,
    combination: Combination,
    hosts_only: bool = False,
) -> Requirements | None:
    """The requirements block at ``node`` (None: none) over ``session`` (the session's for a task's own,
    the task's for a role's), with the combination's values in (each problem recorded once, however many
    combinations share it); None when there is a problem. With ``hosts_only`` (a task with ``board:
    none``) a label other than ``kerrigan.host``, and any tag, is a problem on its line."""
    own = Requirements()
    reader = SourceReader(r.file)
    if node is not None:
        own = read_requirements(reader, node, field, _render(reader, keys, combination))
    if hosts_only:
        _device_asks(reader, own)
    requirements, conflicts = refine(session, own)
    for conflict in conflicts:
        task_origin = conflict.task.origins[0]
        reader.error_at(task_origin.line, task_origin.field, conflict.message())
    _merge(r, reader.errors)
    return None if reader.errors else requirements


NO_DEVICE: Final = (
    "is a device's, and a task with board: none holds no device: its requirements may name only "
    f"{HOST_KEY} (the runner hosts it may run on)"
)


def _device_asks(reader: SourceReader, own: Requirements) -> None:
    """Record each label but ``kerrigan.host``, and each tag, of a boardless task's own: a device's."""
    for key, requirement in own.labels.items():
        if key != HOST_KEY:
            origin = requirement.origins[0]
            reader.error_at(origin.line, origin.field, f"label {key!r} {NO_DEVICE}")
    for tag in own.tags:
        if tag.origin is not None:
            reader.error_at(tag.origin.line, tag.origin.field, f"tag {tag.tag!r} {NO_DEVICE}")


def _render(reader: SourceReader, keys: tuple[str, ...] | None, combination: Combination) -> Render:
    values = combination.values()

    def render(node: yaml.Node, field: str, text: str) -> str | None:
        if keys is None and "{" not in text:
            return text  # the common case: nothing to substitute, and no brace to check
        try:
            return parse_template(text, keys).render(values)
        except TemplateError as err:
            reader.error(node, field, str(err))
            return None

    return render


def _merge(r: SourceReader, problems: list[Problem]) -> None:
    """Add ``problems`` to ``r``, each once: every combination of a matrix reads the same nodes."""
    known = set(r.errors)
    for problem in problems:
        if problem not in known:
            known.add(problem)
            r.errors.append(problem)
