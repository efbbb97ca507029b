"""``/kerrigan approve [SHA] [secrets]``: which commit of a fork's pull request a writer's comment approves.

GitHub's ``issue_comment`` payload names no commit, and a fork can push between the moment a writer comments
and the moment Kerrigan reads the comment. So an approval covers the commit the writer saw, or nothing:

- A full SHA approves that commit when it is the pull request's head; otherwise nothing, and the reply names
  the head to review instead.
- Without a SHA, the head is approved only when it is certain it was the head when the comment was written:
  the head repository's last push (``pushed_at``) came in an earlier second than the comment, and the pull
  request has not changed since the comment (its ``updated_at``, which every push moves and which the
  comment itself sets to its own time, is not later). GitHub's times are whole seconds, so a push in the
  comment's own second counts as after it. Commit dates are no evidence: whoever makes a commit sets them.
- An abbreviated SHA (7 to 39 hex digits) must begin the head's, must begin no other commit Kerrigan has
  seen in the repository (a fork can make a commit that shares the first characters of another), and the
  head must pass the test of a bare approval as well; when any of that fails, the full SHA is asked for.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

SECRETS: Final = "secrets"
MIN_SHA: Final = 7
FULL_SHA: Final = 40
_SHA: Final = re.compile(r"[0-9a-fA-F]{7,40}")


@dataclass(frozen=True, slots=True)
class ApproveCommand:
    """What ``/kerrigan approve`` asked for: a commit (lowercase, full or abbreviated; ``None``: the head
    when the comment was written) and whether its jobs get the secrets they name."""

    sha: str | None = None
    secrets: bool = False

    @property
    def exact(self) -> bool:
        """Whether it names a whole SHA (no other commit can match it)."""
        return self.sha is not None and len(self.sha) == FULL_SHA


def read_approve(argument: str) -> ApproveCommand | None:
    """The command's argument, ``[SHA] [secrets]`` (words separated by blanks); ``None`` for anything else."""
    words = argument.split()
    secrets = bool(words) and words[-1] == SECRETS
    if secrets:
        words.pop()
    if not words:
        return ApproveCommand(None, secrets)
    if len(words) == 1 and _SHA.fullmatch(words[0]) is not None:
        return ApproveCommand(words[0].lower(), secrets)
    return None


@dataclass(frozen=True, slots=True)
class PullHead:
    """A pull request as GitHub describes it when the comment is read: its head commit, when it last
    changed (``updated_at``), and when its head repository was last pushed to (``None``: unknown, as for a
    deleted fork)."""

    sha: str
    updated_at: datetime | None
    pushed_at: datetime | None


class Refusal(enum.StrEnum):
    """Why a comment approves nothing."""

    MOVED = "moved"  # it names a commit that is not the head
    AMBIGUOUS = "ambiguous"  # its abbreviated SHA begins another commit too
    CHANGED = "changed"  # the pull request changed after the comment: which head was seen is unknown


@dataclass(frozen=True, slots=True)
class Approved:
    """The comment approves ``sha``, the pull request's head."""

    sha: str


@dataclass(frozen=True, slots=True)
class Refused:
    """The comment approves nothing, for ``reason``; ``head`` is the commit to review instead and ``named``
    the whole SHA the comment's abbreviation stands for, where one commit Kerrigan has seen matches it."""

    reason: Refusal
    head: str
    named: str | None = None


def decide(
    command: ApproveCommand, head: PullHead, commented_at: datetime | None, seen: Iterable[str] = ()
) -> Approved | Refused:
    """Which commit the comment written at ``commented_at`` (``None``: unknown) approves; ``seen`` are the
    commits Kerrigan has seen in the repository that begin with the command's SHA."""
    named = command.sha
    matches = sorted({sha for sha in seen if named is not None and sha.startswith(named)})
    if named is not None and not head.sha.startswith(named):
        return Refused(Refusal.MOVED, head.sha, matches[0] if len(matches) == 1 else None)
    if command.exact:
        return Approved(head.sha)
    if any(sha != head.sha for sha in matches):
        return Refused(Refusal.AMBIGUOUS, head.sha)
    if not unchanged_since(head, commented_at):
        return Refused(Refusal.CHANGED, head.sha)
    return Approved(head.sha)


def unchanged_since(head: PullHead, commented_at: datetime | None) -> bool:
    """Whether ``head.sha`` was certainly the head when the comment was written at ``commented_at``."""
    if commented_at is None or head.pushed_at is None or head.updated_at is None:
        return False
    comment = _second(commented_at)
    return _second(head.pushed_at) < comment and _second(head.updated_at) <= comment


def _second(at: datetime) -> datetime:
    return at.replace(microsecond=0)
