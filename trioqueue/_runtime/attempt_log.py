"""One log line per attempt outcome, on ``trioqueue.worker`` (docs/usage.rst, "Logging").

Every attempt that ends says so once, when its outcome is written (or known to be nobody's
to write), with the job's fields and an ``event`` naming the outcome. The level says who
needs to see it: INFO for what a healthy queue does all day (a success, a retry, a release,
a snooze, a cancellation someone asked for), WARNING for what an operator should look at (a job that
failed for good, an attempt that lost its lease or whose write came too late). A worker
shows WARNING and worse unless told otherwise (``-v``, ``--log-level``), so by default it
logs every job that failed for good, with its traceback, and nothing per success.

A failure that an exception raised carries it as the record's ``exc_info``: a text
formatter prints the traceback under the line, and ``--log-format json`` puts it in the
record's ``exception`` field. The traceback is formatted only if a handler writes the
record; the attempt's own copy (bounded, stored with its outcome) is separate.
"""

from __future__ import annotations

import logging

from trioqueue._core.outcome import Outcome
from trioqueue._core.rules import OutcomeKind
from trioqueue._runtime.failures import Raised
from trioqueue._runtime.logfields import job_fields
from trioqueue._types import Job

__all__ = ["NOT_RECORDED", "log_outcome"]

log = logging.getLogger("trioqueue.worker")

NOT_RECORDED = "outcome not recorded: the attempt was reclaimed or the job finished elsewhere"


def log_outcome(
    job: Job,
    outcome: Outcome,
    *,
    fenced_out: bool,
    cancelled: bool,
    delay: float,
    raised: Raised | None,
) -> None:
    """The line of an attempt whose outcome is settled: ``outcome`` as written, unless its
    write was ``fenced_out``; ``cancelled``, a failure for good because a cancel was asked;
    ``delay``, a retry's or a snooze's; ``raised``, the exception the failure is, if one is."""
    kind = outcome.kind
    if fenced_out:
        log.warning("job %d: %s", job.id, NOT_RECORDED, extra=job_fields(job, "fenced_out"))
    elif kind is OutcomeKind.SUCCEEDED:
        if log.isEnabledFor(logging.INFO):  # the hot path: no fields built for nothing
            log.info(
                "job %d succeeded (attempt %d)",
                job.id,
                job.attempt,
                extra=job_fields(job, "succeeded"),
            )
    elif kind is OutcomeKind.RETRY:
        log.info(
            "job %d attempt %d failed, retry in %.2fs: %s",
            job.id,
            job.attempt,
            delay,
            outcome.message,
            exc_info=_exc_info(raised),
            extra=job_fields(job, "retry"),
        )
    elif kind is OutcomeKind.SNOOZE:
        log.info(
            "job %d snoozed for %gs (attempt %d not charged)",
            job.id,
            delay,
            job.attempt,
            extra=job_fields(job, "snoozed"),
        )
    elif kind is OutcomeKind.FAILED:
        level, event = (logging.INFO, "cancelled") if cancelled else (logging.WARNING, "failed")
        log.log(
            level,
            "job %d failed: %s",
            job.id,
            outcome.message,
            exc_info=_exc_info(raised),
            extra=job_fields(job, event),
        )
    else:
        level = logging.INFO if kind is OutcomeKind.RELEASE else logging.WARNING
        event = kind.value  # release or unavailable
        log.log(level, "job %d: %s", job.id, outcome.message, extra=job_fields(job, event))


def _exc_info(raised: Raised | None) -> BaseException | None:
    """The exception to print under the line: none for a handler that asked the process to
    exit (``SystemExit``, ``KeyboardInterrupt``: docs/protocol.rst §4.1), which is a request
    the worker carries out, not a crash; its attempt row keeps the traceback all the same."""
    if raised is None or not isinstance(raised.exception, Exception):
        return None
    return raised.exception
