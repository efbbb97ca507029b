"""CPU topologies as sysfs shows them, for the tests of reading one: real machines' snapshots (kept beside the
project) and small ones a test writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

# Copies of /sys/devices/system/cpu from real machines, kept beside the project (see its README there).
SNAPSHOTS = Path(__file__).resolve().parents[3].parent / "shared" / "sysfs-snapshots"
needs_snapshots = pytest.mark.skipif(
    not SNAPSHOTS.is_dir(), reason=f"the real sysfs snapshots are not at {SNAPSHOTS}"
)


def write_sysfs(
    root: Path,
    cores: Iterable[Iterable[int]],
    *,
    online: str | None = None,
    own_online: Mapping[int, str] | None = None,
    packages: Mapping[int, int] | None = None,
) -> Path:
    """A ``/sys/devices/system/cpu`` under ``root``: one sibling group per core, core ids counting from 0.

    ``online`` is the text of the top-level ``online`` file (none when ``None``); ``own_online`` the text of
    per-CPU ``cpuN/online`` files; ``packages`` a CPU's package id where it is not 0.
    """
    root.mkdir(parents=True, exist_ok=True)
    if online is not None:
        (root / "online").write_text(online)
    for core_id, group in enumerate(cores):
        siblings = ",".join(str(cpu) for cpu in sorted(group))
        for cpu in group:
            topology = root / f"cpu{cpu}" / "topology"
            topology.mkdir(parents=True)
            (topology / "thread_siblings_list").write_text(f"{siblings}\n")
            (topology / "core_id").write_text(f"{core_id}\n")
            (topology / "physical_package_id").write_text(f"{(packages or {}).get(cpu, 0)}\n")
    for cpu, text in (own_online or {}).items():
        (root / f"cpu{cpu}").mkdir(exist_ok=True)
        (root / f"cpu{cpu}" / "online").write_text(text)
    # Folders the kernel keeps beside the CPUs, which are not CPUs.
    (root / "cpufreq").mkdir()
    (root / "cpuidle").mkdir()
    (root / "possible").write_text("0-63\n")
    return root
