"""The Backend protocol: what the runtime needs from a job store.

Both backends (memory and PostgreSQL) implement it, and ``trioqueue.testing`` holds a
conformance suite any implementation can run. Every write about an attempt is *fenced*: it
names ``(job_id, claim_seq)`` and does nothing when the row's ``claim_seq`` differs or the
row is already finished (invariant I9). The runtime never imports a concrete backend.

Transactional mode is an optional extension: a backend whose ``supports_transactions`` is
True also implements :class:`TransactionalBackend`. Its ``job_transaction()`` gives one
handler a connection inside an open transaction, and commits the job's fenced ack in that
same transaction (invariant I13: the handler's effects commit exactly once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, cast

import trio

from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import BackendError
from trioqueue._operator_types import (
    AttemptBucket,
    AttemptInfo,
    AuditEntry,
    DeadLetter,
    DeadLetterSummary,
    MaintainerInfo,
    PruneBatch,
    QueueTimings,
    Retention,
    RetentionPolicy,
    RetentionPreview,
    TableHealth,
)
from trioqueue._types import (
    Ack,
    BackendStatistics,
    ChildWait,
    ChildWaitWrite,
    Claimed,
    Enqueued,
    Failure,
    FinishedBucket,
    JobCount,
    JobDependencies,
    JobInfo,
    JobSort,
    JobStatus,
    Notice,
    OnDependencyFailure,
    OnDuplicate,
    PoolBeat,
    PoolRegistration,
    QueueStats,
    Recorded,
    Release,
    ScheduleInfo,
    Snoozed,
    SnoozeWrite,
    WorkerInfo,
)

#: Names of the operations counted by ``statistics().calls`` and targeted by fault injection.
#: ``"beat"`` is a pool's heartbeat sent alone (``renew`` with a beat and no items); a beat
#: riding on a renewal is part of that ``"renew"`` statement. ``"clock"`` is the probe of
#: the database's clock a pool sends while it has stopped claiming (docs/protocol.rst §8).
OPERATIONS = (
    "claim",
    "renew",
    "ack",
    "fail",
    "release",
    "snooze",
    "await_children",
    "enqueue",
    "cancel",
    "beat",
    "register_pool",
    "unregister_pool",
    "enqueue_due",
    "clock",
)

#: Operators' calls both backends count in ``statistics().calls`` besides :data:`OPERATIONS`.
READ_OPERATIONS = (
    "get_job",
    "get_jobs",
    "list_jobs",
    "count_jobs",
    "delete_job",
    "list_workers",
    "finished_history",
    "counts",
    "queue_stats",
    "retry",
    "retry_matching",
    "delete_matching",
    "set_schedule",
    "delete_schedule",
    "list_schedules",
    "set_schedule_enabled",
    "run_schedule_now",
    "record_audit",
    "list_audit",
    "table_health",
    "pause_queue",
    "resume_queue",
    "set_queue_limits",
    # the attempts table (docs/protocol.rst §14)
    "list_attempts",
    "queue_timings",
    "attempt_history",
    # retention and the maintainer (docs/protocol.rst §15)
    "get_retention",
    "set_retention",
    "clear_retention",
    "set_audit_retention",
    "maintainer",
    "retention_preview",
    # dead letters (docs/protocol.rst §19)
    "list_dead_letters",
    "dead_letter_summary",
    # dependencies (docs/protocol.rst §21)
    "dependencies",
)

#: The maintainer's calls (docs/protocol.rst §15), counted like :data:`OPERATIONS`.
MAINTENANCE_OPERATIONS = (
    "claim_maintainer",
    "renew_maintainer",
    "release_maintainer",
    "prune_retained",
)


class Backend(Protocol):
    """A job store the worker pool can run on."""

    #: True when handlers can get ``ctx.connection`` (transactional mode).
    supports_transactions: bool

    async def migrate(self) -> list[str]:
        """Create or upgrade the backend's storage; idempotent (a no-op in memory).

        Returns the names of the migrations it applied (none when up to date).
        """
        ...

    # -- producers and operators ---------------------------------------------------------

    async def enqueue(
        self,
        queue: str,
        payload: Any,
        *,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        dedup_key: str | None = None,
        group: str | None = None,
        on_duplicate: OnDuplicate = "keep",
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: OnDependencyFailure = "fail",
        parent_id: int | None = None,
    ) -> int: ...

    async def enqueue_many(
        self,
        queue: str,
        payloads: Sequence[Any],
        *,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        dedup_key: str | None = None,
        group: str | None = None,
        on_duplicate: OnDuplicate = "keep",
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: OnDependencyFailure = "fail",
        parent_id: int | None = None,
    ) -> list[int]: ...

    async def enqueue_deduplicated(
        self,
        queue: str,
        payload: Any,
        *,
        dedup_key: str,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        group: str | None = None,
        on_duplicate: OnDuplicate = "keep",
    ) -> Enqueued:
        """:meth:`enqueue` with a ``dedup_key``, saying what happened (unpacks as
        ``(id, added)``; ``outcome`` tells kept, replaced, debounced and running apart:
        docs/protocol.rst §18)."""
        ...

    async def cancel(self, job_id: int) -> bool: ...

    async def dependencies(self, job_id: int) -> JobDependencies:
        """The job's dependencies and dependents with their states (docs/protocol.rst §21);
        ``UnknownJobError`` for an unknown id."""
        ...

    async def counts(self) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state, as :class:`JobInfo` reports states."""
        ...

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue: :meth:`counts` plus the age of its oldest ready job, from one snapshot
        (queues with no jobs are left out). Finished counts may be estimates on a big
        table: ``QueueStats.estimated`` says so."""
        ...

    async def retry(self, job_id: int) -> bool:
        """Put a failed job back on its queue for one more attempt; False if not failed."""
        ...

    async def pause_queue(self, queue: str) -> None:
        """Stop every pool claiming from ``queue`` (persisted; running jobs go on)."""
        ...

    async def resume_queue(self, queue: str) -> None:
        """Let ``queue`` be claimed again; idle pools hear of it at once (a notice)."""
        ...

    async def set_queue_limits(
        self, queue: str, *, max_running: int | None = None, max_per_second: float | None = None
    ) -> None:
        """Cap ``queue`` across every pool: jobs under a live lease at once, and claims per
        second. None lifts a limit; both are set by each call (docs/flow.rst)."""
        ...

    async def get_job(self, job_id: int, *, fresh: bool = False) -> JobInfo:
        """A snapshot of one job (a payload that cannot be decoded comes back as an
        :class:`~trioqueue.UndecodablePayload`, here and in :meth:`list_jobs`).

        ``fresh=True`` asks for the primary's state where a backend reads a replica
        (PostgreSQL's ``read_dsn``); a backend without one is always fresh."""
        ...

    async def get_jobs(
        self, job_ids: Sequence[int], *, preview: int | None = None, fresh: bool = False
    ) -> dict[int, JobInfo]:
        """Snapshots of many jobs in one read (one statement): each known job's
        :class:`JobInfo` by id; an unknown id is left out. ``preview`` as in
        :meth:`list_jobs`, ``fresh`` as in :meth:`get_job`.

        Raises:
            TypeError: an id is not an int.
            ValueError: more than 10,000 ids, or a negative ``preview``.
        """
        ...

    async def wait_for(
        self,
        job_id: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a plain argument callers outside trio use)
    ) -> JobInfo:
        """Wait until the job is finished (succeeded or failed) and return its JobInfo.

        Raises ``UnknownJobError`` for an unknown (or meanwhile deleted) job and
        ``TimeoutError`` after ``timeout`` seconds (docs/usage.rst, "Results").
        """
        ...

    async def list_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        search: str | None = None,
        sort: JobSort = "id",
        preview: int | None = None,
        cancelled: bool | None = None,
        after: str | None = None,
        before: str | None = None,
        search_window: int | None = None,
    ) -> list[JobInfo]:
        """Snapshots of jobs, by id unless ``sort`` says otherwise, optionally of one
        queue and state, and whose payload's JSON text or ``last_error`` contains ``search``
        (case-insensitive; with ``search_window=n``, among the jobs whose id is within
        ``n`` of the largest id only: a bounded search).

        ``after`` / ``before`` (at most one): a cursor from :func:`trioqueue.job_cursor`
        of a job in this ``sort``; the page holds the ``limit`` jobs right after (right
        before) it, in ``sort`` order, ``offset`` counted from the cursor (keyset paging:
        its cost does not grow with the page's depth, and jobs inserted or deleted
        meanwhile shift no row to another page). ``cancelled=False`` leaves out cancellations (failed jobs
        whose ``JobInfo.cancelled`` is True), ``cancelled=True`` keeps only them; None
        (the default) filters on neither.

        With ``preview=n``, each payload, result and ``last_error`` longer than ``n``
        characters (of its stored text: JSON for a payload or a result) is cut to its
        first ``n`` by the database and comes back as a
        :class:`~trioqueue.TruncatedText` saying its whole length; shorter ones come
        back whole. A list of big payloads then reads and holds only their prefixes.

        Raises:
            ValueError: an unknown ``status`` or ``sort``, ``limit`` outside 1..10000,
                ``offset`` < 0, a negative ``preview``, a ``search`` text a database
                cannot hold, a cursor not of ``sort``, both cursors, or a
                ``search_window`` < 1.
        """
        ...

    async def count_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
    ) -> int:
        """How many jobs :meth:`list_jobs` would list with these filters and no paging."""
        ...

    async def estimate_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        search_window: int | None = None,
    ) -> JobCount:
        """:meth:`count_jobs`, bounded: exact while few jobs match (``JobCount.estimated``
        False), else an estimate that reads no more rows (docs/dashboard.rst, "Big
        tables"). The memory backend always counts exactly."""
        ...

    async def retry_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = "failed",
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
        error: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        failed_before: datetime | None = None,
    ) -> int:
        """Put every failed job that matches these filters (as :meth:`list_jobs` reads
        them, and the dead-letter filters as :meth:`list_dead_letters` reads them: a
        redrive, docs/protocol.rst §19) back on its queue, as :meth:`retry` does one;
        returns how many.

        Done in statements of at most ``batch_size`` jobs each, so no statement holds many
        row locks; a job that fails again meanwhile is not retried twice by one call.

        Raises:
            ValueError: a bad filter, a status other than ``"failed"`` or None, or
                ``batch_size`` outside 1..10000.
        """
        ...

    async def list_dead_letters(
        self,
        queue: str | None = None,
        *,
        error: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        failed_before: datetime | None = None,
        cancelled: bool | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> list[DeadLetter]:
        """The jobs that failed for good (cancellations among them, ``cancelled`` True)
        matching the filters, highest id first, at most ``limit``; ``after``: the last id
        of the page before. ``error``: text anywhere in ``last_error`` (any case);
        ``error_type``: the last attempt's, exactly (``""``: none recorded, or no attempt
        ran); ``failed_since`` <= ``finished_at``
        < ``failed_before`` (docs/protocol.rst §19).

        Raises:
            TypeError, ValueError: naming every bad argument; nothing is read.
        """
        ...

    async def dead_letter_summary(
        self,
        queue: str | None = None,
        *,
        error: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        failed_before: datetime | None = None,
        cancelled: bool | None = None,
        sample: int | None = 10_000,
    ) -> DeadLetterSummary:
        """How many dead letters match the filters (as :meth:`list_dead_letters`), per
        queue and per error type, counted among the newest ``sample`` of them (None: all
        of them, an exact count that reads every match).

        Raises:
            TypeError, ValueError: naming every bad argument; nothing is read.
        """
        ...

    async def delete_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
    ) -> int:
        """Delete every job that matches these filters, as :meth:`delete_job` deletes one
        (never one running under a live lease); returns how many. In statements of at
        most ``batch_size`` jobs each.

        Raises:
            ValueError: a bad filter, or ``batch_size`` outside 1..10000.
        """
        ...

    # -- attempt history (docs/dashboard.rst, "Attempts") -------------------------------

    async def list_attempts(self, job_id: int) -> list[AttemptInfo]:
        """Every recorded attempt of one job, oldest first.

        Raises ``UnknownJobError`` for an unknown job (attempts go with their job).
        """
        ...

    async def queue_timings(
        self, *, window: float = 3600.0, queue: str | None = None
    ) -> dict[str, QueueTimings]:
        """Per queue (or only ``queue``): run time and wait percentiles of the attempts
        finished in the last ``window`` seconds; queues with none are left out.

        Raises:
            ValueError: ``window`` not > 0.
        """
        ...

    async def attempt_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[AttemptBucket]:
        """Attempts finished per equal time bucket over the last ``window`` seconds, with
        their run time and wait percentiles: exactly ``buckets`` entries, oldest first.

        Raises:
            ValueError: ``window`` not > 0, ``buckets`` outside 1..1000.
        """
        ...

    # -- retention and the maintainer (docs/protocol.rst §15) ------------------------------

    async def get_retention(self) -> Retention:
        """Every retention setting: the default policy, the queues' own, the audit log's."""
        ...

    async def set_retention(
        self, queue: str | None, *, succeeded: float | None, failed: float | None
    ) -> RetentionPolicy:
        """Set how long ``queue``'s finished jobs are kept (``queue`` None: the default for
        every queue without a policy of its own). Each value is seconds after the job
        finished, > 0, or None: kept for ever. Returns the policy as stored.

        Raises:
            TypeError, ValueError: a bad queue name or value, naming every one; nothing is
                written.
        """
        ...

    async def clear_retention(self, queue: str) -> bool:
        """Drop ``queue``'s own policy, so the default applies again; False if it had none."""
        ...

    async def set_audit_retention(self, seconds: float | None) -> None:
        """Keep audit entries ``seconds`` (> 0), or for ever (None)."""
        ...

    async def maintainer(self) -> MaintainerInfo | None:
        """The maintainer lease as it stands (None: never taken); it may have run out."""
        ...

    async def claim_maintainer(self, holder: str, lease: float) -> int | None:
        """Take the maintainer lease for ``lease`` seconds if it is free or has run out
        (by the store's clock), incrementing its fence. Returns the new fence (``seq``), or
        None when another holder's lease is live (a holder whose lease is live gets None
        too: it renews instead)."""
        ...

    async def renew_maintainer(self, holder: str, seq: int, lease: float) -> bool:
        """Extend the lease to ``lease`` seconds from now, fenced by ``seq``: False (and
        nothing written) when the fence moved on or the lease ran out first."""
        ...

    async def release_maintainer(self, holder: str, seq: int) -> bool:
        """Give the lease up at once (a graceful stop), fenced by ``seq``."""
        ...

    async def prune_retained(self, seq: int, *, limit: int = 1000) -> PruneBatch | None:
        """One bounded batch of retention, fenced by the maintainer lease ``seq``: delete up
        to ``limit`` finished jobs past their queue's policy (oldest first, skipping locked
        rows; their attempts and results go with them) and up to ``limit`` audit entries
        past the audit log's. Never a job that is not finished. None, and nothing deleted,
        when ``seq`` is not the live lease's fence.

        Raises:
            ValueError: ``limit`` outside 1..100000.
        """
        ...

    async def retention_preview(self, *, older_than: float | None = None) -> RetentionPreview:
        """What a prune would delete now, counted, deleting and locking nothing: the
        finished jobs past their queue's policy per queue and status, and the audit entries
        past the audit log's keep-time. With ``older_than`` (seconds >= 0): every job that
        finished more than that long ago, whatever the policies say, and no audit entries
        (what ``PostgresBackend.prune`` would delete). Needs no maintainer lease.

        Raises:
            TypeError, ValueError: ``older_than`` is not None or a number of seconds >= 0.
        """
        ...

    # -- the operator's record (docs/dashboard.rst, "Audit log", "Table health") ---------

    async def record_audit(
        self, action: str, target: str, session: str, detail: Mapping[str, Any]
    ) -> int:
        """Append one entry to the audit log; returns its id."""
        ...

    async def list_audit(
        self, limit: int = 100, offset: int = 0, *, action: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally of one action.

        Raises:
            ValueError: ``limit`` outside 1..10000, ``offset`` < 0.
        """
        ...

    async def table_health(self) -> TableHealth:
        """The store's tables and indexes (size, live and dead rows, last autovacuum) and
        its oldest running and ready jobs."""
        ...

    async def delete_job(self, job_id: int) -> bool:
        """Delete a job unless it is running under a live lease; False if running or unknown.

        Writes nothing else: no notice, no other row.
        """
        ...

    async def list_workers(self) -> list[WorkerInfo]:
        """Every registered worker pool, ordered by queue then start time."""
        ...

    async def finished_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[FinishedBucket]:
        """Jobs finished per equal time bucket over the last ``window`` seconds.

        Exactly ``buckets`` entries, oldest first, empty buckets included.

        Raises:
            ValueError: ``window`` not > 0, ``buckets`` outside 1..1000.
        """
        ...

    def statistics(self) -> BackendStatistics: ...

    # -- schedules (docs/scheduling.rst) ---------------------------------------------------

    async def set_schedule(
        self,
        name: str,
        queue: str,
        cron: str,
        payload: Any = None,
        *,
        timezone: str = "UTC",
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> ScheduleInfo:
        """Create or replace the schedule ``name``: one job on ``queue`` at each tick of
        ``cron`` (five fields) read in ``timezone``. Its next run is the first tick after
        now (a replaced schedule's pending tick is dropped; its ``last_run_at`` stays).

        Raises:
            TypeError, ValueError: listing every bad argument (a bad cron field, an unknown
                time zone, ...); nothing is written.
        """
        ...

    async def delete_schedule(self, name: str) -> bool:
        """Delete the schedule ``name``; False when there is none. Its jobs stay."""
        ...

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        ...

    async def set_schedule_enabled(self, name: str, enabled: bool) -> bool:
        """Enable or disable the schedule ``name``; False when there is none. A disabled
        schedule enqueues nothing; enabled again, its next run is the first tick after
        now (ticks missed meanwhile are dropped)."""
        ...

    async def run_schedule_now(self, name: str) -> int | None:
        """Enqueue one job of the schedule ``name`` now, as a tick would, without moving
        its next run; the new job's id, or None when there is no such schedule."""
        ...

    async def enqueue_due(self) -> list[int]:
        """Enqueue one job for each schedule that is due and advance it past now: a
        scheduling pass, run by every worker pool (docs/scheduling.rst).

        Each tick is enqueued exactly once however many passes run at once; a run of ticks
        missed meanwhile enqueues one job. Returns the new jobs' ids.
        """
        ...

    # -- the worker side -----------------------------------------------------------------

    def wall_time(self) -> float:
        """The worker's reading of the clock row times use (seconds), without I/O."""
        ...

    async def database_clock(self) -> float:
        """The database's own clock (the clock of row times, seconds), read by one cheap
        statement: the probe a pool that stopped claiming measures its skew with
        (docs/protocol.rst §8). Claims carry the same reading (``Claims.database_clock``)."""
        ...

    async def claim(
        self,
        queue: str,
        *,
        limit: int,
        worker_id: str,
        visibility_timeout: float,
        quarantine_after: int | None = None,
        alone: bool = False,
    ) -> list[Claimed]:
        """Lease up to ``limit`` claimable jobs in one statement (``SKIP LOCKED``).

        Rows whose lease expired on their final attempt are moved to ``failed`` instead.
        A paused queue gives nothing; its limits cap the rows taken, and then the answer
        may be a ``Claims`` (``trioqueue._types``) whose ``retry_after`` says when to ask again;
        of a group only its next job is taken, while none of the group runs.
        Each row's lease counts from when the row was taken, and ``Claimed.locked_after``
        says how long after the call began that was. A row whose payload cannot be decoded
        is not delivered and never fails the call: the backend fails it on its own, final,
        fenced by the new ``claim_seq``, and delivers the others. The answer, a ``Claims``,
        carries the database's clock as read during the call (``database_clock``), rows or
        none.

        Attempts that ended without an outcome (docs/protocol.rst §13): a row taken again
        after its lease lapsed gets a ``last_error`` saying so. With ``quarantine_after``
        (k), a row whose last k attempts all lapsed is taken only when ``alone`` (the pool
        has nothing in flight), and then by itself (``Claimed.alone``); else the answer is
        a ``Claims`` with ``alone_waiting``. A row whose run alone lapsed too is failed
        ("quarantined: ..."), whatever ``quarantine_after`` says.
        """
        ...

    async def renew(
        self,
        items: Sequence[RenewItem],
        *,
        visibility_timeout: float,
        beat: PoolBeat | None = None,
    ) -> Mapping[int, Verdict]:
        """Renew every item in one statement, storing progress; one verdict per job.

        With ``beat``, the same statement records the pool's heartbeat (upserting its row);
        with a beat and no items, the statement does only that. With neither, no statement.
        """
        ...

    async def register_pool(self, pool: PoolRegistration) -> None:
        """Register (or re-register) a worker pool, and delete the rows of pools that have
        not beaten for more than an hour past their staleness."""
        ...

    async def unregister_pool(self, worker_id: str) -> bool:
        """Remove a pool's row (graceful shutdown); False when it had none."""
        ...

    async def ack(self, items: Sequence[Ack]) -> list[bool]:
        """Fenced: True for each item that was applied."""
        ...

    async def fail(self, items: Sequence[Failure]) -> list[Recorded | None]:
        """Fenced: for each item, what it was recorded as, or None if it was not applied."""
        ...

    async def release(self, items: Sequence[Release]) -> list[bool]:
        """Fenced: True for each item that was applied."""
        ...

    async def snooze(
        self, items: Sequence[SnoozeWrite], *, max_snoozes: int
    ) -> list[Snoozed | None]:
        """Fenced: per item, what the job became (docs/protocol.rst §17), or None if it
        was not applied. A job that snoozed ``max_snoozes`` times already fails for good
        (``Snoozed.LIMIT``); one asked to cancel is a cancellation."""
        ...

    async def await_children(self, items: Sequence[ChildWaitWrite]) -> list[ChildWait | None]:
        """Fenced: per item, what the job became (docs/protocol.rst §22), or None if it was
        not applied: waiting for its unfinished children (edges to them, ``waiting`` their
        count, the attempt given back), failed (``"fail"`` and a child had already failed),
        or cancelled (a cancel asked)."""
        ...

    def listen(
        self, queue: str, worker_id: str
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[Notice]]:
        """Notices for ``queue``: new work, and cancel requests for this worker's jobs."""
        ...

    def watch(self) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[Notice]]:
        """Every notice, whatever its queue or worker: for an operator's live view (the
        dashboard wakes its event streams on them). Best effort, as for :meth:`listen`:
        notices may be dropped, so a watcher polls as well."""
        ...


class ConnectionUnavailable(BackendError):
    """No database connection could be had for a handler: the server refused it (too many
    clients, a role's connection limit, starting up or shutting down) or could not be
    reached.

    Infrastructure trouble, not the handler's failure (docs/protocol.rst §4): the runtime
    tries again for a while, then releases the job without charging the attempt.
    """


class JobTransaction(Protocol):
    """One handler's open transaction, and the fenced ack that may commit it.

    Leaving the :meth:`TransactionalBackend.job_transaction` block without a successful
    :meth:`commit_with_ack` rolls the transaction back: whatever the handler wrote is
    discarded, and the runtime records failures and retries outside it, fenced as usual.
    """

    @property
    def connection(self) -> Any:
        """What the handler gets as ``ctx.connection``."""
        ...

    @property
    def commit_sent(self) -> bool:
        """True once COMMIT was sent: if :meth:`commit_with_ack` then fails, the commit is
        in doubt (it may or may not have happened), so nothing else may be written for the
        attempt; the row's lease settles it."""
        ...

    async def commit_with_ack(self, item: Ack) -> bool:
        """Apply the fenced ack in the transaction and commit both together.

        Returns:
            True when committed; False when the fence did not match (``claim_seq`` moved
            on, or the row is finished), in which case nothing is committed.

        Raises:
            Exception: the database failed; see :attr:`commit_sent` for what is known.
        """
        ...


class TransactionalBackend(Backend, Protocol):
    """A backend that can run handlers inside the transaction of their ack."""

    def job_transaction(self) -> AbstractAsyncContextManager[JobTransaction]:
        """Open a transaction on a connection of its own for one handler.

        Waiting for a connection is part of entering the block, so the caller's cancel
        scope (the batch's lease fence) bounds it. Leaving the block rolls back unless
        :meth:`JobTransaction.commit_with_ack` committed, and always returns the connection.

        Raises:
            ConnectionUnavailable: on entering, when no connection could be had (the server
                refused or could not be reached); any other error is the handler's.
        """
        ...


def transactions_of(backend: Backend) -> TransactionalBackend:
    """``backend`` as a :class:`TransactionalBackend`.

    Raises:
        TypeError: the backend does not support transactions.
    """
    if not backend.supports_transactions or not hasattr(backend, "job_transaction"):
        raise TypeError(f"{type(backend).__name__} does not support transactional mode")
    return cast(TransactionalBackend, backend)
