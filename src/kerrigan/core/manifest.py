"""Workflow manifests (``.kerrigan/workflows/*.yml``): YAML text to a typed workflow with source lines.

:func:`parse_manifest` never raises for a user's mistake. It returns every error and deprecation warning at
once, each with the file, line and field, ready to become a check-run annotation.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import yaml

from kerrigan.core.labels import (
    LabelError,
    is_valid_name,
    validate_requested_key,
    validate_tag,
    validate_user_key,
    validate_value,
)
from kerrigan.core.lifecycle import MAX_RETRIES, RetryPolicy
from kerrigan.core.quoting import quote
from kerrigan.core.requirements import (
    LabelRequirement,
    Origin,
    Requirements,
    TagRequirement,
    refine,
)
from kerrigan.core.yamlsource import Problem, SourceReader, is_null, join_field, line_of

MAX_TASKS: Final = 256
MAX_NODES: Final = 100_000  # keys and values, aliases expanded: far beyond 256 tasks written out in full
DEFAULT_MAX_DEVKITS: Final = 1
DEFAULT_QUEUE_WAIT_LIMIT_S: Final = 300
DEFAULT_VCPUS: Final = 2
DEFAULT_TIMEOUT_S: Final = 3600
DEFAULT_CONCURRENCY_GROUP: Final = "{workflow}/{branch}"
MAX_CONCURRENCY_GROUP: Final = 300  # the stored group's length (sessions.concurrency_group)
PLACEHOLDERS: Final = ("workflow", "branch", "pull_request", "sha")
MAX_EXIT_STATUSES: Final = 255


class Strategy(enum.StrEnum):
    """How a session's devices are chosen among the eligible ones."""

    SPREAD = "spread"
    PACK = "pack"


class Priority(enum.StrEnum):
    """Where a session's jobs stand in the queue."""

    GATE = "gate"
    NORMAL = "normal"
    BACKGROUND = "background"


class TaskType(enum.StrEnum):
    """What a task does on its device."""

    COMMAND = "command"


@dataclass(frozen=True, slots=True)
class BranchFilter:
    """Branch name globs; ``None`` means every branch.

    ``*`` matches within one path segment, ``**`` across ``/``, as GitHub Actions' filters do.
    """

    patterns: tuple[str, ...] | None = None

    def matches(self, branch: str) -> bool:
        """Whether ``branch`` passes the filter."""
        if self.patterns is None:
            return True
        return any(_glob(pattern).fullmatch(branch) for pattern in self.patterns)


def _glob(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*|\*|\?)", pattern)
    wildcard = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wildcard.get(part, re.escape(part)) for part in parts))


@dataclass(frozen=True, slots=True)
class WorkflowRunTrigger:
    """Run after named GitHub Actions workflows reach one of ``types``."""

    workflows: tuple[str, ...]
    types: tuple[str, ...] = ("completed",)
    branches: BranchFilter = BranchFilter()


@dataclass(frozen=True, slots=True)
class Triggers:
    """The events a workflow runs on; ``None`` means not on that event."""

    push: BranchFilter | None = None
    pull_request: BranchFilter | None = None
    workflow_run: WorkflowRunTrigger | None = None
    merge_group: bool = False


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The session-wide ``scheduling`` block."""

    strategy: Strategy = Strategy.SPREAD
    max_devkits: int = DEFAULT_MAX_DEVKITS
    priority: Priority = Priority.NORMAL
    queue_wait_limit_s: int = DEFAULT_QUEUE_WAIT_LIMIT_S
    requirements: Requirements = field(default_factory=Requirements)
    line: int = 1


@dataclass(frozen=True, slots=True)
class Task:
    """One job's worth of work; ``requirements`` are the session's refined by the task's own."""

    id: str
    run: str
    type: TaskType = TaskType.COMMAND
    vcpus: int = DEFAULT_VCPUS
    timeout_s: int = DEFAULT_TIMEOUT_S
    requirements: Requirements = field(default_factory=Requirements)
    line: int = 1


class CancelInProgress(enum.StrEnum):
    """Which of an older commit's sessions a newer one cancels (``concurrency.cancel``)."""

    QUEUED = "queued"  # those none of whose jobs started
    IN_PROGRESS = "in_progress"  # running ones too: their runners stop them
    NONE = "none"  # none: every commit runs to its end


