"""The list filters (``?label=key=value``, ``?tag=``) of ``/api/v1/pools``, ``/api/v1/devices`` and
``/pools``, read alike for the pages and the API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kerrigan.core.labels import LabelError, validate_tag
from kerrigan.web.errors import bad_request

# -- list filters ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Filters:
    """Labels every listed item must carry (effective, ``key=value``) and tags it must have."""

    labels: Mapping[str, str]
    tags: frozenset[str]

    def matches(self, labels: Mapping[str, str], tags: Iterable[str]) -> bool:
        """Whether an item with these effective labels and tags passes."""
        return all(labels.get(k) == v for k, v in self.labels.items()) and self.tags <= frozenset(tags)


def parse_filters(labels: Iterable[str], tags: Iterable[str]) -> Filters:
    """``label`` filters as ``key=value`` (keys compared lowercase) and ``tag`` filters; a malformed one is a
    400 naming the field ``label`` or ``tag``."""
    wanted: dict[str, str] = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise bad_request(f"label filter {item!r} must look like key=value", field="label")
        wanted[key.lower()] = value
    try:
        checked = frozenset(validate_tag(tag) for tag in tags)
    except LabelError as exc:
        raise bad_request(str(exc), field="tag") from None
    return Filters(wanted, checked)
