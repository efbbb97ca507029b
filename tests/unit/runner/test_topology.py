"""Reading the CPU topology from sysfs: real machines' snapshots and the project's own small fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerrigan.core.cpus import CpuAllocator, Topology, parse_cpu_list
from kerrigan.runner.topology import TopologyError, read_topology
from tests.unit.runner.sysfs import SNAPSHOTS, needs_snapshots, write_sysfs


@needs_snapshots
@pytest.mark.parametrize(
    ("machine", "online", "physical_cores", "packages", "first_groups", "reserved"),
    [
        pytest.param(
            "epyc7402",
            "0-23,27-40,42,44,46-47",
            24,
            {0},
            ((0,), (1,), (2,), (3, 27), (4, 28)),
            (0,),
            id="epyc7402-some-siblings-offline",
        ),
        pytest.param(
            "epyc7402_nohyperthreading",
            "0-10,12,14,20-23",
            17,
            {0},
            ((0,), (1,), (2,), (3,), (4,)),
            (0,),
            id="epyc7402-no-smt",
        ),
        pytest.param(
            "xeon4214_2socket",
            "0-47",
            24,
            {0, 1},
            ((0, 24), (1, 25), (2, 26), (3, 27), (4, 28)),
            (0, 24),
            id="xeon4214-two-sockets",
        ),
        pytest.param("rpi4", "0-3", 4, {0}, ((0,), (1,), (2,), (3,)), (0,), id="rpi4-no-online-file"),
        # The online list leaves CPU 0 out, and CPU 2 has no topology folder, as the kernel leaves an
        # offline CPU: two single-thread cores remain, too few to keep one back.
        pytest.param("graviton2", "1,3", 2, {60}, ((1,), (3,)), (), id="graviton2-per-cpu-online-files"),
    ],
)
def test_real_machines_read_as_their_online_cpus_and_siblings(
    machine: str,
    online: str,
    physical_cores: int,
    packages: set[int],
    first_groups: tuple[tuple[int, ...], ...],
    reserved: tuple[int, ...],
) -> None:
    topology = read_topology(SNAPSHOTS / machine)
    assert topology.cpu_ids == parse_cpu_list(online)
    assert topology.physical_cores == physical_cores
    assert {cpu.package for cpu in topology.cpus} == packages
    assert topology.sibling_groups[: len(first_groups)] == first_groups
    assert topology.reserved() == reserved
    assert len(topology.allocatable()) == len(topology.cpus) - len(reserved)


@needs_snapshots
def test_xeon_siblings_are_n_and_n_plus_24_across_both_sockets() -> None:
    topology = read_topology(SNAPSHOTS / "xeon4214_2socket")
    assert topology.sibling_groups == tuple((n, n + 24) for n in range(24))
    # Both sockets number their cores from 0; the siblings still tell the cores apart.
    assert {(cpu.package, cpu.core) for cpu in topology.cpus if cpu.id in (0, 12)} == {(0, 0), (1, 0)}


@needs_snapshots
def test_epyc_siblings_that_are_offline_leave_their_core_with_one_thread() -> None:
    topology = read_topology(SNAPSHOTS / "epyc7402")
    singles = [group[0] for group in topology.sibling_groups if len(group) == 1]
    assert singles == [0, 1, 2, 17, 19, 21]
    # A claim of one goes to a single-thread core rather than splitting a whole pair.
    assert CpuAllocator(topology).allocate("job", 1) == (1,)


@pytest.mark.parametrize(
    ("cores", "online", "own_online", "expected"),
    [
        pytest.param([[0, 2], [1, 3]], "0-1\n", {}, ((0,), (1,)), id="offline-siblings-leave-the-groups"),
        pytest.param([[0, 4], [1, 5], [2, 6], [3, 7]], "0-3,5-7", {}, None, id="one-offline-cpu"),
        pytest.param([[0], [1], [2]], None, {}, ((0,), (1,), (2,)), id="no-online-file"),
        pytest.param([[0], [1], [2]], None, {1: "0\n"}, ((0,), (2,)), id="own-online-file-says-offline"),
        pytest.param([[0], [1], [2]], "0-2", {1: "0\n", 2: "1\n"}, ((0,), (2,)), id="both-must-say-online"),
    ],
)
def test_only_online_cpus_count(
    tmp_path: Path,
    cores: list[list[int]],
    online: str | None,
    own_online: dict[int, str],
    expected: tuple[tuple[int, ...], ...] | None,
) -> None:
    topology = read_topology(write_sysfs(tmp_path / "cpu", cores, online=online, own_online=own_online))
    if expected is None:
        assert topology.sibling_groups == ((0,), (1, 5), (2, 6), (3, 7))
        assert topology.reserved() == (0,)
    else:
        assert topology.sibling_groups == expected


def test_a_cpu_without_a_topology_folder_is_offline(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path / "cpu", [[0], [1]], online="0-2")
    (root / "cpu2").mkdir()
    assert read_topology(root).cpu_ids == (0, 1)


def test_a_one_cpu_host_keeps_its_cpu_allocatable(tmp_path: Path) -> None:
    topology = read_topology(write_sysfs(tmp_path / "cpu", [[0]], online="0\n"))
    assert topology == Topology.from_cpus(topology.cpus)
    assert topology.physical_cores == 1
    assert topology.allocatable() == (0,)
    assert CpuAllocator(topology).allocate("job", 1) == (0,)


def test_four_threads_per_core_group_and_reserve_the_whole_first_core(tmp_path: Path) -> None:
    cores = [[core + 4 * thread for thread in range(4)] for core in range(4)]
    topology = read_topology(write_sysfs(tmp_path / "cpu", cores, online="0-15"))
    assert topology.sibling_groups == ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15))
    assert topology.reserved() == (0, 4, 8, 12)
    assert len(topology.allocatable()) == 12


def test_packages_come_from_physical_package_id(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path / "cpu", [[0, 2], [1, 3]], packages={1: 1, 3: 1})
    assert [(cpu.id, cpu.package, cpu.core) for cpu in read_topology(root).cpus] == [
        (0, 0, 0),
        (1, 1, 1),
        (2, 0, 0),
        (3, 1, 1),
    ]


@pytest.mark.parametrize(
    ("spoil", "file", "problem"),
    [
        pytest.param({"online": "0-"}, "online", "malformed CPU list '0-'", id="malformed-online-list"),
        pytest.param(
            {"online": "0-4"}, "online", "lists CPUs without a cpuN folder: 4", id="online-cpu-missing"
        ),
        pytest.param(
            {"cpu1/online": "yes"}, "cpu1/online", "expected 0 or 1, got 'yes'", id="own-online-flag"
        ),
        pytest.param(
            {"cpu1/topology/core_id": "one"},
            "cpu1/topology/core_id",
            "expected an integer, got 'one'",
            id="core-id-not-a-number",
        ),
        pytest.param(
            {"cpu2/topology/physical_package_id": ""},
            "cpu2/topology/physical_package_id",
            "expected an integer, got ''",
            id="empty-package-id",
        ),
        pytest.param(
            {"cpu3/topology/thread_siblings_list": "3-1"},
            "cpu3/topology/thread_siblings_list",
            "runs backwards",
            id="malformed-siblings",
        ),
        pytest.param(
            {"cpu0/topology/thread_siblings_list": "2"},
            "cpu0/topology/thread_siblings_list",
            "does not list cpu0 itself",
            id="siblings-without-itself",
        ),
        pytest.param(
            {"cpu0/topology/thread_siblings_list": "0-2"},
            "cpu0/topology/thread_siblings_list",
            "lists cpu1, whose own siblings are 1,3",
            id="siblings-that-disagree",
        ),
        pytest.param(
            {"cpu1/topology/core_id": b"\xff\xfe"}, "cpu1/topology/core_id", "not ASCII text", id="binary"
        ),
    ],
)
def test_malformed_files_raise_naming_the_file(
    tmp_path: Path, spoil: dict[str, str | bytes], file: str, problem: str
) -> None:
    root = write_sysfs(tmp_path / "cpu", [[0, 2], [1, 3]], online="0-3", own_online={1: "1"})
    for name, content in spoil.items():
        if isinstance(content, bytes):
            (root / name).write_bytes(content)
        else:
            (root / name).write_text(content)
    with pytest.raises(TopologyError) as raised:
        read_topology(root)
    assert raised.value.path == root / file
    assert str(raised.value).startswith(f"{root / file}: ")
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    "name", ["thread_siblings_list", "core_id", "physical_package_id"], ids=lambda name: f"no-{name}"
)
def test_missing_topology_files_raise_naming_the_file(tmp_path: Path, name: str) -> None:
    root = write_sysfs(tmp_path / "cpu", [[0, 2], [1, 3]])
    (root / "cpu2" / "topology" / name).unlink()
    with pytest.raises(TopologyError, match=f"{name}: missing") as raised:
        read_topology(root)
    assert raised.value.path == root / "cpu2" / "topology" / name


def test_a_folder_without_online_cpus_raises(tmp_path: Path) -> None:
    root = tmp_path / "cpu"
    root.mkdir()
    (root / "cpu0").mkdir()
    with pytest.raises(TopologyError, match="no online CPU with a topology folder"):
        read_topology(root)


def test_a_missing_root_raises_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot list the CPU folders") as raised:
        read_topology(tmp_path / "absent")
    assert raised.value.path == tmp_path / "absent"