@dataclass(frozen=True, slots=True)
class Concurrency:
    """The manifest's ``concurrency``: sessions whose ``group`` expands alike supersede each other."""

    group: str = DEFAULT_CONCURRENCY_GROUP
    cancel: CancelInProgress = CancelInProgress.QUEUED

    def expand(self, *, workflow: str, branch: str | None, pull_request: int | None, sha: str) -> str:
        """The group of one session, cut to what is stored. ``{branch}`` of a pull request is
        ``pull/<number>``: a fork's ``main`` is not the repository's ``main``."""
        values = {
            "workflow": workflow,
            "branch": f"pull/{pull_request}" if pull_request is not None else (branch or ""),
            "pull_request": str(pull_request) if pull_request is not None else "",
            "sha": sha,
        }
        return _PLACEHOLDER.sub(lambda found: values[found.group(1)], self.group)[:MAX_CONCURRENCY_GROUP]


_PLACEHOLDER: Final = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, slots=True)
class Workflow:
    """A valid manifest."""

    name: str
    file: str
    triggers: Triggers
    scheduling: Scheduling
    tasks: tuple[Task, ...]
    concurrency: Concurrency = Concurrency()
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True, slots=True)
class ManifestResult:
    """What parsing found: a workflow when there are no errors, and every error and warning."""

    file: str
    name: str | None
    workflow: Workflow | None
    errors: tuple[Problem, ...]
    warnings: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """Whether the manifest is valid (warnings allowed)."""
        return self.workflow is not None


_TOP_KEYS: Final = ("name", "on", "scheduling", "concurrency", "retry", "tasks")
_CONCURRENCY_KEYS: Final = ("group", "cancel")
_RETRY_KEYS: Final = ("infrastructure", "exit_status", "limit")
_SCHEDULING_KEYS: Final = (
    "strategy",
    "max_devkits",
    "priority",
    "queue_wait_limit_s",
    "labels",
    "tags",
    "pools",
    "capabilities",
)
_TASK_KEYS: Final = ("id", "type", "run", "vcpus", "timeout_s", "requirements")
_REQUIREMENT_KEYS: Final = ("labels", "tags")
_EVENTS: Final = ("push", "pull_request", "workflow_run", "merge_group")
_WORKFLOW_RUN_TYPES: Final = ("requested", "in_progress", "completed")


def parse_manifest(text: str, file: str) -> ManifestResult:
    """Parse a manifest's text; ``file`` is the path shown in every problem."""
    return _ManifestParser(file).parse(text)


