"""The server's own counters and histograms, per process (Prometheus sums them over processes).

They live in prometheus-client's default registry beside its process and Python figures; the lab's
state (queue, devices, runner hosts, check runs), read from the database, is added by
:mod:`kerrigan.web.metrics`. Names follow Prometheus's conventions: counters end in ``_total``, durations
are in seconds. docs/operations.md lists them all.
"""

from __future__ import annotations

import threading
from typing import Final

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# A ``_created`` series beside every counter doubles what a scrape renders (one per device, with 10,000
# devices) for a figure Prometheus does not need: counter resets show in the counters themselves.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Webhook answers are milliseconds; a slow one is a database waiting on a lock.
_ACK_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# Jobs wait from seconds (a free board) to hours (a busy pool, a long queue-wait limit).
_WAIT_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0)

WEBHOOK_DELIVERIES: Final = Counter(
    "kerrigan_webhook_deliveries",
    "Webhook deliveries by event and what became of them: processed, ignored (no route), retrying, failed.",
    ["event", "outcome"],
)
WEBHOOK_ACK: Final = Histogram(
    "kerrigan_webhook_ack_seconds",
    "Time from a signed delivery's arrival to its answer (the 202 once it is stored).",
    buckets=_ACK_BUCKETS,
)
SESSIONS: Final = Counter(
    "kerrigan_sessions", "Sessions completed, by conclusion, in this process.", ["conclusion"]
)
JOBS: Final = Counter(
    "kerrigan_jobs",
    "Jobs ended, by state and failure class (empty when it did not fail), in this process.",
    ["state", "failure_class"],
)
TESTS: Final = Counter(
    "kerrigan_tests",
    "Tests in the JUnit XML results jobs' runners sent, by outcome: passed, failed, error, skipped.",
    ["outcome"],
)
for _outcome in ("passed", "failed", "error", "skipped"):
    TESTS.labels(_outcome)  # each outcome is 0 from the start, not absent until a test ends so
DEVICE_RECOVERIES: Final = Counter(
    "kerrigan_device_recoveries",
    "Recoveries of a board ended, by device and outcome: recovered, failed (another follows), bad (the "
    "last of three failed in a row, or its power silent for an hour), waiting_for_power (its power did not "
    "answer: another follows, not counted).",
    ["device", "outcome"],
)
QUEUE_WAIT: Final = Histogram(
    "kerrigan_queue_wait_seconds",
    "Time from a job's queueing to its start on a device.",
    buckets=_WAIT_BUCKETS,
)


class DeviceBusy:
    """``kerrigan_device_busy_seconds_total{device}``: one series per device that ran a job, rendered here.

    prometheus-client spends about 10 µs a sample encoding; with a series per device of a big lab that was
    most of a scrape (10,000 devices: 170 ms). Each device's line prefix is escaped once, when its first job
    ends, and a scrape joins the lines (about 5 ms for 10,000).
    """

    NAME: Final = "kerrigan_device_busy_seconds"
    HELP: Final = "Seconds devices ran jobs (counted when each job ends)."

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._prefixes: dict[str, str] = {}
        self._lock = threading.Lock()  # a scrape may render while a commit's listener counts

    def inc(self, device: str, seconds: float) -> None:
        """Add ``seconds`` (0 or more) to ``device``'s total."""
        with self._lock:
            if device not in self._seconds:
                self._prefixes[device] = f'{self.NAME}_total{{device="{_label_value(device)}"}} '
                self._seconds[device] = 0.0
            self._seconds[device] += max(0.0, seconds)

    def value(self, device: str) -> float:
        """``device``'s total so far (0 for one that has run nothing)."""
        return self._seconds.get(device, 0.0)

    def render(self, *, openmetrics: bool) -> str:
        """The family in the text format (0.0.4) or in OpenMetrics."""
        with self._lock:
            lines = [prefix + repr(self._seconds[device]) for device, prefix in self._prefixes.items()]
        if openmetrics:
            head = f"# HELP {self.NAME} {self.HELP}\n# TYPE {self.NAME} counter\n"
        else:
            head = f"# HELP {self.NAME}_total {self.HELP}\n# TYPE {self.NAME}_total counter\n"
        return head + "".join(line + "\n" for line in lines)


def _label_value(text: str) -> str:
    """A label value as both formats write it: backslash, double quote and newline escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


DEVICE_BUSY: Final = DeviceBusy()
GITHUB_REQUESTS: Final = Counter(
    "kerrigan_github_requests",
    "Requests to GitHub's API by operation (method and route template) and status (0: no answer).",
    ["operation", "status"],
)
GITHUB_RATE_REMAINING: Final = Gauge(
    "kerrigan_github_rate_remaining",
    "Requests the installation has left this hour, as GitHub's last answer said (app: the App's own).",
    ["installation"],
)
GITHUB_RATE_RESET: Final = Gauge(
    "kerrigan_github_rate_reset_timestamp_seconds",
    "When the installation's hour resets (Unix time), as GitHub's last answer said: the two gauges beside it "
    "are stale once it has passed.",
    ["installation"],
)
GITHUB_RATE_LIMIT: Final = Gauge(
    "kerrigan_github_rate_limit",
    "The installation's hourly allowance, as GitHub's last answer said (app: the App's own).",
    ["installation"],
)
