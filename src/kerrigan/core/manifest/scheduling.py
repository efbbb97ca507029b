"""The manifest's ``scheduling`` block: strategy, devices held at once, priority, queue-wait budget and the
session's requirements, with the legacy ``pools`` and ``capabilities`` forms turned into labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from kerrigan.core.labels import LabelError, validate_user_key
from kerrigan.core.manifest.model import (
    DEFAULT_MAX_DEVKITS,
    DEFAULT_QUEUE_WAIT_LIMIT_S,
    Priority,
    Scheduling,
    Strategy,
)
from kerrigan.core.manifest.requirements import read_label_values, read_labels, read_tags
from kerrigan.core.requirements import LabelRequirement, Origin, Requirements
from kerrigan.core.yamlsource import SourceReader, is_null, line_of

SCHEDULING_KEYS: Final = (
    "strategy",
    "max_devkits",
    "priority",
    "queue_wait_limit_s",
    "labels",
    "tags",
    "pools",
    "capabilities",
)


def read_scheduling(r: SourceReader, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> Scheduling | None:
    """The ``scheduling`` block (defaults where absent), or ``None`` when it is not a mapping."""
    if "scheduling" not in top:
        return Scheduling()
    key_node, node = top["scheduling"]
    if is_null(node):
        return Scheduling(line=line_of(key_node))
    config = r.mapping(node, "scheduling", SCHEDULING_KEYS)
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
    labels = read_labels(r, config.get("labels"), "scheduling.labels")
    _legacy_pools(r, config, labels)
    _legacy_capabilities(r, config, labels)
    tags = read_tags(r, config.get("tags"), "scheduling.tags")
    requirements = Requirements(labels, tags)
    return Scheduling(strategy, max_devkits, priority, wait, requirements, line_of(key_node))


def _legacy_pools(
    r: SourceReader, config: Mapping[str, tuple[yaml.Node, yaml.Node]], labels: dict[str, LabelRequirement]
) -> None:
    if "pools" not in config:
        return
    key_node, node = config["pools"]
    pools = read_label_values(r, node, "scheduling.pools", "kerrigan.pool_id")
    if not pools:
        return
    r.warning(
        key_node,
        "scheduling.pools",
        "scheduling.pools is deprecated; write scheduling.labels: "
        f"{{kerrigan.pool_id: [{', '.join(pools)}]}} instead",
    )
    origin = Origin("scheduling.pools", line_of(key_node))
    _add_legacy(r, labels, LabelRequirement("kerrigan.pool_id", pools, (origin,)), key_node)


def _legacy_capabilities(
    r: SourceReader, config: Mapping[str, tuple[yaml.Node, yaml.Node]], labels: dict[str, LabelRequirement]
) -> None:
    if "capabilities" not in config:
        return
    key_node, node = config["capabilities"]
    field = "scheduling.capabilities"
    converted: list[LabelRequirement] = []
    if isinstance(node, yaml.MappingNode):
        converted = list(read_labels(r, (key_node, node), field, validate_user_key).values())
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
                converted.append(LabelRequirement(key, ("enabled",), (Origin(item_field, line_of(item)),)))
    if not converted:
        return
    written = ", ".join(f"{req.key}: {_yaml_values(req.values)}" for req in converted)
    r.warning(
        key_node,
        field,
        f"scheduling.capabilities is deprecated; write scheduling.labels: {{{written}}} instead",
    )
    for requirement in converted:
        _add_legacy(r, labels, requirement, key_node)


def _add_legacy(
    r: SourceReader, labels: dict[str, LabelRequirement], requirement: LabelRequirement, node: yaml.Node
) -> None:
    existing = labels.get(requirement.key)
    if existing is not None:
        r.error(
            node,
            requirement.origins[0].field,
            f"label {requirement.key!r} is set both by {requirement.origins[0]} and by "
            f"{existing.origins[0]}; keep only the scheduling.labels form",
        )
        return
    labels[requirement.key] = requirement


def _yaml_values(values: tuple[str, ...]) -> str:
    return values[0] if len(values) == 1 else f"[{', '.join(values)}]"
