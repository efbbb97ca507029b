"""Reading what a manifest asks of a device: ``labels`` (each one of some values, as written) and ``tags``,
in the ``scheduling`` block and in a task's ``requirements``.

A task with a matrix reads its requirements once per combination, through a :data:`Render` that turns
each label value and tag into the combination's text (``{matrix.board}``) or records why it cannot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import yaml

from kerrigan.core.labels import LabelError, validate_requested_key, validate_tag, validate_value
from kerrigan.core.requirements import LabelRequirement, Origin, Requirements, TagRequirement
from kerrigan.core.yamlsource import SourceReader, is_null, join_field, line_of

REQUIREMENT_KEYS: Final = ("labels", "tags")

# (node, field, text) -> the text to validate, or None once the problem is recorded.
Render = Callable[[yaml.Node, str, str], "str | None"]


def _as_written(_node: yaml.Node, _field: str, text: str) -> str | None:
    return text


def read_labels(
    r: SourceReader,
    entry: tuple[yaml.Node, yaml.Node] | None,
    field: str,
    validate: Callable[[str], str] = validate_requested_key,
    render: Render = _as_written,
) -> dict[str, LabelRequirement]:
    """The labels of a ``labels`` mapping (``entry``: its key and value nodes), by normalised key."""
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
        values = read_label_values(r, value_node, key_field, key, render)
        if values:
            labels[key] = LabelRequirement(key, values, (Origin(key_field, line_of(key_node)),))
    return labels


def read_label_values(
    r: SourceReader, node: yaml.Node, field: str, key: str, render: Render = _as_written
) -> tuple[str, ...]:
    """A label's allowed values: a string, or a list meaning any of; each validated, none twice."""
    if isinstance(node, yaml.SequenceNode) and not node.value:
        r.error(node, field, "an empty list allows no value; give at least one")
        return ()
    if is_null(node):
        r.error(node, field, f"label {key!r} needs a value (a string, or a list meaning any of)")
        return ()
    values: dict[str, None] = {}  # a set that keeps the order written
    for item, item_field, written in r.strings(node, field, allow_empty=True):
        text = render(item, item_field, written)
        if text is None:
            continue
        try:
            value = validate_value(text, key=key)
        except LabelError as exc:
            r.error(item, item_field, str(exc))
            continue
        values[value] = None
    return tuple(values)


def read_tags(
    r: SourceReader,
    entry: tuple[yaml.Node, yaml.Node] | None,
    field: str,
    render: Render = _as_written,
) -> tuple[TagRequirement, ...]:
    """The tags of a ``tags`` list (or a lone tag), each once."""
    if entry is None or is_null(entry[1]):
        return ()
    tags: dict[str, TagRequirement] = {}
    for item, item_field, written in r.strings(entry[1], field):
        text = render(item, item_field, written)
        if text is None:
            continue
        try:
            tag = validate_tag(text)
        except LabelError as exc:
            r.error(item, item_field, str(exc))
            continue
        tags.setdefault(tag, TagRequirement(tag, Origin(item_field, line_of(item))))
    return tuple(tags.values())


def read_requirements(
    r: SourceReader, node: yaml.Node, field: str, render: Render = _as_written
) -> Requirements:
    """A ``requirements`` block: ``labels`` and ``tags``, each value and tag through ``render``."""
    if is_null(node):
        return Requirements()
    config = r.mapping(node, field, REQUIREMENT_KEYS) or {}
    labels = read_labels(r, config.get("labels"), field + ".labels", render=render)
    tags = read_tags(r, config.get("tags"), field + ".tags", render)
    return Requirements(labels, tags)
