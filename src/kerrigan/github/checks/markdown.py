"""The Markdown pieces every summary is built of: code spans, table cells, requested labels, the header."""

from __future__ import annotations

from kerrigan.github.checks.body import SessionContext


def code(text: str) -> str:
    """``text`` as inline code (a backtick in it made a quote)."""
    quoted = text.replace("`", "'")
    return f"`{quoted}`"


def cell(text: str) -> str:
    """``text`` safe in a table cell: pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def labels_text(requested: dict[str, list[str]]) -> str:
    """Requested labels as code: ``os=linux``, ``board in [a, b]``; ``none``."""
    return (
        ", ".join(
            code(f"{key}={values[0]}") if len(values) == 1 else code(f"{key} in [{', '.join(values)}]")
            for key, values in requested.items()
        )
        or "none"
    )


def header(name: str, context: SessionContext) -> str:
    """The summary's first line: the workflow, the commit and event, a link to the session."""
    where = f" ({context.event}" + (f" to {code(context.ref)}" if context.ref else "") + ")"
    return (
        f"**{cell(name)}** at {code(context.head_sha[:12])}{where}, "
        f"session [{code(context.session_id[:8])}]({context.details_url})\n"
    )
