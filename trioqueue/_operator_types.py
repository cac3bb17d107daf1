"""Plain data of what operators read about past attempts and the store: attempt history,
timings, the audit log, table health, retention and the maintainer (docs/dashboard.rst,
docs/api.rst)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, final

__all__ = [
    "ATTEMPT_OUTCOMES",
    "DEFAULT_KEEP_AUDIT",
    "DEFAULT_KEEP_FAILED",
    "DEFAULT_KEEP_SUCCEEDED",
    "AttemptBucket",
    "AttemptInfo",
    "AttemptOutcome",
    "AuditEntry",
    "DeadLetter",
    "DeadLetterSummary",
    "MaintainerInfo",
    "PruneBatch",
    "QueueTimings",
    "Retention",
    "RetentionPolicy",
    "TableHealth",
    "TableSize",
]

#: How one attempt ended, as its attempt history says (a succeeded attempt is its job's row,
#: the others rows of the attempts table):
#:
#: - ``succeeded``: acknowledged; ``retry``: failed, back in the queue for another attempt;
#: - ``failed``: failed for good; ``cancelled``: failed for good because a cancel was asked
#:   (the job's status is ``failed``, and ``JobInfo.cancelled`` is True);
#: - ``released``: given back without charging the attempt (shutdown, no connection);
#: - ``snoozed``: given back without charging the attempt, to run after a delay: the
#:   handler answered ``Snooze`` (docs/protocol.rst §17);
#: - ``awaiting``: given back without charging the attempt, to wait for the job's
#:   children: the handler answered ``AwaitChildren`` (docs/protocol.rst §22);
#: - ``lost``: its lease lapsed and another claim took the job over (written by that claim:
#:   the attempt that lost its lease writes nothing, docs/protocol.rst §14).
AttemptOutcome = Literal[
    "succeeded", "retry", "failed", "cancelled", "released", "snoozed", "awaiting", "lost"
]  # fmt: skip
ATTEMPT_OUTCOMES: tuple[AttemptOutcome, ...] = (
    "succeeded", "retry", "failed", "cancelled", "released", "snoozed", "awaiting", "lost"
)  # fmt: skip


@final
@dataclass(frozen=True, slots=True)
class AttemptInfo:
    """One attempt of a job, from its attempt history (``Backend.list_attempts``).

    Times are the database's (aware, UTC). ``started_at`` and ``run_seconds`` come from the
    worker's monotonic clock, offset from ``claimed_at``; None where the handler never
    started (a claim hook failed, the lease was lost first) or the attempt was ``lost``.
    """

    job_id: int
    attempt: int  # 1 for the first attempt (Job.attempt)
    claim_seq: int
    outcome: AttemptOutcome
    worker_id: str | None  # the pool that held the lease
    host: str | None  # that pool's host, as it registered
    claimed_at: datetime
    started_at: datetime | None  # the handler's start
    finished_at: datetime  # when the outcome was written (for ``lost``: the takeover)
    run_seconds: float | None  # the handler's run time
    wait_seconds: float | None  # from visible (enqueued, delay over, put back) to claimed
    error_type: str | None  # the exception's qualified class name, for a failure
    error: str | None  # "Type: message", as ``JobInfo.last_error`` had it
    traceback: str | None  # bounded (trioqueue.MAX_TRACEBACK_CHARS), cut with a marker


@final
@dataclass(frozen=True, slots=True)
class QueueTimings:
    """Run time and wait percentiles of one queue's attempts over a recent window
    (``Backend.queue_timings``), from the finished attempts of its attempt history.

    Percentiles are continuous (linear interpolation, PostgreSQL's ``percentile_cont``);
    None where no attempt of the window had the value.
    """

    queue: str
    attempts: int  # attempts finished in the window (every outcome but ``lost``)
    run_p50: float | None
    run_p95: float | None
    run_p99: float | None
    wait_p50: float | None
    wait_p95: float | None
    wait_p99: float | None


@final
@dataclass(frozen=True, slots=True)
class AttemptBucket:
    """Attempts that finished in one time bucket of ``Backend.attempt_history``: the charts
    of throughput, failures, run time and wait."""

    start: datetime
    succeeded: int
    failed: int  # outcome failed or retry
    cancelled: int
    run_p50: float | None
    run_p95: float | None
    wait_p50: float | None
    wait_p95: float | None


@final
@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action taken through the dashboard or its JSON API (``Backend.list_audit``)."""

    id: int
    at: datetime
    action: str  # e.g. "job.cancel", "jobs.retry_matching", "queue.pause", "schedule.run_now"
    target: str  # what it acted on: a job id, a queue, a schedule, or a filter's text
    session: str  # who: the session's short id ("token" or "open" where there is none)
    detail: dict[str, Any]  # the action's arguments and result (counts, ids)


@final
@dataclass(frozen=True, slots=True)
class TableSize:
    """One table or index of the store (``TableHealth``)."""

    name: str
    total_bytes: int
    live_rows: int | None  # None for an index
    dead_rows: int | None
    last_autovacuum: datetime | None
    last_autoanalyze: datetime | None


@final
@dataclass(frozen=True, slots=True)
class TableHealth:
    """The store's tables and indexes, and its oldest unfinished work
    (``Backend.table_health``): what an operator watches for bloat."""

    tables: tuple[TableSize, ...]
    indexes: tuple[TableSize, ...]
    oldest_running_since: datetime | None  # the longest-running job's claim
    oldest_running_id: int | None
    oldest_ready_since: datetime | None  # the job ready the longest: when it became visible
    oldest_ready_id: int | None


#: Retention's defaults (docs/protocol.rst §15), in seconds: succeeded jobs are kept a week,
#: failed ones (cancellations too) thirty days, audit entries ninety days.
DEFAULT_KEEP_SUCCEEDED = 7 * 86_400.0
DEFAULT_KEEP_FAILED = 30 * 86_400.0
DEFAULT_KEEP_AUDIT = 90 * 86_400.0


@final
@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long one queue's finished jobs are kept (``Backend.get_retention``).

    Each is seconds after ``finished_at``, or None: kept for ever. ``failed`` covers every
    job that failed for good, cancellations included. A job that is not finished is never
    pruned, whatever its age (docs/protocol.rst §15).
    """

    queue: str | None  # None: the default, for every queue without a policy of its own
    succeeded: float | None
    failed: float | None


@final
@dataclass(frozen=True, slots=True)
class Retention:
    """Every retention setting of a store (``Backend.get_retention``)."""

    default: RetentionPolicy  # queue None
    queues: tuple[RetentionPolicy, ...]  # the queues with a policy of their own, by name
    audit: float | None  # audit entries are kept this many seconds; None: for ever

    def for_queue(self, queue: str) -> RetentionPolicy:
        """The policy that applies to ``queue``: its own, else the default."""
        for policy in self.queues:
            if policy.queue == queue:
                return policy
        return self.default


@final
@dataclass(frozen=True, slots=True)
class PruneBatch:
    """What one bounded batch of retention deleted (``Backend.prune_retained``)."""

    deleted: dict[tuple[str, str], int]  # (queue, "succeeded" | "failed") -> jobs deleted
    audit_deleted: int  # audit entries past their retention
    more: bool  # the batch hit its limit: another batch would find more
    oldest_finished_age: float | None  # seconds since the oldest finished job still kept

    @property
    def jobs_deleted(self) -> int:
        return sum(self.deleted.values())


@final
@dataclass(frozen=True, slots=True)
class RetentionPreview:
    """What a prune would delete now, counted without deleting
    (``Backend.retention_preview``, ``trioqueue prune --dry-run``)."""

    due: dict[tuple[str, str], int]  # (queue, "succeeded" | "failed") -> jobs a pass deletes
    audit_due: int  # audit entries past their retention (0 for an age prune)

    @property
    def jobs_due(self) -> int:
        return sum(self.due.values())


@final
@dataclass(frozen=True, slots=True)
class MaintainerInfo:
    """The maintainer lease of a store (``Backend.maintainer``): which pool prunes."""

    holder: str  # the pool's worker_id
    seq: int  # the lease's fence, incremented by each claim of it
    acquired_at: datetime
    expires_at: datetime  # the lease runs out then unless renewed


@final
@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A job that failed for good, as ``Backend.list_dead_letters`` reads it
    (docs/protocol.rst §19): a cancellation is one too, with ``cancelled`` True."""

    id: int
    queue: str
    attempts: int
    max_attempts: int
    priority: int
    last_error: str | None  # its first MAX_DEAD_ERROR characters (show ID reads it all)
    error_type: str | None  # the last attempt's qualified class name; None: it recorded none
    cancelled: bool
    created_at: datetime
    finished_at: datetime


@final
@dataclass(frozen=True, slots=True)
class DeadLetterSummary:
    """How many dead letters match, and how many per queue and per error type
    (``Backend.dead_letter_summary``). Counted among the newest ``sample`` that match:
    with ``capped`` True more matched, ``total`` is then the sample's size (a lower
    bound) and the breakdowns are of that sample."""

    total: int
    capped: bool
    by_queue: tuple[tuple[str, int], ...]  # most first, then by name
    by_error_type: tuple[tuple[str | None, int], ...]  # None: no error type recorded
