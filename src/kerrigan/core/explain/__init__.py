"""``kerrigan explain``: a workflow resolved against an inventory, as JSON and as text for a terminal.

The explanation itself (every task resolved, devices chosen, the exit code) is
:mod:`~kerrigan.core.explain.explanation`; its JSON document, DESIGN.md's contract (docs/explain.md), is
:mod:`~kerrigan.core.explain.document`; what a person reads in a terminal, :mod:`~kerrigan.core.explain.text`.
"""

from __future__ import annotations

from kerrigan.core.explain.document import explanation_json, resolution_json
from kerrigan.core.explain.explanation import (
    EXIT_CODE_HEADER,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNMATCHED,
    Explanation,
    TaskExplanation,
    explain,
    invalid_input,
    no_devices,
)
from kerrigan.core.explain.text import render_text

__all__ = [
    "EXIT_CODE_HEADER",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_UNMATCHED",
    "Explanation",
    "TaskExplanation",
    "explain",
    "explanation_json",
    "invalid_input",
    "no_devices",
    "render_text",
    "resolution_json",
]
