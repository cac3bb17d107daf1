"""The fields of a log record about one job, for logging's ``extra=``.

The message texts stay as they are (people read them); these fields are for machines: a
formatter that knows them (``trioqueue --log-format json``, docs/usage.rst "Logging")
writes them as fields of their own, and every other formatter ignores them.
"""

from __future__ import annotations

from typing import Any

from trioqueue._types import Job


def job_fields(job: Job | int, event: str, *, queue: str | None = None) -> dict[str, Any]:
    """``extra=`` for a record about ``job``: ``job_id``, ``queue``, ``attempt`` and ``event``
    (a short name of what happened, e.g. ``succeeded``). Given only a job id (where the job
    itself is not at hand), it is ``job_id`` and ``event``, and the job's ``queue`` when
    known. Always the job's own queue, never the pool's: a scheduling pass of a pool on
    one queue enqueues jobs on others."""
    if isinstance(job, int):
        return {"job_id": job, "event": event} | ({} if queue is None else {"queue": queue})
    return {"job_id": job.id, "queue": job.queue, "attempt": job.attempt, "event": event}


def pool_fields(queue: str, event: str) -> dict[str, Any]:
    """``extra=`` for a record about a whole pool: its ``queue`` and the ``event``, so that
    the records of several pools in one process (``trioqueue.run_workers``) tell apart."""
    return {"queue": queue, "event": event}
