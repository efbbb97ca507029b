"""Suspect devices (DESIGN.md, "Device health", flaky devices): the test, the correction and the window."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from kerrigan.core.flaky import (
    FALSE_DISCOVERY_RATE,
    MIN_RUNS,
    RELEASE_RATE,
    WINDOW_DAYS,
    FailureStats,
    Suspect,
    benjamini_hochberg,
    fisher_greater,
    hypergeometric_tail,
)

TASK = "octo/firmware:hil-smoke.yml:boot"
OTHER_TASK = "octo/firmware:hil-smoke.yml:flash"
TODAY = 20_788


def exact_fisher(failures: int, passes: int, peer_failures: int, peer_passes: int) -> Fraction:
    """P(device failures >= observed | the margins), summed from binomial coefficients with no rounding."""
    runs = failures + passes
    all_failures = failures + peer_failures
    population = runs + peer_failures + peer_passes
    tail = sum(
        math.comb(all_failures, x) * math.comb(population - all_failures, runs - x)
        for x in range(failures, min(runs, all_failures) + 1)
    )
    return Fraction(tail, math.comb(population, runs))


def record_runs(stats: FailureStats, device: str, runs: int, failures: int, *, task: str = TASK) -> None:
    """``runs`` jobs of ``device`` today, the first ``failures`` of them failed."""
    for index in range(runs):
        stats.record(task, device, TODAY, failed=index < failures)


def redbox_and_peers(stats: FailureStats) -> None:
    """DESIGN's example: modalix-redbox failed 8 of 10; its 5 peers failed 1 of 52."""
    record_runs(stats, "modalix-redbox", 10, 8)
    for index, runs in enumerate((10, 10, 10, 11, 11)):
        record_runs(stats, f"modalix-{index}", runs, 1 if index == 0 else 0)


@pytest.mark.parametrize(
    ("failures", "passes", "peer_failures", "peer_passes"),
    [
        (8, 2, 1, 51),  # DESIGN's example
        (1, 0, 0, 1),
        (3, 2, 1, 4),
        (5, 0, 0, 5),
        (0, 5, 3, 20),
        (2, 8, 2, 8),  # like its peers
        (1, 9, 5, 5),  # fails less than its peers: the lower tail is summed
        (6, 14, 40, 940),
        (12, 18, 3, 2),
        (30, 0, 0, 30),
    ],
)
def test_fisher_p_value_equals_exact_summation_of_small_tables(
    failures: int, passes: int, peer_failures: int, peer_passes: int
) -> None:
    exact = exact_fisher(failures, passes, peer_failures, peer_passes)
    assert fisher_greater(failures, passes, peer_failures, peer_passes) == pytest.approx(
        float(exact), rel=1e-12
    )


@pytest.mark.parametrize(
    ("failures", "passes", "peer_failures", "peer_passes"),
    [
        (20, 8, 93, 6_160),
        (75, 925, 425, 8_575),  # a long tail, near the mean
        (45, 955, 455, 8_545),  # below the mean
        # a million runs: differences of lgamma would lose 1e-9 here, the direct deviance 1e-11
        (12, 188, 9_988, 989_812),
        (60, 940, 49_940, 949_060),
        (700, 300, 30_000, 69_000),
    ],
)
def test_fisher_p_value_stays_exact_for_large_populations(
    failures: int, passes: int, peer_failures: int, peer_passes: int
) -> None:
    exact = exact_fisher(failures, passes, peer_failures, peer_passes)
    assert fisher_greater(failures, passes, peer_failures, peer_passes) == pytest.approx(
        float(exact), rel=1e-12
    )


def test_fisher_p_value_matches_exact_summation_on_random_tables() -> None:
    rng = random.Random(7)
    for _ in range(300):
        table = [rng.randrange(40) for _ in range(4)]
        exact = exact_fisher(*table)
        assert fisher_greater(*table) == pytest.approx(float(exact), rel=1e-12), table


@pytest.mark.parametrize(
    "table",
    [(0, 10, 0, 10), (10, 0, 10, 0), (5, 5, 0, 0), (0, 0, 3, 3)],
    ids=["nothing-failed", "everything-failed", "no-peer-runs", "no-device-runs"],
)
def test_fisher_p_value_is_one_when_the_table_cannot_say_more_failures(
    table: tuple[int, int, int, int],
) -> None:
    assert fisher_greater(*table) == 1.0


def test_fisher_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        fisher_greater(1, -1, 2, 2)


