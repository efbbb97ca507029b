"""Reading a runner host's CPU topology from sysfs (``/sys/devices/system/cpu``).

A CPU counts when it is online: listed in the ``online`` file when there is one (without it every ``cpuN`` is
online), and not marked ``0`` by its own ``cpuN/online`` file where the kernel has one. The kernel removes the
``topology`` directory of a CPU it has taken offline, so a CPU without one is not running either. For every
online CPU, ``topology/thread_siblings_list``, ``core_id`` and ``physical_package_id`` must be there and
well formed; anything missing or malformed raises ``TopologyError`` naming the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from kerrigan.core.cpus import Cpu, Topology, format_cpu_list, parse_cpu_list

SYSFS_CPU_ROOT: Final = Path("/sys/devices/system/cpu")

_CPU_DIR = re.compile(r"cpu([0-9]+)")
_INTEGER = re.compile(r"-?[0-9]+")


class TopologyError(ValueError):
    """A sysfs CPU file that is missing, unreadable or malformed; ``path`` names it."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def read_topology(root: Path = SYSFS_CPU_ROOT) -> Topology:
    """The online CPUs under ``root`` and their hyperthread siblings."""
    present = _cpu_dirs(root)
    online_file = root / "online"
    if online_file.exists():
        listed = set(_read_cpu_list(online_file))
        absent = sorted(listed - present.keys())
        if absent:
            raise TopologyError(online_file, f"lists CPUs without a cpuN folder: {format_cpu_list(absent)}")
    else:
        listed = set(present)
    online = {cpu: path for cpu, path in present.items() if cpu in listed and _is_running(path)}
    if not online:
        raise TopologyError(root, "no online CPU with a topology folder")

    cpus: list[Cpu] = []
    siblings: dict[int, frozenset[int]] = {}
    for cpu_id, path in sorted(online.items()):
        topology = path / "topology"
        package = _read_integer(topology / "physical_package_id")
        core = _read_integer(topology / "core_id")
        siblings_file = topology / "thread_siblings_list"
        # Offline siblings still appear in the list; only online ones share the core's work.
        group = frozenset(_read_cpu_list(siblings_file)) & online.keys()
        if cpu_id not in group:
            raise TopologyError(siblings_file, f"does not list cpu{cpu_id} itself")
        cpus.append(Cpu(cpu_id, package, core))
        siblings[cpu_id] = group

    for cpu_id, group in siblings.items():
        for sibling in group:
            if siblings[sibling] != group:
                raise TopologyError(
                    online[cpu_id] / "topology" / "thread_siblings_list",
                    f"lists cpu{sibling}, whose own siblings are {format_cpu_list(siblings[sibling])}",
                )
    return Topology(tuple(cpus), tuple({tuple(sorted(group)) for group in siblings.values()}))


def _cpu_dirs(root: Path) -> dict[int, Path]:
    """Every ``cpuN`` folder under ``root``, by N."""
    try:
        entries = list(root.iterdir())
    except OSError as err:
        raise TopologyError(root, f"cannot list the CPU folders ({err.strerror or err})") from err
    found: dict[int, Path] = {}
    for entry in entries:
        match = _CPU_DIR.fullmatch(entry.name)
        if match is not None and entry.is_dir():
            found[int(match[1])] = entry
    return found


def _is_running(cpu_dir: Path) -> bool:
    """Whether a CPU the ``online`` list admits is running by its own ``online`` file and topology folder."""
    own_flag = cpu_dir / "online"
    if own_flag.exists():
        flag = _read_text(own_flag)
        if flag not in {"0", "1"}:
            raise TopologyError(own_flag, f"expected 0 or 1, got {flag!r}")
        if flag == "0":
            return False
    return (cpu_dir / "topology").is_dir()


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError as err:
        raise TopologyError(path, "missing") from err
    except UnicodeDecodeError as err:
        raise TopologyError(path, "not ASCII text") from err
    except OSError as err:
        raise TopologyError(path, f"cannot read it ({err.strerror or err})") from err


def _read_integer(path: Path) -> int:
    text = _read_text(path)
    if _INTEGER.fullmatch(text) is None:
        raise TopologyError(path, f"expected an integer, got {text!r}")
    return int(text)


def _read_cpu_list(path: Path) -> tuple[int, ...]:
    text = _read_text(path)
    try:
        return parse_cpu_list(text)
    except ValueError as err:
        raise TopologyError(path, str(err)) from err
