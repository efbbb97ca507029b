"""How the command line reports a mistake: :class:`UsageError`, one line and exit status 2."""

from __future__ import annotations

from pathlib import Path


class UsageError(Exception):
    """A mistake in how the command was called; printed as one line, exit status 2."""


def read_input(path: str, what: str) -> str:
    """The text of the file the user named; a :class:`UsageError` naming it when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror}") from None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (of the driver's, for a database error)."""
    text = str(getattr(exc, "orig", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def port_number(text: str, flag: str, *, least: int = 1) -> int:
    """``text`` as a TCP port from ``least`` (0: any free port) to 65535; a UsageError naming ``flag``."""
    if not (text.isascii() and text.isdigit() and len(text) <= 5 and least <= int(text) <= 65535):
        raise UsageError(f"{flag} must be a port number from {least} to 65535, not {text[:40]!r}")
    return int(text)


def actor_name(name: str | None, doing: str) -> str:
    """Who the audit log names: ``--actor``, else the user running the command; ``doing`` says what for
    in the error (``importing``)."""
    if name is None:
        import getpass

        try:
            name = getpass.getuser()
        except (OSError, KeyError):
            raise UsageError(f"cannot tell who is {doing}: pass --actor NAME") from None
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise UsageError("--actor: the name must be 1-100 characters")
    return name
