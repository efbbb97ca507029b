"""The server's own counters and histograms, per process (Prometheus sums them over processes).

They live in prometheus-client's default registry beside its process and Python figures; the lab's
state (queue, devices, runner hosts, check runs), read from the database, is added by
:mod:`kerrigan.web.metrics`. Names follow Prometheus's conventions: counters end in ``_total``, durations
are in seconds. docs/operations.md lists them all.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

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
QUEUE_WAIT: Final = Histogram(
    "kerrigan_queue_wait_seconds",
    "Time from a job's queueing to its start on a device.",
    buckets=_WAIT_BUCKETS,
)
DEVICE_BUSY: Final = Counter(
    "kerrigan_device_busy_seconds", "Seconds devices ran jobs (counted when each job ends).", ["device"]
)
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
GITHUB_RATE_LIMIT: Final = Gauge(
    "kerrigan_github_rate_limit",
    "The installation's hourly allowance, as GitHub's last answer said (app: the App's own).",
    ["installation"],
)
