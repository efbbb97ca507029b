"""What reading a devices file asks of the host it runs on: whether a path exists, whether a program is on
the PATH, and whether labgrid (an optional extra, ``kerrigan[labgrid]``) has a power backend of a model.

Tests give a :class:`HostView` of their own; :data:`THIS_HOST` asks this one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final


@dataclass(frozen=True, slots=True)
class HostView:
    """The host's answers: ``exists(path)``, ``has_program(name)`` and ``power_backend(model)`` (True or
    False; None where labgrid is not installed)."""

    exists: Callable[[str], bool]
    has_program: Callable[[str], bool]
    power_backend: Callable[[str], bool | None]


def labgrid_power_backend(model: str, package: str = "labgrid") -> bool | None:
    """Whether the installed labgrid (``package``: a test's stand-in for it) has
    ``labgrid.driver.power.<model>``; None where labgrid is not installed.

    Found by its file, without importing anything: importing ``labgrid.driver`` runs every driver of
    labgrid's, which the agent needs only when it switches an outlet. ``model`` must already be a plain
    identifier (the caller checks): never a dotted path from a file's text.
    """
    labgrid = importlib.util.find_spec(package)
    if labgrid is None or not labgrid.submodule_search_locations:
        return None
    places = [str(Path(place, "driver", "power")) for place in labgrid.submodule_search_locations]
    found = importlib.machinery.PathFinder.find_spec(model, places)
    return found is not None and found.loader is not None  # a module, not a folder of that name


def _has_program(name: str) -> bool:
    return shutil.which(name) is not None


THIS_HOST: Final = HostView(os.path.exists, _has_program, labgrid_power_backend)
