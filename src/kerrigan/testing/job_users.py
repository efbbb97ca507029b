"""Ranges of job users for the agents tests and demos start on one machine: each its own, since an agent
refuses to start on job users another agent of the host holds (:mod:`kerrigan.runner.isolation.range_lock`).

The default range, 61000-61183, is cut into slices of :data:`SLICE` ids, handed out in turn from a place
that depends on the process id (so two test processes on one machine start apart), passing over any slice
an agent on the host holds now. A slice handed out comes round again only after every other one: by then
the agent it went to has long taken its lock, or stopped.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Final

from kerrigan.runner.isolation.range_lock import DEFAULT_LOCK_FOLDER, RangeLockError, hold_range
from kerrigan.runner.isolation.users import DEFAULT_JOB_USERS, UserRange

SLICE: Final = 8
_WHOLE: Final = UserRange.parse(DEFAULT_JOB_USERS)
_SLICES: Final = tuple(
    UserRange(first, min(first + SLICE - 1, _WHOLE.last)) for first in range(_WHOLE.first, _WHOLE.last, SLICE)
)
_turn = itertools.count(os.getpid() % len(_SLICES))


def spare_job_users(folder: Path = DEFAULT_LOCK_FOLDER) -> UserRange:
    """A slice of the default range no agent on this host holds now (where the locks can be looked at; as
    another user than root, the next slice: jobs then run as that user and the range is not used)."""
    for _ in _SLICES:
        users = _SLICES[next(_turn) % len(_SLICES)]
        if os.geteuid() != 0:
            return users
        try:
            hold_range(users, Path("spare_job_users"), folder).release()
        except RangeLockError:
            continue
        return users
    raise RangeLockError(f"every slice of {_WHOLE} is held by an agent on this host")
