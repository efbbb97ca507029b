"""A session's diagnostics as stored: the ``kerrigan explain`` document with its per-device lists compact.

A task's ``rejected_devices`` names every device the task was matched against and every reason it was
turned away. In a lab of 10,000 devices those reasons are a few strings repeated thousands of times, so
the stored form keeps each distinct reason once, each distinct pool once, each distinct verdict (a set of
reasons, never or not yet) once, and per device only its id and the indexes of its pool and its verdict.
The per-device columns are deflated together (ids of a lab share long prefixes; indexes repeat), so a
device costs a few bytes. ``eligible_devices`` is kept the same way when it is long.

Everything else (``retry``, ``scheduling``, each task's ``requested``, the histogram, the nearest misses)
is left as it is, so what the dispatcher and the retry code read needs no expanding. :func:`expand` undoes
:func:`compact` exactly, and leaves a document stored before (its lists plain) as it is.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import zlib
from collections.abc import Mapping
from typing import Any, Final

FORMAT: Final = 1
MARKER: Final = "compact"  # the key that tells a compacted list (a dict) from a plain one
COMPACT_FROM: Final = 32  # shorter lists stay plain: readable in the database, and as small either way
_VERDICT_KEYS: Final = ("device", "pool", "reasons", "never")


def _pack(value: object) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(zlib.compress(text.encode("utf-8", "surrogatepass"), 9)).decode("ascii")


def _unpack(packed: str) -> Any:
    return json.loads(zlib.decompress(base64.b64decode(packed)).decode("utf-8", "surrogatepass"))


def _is_verdict(entry: object) -> bool:
    """A rejected device exactly as ``kerrigan explain`` writes one (anything else is stored as it is)."""
    return (
        isinstance(entry, dict)
        and tuple(entry) == _VERDICT_KEYS
        and isinstance(entry["device"], str)
        and isinstance(entry["pool"], str)
        and isinstance(entry["reasons"], list)
        and all(isinstance(reason, str) for reason in entry["reasons"])
        and isinstance(entry["never"], bool)
    )


def _compact_rejected(verdicts: list[dict[str, Any]]) -> dict[str, object]:
    reasons: dict[str, int] = {}
    pools: dict[str, int] = {}
    kinds: dict[tuple[tuple[int, ...], bool], int] = {}
    devices: list[str] = []
    pool_of: list[int] = []
    kind_of: list[int] = []
    for verdict in verdicts:
        texts = tuple(reasons.setdefault(text, len(reasons)) for text in verdict["reasons"])
        kind_of.append(kinds.setdefault((texts, verdict["never"]), len(kinds)))
        pool_of.append(pools.setdefault(verdict["pool"], len(pools)))
        devices.append(verdict["device"])
    return {
        MARKER: FORMAT,
        "count": len(verdicts),
        "reasons": list(reasons),
        "pools": list(pools),
        "verdicts": [[list(texts), never] for texts, never in kinds],
        "columns": _pack([devices, pool_of, kind_of]),
    }


def _expand_rejected(stored: Mapping[str, Any]) -> list[dict[str, object]]:
    reasons: list[str] = stored["reasons"]
    pools: list[str] = stored["pools"]
    kinds = [([reasons[i] for i in texts], never) for texts, never in stored["verdicts"]]
    devices, pool_of, kind_of = _unpack(stored["columns"])
    out: list[dict[str, object]] = []
    for device, pool, kind in zip(devices, pool_of, kind_of, strict=True):
        texts, never = kinds[kind]
        out.append({"device": device, "pool": pools[pool], "reasons": list(texts), "never": never})
    return out


def _is_compacted(value: object) -> bool:
    return isinstance(value, dict) and value.get(MARKER) == FORMAT


def _compact_task(task: dict[str, Any], from_length: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in task.items():
        if not isinstance(value, list) or len(value) < max(from_length, 1):
            out[key] = value
        elif key == "rejected_devices" and all(_is_verdict(entry) for entry in value):
            out[key] = _compact_rejected(value)
        elif key == "eligible_devices" and all(isinstance(device, str) for device in value):
            out[key] = {MARKER: FORMAT, "count": len(value), "devices": _pack(value)}
        else:
            out[key] = value
    return out


# What a damaged stored list raises; it is then handed on as it is (readers take a non-list for none),
# so one bad row costs its device table, not its page.
_DAMAGED = (binascii.Error, zlib.error, ValueError, KeyError, IndexError, TypeError)


def _expand_task(task: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in task.items():
        out[key] = value
        if key in ("rejected_devices", "eligible_devices") and _is_compacted(value):
            with contextlib.suppress(*_DAMAGED):
                out[key] = _expand_rejected(value) if key == "rejected_devices" else _unpack(value["devices"])
    return out


def compact(document: Mapping[str, Any], *, from_length: int = COMPACT_FROM) -> dict[str, Any]:
    """The stored form of a resolution document: each task's ``rejected_devices`` and
    ``eligible_devices`` of at least ``from_length`` entries kept by reference; the rest as it is."""
    tasks = document.get("tasks")
    if not isinstance(tasks, list):
        return dict(document)
    return {
        **document,
        "tasks": [_compact_task(task, from_length) if isinstance(task, dict) else task for task in tasks],
    }


def expand(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The resolution document a stored one holds: :func:`compact` undone; a plain one (or a damaged
    list) as it is."""
    tasks = stored.get("tasks")
    if not isinstance(tasks, list):
        return dict(stored)
    return {**stored, "tasks": [_expand_task(task) if isinstance(task, dict) else task for task in tasks]}
