"""A job's life on a runner host, in parts: whose it is (:mod:`.holders`), what a poll hands a runner host
(:mod:`.offers`), its transitions (:mod:`.lifecycle`), its output log (:mod:`.output`) and its records for
reports (:mod:`.records`). Callers import from the part; the names re-exported here are the runner calls
the tests drive through ``jobs.<call>``."""

from kerrigan.store.jobs.holders import NotYoursError, owned_job
from kerrigan.store.jobs.lifecycle import (
    Transition,
    accept,
    finish,
    refuse,
    request_cancel,
    start,
    withdrawn,
)
from kerrigan.store.jobs.offers import Offer, held_jobs, observe_runner_waits, offers, runner_requests
from kerrigan.store.jobs.output import CUT_SEQ, append_output, output, output_tail, output_tails
from kerrigan.store.jobs.records import JobRecord

__all__ = [
    "CUT_SEQ",
    "JobRecord",
    "NotYoursError",
    "Offer",
    "Transition",
    "accept",
    "append_output",
    "finish",
    "held_jobs",
    "observe_runner_waits",
    "offers",
    "output",
    "output_tail",
    "output_tails",
    "owned_job",
    "refuse",
    "request_cancel",
    "runner_requests",
    "start",
    "withdrawn",
]
