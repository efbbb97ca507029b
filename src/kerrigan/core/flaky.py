"""Suspect devices: those that fail a workflow task significantly more often than their peers do.

The rule (DESIGN.md, "Device health"): over the job history of the last 7 days (:data:`WINDOW_DAYS`), a device
is *suspect* for a task when a one-sided Fisher exact test on the table (its failures, its passes; its peers'
failures, its peers' passes) says it fails more often than its peers, the other devices that ran the same
task, and the Benjamini-Hochberg adjusted p-value over all (device, task) pairs tested is below 0.01
(:data:`FALSE_DISCOVERY_RATE`). Only pairs with at least 5 runs on the device (:data:`MIN_RUNS`) and at least
one peer run are tested; the others are not counted in the correction's m either.

A pair once named stays named while its adjusted p-value is below 0.05 (:data:`RELEASE_RATE`): the caller
passes the pairs it named before. Without that, a board named on 6 failures of 8 was unnamed by the next
pass, and its next failure showed as the code's (the lab week of issue 31); a threshold to leave above the
one to enter keeps a name from flapping on each run near the edge.

The caller names tasks (``"octo/firmware:hil-smoke.yml:boot"``) and devices, and gives time as whole day
numbers: nothing here reads a clock. :class:`FailureStats` keeps the counts so that recording a job is O(1)
and a new list of suspects recomputes only the tasks that changed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext

WINDOW_DAYS = 7
MIN_RUNS = 5
FALSE_DISCOVERY_RATE = 0.01
RELEASE_RATE = 0.05  # a named pair stays named while its adjusted p-value is below this

_LN_2PI = math.log(2 * math.pi)
# The tail stops once what is left is under this share of the sum: rounding could not keep it anyway.
_NEGLIGIBLE = 2.0**-56
_SCREEN_MARGIN = 1e-3  # in log: the screen skips a device only when P(X = failures) > 1.001 q
_PI_TEXT = "3.14159265358979323846264338327950288419716939937510"


def _small_stirling_errors() -> tuple[float, ...]:
    """log(n!) - log(sqrt(2 pi n) (n/e)**n) for n = 0..15, at 40 digits so the float is correctly rounded.

    The subtraction cancels most of the digits, which is why this is not done with ``math.lgamma``.
    """
    values = [0.0]
    with localcontext() as context:
        context.prec = 40
        half_ln_2pi = (2 * Decimal(_PI_TEXT)).ln() / 2
        ln_factorial = Decimal(0)
        for n in range(1, 16):
            ln_n = Decimal(n).ln()
            ln_factorial += ln_n
            values.append(float(ln_factorial - (n + Decimal("0.5")) * ln_n + n - half_ln_2pi))
    return tuple(values)


_STIRLING_ERRORS = _small_stirling_errors()


def _stirling_error(n: int) -> float:
    """log(n!) - log(sqrt(2 pi n) (n/e)**n): a table to 15, then its asymptotic series (C. Loader, 2000)."""
    if n <= 15:
        return _STIRLING_ERRORS[n]
    nn = float(n * n)
    # Each cut-off keeps the first omitted term of the series below 1e-16 of the result.
    if n > 500:
        return (1 / 12 - (1 / 360) / nn) / n
    if n > 80:
        return (1 / 12 - (1 / 360 - (1 / 1260) / nn) / nn) / n
    if n > 35:
        return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680) / nn) / nn) / nn) / n
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - (1 / 1188) / nn) / nn) / nn) / nn) / n


def _deviance(x: int, mean: float) -> float:
    """x log(x / mean) + mean - x, by its series when x is near the mean, where the direct form cancels."""
    if abs(x - mean) < 0.1 * (x + mean):
        v = (x - mean) / (x + mean)
        total = (x - mean) * v
        term = 2 * x * v
        v2 = v * v
        j = 3
        while True:
            term *= v2
            following = total + term / j
            if following == total:
                return total
            total = following
            j += 2
    return x * math.log(x / mean) + mean - x


def _log_binomial(x: int, size: int, draws: int, population: int) -> float:
    """log P(Binomial(size, draws / population) = x), for 0 <= x <= size and 0 < draws < population.

    Loader's saddle-point form: unlike differences of ``lgamma`` (values near 1e7 for a million runs, so
    errors near 1e-9), it keeps the relative error of the probability near 1e-15 whatever the size.
    """
    mean = size * draws / population
    mean_other = size * (population - draws) / population
    if x == 0:
        return (
            -_deviance(size, mean_other) - mean
            if draws < 0.1 * population
            else size * math.log1p(-draws / population)
        )
    if x == size:
        if population - draws < 0.1 * population:
            return -_deviance(size, mean) - mean_other
        return size * math.log(draws / population)
    exponent = (
        _stirling_error(size)
        - _stirling_error(x)
        - _stirling_error(size - x)
        - _deviance(x, mean)
        - _deviance(size - x, mean_other)
    )
    return exponent - 0.5 * (_LN_2PI + math.log(x) + math.log1p(-x / size))


def _log_hypergeometric(x: int, population: int, successes: int, draws: int) -> float:
    """log P(X = x) for X the successes among ``draws`` taken without replacement (R's ``dhyper``)."""
    return (
        _log_binomial(x, successes, draws, population)
        + _log_binomial(draws - x, population - successes, draws, population)
        - _log_binomial(draws, population, draws, population)
    )


def hypergeometric_tail(k: int, population: int, successes: int, draws: int) -> float:
    """P(X >= k) for X the successes among ``draws`` taken without replacement from ``population``."""
    if not 0 <= successes <= population or not 0 <= draws <= population:
        raise ValueError(f"impossible hypergeometric: {successes} successes, {draws} draws of {population}")
    others = population - successes
    low, high = max(0, draws - others), min(draws, successes)
    if k <= low:
        return 1.0
    if k > high:
        return 0.0
    # Sum the smaller side, so the answer keeps its relative precision however small it is; each term
    # follows from the last by an exact ratio, and the pmf is log-concave, so once the ratio r is below 1
    # what is left is at most term * r / (1 - r).
    if k * population > draws * successes:  # k above the mean: sum the upper tail upward
        x = k
        term = math.exp(_log_hypergeometric(x, population, successes, draws))
        total = term
        while x < high:
            ratio = (successes - x) * (draws - x) / ((x + 1) * (others - draws + x + 1))
            if ratio < 1 and term * ratio <= (1 - ratio) * total * _NEGLIGIBLE:
                break
            term *= ratio
            total += term
            x += 1
        return min(1.0, total)
    x = k - 1  # k at or below the mean: one minus the lower tail, summed downward
    term = math.exp(_log_hypergeometric(x, population, successes, draws))
    total = term
    while x > low:
        ratio = x * (others - draws + x) / ((successes - x + 1) * (draws - x + 1))
        if ratio < 1 and term * ratio <= (1 - ratio) * total * _NEGLIGIBLE:
            break
        term *= ratio
        total += term
        x -= 1
    return max(0.0, 1.0 - total)


def fisher_greater(failures: int, passes: int, peer_failures: int, peer_passes: int) -> float:
    """One-sided Fisher exact p-value that the first row (a device) fails more often than the second."""
    if min(failures, passes, peer_failures, peer_passes) < 0:
        raise ValueError("a 2x2 table of counts cannot hold a negative count")
    runs = failures + passes
    return hypergeometric_tail(failures, runs + peer_failures + peer_passes, failures + peer_failures, runs)


def benjamini_hochberg(p_values: Sequence[float], m: int | None = None) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, in the order given.

    ``m`` is the number of hypotheses tested, when only the smallest p-values are passed: an adjusted value
    below the rate is the same as it would be with all m given.
    """
    count = len(p_values) if m is None else m
    if count < len(p_values):
        raise ValueError(f"m={count} is fewer than the {len(p_values)} p-values given")
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted = [0.0] * len(p_values)
    running = 1.0
    for rank in range(len(order), 0, -1):  # step-up: each is the smallest m p / rank at or after it
        index = order[rank - 1]
        running = min(running, count * p_values[index] / rank)
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True, slots=True)
class Suspect:
    """A device that fails a task more often than its peers, with the counts and the test's figures."""

    device: str
    task: str
    runs: int
    failures: int
    peers: int  # other devices that ran the task in the window
    peer_runs: int
    peer_failures: int
    p_value: float
    adjusted: float  # Benjamini-Hochberg adjusted p-value

    def sentence(self) -> str:
        """What a failed job's check run says, e.g. "... failed 8 of 10 runs of this task in 7 days; ..."."""
        return (
            f"{self.device} failed {self.failures} of {_runs(self.runs)} of this task in {WINDOW_DAYS} days; "
            f"its {self.peers} {'peer' if self.peers == 1 else 'peers'} failed {self.peer_failures} of "
            f"{self.peer_runs}"
        )


def _runs(count: int) -> str:
    return f"{count} {'run' if count == 1 else 'runs'}"


@dataclass(slots=True)
class _Pair:
    """One device's counts for one task: over the retained days, and day by day for ``expire``."""

    runs: int = 0
    failures: int = 0
    # Day by day in dicts of plain ints: the garbage collector does not track those, and a week of history
    # is hundreds of thousands of them.
    day_runs: dict[int, int] = field(default_factory=dict)
    day_failures: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Task:
    """One task's counts over the retained days, and the p-values last computed from them."""

    runs: int = 0
    failures: int = 0
    devices: dict[str, _Pair] = field(default_factory=dict)
    tested: int = 0  # pairs tested when the p-values were last computed: this task's share of m
    small: list[tuple[float, str]] = field(default_factory=list)  # (p, device), p below the release rate


class FailureStats:
    """Pass and fail counts per task, device and day, kept so that suspects are cheap to recompute.

    ``record`` is O(1); ``expire`` visits every (task, device) pair once. ``suspects`` recomputes the
    p-values of the tasks recorded or expired since the last call (one job changes the peers of every device
    of its task) and keeps, per task, only the p-values below the release rate: no other can be below it
    adjusted (Benjamini-Hochberg multiplies a p-value by m / rank, never less than 1).
    """

    def __init__(self, q: float = FALSE_DISCOVERY_RATE, release: float | None = None) -> None:
        """``release`` defaults to :data:`RELEASE_RATE`, or to ``q`` when that is looser."""
        if not 0 < q <= 1:
            raise ValueError(f"the false discovery rate must be in (0, 1], not {q}")
        release = max(q, RELEASE_RATE) if release is None else release
        if not q <= release <= 1:
            raise ValueError(f"the release rate must be in [{q}, 1], not {release}")
        self.q = q
        self.release = release
        self._tasks: dict[str, _Task] = {}
        self._changed: set[str] = set()
        self._tested = 0  # m: the sum of every task's ``tested``
        self._oldest: int | None = None  # days before this were expired; their late records are dropped
        self._newest: int | None = None  # the latest day counted

    def record(self, task: str, device: str, day: int, *, failed: bool) -> bool:
        """Count one finished job; ``False`` (and nothing counted) when its day was already expired."""
        return self.add(task, device, day, 1, 1 if failed else 0)

    def add(self, task: str, device: str, day: int, runs: int, failures: int) -> bool:
        """Count ``runs`` jobs of a day, ``failures`` of them failed: history as a store counts it.

        ``False`` (and nothing counted) when the day was already expired.
        """
        if runs < 1 or not 0 <= failures <= runs:
            raise ValueError(f"{failures} failures of {runs} runs")
        if self._oldest is not None and day < self._oldest:
            return False
        stats = self._tasks.get(task)
        if stats is None:
            stats = self._tasks[task] = _Task()
        pair = stats.devices.get(device)
        if pair is None:
            pair = stats.devices[device] = _Pair()
        day_runs = pair.day_runs
        day_runs[day] = day_runs.get(day, 0) + runs
        pair.runs += runs
        stats.runs += runs
        if failures:
            day_failures = pair.day_failures
            day_failures[day] = day_failures.get(day, 0) + failures
            pair.failures += failures
            stats.failures += failures
        if self._newest is None or day > self._newest:
            self._newest = day
        self._changed.add(task)
        return True

    def expire(self, oldest_day: int) -> None:
        """Forget the days before ``oldest_day``; records for them that arrive later are dropped."""
        if self._oldest is not None and oldest_day <= self._oldest:
            return
        self._oldest = oldest_day
        if self._newest is not None and self._newest < oldest_day:
            self._newest = None
        for task, stats in self._tasks.items():
            emptied = []
            for device, pair in stats.devices.items():
                old = [day for day in pair.day_runs if day < oldest_day]
                if not old:
                    continue
                for day in old:
                    runs = pair.day_runs.pop(day)
                    failures = pair.day_failures.pop(day, 0)
                    pair.runs -= runs
                    pair.failures -= failures
                    stats.runs -= runs
                    stats.failures -= failures
                if not pair.day_runs:
                    emptied.append(device)
                self._changed.add(task)
            for device in emptied:
                del stats.devices[device]

    def suspects(self, today: int, named: Collection[tuple[str, str]] = frozenset()) -> list[Suspect]:
        """The suspects over the days ``today - 6`` to ``today``, most significant first: the (task, device)
        pairs whose adjusted p-value is below the rate, and those of ``named`` (named before) still below
        the release rate.

        Expires the days before the window first. Raises ``ValueError`` if a job was recorded after ``today``:
        the window would silently hold it.
        """
        if self._newest is not None and self._newest > today:
            raise ValueError(f"jobs were recorded on day {self._newest}, after today ({today})")
        self.expire(today - WINDOW_DAYS + 1)
        for task in self._changed:
            self._recompute(task)
        self._changed.clear()
        candidates = [
            (p_value, task, device) for task, stats in self._tasks.items() for p_value, device in stats.small
        ]
        candidates.sort()
        adjusted = benjamini_hochberg([p_value for p_value, _, _ in candidates], self._tested)
        found = []
        for (p_value, task, device), q_value in zip(candidates, adjusted, strict=True):
            if q_value < self.q or (q_value < self.release and (task, device) in named):
                stats = self._tasks[task]
                pair = stats.devices[device]
                found.append(
                    Suspect(
                        device,
                        task,
                        pair.runs,
                        pair.failures,
                        len(stats.devices) - 1,
                        stats.runs - pair.runs,
                        stats.failures - pair.failures,
                        p_value,
                        q_value,
                    )
                )
        found.sort(key=lambda suspect: (suspect.adjusted, suspect.p_value, suspect.task, suspect.device))
        return found

    def _recompute(self, task: str) -> None:
        stats = self._tasks[task]
        population, successes, q = stats.runs, stats.failures, self.release
        lgamma = math.lgamma
        # A screen before the exact test: P(X = failures) alone, from lgamma, is a lower bound on the tail
        # at a fraction of its cost; where it is over the release rate (most devices) the p-value is too.
        # lgamma's error here (about 1e-8 for a million runs) is far inside the margin.
        screen = math.log(q) + _SCREEN_MARGIN
        shared = lgamma(successes + 1) + lgamma(population - successes + 1) - lgamma(population + 1)
        tested = 0
        small = []
        for device, pair in stats.devices.items():
            runs, failures = pair.runs, pair.failures
            if runs < MIN_RUNS or runs == population:  # too few runs, or no peer to compare with
                continue
            tested += 1
            peer_failures = successes - failures
            log_point = (
                shared
                + lgamma(runs + 1)
                + lgamma(population - runs + 1)
                - lgamma(failures + 1)
                - lgamma(runs - failures + 1)
                - lgamma(peer_failures + 1)
                - lgamma(population - runs - peer_failures + 1)
            )
            if log_point > screen:
                continue
            p_value = hypergeometric_tail(failures, population, successes, runs)
            if p_value < q:
                small.append((p_value, device))
        self._tested += tested - stats.tested
        stats.tested = tested
        stats.small = small
        if not stats.devices:
            del self._tasks[task]
