"""The manifest's session-wide policies: ``concurrency`` (which sessions supersede each other) and
``retry`` (how many more attempts a failed job gets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from kerrigan.core.lifecycle import MAX_RETRIES, RetryPolicy
from kerrigan.core.manifest.model import (
    DEFAULT_CONCURRENCY_GROUP,
    MAX_CONCURRENCY_GROUP,
    MAX_EXIT_STATUSES,
    PLACEHOLDER,
    PLACEHOLDERS,
    CancelInProgress,
    Concurrency,
)
from kerrigan.core.printable import is_printable
from kerrigan.core.quoting import quote
from kerrigan.core.yamlsource import SourceReader, is_null, join_field

CONCURRENCY_KEYS: Final = ("group", "cancel")
RETRY_KEYS: Final = ("infrastructure", "exit_status", "limit", "suspect")


def read_concurrency(r: SourceReader, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> Concurrency:
    """The manifest's ``concurrency``, the default where it is absent or wrong."""
    if "concurrency" not in top or is_null(top["concurrency"][1]):
        return Concurrency()
    config = r.mapping(top["concurrency"][1], "concurrency", CONCURRENCY_KEYS) or {}
    group = DEFAULT_CONCURRENCY_GROUP
    if "group" in config:
        node = config["group"][1]
        written = r.string(node, "concurrency.group")
        if written is not None and _group_ok(r, node, written):
            group = written
    cancel = CancelInProgress.QUEUED
    if "cancel" in config:
        chosen = r.choice(config["cancel"][1], "concurrency.cancel", CancelInProgress)
        cancel = CancelInProgress(chosen) if chosen else cancel
    return Concurrency(group, cancel)


def _group_ok(r: SourceReader, node: yaml.Node, group: str) -> bool:
    if len(group) > MAX_CONCURRENCY_GROUP or not is_printable(group):
        r.error(
            node,
            "concurrency.group",
            f"must be 1-{MAX_CONCURRENCY_GROUP} printable characters on one line",
        )
        return False
    for name in PLACEHOLDER.findall(group):
        if name not in PLACEHOLDERS:
            known = ", ".join(f"{{{known}}}" for known in PLACEHOLDERS)
            r.error(node, "concurrency.group", f"unknown placeholder {quote('{' + name + '}')}; use {known}")
            return False
    return True


def read_retry(r: SourceReader, top: Mapping[str, tuple[yaml.Node, yaml.Node]]) -> RetryPolicy:
    """The manifest's ``retry``, the default where it is absent."""
    if "retry" not in top or is_null(top["retry"][1]):
        return RetryPolicy()
    config = r.mapping(top["retry"][1], "retry", RETRY_KEYS) or {}
    default = RetryPolicy()
    counts = {"infrastructure": default.infrastructure, "limit": default.limit, "suspect": default.suspect}
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
    return RetryPolicy(counts["infrastructure"], frozenset(statuses), counts["limit"], counts["suspect"])
