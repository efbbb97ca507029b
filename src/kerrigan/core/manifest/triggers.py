"""The manifest's ``on`` block: which events run the workflow, with their branch and workflow filters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from kerrigan.core.manifest.model import BranchFilter, Triggers, WorkflowRunTrigger
from kerrigan.core.quoting import SHOWN, quote
from kerrigan.core.yamlsource import SourceReader, is_null, join_field, suggest

EVENTS: Final = ("push", "pull_request", "workflow_run", "merge_group")
WORKFLOW_RUN_TYPES: Final = ("requested", "in_progress", "completed")


def read_triggers(
    r: SourceReader, root: yaml.Node, top: Mapping[str, tuple[yaml.Node, yaml.Node]]
) -> Triggers | None:
    """The workflow's triggers, or ``None`` (with an error) when ``on`` is missing."""
    if "on" not in top:
        r.error(root, "on", "is required: say which events run this workflow")
        return None
    node = top["on"][1]
    events: dict[str, yaml.Node | None] = {}
    if isinstance(node, yaml.MappingNode):
        entries = r.mapping(node, "on", EVENTS) or {}
        events = {event: value for event, (_, value) in entries.items()}
    else:
        for item, item_field, event in r.strings(node, "on"):
            if event not in EVENTS:
                close = suggest(event, EVENTS) if len(event) <= SHOWN else None
                hint = f"did you mean {close!r}?" if close else f"expected one of {', '.join(EVENTS)}"
                r.error(item, item_field, f"unknown event {quote(event)}; {hint}")
            else:
                events[event] = None
    push = pull_request = None
    workflow_run = None
    if "push" in events:
        push = _branch_event(r, events["push"], "on.push")
    if "pull_request" in events:
        pull_request = _branch_event(r, events["pull_request"], "on.pull_request")
    if "workflow_run" in events:
        workflow_run = _workflow_run(r, events["workflow_run"], node)
    merge_group = "merge_group" in events
    if merge_group:
        _merge_group(r, events["merge_group"])
    return Triggers(push, pull_request, workflow_run, merge_group)


def _event_config(
    r: SourceReader, node: yaml.Node | None, field: str, allowed: tuple[str, ...]
) -> Mapping[str, tuple[yaml.Node, yaml.Node]]:
    if node is None or is_null(node):
        return {}
    return r.mapping(node, field, allowed) or {}


def _branch_event(r: SourceReader, node: yaml.Node | None, field: str) -> BranchFilter:
    config = _event_config(r, node, field, ("branches",))
    if "branches" not in config:
        return BranchFilter()
    return BranchFilter(_patterns(r, config["branches"][1], join_field(field, "branches")))


def _patterns(r: SourceReader, node: yaml.Node, field: str) -> tuple[str, ...]:
    if isinstance(node, yaml.SequenceNode) and not node.value:
        r.error(node, field, "an empty list matches nothing; leave it out to match every branch")
    return tuple(text for _, _, text in r.strings(node, field))


def _workflow_run(r: SourceReader, node: yaml.Node | None, on_node: yaml.Node) -> WorkflowRunTrigger | None:
    config = _event_config(r, node, "on.workflow_run", ("workflows", "types", "branches"))
    if "workflows" not in config:
        r.error(
            node or on_node,
            "on.workflow_run.workflows",
            "is required: name the GitHub Actions workflows whose runs start this one",
        )
        return None
    workflows = tuple(text for _, _, text in r.strings(config["workflows"][1], "on.workflow_run.workflows"))
    types: tuple[str, ...] = ("completed",)
    if "types" in config:
        found = []
        if isinstance(config["types"][1], yaml.SequenceNode) and not config["types"][1].value:
            r.error(config["types"][1], "on.workflow_run.types", "an empty list matches nothing")
        for item, item_field, text in r.strings(config["types"][1], "on.workflow_run.types"):
            if text not in WORKFLOW_RUN_TYPES:
                r.error(
                    item,
                    item_field,
                    f"must be one of {', '.join(WORKFLOW_RUN_TYPES)}, not {quote(text)}",
                )
            else:
                found.append(text)
        types = tuple(found)
    branches = BranchFilter()
    if "branches" in config:
        branches = BranchFilter(_patterns(r, config["branches"][1], "on.workflow_run.branches"))
    return WorkflowRunTrigger(workflows, types, branches)


def _merge_group(r: SourceReader, node: yaml.Node | None) -> None:
    config = _event_config(r, node, "on.merge_group", ("types",))
    if "types" in config:
        for item, item_field, text in r.strings(config["types"][1], "on.merge_group.types"):
            if text != "checks_requested":
                r.error(item, item_field, f"must be checks_requested, not {quote(text)}")