def test_hypergeometric_tail_rejects_more_successes_than_the_population() -> None:
    with pytest.raises(ValueError, match="impossible"):
        hypergeometric_tail(1, 10, 11, 2)


P_VALUES = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]


def test_benjamini_hochberg_adjusts_a_hand_worked_example() -> None:
    # m p / rank: .008 .032 .104 .082 .0672 .08 .0846 .205; then each the smallest at or after it
    expected = [0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.08, 0.074 * 8 / 7, 0.205]
    assert benjamini_hochberg(P_VALUES) == pytest.approx(expected, rel=1e-12)
    assert [q_value < 0.05 for q_value in benjamini_hochberg(P_VALUES)] == [True, True] + [False] * 6


def test_benjamini_hochberg_keeps_the_order_given() -> None:
    shuffled = P_VALUES[::-1]
    assert benjamini_hochberg(shuffled) == benjamini_hochberg(P_VALUES)[::-1]


def test_benjamini_hochberg_of_the_smallest_p_values_with_m_agrees_below_the_rate() -> None:
    assert benjamini_hochberg(P_VALUES[:2], m=len(P_VALUES)) == benjamini_hochberg(P_VALUES)[:2]


def test_benjamini_hochberg_refuses_an_m_smaller_than_the_p_values() -> None:
    with pytest.raises(ValueError, match="fewer"):
        benjamini_hochberg(P_VALUES, m=3)


def test_designs_example_device_is_suspect() -> None:
    stats = FailureStats()
    redbox_and_peers(stats)
    [suspect] = stats.suspects(TODAY)
    assert (suspect.device, suspect.task) == ("modalix-redbox", TASK)
    assert (suspect.runs, suspect.failures) == (10, 8)
    assert (suspect.peers, suspect.peer_runs, suspect.peer_failures) == (5, 52, 1)
    assert suspect.p_value == pytest.approx(float(exact_fisher(8, 2, 1, 51)), rel=1e-12)
    assert suspect.adjusted < FALSE_DISCOVERY_RATE


def test_designs_example_reads_as_the_check_run_says_it() -> None:
    stats = FailureStats()
    redbox_and_peers(stats)
    [suspect] = stats.suspects(TODAY)
    expected = "modalix-redbox failed 8 of 10 runs of this task in 7 days; its 5 peers failed 1 of 52"
    assert suspect.sentence() == expected


@pytest.mark.parametrize(
    ("runs", "peers", "expected"),
    [
        (1, 1, "rb failed 1 of 1 run of this task in 7 days; its 1 peer failed 0 of 6"),
        (2, 1, "rb failed 1 of 2 runs of this task in 7 days; its 1 peer failed 0 of 6"),
        (1, 2, "rb failed 1 of 1 run of this task in 7 days; its 2 peers failed 0 of 6"),
    ],
)
def test_sentence_is_singular_for_one_run_or_one_peer(runs: int, peers: int, expected: str) -> None:
    suspect = Suspect("rb", TASK, runs, 1, peers, 6, 0, 0.001, 0.002)
    assert suspect.sentence() == expected


def test_a_device_with_fewer_than_five_runs_is_never_suspect() -> None:
    stats = FailureStats()
    record_runs(stats, "new-board", MIN_RUNS - 1, MIN_RUNS - 1)
    for index in range(20):
        record_runs(stats, f"peer-{index}", 50, 0)
    assert stats.suspects(TODAY) == []
    record_runs(stats, "new-board", 1, 1)  # its fifth run, failed too
    assert [suspect.device for suspect in stats.suspects(TODAY)] == ["new-board"]


def test_pairs_with_fewer_than_five_runs_are_not_counted_in_the_correction() -> None:
    alone = FailureStats()
    redbox_and_peers(alone)
    crowded = FailureStats()
    redbox_and_peers(crowded)
    for index in range(200):  # another task's many devices, each short of five runs
        record_runs(crowded, f"other-{index}", MIN_RUNS - 1, index % 2, task=OTHER_TASK)
    assert crowded.suspects(TODAY) == alone.suspects(TODAY)


def test_a_device_alone_on_its_task_is_not_tested() -> None:
    stats = FailureStats()
    record_runs(stats, "only-one", 30, 30)
    assert stats.suspects(TODAY) == []


def test_a_device_that_fails_like_its_peers_is_not_suspect() -> None:
    stats = FailureStats()
    for index in range(20):
        record_runs(stats, f"board-{index}", 30, 3 + index % 3)
    assert stats.suspects(TODAY) == []