class _ManifestParser:
    def __init__(self, file: str) -> None:
        self.reader = SourceReader(file)
        self.file = file

    def parse(self, text: str) -> ManifestResult:
        r = self.reader
        name: str | None = None
        workflow: Workflow | None = None
        root = r.compose(text, "manifest", max_nodes=MAX_NODES)
        top = r.mapping(root, "", _TOP_KEYS) if root is not None else None
        if root is not None and top is not None:
            name = self._name(root, top)
            triggers = self._triggers(root, top)
            scheduling = self._scheduling(top)
            concurrency = self._concurrency(top)
            retry = self._retry(top)
            tasks = self._tasks(root, top, scheduling)
            if not r.errors and triggers is not None and scheduling is not None:
                assert name is not None  # no errors means the name was read
                workflow = Workflow(name, self.file, triggers, scheduling, tuple(tasks), concurrency, retry)
        return ManifestResult(self.file, name, workflow, r.sorted_errors(), r.sorted_warnings())

    # -- name and triggers -------------------------------------------------------------------------

    def _name(self, root: yaml.Node, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> str | None:
        if "name" not in top:
            self.reader.error(root, "name", "is required: the check run is named after it")
            return None
        node = top["name"][1]
        name = self.reader.string(node, "name")
        if name is not None and (len(name) > 100 or not name.isprintable()):
            self.reader.error(node, "name", "must be 1-100 printable characters on one line")
            return None
        return name

    def _triggers(self, root: yaml.Node, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> Triggers | None:
        r = self.reader
        if "on" not in top:
            r.error(root, "on", "is required: say which events run this workflow")
            return None
        node = top["on"][1]
        events: dict[str, yaml.Node | None] = {}
        if isinstance(node, yaml.MappingNode):
            entries = r.mapping(node, "on", _EVENTS) or {}
            events = {event: value for event, (_, value) in entries.items()}
        else:
            for item, item_field, event in r.strings(node, "on"):
                if event not in _EVENTS:
                    r.error(
                        item,
                        item_field,
                        f"unknown event {quote(event)}; expected one of {', '.join(_EVENTS)}",
                    )
                else:
                    events[event] = None
        push = pull_request = None
        workflow_run = None
        if "push" in events:
            push = self._branch_event(events["push"], "on.push")
        if "pull_request" in events:
            pull_request = self._branch_event(events["pull_request"], "on.pull_request")
        if "workflow_run" in events:
            workflow_run = self._workflow_run(events["workflow_run"], node)
        merge_group = "merge_group" in events
        if merge_group:
            self._merge_group(events["merge_group"])
        return Triggers(push, pull_request, workflow_run, merge_group)

    def _event_config(
        self, node: yaml.Node | None, field: str, allowed: tuple[str, ...]
    ) -> Mapping[str, tuple[yaml.Node, yaml.Node]]:
        if node is None or is_null(node):
            return {}
        return self.reader.mapping(node, field, allowed) or {}

    def _branch_event(self, node: yaml.Node | None, field: str) -> BranchFilter:
        config = self._event_config(node, field, ("branches",))
        if "branches" not in config:
            return BranchFilter()
        return BranchFilter(self._patterns(config["branches"][1], join_field(field, "branches")))

    def _patterns(self, node: yaml.Node, field: str) -> tuple[str, ...]:
        if isinstance(node, yaml.SequenceNode) and not node.value:
            self.reader.error(
                node, field, "an empty list matches nothing; leave it out to match every branch"
            )
        return tuple(text for _, _, text in self.reader.strings(node, field))

    def _workflow_run(self, node: yaml.Node | None, on_node: yaml.Node) -> WorkflowRunTrigger | None:
        r = self.reader
        config = self._event_config(node, "on.workflow_run", ("workflows", "types", "branches"))
        if "workflows" not in config:
            r.error(
                node or on_node,
                "on.workflow_run.workflows",
                "is required: name the GitHub Actions workflows whose runs start this one",
            )
            return None
        workflows = tuple(
            text for _, _, text in r.strings(config["workflows"][1], "on.workflow_run.workflows")
        )
        types: tuple[str, ...] = ("completed",)
        if "types" in config:
            found = []
            if isinstance(config["types"][1], yaml.SequenceNode) and not config["types"][1].value:
                r.error(config["types"][1], "on.workflow_run.types", "an empty list matches nothing")
            for item, item_field, text in r.strings(config["types"][1], "on.workflow_run.types"):
                if text not in _WORKFLOW_RUN_TYPES:
                    r.error(
                        item,
                        item_field,
                        f"must be one of {', '.join(_WORKFLOW_RUN_TYPES)}, not {quote(text)}",
                    )
                else:
                    found.append(text)
            types = tuple(found)
        branches = BranchFilter()
        if "branches" in config:
            branches = BranchFilter(self._patterns(config["branches"][1], "on.workflow_run.branches"))
        return WorkflowRunTrigger(workflows, types, branches)

    def _merge_group(self, node: yaml.Node | None) -> None:
        config = self._event_config(node, "on.merge_group", ("types",))
        if "types" in config:
            for item, item_field, text in self.reader.strings(config["types"][1], "on.merge_group.types"):
                if text != "checks_requested":
                    self.reader.error(item, item_field, f"must be checks_requested, not {quote(text)}")

    # -- concurrency and retry -----------------------------------------------------------------------

    def _concurrency(self, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> Concurrency:
        r = self.reader
        if "concurrency" not in top or is_null(top["concurrency"][1]):
            return Concurrency()
        config = r.mapping(top["concurrency"][1], "concurrency", _CONCURRENCY_KEYS) or {}
        group = DEFAULT_CONCURRENCY_GROUP
        if "group" in config:
            node = config["group"][1]
            written = r.string(node, "concurrency.group")
            if written is not None and self._group_ok(node, written):
                group = written
        cancel = CancelInProgress.QUEUED
        if "cancel" in config:
            chosen = r.choice(config["cancel"][1], "concurrency.cancel", CancelInProgress)
            cancel = CancelInProgress(chosen) if chosen else cancel
        return Concurrency(group, cancel)

    def _group_ok(self, node: yaml.Node, group: str) -> bool:
        r = self.reader
        if len(group) > MAX_CONCURRENCY_GROUP or not group.isprintable():
            r.error(
                node,
                "concurrency.group",
                f"must be 1-{MAX_CONCURRENCY_GROUP} printable characters on one line",
            )
            return False
        for name in _PLACEHOLDER.findall(group):
            if name not in PLACEHOLDERS:
                known = ", ".join(f"{{{known}}}" for known in PLACEHOLDERS)
                r.error(
                    node, "concurrency.group", f"unknown placeholder {quote('{' + name + '}')}; use {known}"
                )
                return False
        return True

    def _retry(self, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> RetryPolicy:
        r = self.reader
        if "retry" not in top or is_null(top["retry"][1]):
            return RetryPolicy()
        config = r.mapping(top["retry"][1], "retry", _RETRY_KEYS) or {}
        default = RetryPolicy()
        counts = {"infrastructure": default.infrastructure, "limit": default.limit}
        for key, fallback in list(counts.items()):
            if key in config:
                found = r.integer(config[key][1], f"retry.{key}", minimum=0, maximum=MAX_RETRIES)
                counts[key] = found if found is not None else fallback
        statuses: dict[int, None] = {}  # a set that keeps the order written
        if "exit_status" in config:
            node = config["exit_status"][1]
            items = r.sequence(node, "retry.exit_status") if not is_null(node) else []
            for index, item in enumerate(items or ()):
                status = r.integer(
                    item, join_field("retry.exit_status", index), minimum=1, maximum=MAX_EXIT_STATUSES
                )
                if status is not None:
                    statuses[status] = None
            if statuses and "limit" not in config:
                r.error(
                    node,
                    "retry.exit_status",
                    "lists exit statuses but retry.limit is 0: say how many retries they get",
                )
        return RetryPolicy(counts["infrastructure"], frozenset(statuses), counts["limit"])

    # -- scheduling --------------------------------------------------------------------------------

    def _scheduling(self, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> Scheduling | None:
        r = self.reader
        if "scheduling" not in top:
            return Scheduling()
        key_node, node = top["scheduling"]
        if is_null(node):
            return Scheduling(line=line_of(key_node))
        config = r.mapping(node, "scheduling", _SCHEDULING_KEYS)
        if config is None:
            return None
        strategy = Strategy.SPREAD
        if "strategy" in config:
            chosen = r.choice(config["strategy"][1], "scheduling.strategy", Strategy)
            strategy = Strategy(chosen) if chosen else strategy
        priority = Priority.NORMAL
        if "priority" in config:
            chosen = r.choice(config["priority"][1], "scheduling.priority", Priority)
            priority = Priority(chosen) if chosen else priority
        max_devkits = DEFAULT_MAX_DEVKITS
        if "max_devkits" in config:
            max_devkits = (
                r.integer(config["max_devkits"][1], "scheduling.max_devkits", minimum=1, maximum=64)
                or max_devkits
            )
        wait = DEFAULT_QUEUE_WAIT_LIMIT_S
        if "queue_wait_limit_s" in config:
            wait = (
                r.integer(
                    config["queue_wait_limit_s"][1],
                    "scheduling.queue_wait_limit_s",
                    minimum=1,
                    maximum=7 * 24 * 3600,
                )
                or wait
            )
        labels = self._labels(config.get("labels"), "scheduling.labels")
        self._legacy_pools(config, labels)
        self._legacy_capabilities(config, labels)
        tags = self._tags(config.get("tags"), "scheduling.tags")
        requirements = Requirements(labels, tags)
        return Scheduling(strategy, max_devkits, priority, wait, requirements, line_of(key_node))

    def _labels(
        self,
        entry: tuple[yaml.Node, yaml.Node] | None,
        field: str,
        validate: Callable[[str], str] = validate_requested_key,
    ) -> dict[str, LabelRequirement]:
        r = self.reader
        labels: dict[str, LabelRequirement] = {}
        if entry is None or is_null(entry[1]):
            return labels
        config = r.mapping(entry[1], field) or {}
        for raw_key, (key_node, value_node) in config.items():
            key_field = join_field(field, raw_key)
            try:
                key = validate(raw_key)
            except LabelError as exc:
                r.error(key_node, key_field, str(exc))
                continue
            if key in labels:
                first = labels[key].origins[0].line
                r.error(
                    key_node,
                    key_field,
                    f"label {key!r} is set twice (first on line {first}); keys are case-insensitive",
                )
                continue
            values = self._label_values(value_node, key_field, key)
            if values:
                labels[key] = LabelRequirement(key, values, (Origin(key_field, line_of(key_node)),))
        return labels

    def _label_values(self, node: yaml.Node, field: str, key: str) -> tuple[str, ...]:
        r = self.reader
        if isinstance(node, yaml.SequenceNode) and not node.value:
            r.error(node, field, "an empty list allows no value; give at least one")
            return ()
        if is_null(node):
            r.error(node, field, f"label {key!r} needs a value (a string, or a list meaning any of)")
            return ()
        values: dict[str, None] = {}  # a set that keeps the order written
        for item, item_field, text in r.strings(node, field, allow_empty=True):
            try:
                value = validate_value(text, key=key)
            except LabelError as exc:
                r.error(item, item_field, str(exc))
                continue
            values[value] = None
        return tuple(values)

    def _tags(self, entry: tuple[yaml.Node, yaml.Node] | None, field: str) -> tuple[TagRequirement, ...]:
        r = self.reader
        if entry is None or is_null(entry[1]):
            return ()
        tags: dict[str, TagRequirement] = {}
        for item, item_field, text in r.strings(entry[1], field):
            try:
                tag = validate_tag(text)
            except LabelError as exc:
                r.error(item, item_field, str(exc))
                continue
            tags.setdefault(tag, TagRequirement(tag, Origin(item_field, line_of(item))))
        return tuple(tags.values())

    def _legacy_pools(
        self, config: Mapping[str, tuple[yaml.Node, yaml.Node]], labels: dict[str, LabelRequirement]
    ) -> None:
        r = self.reader
        if "pools" not in config:
            return
        key_node, node = config["pools"]
        pools = self._label_values(node, "scheduling.pools", "kerrigan.pool_id")
        if not pools:
            return
        r.warning(
            key_node,
            "scheduling.pools",
            "scheduling.pools is deprecated; write scheduling.labels: "
            f"{{kerrigan.pool_id: [{', '.join(pools)}]}} instead",
        )
        origin = Origin("scheduling.pools", line_of(key_node))
        self._add_legacy(labels, LabelRequirement("kerrigan.pool_id", pools, (origin,)), key_node)

    def _legacy_capabilities(
        self, config: Mapping[str, tuple[yaml.Node, yaml.Node]], labels: dict[str, LabelRequirement]
    ) -> None:
        r = self.reader
        if "capabilities" not in config:
            return
        key_node, node = config["capabilities"]
        field = "scheduling.capabilities"
        converted: list[LabelRequirement] = []
        if isinstance(node, yaml.MappingNode):
            converted = list(self._labels((key_node, node), field, validate_user_key).values())
        else:
            seen: set[str] = set()
            for item, item_field, text in r.strings(node, field):
                try:
                    key = validate_user_key(text)
                except LabelError as exc:
                    r.error(item, item_field, str(exc))
                    continue
                if key not in seen:
                    seen.add(key)
                    converted.append(
                        LabelRequirement(key, ("enabled",), (Origin(item_field, line_of(item)),))
                    )
        if not converted:
            return
        written = ", ".join(f"{req.key}: {_yaml_values(req.values)}" for req in converted)
        r.warning(
            key_node,
            field,
            f"scheduling.capabilities is deprecated; write scheduling.labels: {{{written}}} instead",
        )
        for requirement in converted:
            self._add_legacy(labels, requirement, key_node)

    def _add_legacy(
        self, labels: dict[str, LabelRequirement], requirement: LabelRequirement, node: yaml.Node
    ) -> None:
        existing = labels.get(requirement.key)
        if existing is not None:
            self.reader.error(
                node,
                requirement.origins[0].field,
                f"label {requirement.key!r} is set both by {requirement.origins[0]} and by "
                f"{existing.origins[0]}; keep only the scheduling.labels form",
            )
            return
        labels[requirement.key] = requirement

    # -- tasks -------------------------------------------------------------------------------------

    def _tasks(
        self,
        root: yaml.Node,
        top: Mapping[str, tuple[yaml.Node, yaml.Node]],
        scheduling: Scheduling | None,
    ) -> list[Task]:
        r = self.reader
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
            task_id, task = self._task(item, join_field("tasks", index), session)
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

    def _task(self, node: yaml.Node, field: str, session: Requirements) -> tuple[str | None, Task | None]:
        """The task's id (when readable) and the task (when valid)."""
        r = self.reader
        config = r.mapping(node, field, _TASK_KEYS)
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
                    f"{quote(task_id)} is not a valid id: "
                    "1-63 of lowercase letters, digits, '.', '_' and '-'",
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
            own = self._requirements(config["requirements"][1], field + ".requirements")
        requirements, conflicts = refine(session, own)
        for conflict in conflicts:
            task_origin = conflict.task.origins[0]
            r.error_at(task_origin.line, task_origin.field, conflict.message())
        if len(r.errors) > errors_before or task_id is None or run is None:
            return task_id, None
        return task_id, Task(task_id, run, task_type, vcpus, timeout_s, requirements, line_of(node))

    def _requirements(self, node: yaml.Node, field: str) -> Requirements:
        if is_null(node):
            return Requirements()
        config = self.reader.mapping(node, field, _REQUIREMENT_KEYS) or {}
        labels = self._labels(config.get("labels"), field + ".labels")
        tags = self._tags(config.get("tags"), field + ".tags")
        return Requirements(labels, tags)


def _yaml_values(values: tuple[str, ...]) -> str:
    return values[0] if len(values) == 1 else f"[{', '.join(values)}]"