def test_a_device_that_fails_somewhat_more_is_suspect_only_at_a_looser_rate() -> None:
    strict, loose = FailureStats(), FailureStats(q=0.05)
    for stats in (strict, loose):
        record_runs(stats, "board-x", 10, 4)
        for index in range(3):
            record_runs(stats, f"board-{index}", 20, 1)
    # p = P(X >= 4) on (4, 6; 3, 57), 4 pairs tested: adjusted = 4 p, between the two rates
    adjusted = 4 * float(exact_fisher(4, 6, 3, 57))
    assert 0.01 < adjusted < 0.05
    assert strict.suspects(TODAY) == []
    [suspect] = loose.suspects(TODAY)
    assert suspect.device == "board-x"
    assert suspect.adjusted == pytest.approx(adjusted, rel=1e-12)


def test_the_false_discovery_rate_must_be_a_probability() -> None:
    with pytest.raises(ValueError, match="false discovery rate"):
        FailureStats(q=0)


def test_the_release_rate_cannot_be_stricter_than_the_rate_to_name() -> None:
    with pytest.raises(ValueError, match="release rate"):
        FailureStats(q=0.05, release=0.01)


def test_a_named_device_stays_named_until_its_evidence_clears() -> None:
    """The lab week's lapse (issue 31): named on 6 failures of 8, a pass must not unname it."""
    stats = FailureStats()
    record_runs(stats, "flaky", 8, 6)
    for index in range(6):
        record_runs(stats, f"peer-{index}", 30, 5)
    [named] = stats.suspects(TODAY)
    assert named.device == "flaky"
    assert named.adjusted < FALSE_DISCOVERY_RATE
    stats.record(TASK, "flaky", TODAY, failed=False)
    stats.record(TASK, "flaky", TODAY, failed=False)  # 6 of 10: no longer enough to name it
    assert stats.suspects(TODAY) == []
    [kept] = stats.suspects(TODAY, {(TASK, "flaky")})
    assert (kept.device, kept.runs, kept.failures) == ("flaky", 10, 6)
    assert FALSE_DISCOVERY_RATE <= kept.adjusted < RELEASE_RATE
    record_runs(stats, "flaky", 10, 0)  # 6 of 20: its evidence has cleared
    assert stats.suspects(TODAY, {(TASK, "flaky")}) == []


def test_a_name_for_another_task_or_device_keeps_nothing() -> None:
    stats = FailureStats()
    record_runs(stats, "flaky", 10, 6)
    for index in range(6):
        record_runs(stats, f"peer-{index}", 30, 5)
    assert stats.suspects(TODAY) == []
    assert stats.suspects(TODAY, {(OTHER_TASK, "flaky"), (TASK, "peer-0")}) == []
    assert [s.device for s in stats.suspects(TODAY, {(TASK, "flaky")})] == ["flaky"]


def test_failures_stop_counting_once_their_day_leaves_the_window() -> None:
    stats = FailureStats()
    last_day_in_window = TODAY + WINDOW_DAYS - 1
    record_runs(stats, "modalix-redbox", 10, 10)
    for _ in range(6):
        stats.record(TASK, "modalix-redbox", last_day_in_window, failed=False)
    for index in range(5):
        for _ in range(20):
            stats.record(TASK, f"modalix-{index}", last_day_in_window, failed=False)
    [suspect] = stats.suspects(last_day_in_window)
    assert (suspect.device, suspect.runs, suspect.failures) == ("modalix-redbox", 16, 10)
    assert stats.suspects(last_day_in_window + 1) == []  # only its 6 passes are left


def test_expire_drops_the_days_before_it_and_their_late_records() -> None:
    stats = FailureStats()
    redbox_and_peers(stats)
    stats.expire(TODAY + 1)
    assert stats.suspects(TODAY + 1) == []
    assert stats.record(TASK, "modalix-redbox", TODAY, failed=True) is False
    assert stats.record(TASK, "modalix-redbox", TODAY + 1, failed=True) is True


def test_suspects_refuses_a_today_before_a_recorded_job() -> None:
    stats = FailureStats()
    stats.record(TASK, "modalix-redbox", TODAY + 1, failed=True)
    with pytest.raises(ValueError, match="after today"):
        stats.suspects(TODAY)


@pytest.mark.parametrize(("runs", "failures"), [(0, 0), (3, 4), (3, -1)])
def test_add_refuses_impossible_counts(runs: int, failures: int) -> None:
    with pytest.raises(ValueError, match="failures of"):
        FailureStats().add(TASK, "modalix-redbox", TODAY, runs, failures)


def test_counts_added_per_day_equal_the_jobs_recorded_one_by_one() -> None:
    one_by_one, counted = FailureStats(), FailureStats()
    redbox_and_peers(one_by_one)
    counted.add(TASK, "modalix-redbox", TODAY, 10, 8)
    for index, runs in enumerate((10, 10, 10, 11, 11)):
        counted.add(TASK, f"modalix-{index}", TODAY, runs, 1 if index == 0 else 0)
    assert counted.suspects(TODAY) == one_by_one.suspects(TODAY)


def from_scratch(
    records: list[tuple[str, str, int, bool]],
    today: int,
    q: float,
    named: frozenset[tuple[str, str]] = frozenset(),
) -> list[Suspect]:
    """The rule applied to the raw records of the window, with none of FailureStats' kept state."""
    counts: dict[str, dict[str, list[int]]] = {}
    for task, device, day, failed in records:
        if today - WINDOW_DAYS < day <= today:
            cell = counts.setdefault(task, {}).setdefault(device, [0, 0])
            cell[0] += 1
            cell[1] += failed
    tested: list[tuple[str, str, int, int, int, int, int, float]] = []
    for task, devices in counts.items():
        task_runs = sum(runs for runs, _ in devices.values())
        task_failures = sum(failures for _, failures in devices.values())
        for device, (runs, failures) in devices.items():
            if runs >= MIN_RUNS and runs < task_runs:
                peer_runs, peer_failures = task_runs - runs, task_failures - failures
                p_value = fisher_greater(failures, runs - failures, peer_failures, peer_runs - peer_failures)
                tested.append(
                    (task, device, runs, failures, len(devices) - 1, peer_runs, peer_failures, p_value)
                )
    adjusted = benjamini_hochberg([row[-1] for row in tested])
    found = [
        Suspect(device, task, runs, failures, peers, peer_runs, peer_failures, p_value, q_value)
        for (task, device, runs, failures, peers, peer_runs, peer_failures, p_value), q_value in zip(
            tested, adjusted, strict=True
        )
        if q_value < q or (q_value < max(q, RELEASE_RATE) and (task, device) in named)
    ]
    return sorted(
        found, key=lambda suspect: (suspect.adjusted, suspect.p_value, suspect.task, suspect.device)
    )


@pytest.mark.parametrize(("seed", "q"), [(1, FALSE_DISCOVERY_RATE), (2, FALSE_DISCOVERY_RATE), (3, 0.2)])
def test_incremental_suspects_equal_a_computation_from_scratch(seed: int, q: float) -> None:
    rng = random.Random(seed)
    tasks = [f"org/repo:wf.yml:task-{index}" for index in range(6)]
    task_devices = {
        task: [f"board-{rng.randrange(40)}" for _ in range(rng.randrange(2, 15))] for task in tasks
    }
    flaky = {"board-flaky-1", "board-flaky-2"}
    for task in tasks[::2]:
        task_devices[task] += sorted(flaky)
    failure_rate = {task: rng.uniform(0.0, 0.2) for task in tasks}
    stats = FailureStats(q=q)
    records: list[tuple[str, str, int, bool]] = []
    today = TODAY
    checked_with_suspects = 0
    named: frozenset[tuple[str, str]] = frozenset()  # as a caller keeps them: last look's suspects
    kept = 0
    for step in range(6_000):
        if rng.random() < 0.004:
            today += rng.choice((1, 1, 2, 8))
        task = rng.choice(tasks)
        device = rng.choice(task_devices[task])
        day = today - rng.choice((0, 0, 0, 1, 3, 6, 7, 9))  # some late, some already out of the window
        failed = rng.random() < (0.6 if device in flaky else failure_rate[task])
        if stats.record(task, device, day, failed=failed):
            records.append((task, device, day, failed))
        if step % 50 == 0:
            expected = from_scratch(records, today, q, named)
            assert stats.suspects(today, named) == expected
            checked_with_suspects += bool(expected)
            kept += sum(1 for suspect in expected if suspect.adjusted >= q)
            named = frozenset((suspect.task, suspect.device) for suspect in expected)
    assert checked_with_suspects > 20  # the comparison saw suspects, not only empty lists
    if q < RELEASE_RATE:
        assert kept > 0  # and pairs named before that only the release rate kept
