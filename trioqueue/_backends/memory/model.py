"""The reference model: the job table and its named queries, synchronous, on a given clock.

Theory of operation
-------------------
:class:`MemoryModel` is what the PostgreSQL backend's ``queries.sql`` does to the jobs table,
as a plain class: one method per named query (``enqueue``, ``claim``, ``renew``, ``ack``,
``fail``, ``release``, ``cancel``, ``retry``, ``get_job``, ``await_job``, ``list_jobs``, ``count_jobs``,
``delete_job``, ``counts``, ``queue_stats``, ``finished_history``, ``prune``, ``find_dedup``,
``revise_duplicate``,
the attempts table's ``list_attempts``, ``queue_timings`` and ``attempt_history``,
the worker pools' ``register_pool``, ``beat``, ``unregister_pool`` and ``list_workers``, and
the schedules' ``set_schedule``, ``delete_schedule``, ``list_schedules``, ``due_schedules``
and ``advance_schedules``, and retention's ``get_retention``, ``set_retention``,
``clear_retention``, ``set_audit_retention``, ``maintainer``, ``claim_maintainer``,
``renew_maintainer``, ``release_maintainer`` and ``prune_retained``),
each taking ``now``, the model's clock in seconds, as its first argument. It imports no trio and does no I/O, so a porter can read the protocol's
effects here without an event loop, and a property test can drive it with a float clock.

Each method applies its whole effect in one step, as one SQL statement would, and assumes
its arguments were checked already (``trioqueue._backends.validation`` does that in the
async shell, :class:`~trioqueue._backends.memory.backend.MemoryBackend`, as the PostgreSQL
backend does before it sends a statement). What the model cannot do by itself is left to the
shell: the connection model, injected faults, and delivering notices. The model only queues
the notices a statement would send (``pg_notify``); :meth:`MemoryModel.take_notices`
hands them over.

The attempts table (docs/protocol.rst §14) is a list of
:class:`~trioqueue._backends.memory.attempts.AttemptRow` per job, written by
``_record_attempt`` from the same method that records the outcome, as the SQL writes it
from the same statement, and deleted with the job. A succeeded attempt gets its row in that
list too, where PostgreSQL keeps it on the job's row and reads both through the view
``attempt_rows``: the reads cannot tell the two apart.

A job is a :class:`Row` with the columns the PostgreSQL table has. A row is *claimable* when
it is not finished and its ``not_visible_until`` has passed; there is no other "running"
bookkeeping, exactly as in the protocol (an expired lease makes a row claimable by itself).

Claim order (priority DESC, id ASC) is kept incrementally per queue (:class:`_QueueIndex`)
so that a claim costs ``O(k log n)`` rather than a scan of every row: demos and property
tests drain thousands of jobs.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from trioqueue._backends.cursors import Cursor
from trioqueue._backends.dead_letter_checks import DeadFilter
from trioqueue._backends.dependency_checks import Dependencies
from trioqueue._backends.memory.attempts import (
    AttemptRow,
    AttemptStart,
    attempt_buckets,
    new_attempt,
    queue_timings,
)
from trioqueue._backends.memory.dependencies import Edges, failure_message
from trioqueue._backends.memory.retention import LeaseRow, Policies
from trioqueue._backends.operator_checks import read_detail
from trioqueue._backends.validation import (
    EnqueueRequest,
    ScheduleRequest,
    decode_payload,
    decode_trace_context,
)
from trioqueue._core.progress import valid_progress
from trioqueue._core.schedule import Advance, Due, next_tick
from trioqueue._core.snooze import snooze_limit_message
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import UnknownJobError
from trioqueue._operator_types import (
    AttemptBucket,
    AttemptInfo,
    AttemptOutcome,
    AuditEntry,
    DeadLetter,
    MaintainerInfo,
    PruneBatch,
    QueueTimings,
    Retention,
    RetentionPolicy,
    RetentionPreview,
    TableHealth,
    TableSize,
)
from trioqueue._types import (
    Ack,
    AttemptTiming,
    ChildWait,
    ChildWaitWrite,
    Claimed,
    Claims,
    DependencyInfo,
    Failure,
    FinishedBucket,
    Job,
    JobDependencies,
    JobInfo,
    JobSort,
    JobStatus,
    Notice,
    NoticeKind,
    OnDuplicate,
    PoolBeat,
    PoolRegistration,
    QueueStats,
    Recorded,
    Release,
    ScheduleInfo,
    Snoozed,
    SnoozeWrite,
    TruncatedText,
    WorkerInfo,
)

__all__ = ["MemoryModel", "PoolRow", "Row", "RowStatus", "ScheduleRow", "Sent"]

#: A pool is stale after this many heartbeat intervals without a beat.
STALE_BEATS = 3
#: Registering a pool deletes the rows of pools stale for longer than this (seconds).
PRUNE_STALE_AFTER = 3600.0

RowStatus = Literal["queued", "running", "succeeded", "failed"]

#: How soon a claim held back by ``max_running`` says to claim again (seconds): a job of
#: the queue finishing elsewhere sends no notice, so the pools ask again at this pace.
RUNNING_LIMIT_RETRY = 0.5

#: What a claim writes to ``last_error`` for an attempt that ended without an outcome (its
#: lease lapsed), for the claim that takes a quarantined row to run alone, for a row whose
#: run alone lapsed too (parked), and for a final attempt that lapsed (docs/protocol.rst
#: §13). ``queries.sql`` writes the same words.
STOPPED = "the worker running attempt {last} stopped without recording an outcome"
RUNS_ALONE = STOPPED + " (attempts {first}..{last} in a row): attempt {next} runs alone"
PARKED = (
    "quarantined: attempts {first}..{last} each ended without an outcome (the last one run alone)"
)
FINAL_ATTEMPT = (
    "lease expired on the final attempt ({n} of {n}): "
    "the worker running it stopped without recording an outcome"
)

#: The datetime of model time 0.0 unless the model is given another anchor.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: ``error_type`` of the attempt a snooze past ``max_snoozes`` fails (as queries.sql's).
SNOOZE_LIMIT = "SnoozeLimitExceeded"


@dataclass(slots=True, eq=False)
class Row:
    """One job, with the columns of the PostgreSQL table (times are model times).

    Read it, never write it: the model keeps its claim order beside the rows.
    """

    id: int
    queue: str
    payload: str  # JSON text, decoded afresh on every read so that no caller shares it
    priority: int
    max_attempts: int
    not_visible_until: float
    created_at: float
    dedup_key: str | None
    status: RowStatus = "queued"
    attempts: int = 0
    claim_seq: int = 0
    progress: float | None = None
    last_error: str | None = None
    cancel_requested_at: float | None = None
    cancel_acknowledged_at: float | None = None
    last_renewed_at: float | None = None
    finished_at: float | None = None
    worker_id: str | None = None
    result: str | None = None  # JSON text of the last successful attempt's return value
    schedule_key: tuple[str, datetime] | None = None  # (schedule, tick) of a scheduled job
    awaited: bool = False  # someone waits for it (await_job): finishing it sends FINISHED
    group: str | None = None
    # Attempts in a row, up to the current one, that ended without an outcome, and whether
    # the current attempt was claimed to run alone (docs/protocol.rst §13; migration 0007).
    lapses: int = 0
    alone: bool = False
    # The current attempt's claim, how long the row had been claimable before it, and its
    # pool's host (as it registered, at the claim); a failure for good with a cancel asked;
    # the enqueue's trace context, JSON text (docs/protocol.rst §14; migration 0009).
    claimed_at: float | None = None
    wait_seconds: float | None = None
    host: str | None = None
    cancelled: bool = False
    trace_context: str | None = None
    # The latest checkpoint an attempt stored, JSON text, and when (docs/protocol.rst §16;
    # migration 0016). A claim keeps it: it is what the next attempt resumes from.
    checkpoint: str | None = None
    checkpointed_at: float | None = None
    # How many times the job snoozed, across its attempts (docs/protocol.rst §17;
    # migration 0017): only a fenced snooze changes it.
    snoozes: int = 0
    # Dependencies (docs/protocol.rst §21; migration 0018): how many have not succeeded
    # yet (a waiting row is queued at an infinite visibility time), whether some job
    # depends on this one, and this job's policy (None: it has no dependencies).
    waiting: int = 0
    has_dependents: bool = False
    dependency_failure: str | None = None
    parent_id: int | None = None  # the job it was enqueued under (§22; migration 0019)
    awaits_children: bool = False  # it has waited for its children (§22; migration 0020)
    in_ready: bool = False  # an entry for it is in its queue's ready heap
    due_at: float | None = None  # the time of its live entry in its queue's waiting heap

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed")

    def leased(self, now: float) -> bool:
        """Running under a lease that has not expired yet."""
        return self.status == "running" and self.not_visible_until > now

    def state(self, now: float) -> JobStatus:
        """The public status at ``now``, derived as ``get_job`` derives it."""
        if self.status == "succeeded" or self.status == "failed":
            return self.status
        if self.leased(now):
            return "running"
        return "scheduled" if self.not_visible_until > now else "ready"


@dataclass(slots=True, eq=False)
class PoolRow:
    """One worker pool, with the columns of the PostgreSQL ``workers`` table (model times)."""

    pool: PoolRegistration
    started_at: float
    last_beat_at: float
    in_flight: int = 0
    abandoned_renewals: int = 0
    clock_skew: float | None = None
    clock_verdict: str | None = None

    def stale(self, now: float) -> bool:
        """No beat for more than three of the pool's heartbeat intervals."""
        return now - self.last_beat_at > STALE_BEATS * self.pool.heartbeat_interval


@dataclass(slots=True, eq=False)
class ScheduleRow:
    """One schedule, with the columns of the PostgreSQL ``schedules`` table.

    Its times are datetimes (UTC), not model times: ticks are wall-clock instants, and the
    compare-and-set of ``advance_schedules`` compares them exactly.
    """

    request: ScheduleRequest
    next_run_at: datetime
    last_run_at: datetime | None = None
    enabled: bool = True  # a disabled schedule is never due (set_schedule_enabled)


@dataclass(slots=True, eq=False)
class QueueRow:
    """One queue's flow control, with the columns of the PostgreSQL ``queues`` table.

    ``tokens`` is the ``max_per_second`` bucket as of ``tokens_at`` (model times).
    """

    paused: bool = False
    max_running: int | None = None
    max_per_second: float | None = None
    tokens: float = 0.0
    tokens_at: float = 0.0

    @property
    def limited(self) -> bool:
        return self.max_running is not None or self.max_per_second is not None

    def tokens_at_time(self, now: float) -> float:
        """The bucket at ``now``: refilled at ``max_per_second``, holding at most one
        second's worth (and at least one token's room)."""
        rate = self.max_per_second
        assert rate is not None
        return min(max(1.0, rate), self.tokens + max(0.0, now - self.tokens_at) * rate)


@dataclass(frozen=True, slots=True)
class Sent:
    """A notice a statement sent: to every listener of ``notice.queue``, or, when
    ``worker_id`` is set, only to that worker's listeners of it (a cancel request)."""

    notice: Notice
    worker_id: str | None = None


@dataclass(slots=True)
class _QueueIndex:
    """Claim order for one queue, kept incrementally.

    ``waiting`` holds ``(t, id)`` entries, at most one live per row (its ``due_at``), never
    later than the row's ``not_visible_until``. A time moved earlier pushes a fresh entry
    (the old one goes stale and is dropped when it surfaces); a time moved later (every
    renewal) pushes nothing: the live entry, when it surfaces, is pushed again for the row's
    time then. So a running row holds one entry however often it is renewed. When a live
    entry comes due at its row's time, the row moves to ``ready``, ordered
    ``(-priority, id)``; a queued row that is visible at once goes there directly. A ready
    entry is re-checked when popped, since the old owner of an expired lease may renew it.
    ``lapsed`` holds the ids of the running rows (expired leases) among ``ready``: where a
    claim looks for quarantined rows without walking the whole heap.
    """

    waiting: list[tuple[float, int]] = field(default_factory=list)
    ready: list[tuple[int, int]] = field(default_factory=list)
    lapsed: set[int] = field(default_factory=set)


class MemoryModel:
    """The jobs table and the named queries of ``queries.sql``, on the caller's clock.

    Every method taking ``now`` runs at that model time; give it times that never go back.
    Arguments are assumed valid (checked as ``trioqueue._backends.validation`` checks them).

    Args:
        anchor: a model time, and ``anchor_datetime`` the wall-clock datetime it stands for;
            ``JobInfo`` times are mapped through them. By default model times are seconds
            since the Unix epoch.
    """

    def __init__(self, *, anchor: float = 0.0, anchor_datetime: datetime = EPOCH) -> None:
        self._rows: dict[int, Row] = {}
        self._last_id = 0
        self._queues: dict[str, _QueueIndex] = {}
        self._dedup: dict[tuple[str, str], int] = {}  # unfinished jobs only
        self._locked: set[int] = set()
        self._pools: dict[str, PoolRow] = {}
        self._settings: dict[str, QueueRow] = {}
        self._groups: dict[tuple[str, str], set[int]] = {}  # unfinished rows per group
        self._outbox: list[Sent] = []
        self._anchor = anchor
        self._anchor_datetime = anchor_datetime
        self._schedules: dict[str, ScheduleRow] = {}
        self._attempts: dict[int, list[AttemptRow]] = {}  # per job, by claim_seq
        self._audit: list[AuditEntry] = []  # the audit_log table, oldest first
        self._last_audit_id = 0
        self._policies = Policies()  # retention and retention_settings (§15)
        self._maintainer_row: LeaseRow | None = None  # the maintainer row, once taken (§15)
        self._edges = Edges()  # job_edges (§21)
        self._children: dict[int, list[int]] = {}  # jobs_parent_idx: children by parent (§22)

    # -- producers and operators ---------------------------------------------------------

    def enqueue(self, now: float, request: EnqueueRequest) -> tuple[list[int], bool]:
        """Insert every payload in order; mirrors ``-- name: enqueue`` (with ``find_dedup``).

        Returns:
            The new ids and True; or, when ``request.dedup_key`` is held by an unfinished
            job of the queue, ``([that job's id], False)`` and nothing is written. One
            ``AVAILABLE`` notice when anything was added.
        """
        if request.dedup_key is not None:
            existing = self.find_dedup(request.queue, request.dedup_key)
            if existing is not None:
                return [existing], False
        ids = [self._insert(request, text, now) for text in request.payloads]
        if ids:
            self._notify_available(request.queue)
        return ids, True

    def enqueue_after(
        self, now: float, request: EnqueueRequest, dependencies: Dependencies
    ) -> list[int] | None:
        """Insert every payload after ``dependencies``; mirrors ``-- name: enqueue_after``.

        None, and nothing written, when an id names no job (``unknown_jobs`` says which),
        or ``dependencies.parent_id`` names no unfinished job (docs/protocol.rst §22).
        A dependency that succeeded is met; one that failed finishes the new jobs at once by
        their policy; the others are waited for. One ``AVAILABLE`` notice when the new jobs
        are claimable at once.
        """
        found = [self._rows.get(job_id) for job_id in dependencies.ids]
        if any(row is None for row in found):
            return None
        parent_id = dependencies.parent_id
        if parent_id is not None:
            parent = self._rows.get(parent_id)
            if parent is None or parent.finished:
                return None
        rows = [row for row in found if row is not None]
        unmet = sum(not row.finished for row in rows)
        failed = min((row.id for row in rows if row.status == "failed"), default=None)
        for row in rows:
            row.has_dependents = True
        ids = []
        for text in request.payloads:
            job_id = self._insert(request, text, now, waiting=unmet if failed is None else 0)
            dependent = self._rows[job_id]
            dependent.dependency_failure = dependencies.policy
            if parent_id is not None:
                dependent.parent_id = parent_id
                self._children.setdefault(parent_id, []).append(job_id)
            self._edges.add(dependencies.ids, job_id)
            if failed is not None:
                dependent.cancelled = dependencies.policy == "cancel"
                error = failure_message(dependencies.policy, failed, failed, "failed")
                self._finish(dependent, "failed", error, now)
            ids.append(job_id)
        if failed is None and unmet == 0:
            self._notify_available(request.queue)
        return ids

    def unknown_jobs(self, job_ids: Iterable[int]) -> list[int]:
        """Which of ``job_ids`` name no job, ascending; mirrors ``-- name: unknown_jobs``."""
        return sorted(job_id for job_id in set(job_ids) if job_id not in self._rows)

    def job_dependencies(self, now: float, job_id: int) -> JobDependencies | None:
        """The job's dependencies and dependents with their states, None for an unknown
        job; mirrors ``-- name: job_dependencies`` (an edge to a job gone is left out)."""
        row = self._rows.get(job_id)
        if row is None:
            return None

        def ends(ids: list[int]) -> tuple[DependencyInfo, ...]:
            rows = [self._rows[i] for i in ids if i in self._rows]
            return tuple(DependencyInfo(row.id, row.queue, row.state(now)) for row in rows)

        parent = ends([] if row.parent_id is None else [row.parent_id])
        return JobDependencies(
            job_id,
            ends(self._edges.dependencies_of(job_id)),
            ends(self._edges.dependents_of(job_id)),
            parent[0] if parent else None,
            ends(self._children.get(job_id, [])),
        )

    def find_dedup(self, queue: str, dedup_key: str) -> int | None:
        """The unfinished job of ``queue`` holding ``dedup_key``; mirrors ``find_dedup``."""
        return self._dedup.get((queue, dedup_key))

    def revise_duplicate(
        self, now: float, request: EnqueueRequest, policy: OnDuplicate
    ) -> tuple[int, bool] | None:
        """Apply ``policy`` to the holder of ``request.dedup_key``; mirrors ``revise_duplicate``.

        Only a waiting holder (status queued) is changed: ``replace`` gives it the
        request's payload, priority and run time (now + delay), ``debounce`` the run time
        alone. A holder that is running, leased or not, is left as it is (docs/protocol.rst
        §18). One ``AVAILABLE`` notice when a holder changed.

        Returns:
            ``(holder id, True)`` when it changed, ``(holder id, False)`` when it is
            running, None when no unfinished job holds the key.
        """
        assert request.dedup_key is not None  # (check_on_duplicate saw to it)
        job_id = self._dedup.get((request.queue, request.dedup_key))
        if job_id is None:
            return None
        row = self._rows[job_id]
        if row.status != "queued":
            return job_id, False
        if policy == "replace":
            row.payload = request.payloads[0]
            self._reprioritise(row, request.priority)
        self._show_at(row, now + request.delay, now)
        self._notify_available(row.queue)
        return job_id, True

    def cancel(self, now: float, job_id: int) -> bool:
        """Cancel a job; mirrors ``-- name: cancel``.

        A leased job gets the cancel flag and its worker a ``CANCEL`` notice; any other
        unfinished job fails at once. False when the job is unknown or already finished.
        """
        row = self._rows.get(job_id)
        if row is None or row.finished:
            return False
        self._cancel_one(row, self._cancel_message(row), now)
        # Its unfinished descendants too (§22), parents before their children.
        for descendant in self._descendants(job_id):
            if not descendant.finished:
                self._cancel_one(descendant, f"cancelled: parent {job_id} cancelled", now)
        return True

    def _cancel_one(self, row: Row, error: str, now: float) -> None:
        if row.leased(now):
            # The worker stops the handler when its renewal says CANCEL_REQUESTED; the
            # notice only makes that renewal happen now rather than at the next beat.
            if row.cancel_requested_at is None:
                row.cancel_requested_at = now
            self._outbox.append(Sent(Notice(NoticeKind.CANCEL, row.queue, row.id), row.worker_id))
        else:
            row.cancelled = True  # failed for good with a cancel asked (§14); no attempt row
            self._finish(row, "failed", error, now)

    def _descendants(self, job_id: int) -> list[Row]:
        """``cancel``'s ``tree`` below ``job_id``: children, theirs, and so on, by level."""
        found: list[Row] = []
        level = [job_id]
        while level:
            level = [c for p in level for c in self._children.get(p, ()) if c in self._rows]
            found.extend(self._rows[c] for c in level)
        return found

    def retry(self, now: float, job_id: int) -> bool:
        """Put a failed job back for one more attempt; mirrors ``-- name: retry``.

        Attempts and ``last_error`` stay, ``max_attempts`` grows when it was used up, a
        cancel flag is cleared. False when the job is unknown, not failed, or another
        unfinished job of its queue holds its dedup key.
        """
        row = self._rows.get(job_id)
        if row is None or row.status != "failed":
            return False
        unmet = self._recheck_dependencies(row)
        if unmet is None:
            return False  # a dependency is failed (the trigger skips the update)
        if row.dedup_key is not None:
            key = (row.queue, row.dedup_key)
            if key in self._dedup:
                return False  # another unfinished job holds the key
            self._dedup[key] = row.id
        row.status = "queued"
        row.finished_at = row.cancel_requested_at = row.cancel_acknowledged_at = None
        row.worker_id = None
        row.cancelled = False  # cleared with the cancel request (§14)
        row.awaited = False
        if row.group is not None:
            self._groups.setdefault((row.queue, row.group), set()).add(row.id)
        row.max_attempts = max(row.max_attempts, row.attempts + 1)
        row.waiting = unmet
        self._show_at(row, now if unmet == 0 else math.inf, now)
        self._notify_available(row.queue)
        return True

    def get_job(self, now: float, job_id: int) -> JobInfo | None:
        """A snapshot of one job, None when no job has this id; mirrors ``get_job``."""
        row = self._rows.get(job_id)
        return None if row is None else self._info(row, now, checkpoint=True)

    def get_jobs(
        self, now: float, job_ids: Sequence[int], preview: int | None = None
    ) -> dict[int, JobInfo]:
        """Snapshots of the known jobs among ``job_ids``, by id; mirrors ``get_jobs``."""
        rows = (self._rows.get(job_id) for job_id in job_ids)
        return {row.id: self._info(row, now, preview) for row in rows if row is not None}

    def await_job(self, now: float, job_id: int) -> JobInfo | None:
        """``get_job``, after marking an unfinished job awaited, so that the statements
        finishing (or deleting) it send a ``FINISHED`` notice; mirrors ``await_job`` and
        the ``get_job`` the PostgreSQL backend runs after it when it marks nothing."""
        row = self._rows.get(job_id)
        if row is None:
            return None
        if not row.finished:
            row.awaited = True
        return self._info(row, now, checkpoint=True)

    def list_jobs(
        self,
        now: float,
        queue: str | None,
        status: JobStatus | None,
        limit: int,
        offset: int,
        *,
        search: str | None = None,
        sort: JobSort = "id",
        preview: int | None = None,
        cancelled: bool | None = None,
        after: Cursor | None = None,
        before: Cursor | None = None,
        search_window: int | None = None,
    ) -> list[JobInfo]:
        """Snapshots in ``sort`` order, optionally of one queue and state, and containing
        ``search`` (among the ``search_window`` newest ids, when given), their long texts
        cut to ``preview`` characters, with or without the cancellations (``cancelled``),
        right after the ``after`` cursor's row or right before the ``before`` one's;
        mirrors ``list_jobs`` (job_lists.py)."""
        rows = self._matching(now, queue, status, search, cancelled, search_window)
        matching = _sorted(rows, sort, self.to_datetime)
        if after is not None:
            matching = [r for r in matching if _follows(self._key(r, sort), after)]
        if before is not None:
            ahead = [r for r in matching if _precedes(self._key(r, sort), before)]
            page = ahead[::-1][offset : offset + limit][::-1]
        else:
            page = matching[offset : offset + limit]
        return [self._info(row, now, preview) for row in page]

    def _key(self, row: Row, sort: JobSort) -> tuple[object, int]:
        """``row``'s (sort key, id), as a cursor of it holds them."""
        column = sort.lstrip("-")
        if column == "id":
            return row.id, row.id
        if column == "priority":
            return row.priority, row.id
        moment = row.created_at if column == "created_at" else row.finished_at
        return (None if moment is None else self.to_datetime(moment)), row.id

    def count_jobs(
        self,
        now: float,
        queue: str | None,
        status: JobStatus | None,
        search: str | None,
        cancelled: bool | None = None,
        search_window: int | None = None,
    ) -> int:
        """How many jobs ``list_jobs`` would list unpaged; mirrors ``count_jobs``
        (job_lists.py)."""
        return len(self._matching(now, queue, status, search, cancelled, search_window))

    def list_attempts(self, now: float, job_id: int) -> list[AttemptInfo] | None:
        """Every attempt row of one job, oldest first; None when no job has this id;
        mirrors ``-- name: list_attempts``."""
        if job_id not in self._rows:
            return None
        return [row.info(self.to_datetime) for row in self._attempts.get(job_id, ())]

    def queue_timings(
        self, now: float, window: float, queue: str | None
    ) -> dict[str, QueueTimings]:
        """Per queue, run time and wait percentiles of the attempts finished in the
        ``window`` seconds before ``now``; mirrors ``-- name: queue_timings``."""
        return queue_timings(self._attempt_rows(), now - window, queue)

    def attempt_history(
        self, now: float, window: float, buckets: int, queue: str | None
    ) -> list[AttemptBucket]:
        """Attempts finished per bucket over the ``window`` seconds before ``now``, with
        their percentiles, bucketed as ``finished_history``; mirrors
        ``-- name: attempt_history``."""
        since = now - window
        rows = self._attempt_rows()
        return attempt_buckets(rows, since, window, buckets, queue, self.to_datetime)

    def attempt_rows(self, job_id: int) -> list[AttemptRow]:
        """One job's attempt rows (for inspection: the property test checks I15)."""
        return list(self._attempts.get(job_id, ()))

    def _attempt_rows(self) -> Iterator[AttemptRow]:
        for rows in self._attempts.values():
            yield from rows

    def _matching(
        self,
        now: float,
        queue: str | None,
        status: JobStatus | None,
        search: str | None,
        cancelled: bool | None = None,
        search_window: int | None = None,
    ) -> list[Row]:
        needle = None if search is None else search.lower()
        newest = max(self._rows, default=0)
        floor = newest - search_window if needle is not None and search_window else None
        return [
            row
            for row in self._rows.values()  # ids ascend in insertion order
            if (floor is None or row.id > floor)
            and (queue is None or row.queue == queue)
            and (status is None or row.state(now) == status)
            and (cancelled is None or row.cancelled == cancelled)
            and (needle is None or _contains(row, needle))
        ]

    def delete_job(self, now: float, job_id: int) -> bool:
        """Delete a job unless it is running under a live lease; mirrors ``delete_job``.

        False when the job is unknown or leased. Its dedup key is freed with it.
        """
        row = self._rows.get(job_id)
        if row is None or row.leased(now):
            return False
        del self._rows[job_id]  # its heap entries go stale: claims skip missing rows
        self._attempts.pop(job_id, None)  # its attempts go with it (§14)
        self._forget_dependents(row, now)
        self._notify_finished(row)  # its waiters read again and find it gone
        if row.dedup_key is not None and self._dedup.get((row.queue, row.dedup_key)) == row.id:
            del self._dedup[(row.queue, row.dedup_key)]
        if not row.finished:
            self._leave_group(row)
        return True

    def counts(self, now: float) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state (states with no jobs left out); mirrors ``counts``."""
        counts: dict[str, dict[JobStatus, int]] = {}
        for row in self._rows.values():
            per_state = counts.setdefault(row.queue, {})
            state = row.state(now)
            per_state[state] = per_state.get(state, 0) + 1
        return counts

    def queue_stats(self, now: float) -> dict[str, QueueStats]:
        """``counts`` plus, per queue, how long its oldest ready row has been claimable
        (``now`` minus the earliest ``not_visible_until`` of its ready rows, None when no
        row is ready); mirrors ``queue_stats``."""
        since: dict[str, float] = {}
        for row in self._rows.values():
            if row.state(now) == "ready":
                since[row.queue] = min(since.get(row.queue, now), row.not_visible_until)
        counts = self.counts(now)
        return {
            queue: QueueStats(
                counts.get(queue, {}),
                now - since[queue] if queue in since else None,
                *self._flow(queue),
            )
            for queue in sorted(counts.keys() | self._settings.keys())
        }

    def _flow(self, queue: str) -> tuple[bool, int | None, float | None]:
        settings = self._settings.get(queue)
        if settings is None:
            return False, None, None
        return settings.paused, settings.max_running, settings.max_per_second

    # -- flow control --------------------------------------------------------------------

    def pause_queue(self, now: float, queue: str) -> None:
        """Stop claims of ``queue`` (running jobs go on); mirrors ``pause_queue``. A notice
        tells listeners (the dashboard) at once."""
        self._queue_row(queue).paused = True
        self._notify_available(queue)

    def resume_queue(self, now: float, queue: str) -> None:
        """Let ``queue`` be claimed again; mirrors ``resume_queue``. The notice wakes idle
        pools at once."""
        settings = self._settings.get(queue)
        if settings is not None:
            settings.paused = False
        self._notify_available(queue)

    def set_queue_limits(
        self, now: float, queue: str, max_running: int | None, max_per_second: float | None
    ) -> None:
        """Set both limits of ``queue`` (None lifts one); mirrors ``set_queue_limits``.

        A rate starts with a full bucket: one second's worth of claims.
        """
        settings = self._queue_row(queue)
        settings.max_running = max_running
        settings.max_per_second = max_per_second
        settings.tokens = 0.0 if max_per_second is None else max(1.0, max_per_second)
        settings.tokens_at = now
        self._notify_available(queue)  # a raised limit may let idle pools claim

    def _queue_row(self, queue: str) -> QueueRow:
        settings = self._settings.get(queue)
        if settings is None:
            settings = self._settings[queue] = QueueRow()
        return settings

    def finished_history(
        self, now: float, window: float, buckets: int, queue: str | None
    ) -> list[FinishedBucket]:
        """Jobs finished per bucket of ``window / buckets`` seconds, over the ``window``
        seconds before ``now``, oldest first; mirrors ``finished_history``.

        A row finished at ``now`` or later (another statement's clock) counts in the last
        bucket.
        """
        since = now - window
        width = window / buckets
        succeeded, failed = [0] * buckets, [0] * buckets
        for row in self._rows.values():
            t = row.finished_at
            if t is None or t < since or (queue is not None and row.queue != queue):
                continue
            n = min(int((t - since) / width), buckets - 1)
            (succeeded if row.status == "succeeded" else failed)[n] += 1
        return [
            FinishedBucket(self.to_datetime(since + n * width), succeeded[n], failed[n])
            for n in range(buckets)
        ]

    def prune(self, now: float, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` rows finished more than ``older_than`` seconds before
        ``now``, oldest first, skipping locked rows; mirrors ``-- name: prune``."""
        cutoff = now - older_than
        doomed = sorted(
            (row.finished_at, row.id)
            for row in self._rows.values()
            if row.finished_at is not None
            and row.finished_at < cutoff
            and row.id not in self._locked  # FOR UPDATE SKIP LOCKED
        )[:limit]
        for _, job_id in doomed:
            row = self._rows.pop(job_id)  # a finished row holds no dedup key; entries go stale
            self._attempts.pop(job_id, None)  # its attempts go with it (§14)
            self._forget_dependents(row, now)
        return len(doomed)

    # -- worker pools --------------------------------------------------------------------

    def register_pool(self, now: float, pool: PoolRegistration) -> None:
        """Register (or re-register) a pool, started now; mirrors ``register_pool``.

        First deletes the rows of pools stale for more than an hour (their processes are
        long gone; an unregistration was lost).
        """
        for worker_id, row in list(self._pools.items()):
            if (
                now - row.last_beat_at
                > STALE_BEATS * row.pool.heartbeat_interval + PRUNE_STALE_AFTER
            ):
                del self._pools[worker_id]
        self._pools[pool.worker_id] = PoolRow(pool, started_at=now, last_beat_at=now)

    def beat(self, now: float, beat: PoolBeat) -> None:
        """Record a pool's heartbeat, inserting its row if missing; mirrors ``beat`` (also
        the beat part of ``renew``). A late beat (an older ``now``) changes nothing."""
        row = self._pools.get(beat.worker_id)
        if row is None:
            row = self._pools[beat.worker_id] = PoolRow(beat.pool, now, now)
        elif row.last_beat_at > now:
            return
        row.last_beat_at = now
        row.in_flight = beat.in_flight
        row.abandoned_renewals = beat.abandoned_renewals
        row.clock_skew, row.clock_verdict = beat.clock_skew, beat.clock_verdict

    def unregister_pool(self, now: float, worker_id: str) -> bool:
        """Delete a pool's row; False when it had none. Mirrors ``unregister_pool``."""
        return self._pools.pop(worker_id, None) is not None

    def list_workers(self, now: float) -> list[WorkerInfo]:
        """Every pool, by queue then start time (then id); mirrors ``list_workers``."""
        rows = sorted(
            self._pools.values(), key=lambda r: (r.pool.queue, r.started_at, r.pool.worker_id)
        )
        return [
            WorkerInfo(
                worker_id=row.pool.worker_id,
                host=row.pool.host,
                pid=row.pool.pid,
                queue=row.pool.queue,
                concurrency=row.pool.concurrency,
                in_flight=row.in_flight,
                abandoned_renewals=row.abandoned_renewals,
                last_beat_at=self.to_datetime(row.last_beat_at),
                started_at=self.to_datetime(row.started_at),
                stale=row.stale(now),
                clock_skew=row.clock_skew,
                clock_verdict=row.clock_verdict,
            )
            for row in rows
        ]

    # -- the worker side -----------------------------------------------------------------

    def claim(
        self,
        now: float,
        queue: str,
        limit: int,
        worker_id: str,
        visibility_timeout: float,
        *,
        started: float | None = None,
        quarantine_after: int | None = None,
        alone: bool = False,
    ) -> Claims:
        """Lease up to ``limit`` claimable rows, priority DESC then id; mirrors ``claim``.

        Rows whose lease expired on their final attempt, or that were asked to cancel while
        running, or whose run alone lapsed, are failed instead of run again. The lease
        counts from ``now``, when the rows are taken; ``started`` is when the statement
        began (PostgreSQL's ``now()``, by default ``now``), and each answer's
        ``locked_after`` is ``now - started``.

        Flow control (docs/flow.rst): a paused queue gives nothing; its limits cap how many
        rows are taken (``Claims.retry_after`` says when they held rows back); of a group,
        only its next job, and only while none of the group runs.

        Quarantine (docs/protocol.rst §13): with ``quarantine_after``, a row whose last
        that many attempts lapsed is taken only by a claim made ``alone``, and then alone;
        any other claim leaves it and answers ``Claims.alone_waiting``.

        Attempt history (docs/protocol.rst §14): each row taken records when its lease
        began and how long it had been claimable (``Job.waited``), and each lapsed attempt
        taken over or dead-lettered gets its ``lost`` attempt row.
        """
        settings = self._settings.get(queue)
        index = self._queues.get(queue)
        if index is None or (settings is not None and settings.paused):
            return Claims()
        allowed = (
            limit
            if settings is None or not settings.limited
            else self._allowance(settings, queue, now, limit)
        )
        self._promote(index, now)
        # The lease counts from now, when the rows are taken, however long the call waited
        # for its connection or a stall before it (docs/protocol.rst, "Rows, attempts and
        # fencing"); the answer says how long that was.
        locked_after = 0.0 if started is None else now - started
        lone = self._lone(index, now, quarantine_after)
        if alone and lone is not None and allowed >= 1:
            rows, lone_rows = [self._take_lone(index, lone)], True
        else:
            rows, lone_rows = self._pop_ready(index, now, allowed, quarantine_after), False
        claims = Claims(
            self._lease(row, worker_id, now, now + visibility_timeout, locked_after, lone_rows)
            for row in rows
        )
        claims.alone_waiting = not lone_rows and self._quarantined_waiting(
            index, now, quarantine_after
        )
        if settings is not None and settings.limited:
            claims.retry_after = self._spend(settings, queue, now, limit, allowed, len(claims))
        return claims

    def _allowance(self, settings: QueueRow, queue: str, now: float, limit: int) -> int:
        """How many rows the queue's limits let this claim take (at most ``limit``)."""
        allowed = limit
        if settings.max_running is not None:
            allowed = min(allowed, max(0, settings.max_running - self._running(queue, now)))
        if settings.max_per_second is not None:
            allowed = min(allowed, math.floor(settings.tokens_at_time(now)))
        return allowed

    def _spend(
        self, settings: QueueRow, queue: str, now: float, limit: int, allowed: int, taken: int
    ) -> float | None:
        """Take ``taken`` tokens from the bucket; the claim's ``retry_after``: when the
        limits held rows back (fewer allowed than asked, and all of those taken), how long
        until they may let one through."""
        wait = 0.0
        if settings.max_per_second is not None:
            settings.tokens = settings.tokens_at_time(now) - taken
            settings.tokens_at = now
            if settings.tokens < 1.0:
                wait = (1.0 - settings.tokens) / settings.max_per_second
        if settings.max_running is not None and self._running(queue, now) >= settings.max_running:
            wait = max(wait, RUNNING_LIMIT_RETRY)
        if allowed >= limit or taken < allowed:
            return None  # nothing held back: the claim had all it asked for, or all there was
        return wait

    def _running(self, queue: str, now: float) -> int:
        """Rows of ``queue`` under a live lease (what ``max_running`` counts)."""
        return sum(1 for row in self._rows.values() if row.queue == queue and row.leased(now))

    def renew(
        self,
        now: float,
        items: Sequence[RenewItem],
        visibility_timeout: float,
        beat: PoolBeat | None = None,
    ) -> dict[int, Verdict]:
        """Renew every item in one statement, storing progress; mirrors ``renew``.

        A lease is never shortened (``greatest()``); a locked row answers ``UNCHANGED``.
        The items name distinct jobs (validation refuses a job named twice). A ``beat``
        is recorded by the same statement (see :meth:`beat`).
        """
        lease_until = now + visibility_timeout
        if beat is not None:
            self.beat(now, beat)
        return {item.job_id: self._renew_one(item, lease_until, now) for item in items}

    def ack(self, now: float, items: Sequence[Ack]) -> list[bool]:
        """Mark attempts succeeded, fenced by ``claim_seq`` (I9); mirrors ``ack``. Each
        applied item writes its ``succeeded`` attempt row (§14: on PostgreSQL, the
        attempt's columns on the job's row)."""
        return [self._ack_one(item, now) for item in items]

    def fail(self, now: float, items: Sequence[Failure]) -> list[Recorded | None]:
        """Record failed attempts, fenced (I9); mirrors ``-- name: fail``.

        Per item, what the job became (None: not applied). A retry is final when the
        attempt was the last one allowed or the job was asked to cancel (then a
        cancellation). Each applied item writes its attempt row: ``retry``, ``failed`` or
        ``cancelled`` (§14).
        """
        return [self._fail_one(item, now) for item in items]

    def release(self, now: float, items: Sequence[Release]) -> list[bool]:
        """Give attempts back uncharged, fenced (I9); mirrors ``-- name: release``.

        A job asked to cancel is failed instead, a cancellation. Each applied item writes
        its attempt row: ``released``, or ``cancelled`` (§14).
        """
        return [self._release_one(item, now) for item in items]

    def snooze(
        self, now: float, items: Sequence[SnoozeWrite], max_snoozes: int
    ) -> list[Snoozed | None]:
        """Put jobs back after a delay, their attempts given back, fenced (I9, I19);
        mirrors ``-- name: snooze``.

        Per item, what the job became (None: not applied): a job asked to cancel is failed
        instead, a cancellation; one that snoozed ``max_snoozes`` times already fails for
        good, charged. Each applied item writes its attempt row: ``snoozed``, ``failed`` or
        ``cancelled`` (§14, §17).
        """
        return [self._snooze_one(item, now, max_snoozes) for item in items]

    def await_children(self, now: float, items: Sequence[ChildWaitWrite]) -> list[ChildWait | None]:
        """Put jobs back to wait for their unfinished children (docs/protocol.rst §22);
        mirrors ``-- name: await_children``. Fenced rows first, then each one's children in
        id order, at their latest state (the model runs one statement at a time). A job
        asked to cancel is failed instead, a cancellation; under ``"fail"`` a child already
        failed fails it, naming the lowest such child."""
        fenced = [(item, self._fenced(item.job_id, item.claim_seq)) for item in items]
        decided = {
            row.id: self._child_wait_decision(item, row)
            for item, row in sorted(fenced, key=lambda pair: pair[0].job_id)
            if row is not None
        }
        seen: set[int] = set()
        answers: list[ChildWait | None] = []
        for item, row in fenced:
            if row is None or row.id in seen:  # a repeated item applies once, as DISTINCT ON
                answers.append(None)
                continue
            seen.add(row.id)
            answers.append(self._await_one(item, row, *decided[row.id], now))
        return answers

    # -- what the shell needs besides the queries ------------------------------------------

    def take_notices(self) -> list[Sent]:
        """The notices sent since the last call, oldest first (the outbox is emptied)."""
        sent, self._outbox = self._outbox, []
        return sent

    def rows(self) -> Iterator[Row]:
        """Every row, by id (for inspection: do not change them)."""
        return iter(list(self._rows.values()))

    def lock_rows(self, job_ids: Iterable[int]) -> None:
        """Pretend another transaction holds these rows' locks (``SKIP LOCKED`` skips them)."""
        self._locked.update(job_ids)

    def unlock_rows(self, job_ids: Iterable[int]) -> None:
        self._locked.difference_update(job_ids)

    def locked_rows(self) -> frozenset[int]:
        """The ids :meth:`lock_rows` locked and :meth:`unlock_rows` has not unlocked."""
        return frozenset(self._locked)

    def expire(self, now: float, job_id: int) -> None:
        """Make a running job's lease expire (one second before ``now``).

        Raises:
            UnknownJobError: no job has this id.
            ValueError: the job is not running.
        """
        row = self._rows.get(job_id)
        if row is None:
            raise UnknownJobError(job_id)
        if row.status != "running":
            raise ValueError(f"job {job_id} is {row.status}, not running")
        self._show_at(row, now - 1.0)  # pushes a live heap entry, due now

    def to_datetime(self, t: float) -> datetime:
        """The wall-clock datetime of model time ``t``."""
        return self._anchor_datetime + timedelta(seconds=t - self._anchor)

    # -- rows ----------------------------------------------------------------------------

    def _insert(self, request: EnqueueRequest, payload: str, now: float, waiting: int = 0) -> int:
        self._last_id += 1
        row = Row(
            id=self._last_id,
            queue=request.queue,
            payload=payload,
            priority=request.priority,
            max_attempts=request.max_attempts,
            not_visible_until=now + request.delay if waiting == 0 else math.inf,
            created_at=now,
            dedup_key=request.dedup_key,
            group=request.group,
            trace_context=request.trace_context,
            waiting=waiting,
        )
        self._rows[row.id] = row
        if row.group is not None:
            self._groups.setdefault((row.queue, row.group), set()).add(row.id)
        self._show_at(row, row.not_visible_until, now)
        if row.dedup_key is not None:
            self._dedup[(row.queue, row.dedup_key)] = row.id
        return row.id

    def _finish(
        self, row: Row, status: RowStatus, error: str | None, now: float, *, settle: bool = True
    ) -> None:
        """``settle``: settle a row with dependents, as the ack's ``settle_successes`` and
        the trigger ``jobs_settle_dependents`` do (the dependents ``fail_dependents``
        finishes settle nothing: their own are among them)."""
        row.status = status
        row.finished_at = now
        if error is not None:
            row.last_error = error
        self._notify_finished(row)
        if row.dedup_key is not None and self._dedup.get((row.queue, row.dedup_key)) == row.id:
            del self._dedup[(row.queue, row.dedup_key)]
        self._leave_group(row)
        if settle and row.has_dependents:
            if status == "succeeded":
                self._wake_dependents(row, now)
            else:
                self._fail_dependents(row.id, "failed", now)

    # -- dependencies: what migration 0018's functions do (docs/protocol.rst §21) ----------

    def _waits(self, job_id: int) -> bool:
        row = self._rows.get(job_id)
        return row is not None and row.status == "queued" and row.waiting > 0

    def _wake_dependents(self, row: Row, now: float) -> None:
        """``settle_successes`` (the ack calls it): one dependency fewer for each waiting
        dependent; those left with none become claimable, one notice per queue."""
        woken: list[str] = []
        for job_id in self._edges.dependents_of(row.id):
            if not self._waits(job_id):
                continue
            dependent = self._rows[job_id]
            dependent.waiting -= 1
            if dependent.waiting == 0:
                self._show_at(dependent, now, now)
                woken.append(dependent.queue)
        for queue in dict.fromkeys(woken):
            self._notify_available(queue)

    def _fail_dependents(self, root: int, reason: str, now: float) -> None:
        """``fail_dependents``: every waiting dependent reachable from ``root`` fails by its
        policy, naming the dependency through which the failure reached it."""
        reached = sorted(self._edges.nearest(root, self._fails_by_policy).items())
        for job_id, via in reached:
            dependent = self._rows[job_id]
            dependent.waiting = 0
            dependent.cancelled = dependent.dependency_failure == "cancel"
            error = failure_message(dependent.dependency_failure, via, root, reason)
            self._finish(dependent, "failed", error, now, settle=False)
        # Dependents under "continue" count a failed dependency as finished (§22): root's,
        # and those of every job failed here (each one's own trigger settles them).
        for failed_id in [root, *(job_id for job_id, _ in reached)]:
            self._continue_dependents(failed_id, now)

    def _fails_by_policy(self, job_id: int) -> bool:
        """A waiting job a failure fails (reaches), not one under ``"continue"``."""
        return self._waits(job_id) and self._rows[job_id].dependency_failure != "continue"

    def _continue_dependents(self, failed_id: int, now: float) -> None:
        """``fail_dependents``' ``continued``: each waiting dependent of ``failed_id`` under
        ``"continue"`` waits for one fewer; those left with none become claimable."""
        for job_id in self._edges.dependents_of(failed_id):
            dependent = self._rows.get(job_id)
            if dependent is None or not self._waits(job_id):
                continue
            if dependent.dependency_failure != "continue":
                continue
            dependent.waiting -= 1
            if dependent.waiting == 0:
                self._show_at(dependent, now, now)
                self._notify_available(dependent.queue)

    def _forget_dependents(self, row: Row, now: float) -> None:
        """``forget_dependents`` for a deleted row: an unfinished one fails its dependents;
        its edges go."""
        if not row.has_dependents:
            return
        if not row.finished:
            self._fail_dependents(row.id, "was deleted", now)
        self._edges.forget_dependency(row.id)

    def _recheck_dependencies(self, row: Row) -> int | None:
        """``recheck_dependencies`` for a failed row put back: how many of its dependencies
        have not succeeded (a deleted one counts as met), or None while one is failed."""
        if row.dependency_failure is None:
            return 0
        dependencies = [
            self._rows[i] for i in self._edges.dependencies_of(row.id) if i in self._rows
        ]
        if any(d.status == "failed" for d in dependencies):
            return None
        return sum(d.status != "succeeded" for d in dependencies)

    def _leave_group(self, row: Row) -> None:
        if row.group is not None:
            members = self._groups[(row.queue, row.group)]
            members.discard(row.id)
            if not members:
                del self._groups[(row.queue, row.group)]

    def _fenced(self, job_id: int, claim_seq: int) -> Row | None:
        """The row, if a write naming ``(job_id, claim_seq)`` may apply to it (I9)."""
        row = self._rows.get(job_id)
        if row is None or row.status != "running" or row.claim_seq != claim_seq:
            return None
        return row

    def _record_attempt(
        self,
        row: Row,
        outcome: AttemptOutcome,
        now: float,
        *,
        timing: AttemptTiming | None = None,
        error: str | None = None,
        error_type: str | None = None,
        traceback: str | None = None,
    ) -> None:
        """Write the attempts-table row of the row's current attempt (docs/protocol.rst
        §14): at most one per ``claim_seq`` (``ON CONFLICT DO NOTHING``)."""
        rows = self._attempts.setdefault(row.id, [])
        if any(r.claim_seq == row.claim_seq for r in rows):
            return
        start = AttemptStart(
            job_id=row.id,
            queue=row.queue,
            attempt=row.attempts,
            claim_seq=row.claim_seq,
            worker_id=row.worker_id,
            host=row.host,
            claimed_at=now if row.claimed_at is None else row.claimed_at,
            wait_seconds=row.wait_seconds,
        )
        rows.append(
            new_attempt(
                start,
                outcome,
                now,
                timing=timing,
                error=error,
                error_type=error_type,
                traceback=traceback,
            )
        )

    @staticmethod
    def _store_progress(row: Row, progress: float | None) -> None:
        if progress is None:  # none reported: most jobs, so no check for it
            return
        # The runtime filters progress already; a backend must never store junk anyway.
        value = valid_progress(progress)
        if value is not None:
            row.progress = value

    @staticmethod
    def _store_checkpoint(row: Row, checkpoint: str | None, now: float) -> None:
        """A fenced write that carries a checkpoint stores it, and when (§16); one that
        carries none leaves the row's."""
        if checkpoint is not None:
            row.checkpoint, row.checkpointed_at = checkpoint, now

    def _info(
        self, row: Row, now: float, preview: int | None = None, *, checkpoint: bool = False
    ) -> JobInfo:
        """``checkpoint``: carry the row's checkpoint, as ``get_job`` and ``await_job`` do
        (a list's rows carry none, docs/protocol.rst §16)."""
        running = row.leased(now)
        state = row.state(now)
        return JobInfo(
            id=row.id,
            queue=row.queue,
            payload=_json_preview(row.payload, preview),
            status=state,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            priority=row.priority,
            progress=row.progress,
            last_error=_text_preview(row.last_error, preview),
            created_at=self.to_datetime(row.created_at),
            finished_at=self._maybe_datetime(row.finished_at),
            lease_expires_at=self.to_datetime(row.not_visible_until) if running else None,
            last_renewed_at=self._maybe_datetime(row.last_renewed_at),
            cancel_requested_at=self._maybe_datetime(row.cancel_requested_at),
            cancel_acknowledged_at=self._maybe_datetime(row.cancel_acknowledged_at),
            worker_id=row.worker_id if running else None,
            result=None if row.result is None else _json_preview(row.result, preview),
            group=row.group,
            cancelled=row.cancelled,
            snoozes=row.snoozes,
            next_attempt_at=(
                self.to_datetime(row.not_visible_until)
                if state == "scheduled" and row.waiting == 0
                else None
            ),
            # The pool that ran the last attempt: the row keeps worker_id until a retry.
            finished_by=row.worker_id if row.finished else None,
            checkpoint=(
                None if not checkpoint or row.checkpoint is None else decode_payload(row.checkpoint)
            ),
            checkpointed_at=self._maybe_datetime(row.checkpointed_at) if checkpoint else None,
            # get_job's row alone says what a waiting job waits for (§21).
            waiting_on=self._waiting_on(row) if checkpoint else (),
            parent_id=row.parent_id if checkpoint else None,  # get_job's row alone (§22)
        )

    def _waiting_on(self, row: Row) -> tuple[int, ...]:
        if row.waiting == 0 or row.status != "queued":
            return ()  # (a waiting job cancelled or deleted keeps its count: it waits no more)
        ids = self._edges.dependencies_of(row.id)
        return tuple(i for i in ids if i in self._rows and self._rows[i].status != "succeeded")

    def _maybe_datetime(self, t: float | None) -> datetime | None:
        return None if t is None else self.to_datetime(t)

    # -- claim order ---------------------------------------------------------------------

    def _index(self, queue: str) -> _QueueIndex:
        index = self._queues.get(queue)
        if index is None:
            index = self._queues[queue] = _QueueIndex()
        return index

    def _show_at(self, row: Row, t: float, now: float = -math.inf) -> None:
        """Set the row's visibility time; it becomes claimable once ``t`` has passed.

        A queued row visible already (``t <= now``) goes straight to ``ready``, with no
        live entry in ``waiting`` (an older one goes stale): ``_promote`` would move it
        there at the next claim anyway.
        """
        row.not_visible_until = t
        if t <= now and row.status == "queued":
            row.due_at = None
            self._make_ready(self._index(row.queue), row)
            return
        if row.due_at is None or t < row.due_at:
            heapq.heappush(self._index(row.queue).waiting, (t, row.id))
            row.due_at = t
        # else: its live entry surfaces first and is pushed again then (see _QueueIndex)

    def _promote(self, index: _QueueIndex, now: float) -> None:
        """Move rows that came due to ``ready``, failing those that must not run again."""
        waiting = index.waiting
        while waiting and waiting[0][0] <= now:
            t, job_id = heapq.heappop(waiting)
            row = self._rows.get(job_id)  # None: pruned
            if row is None or row.due_at != t:
                continue  # pruned, or a stale entry
            row.due_at = None
            if row.finished:
                continue
            if row.not_visible_until > t:  # moved later since: due again then
                heapq.heappush(waiting, (row.not_visible_until, row.id))
                row.due_at = row.not_visible_until
                continue
            if not self._settle_expired(row, now):
                self._make_ready(index, row)

    def _reprioritise(self, row: Row, priority: int) -> None:
        """Give a queued row a new priority: its ready entry, ordered by the old one, is
        taken out (a rare write, so a linear removal does); ``_show_at`` puts it back."""
        if priority == row.priority:
            return
        if row.in_ready:
            index = self._index(row.queue)
            index.ready.remove((-row.priority, row.id))
            heapq.heapify(index.ready)
            row.in_ready = False
        row.priority = priority

    @staticmethod
    def _make_ready(index: _QueueIndex, row: Row) -> None:
        if not row.in_ready:
            row.in_ready = True
            heapq.heappush(index.ready, (-row.priority, row.id))
            if row.status == "running":
                index.lapsed.add(row.id)

    def _settle_expired(self, row: Row, now: float) -> bool:
        """Fail a row whose lease expired when it must not run again; True if it did.

        A cancel flag means the user wants the job dead, even if its worker never saw the
        flag. A run alone that lapsed is parked (docs/protocol.rst §13). A lease expired on
        the final attempt is dead-lettered (docs/protocol.rst §1).
        """
        if row.status != "running" or row.not_visible_until > now or row.id in self._locked:
            return False  # still leased; or locked, so skipped as SKIP LOCKED would
        if row.cancel_requested_at is not None:
            error = "cancelled: cancel requested"
            row.cancelled = True
        elif row.alone:
            first, last = row.attempts - row.lapses, row.attempts
            error = PARKED.format(first=first, last=last)
        elif row.attempts >= row.max_attempts:
            error = FINAL_ATTEMPT.format(n=row.max_attempts)
        else:
            return False
        # The dead-lettered attempt lapsed too: the claim writes its row (§14).
        self._record_attempt(row, "lost", now, error=error)
        self._finish(row, "failed", error, now)
        return True

    def _pop_ready(
        self, index: _QueueIndex, now: float, limit: int, quarantine_after: int | None = None
    ) -> list[Row]:
        taken: list[Row] = []
        skipped: list[Row] = []  # locked by someone else: SKIP LOCKED passes them over
        while index.ready and len(taken) < limit:
            _, job_id = heapq.heappop(index.ready)
            index.lapsed.discard(job_id)
            row = self._rows.get(job_id)  # None: pruned
            if row is None:
                continue
            row.in_ready = False
            if row.not_visible_until > now:
                continue  # hidden again by its old owner's renewal
            if row.status != "queued" and (row.finished or self._settle_expired(row, now)):
                continue  # finished, or failed as its lease expired (a queued row is neither)
            if (
                row.id in self._locked
                or not self._group_allows(row)
                or self._quarantined(row, quarantine_after)
            ):
                skipped.append(row)  # locked elsewhere, its group's turn has not come, or
                # it must run alone (only a claim made alone takes it: _lone)
            else:
                taken.append(row)
        for row in skipped:
            self._make_ready(index, row)
        return taken

    @staticmethod
    def _quarantined(row: Row, quarantine_after: int | None) -> bool:
        """An expired lease whose last ``quarantine_after`` attempts all lapsed, this one
        included (docs/protocol.rst §13)."""
        return (
            quarantine_after is not None
            and row.status == "running"
            and row.lapses + 1 >= quarantine_after
        )

    def _lapsed_rows(
        self, index: _QueueIndex, now: float, quarantine_after: int | None
    ) -> Iterator[Row]:
        """The quarantined rows a claim may take now, locks aside: expired leases that no
        dead-letter reason fails (``_settle_expired`` has failed those already)."""
        if quarantine_after is None:
            return
        for job_id in index.lapsed:
            row = self._rows.get(job_id)
            if (
                row is not None
                and row.in_ready
                and row.status == "running"
                and row.not_visible_until <= now
                and row.cancel_requested_at is None
                and not row.alone
                and row.attempts < row.max_attempts
                and self._quarantined(row, quarantine_after)
            ):
                yield row

    def _lone(self, index: _QueueIndex, now: float, quarantine_after: int | None) -> Row | None:
        """The quarantined row a claim made alone takes: the first in claim order that is
        not locked elsewhere (SKIP LOCKED)."""
        rows = [
            r for r in self._lapsed_rows(index, now, quarantine_after) if r.id not in self._locked
        ]
        return min(rows, key=lambda r: (-r.priority, r.id), default=None)

    def _quarantined_waiting(
        self, index: _QueueIndex, now: float, quarantine_after: int | None
    ) -> bool:
        """Whether a quarantined row is claimable, locks aside (``Claims.alone_waiting``)."""
        return next(self._lapsed_rows(index, now, quarantine_after), None) is not None

    @staticmethod
    def _take_lone(index: _QueueIndex, row: Row) -> Row:
        """Take ``row`` out of its queue's ready heap (it is not at the top): a rare claim,
        so a linear removal does."""
        index.ready.remove((-row.priority, row.id))
        heapq.heapify(index.ready)
        index.lapsed.discard(row.id)
        row.in_ready = False
        return row

    def _group_allows(self, row: Row) -> bool:
        """Whether a grouped row may be claimed: a waiting row only as its group's next job
        (first of the group's waiting rows in claim order, delayed ones included) while no
        row of the group is running; an expired lease is its group's job in flight."""
        if row.group is None or row.status == "running":
            return True
        members = [self._rows[i] for i in self._groups[(row.queue, row.group)]]
        if any(m.status == "running" for m in members):
            return False  # (a row taken earlier in this claim is still "queued": see head)
        head = min((-m.priority, m.id) for m in members if m.status == "queued")
        return head == (-row.priority, row.id)

    # -- statements, per row -------------------------------------------------------------

    def _lease(
        self,
        row: Row,
        worker_id: str,
        now: float,
        lease_until: float,
        locked_after: float,
        alone: bool = False,
    ) -> Claimed:
        lapsed = row.status == "running"
        self._record_lapse(row, alone)
        if lapsed:  # the claim writes the lapsed attempt's row (docs/protocol.rst §14)
            self._record_attempt(row, "lost", now, error=row.last_error)
        row.status = "running"
        row.attempts += 1
        row.claim_seq += 1
        row.worker_id = worker_id
        row.last_renewed_at = now
        row.claimed_at = now
        row.wait_seconds = max(0.0, now - row.not_visible_until)
        pool = self._pools.get(worker_id)  # the claim's pool, as the SQL's subselect reads it
        row.host = None if pool is None else pool.pool.host
        row.progress = None  # the new attempt has reported none; an old attempt's is not its own
        self._show_at(row, lease_until)
        # Job(id, queue, payload, attempt, max_attempts, claim_seq, waited, trace_context,
        # checkpoint): by position, a third cheaper than by keyword for every job claimed.
        # The claim keeps the row's checkpoint and delivers it (docs/protocol.rst §16).
        job = Job(
            row.id,
            row.queue,
            decode_payload(row.payload),
            row.attempts,
            row.max_attempts,
            row.claim_seq,
            row.wait_seconds,
            decode_trace_context(row.trace_context),
            None if row.checkpoint is None else decode_payload(row.checkpoint),
        )
        return Claimed(job, lease_until, locked_after, alone)

    @staticmethod
    def _record_lapse(row: Row, alone: bool) -> None:
        """Before a row is leased: a running row's last attempt ended without an outcome
        (its lease lapsed), so count it and say so; a queued row's did not (docs/protocol.rst
        §13)."""
        if row.status == "running":
            row.lapses += 1
            last = row.attempts
            if alone:
                row.last_error = RUNS_ALONE.format(
                    first=last - row.lapses + 1, last=last, next=last + 1
                )
            else:
                row.last_error = STOPPED.format(last=last)
        else:
            row.lapses = 0
        row.alone = alone

    def _renew_one(self, item: RenewItem, lease_until: float, now: float) -> Verdict:
        if item.job_id in self._locked:
            return Verdict.UNCHANGED  # the statement skips rows it cannot lock at once
        row = self._rows.get(item.job_id)
        if row is None or row.status != "running":
            return Verdict.GONE
        if row.claim_seq != item.claim_seq:
            return Verdict.RECLAIMED
        if lease_until >= row.not_visible_until:  # a late statement changes none (SQL)
            self._store_progress(row, item.progress)
            self._store_checkpoint(row, item.checkpoint, now)
            self._show_at(row, lease_until)
        row.last_renewed_at = max(now, row.last_renewed_at or now)  # never backwards
        if row.cancel_requested_at is not None:
            if row.cancel_acknowledged_at is None:
                row.cancel_acknowledged_at = now  # the directive reaches the pool now
            return Verdict.CANCEL_REQUESTED
        return Verdict.EXTENDED

    def _ack_one(self, item: Ack, now: float) -> bool:
        row = self._fenced(item.job_id, item.claim_seq)
        if row is None:
            return False
        self._store_progress(row, item.progress)
        self._store_checkpoint(row, item.checkpoint, now)
        row.result = item.result  # a re-run that succeeds overwrites an earlier result
        self._record_attempt(row, "succeeded", now, timing=item.timing)
        self._finish(row, "succeeded", None, now)
        return True

    def _fail_one(self, item: Failure, now: float) -> Recorded | None:
        row = self._fenced(item.job_id, item.claim_seq)
        if row is None:
            return None
        self._store_progress(row, item.progress)
        self._store_checkpoint(row, item.checkpoint, now)
        outcome: AttemptOutcome
        if row.cancel_requested_at is not None:
            # A cancelled job is never retried; keep the worker's own words when it knew.
            error = item.error
            if not error.startswith("cancelled"):
                error = f"cancelled: cancel requested ({error})"
            outcome = "cancelled"
        elif item.retry_delay is None or row.attempts >= row.max_attempts:
            error, outcome = item.error, "failed"
        else:
            error, outcome = item.error, "retry"
        self._record_attempt(
            row,
            outcome,
            now,
            timing=item.timing,
            error=error,
            error_type=item.error_type,
            traceback=item.traceback,
        )
        if outcome == "retry":
            row.status = "queued"
            row.last_error = error
            self._show_at(row, now + (item.retry_delay or 0.0))  # (not None: a retry)
            self._notify_available(row.queue)
            return Recorded.RETRY
        row.cancelled = outcome == "cancelled"
        self._finish(row, "failed", error, now)
        return Recorded.FINAL

    def _given_back(self, item: Release | SnoozeWrite, now: float) -> tuple[Row | None, bool]:
        """What release and snooze do first (they give the attempt back): the fenced row
        (None: the fence moved on), its progress and checkpoint stored; and whether a
        cancel asked meanwhile was honoured instead (the job failed for good, cancelled,
        not run again)."""
        row = self._fenced(item.job_id, item.claim_seq)
        if row is None:
            return None, False
        self._store_progress(row, item.progress)
        self._store_checkpoint(row, item.checkpoint, now)
        if row.cancel_requested_at is None:
            return row, False
        error = "cancelled: cancel requested"
        self._record_attempt(row, "cancelled", now, timing=item.timing, error=error)
        row.cancelled = True
        self._finish(row, "failed", error, now)
        return row, True

    def _release_one(self, item: Release, now: float) -> bool:
        row, cancelled = self._given_back(item, now)
        if row is None or cancelled:
            return row is not None
        self._record_attempt(row, "released", now, timing=item.timing)
        row.status = "queued"
        row.attempts -= 1  # a released attempt is not charged
        self._show_at(row, now, now)
        self._notify_available(row.queue)
        return True

    def _snooze_one(self, item: SnoozeWrite, now: float, max_snoozes: int) -> Snoozed | None:
        row, cancelled = self._given_back(item, now)
        if row is None:
            return None
        if cancelled:
            return Snoozed.CANCELLED
        if row.snoozes >= max_snoozes:
            # The bound (§17): a failure for good, charged; a retry would meet it again.
            error = snooze_limit_message(max_snoozes)
            self._record_attempt(
                row, "failed", now, timing=item.timing, error=error, error_type=SNOOZE_LIMIT
            )
            self._finish(row, "failed", error, now)
            return Snoozed.LIMIT
        self._record_attempt(row, "snoozed", now, timing=item.timing)
        row.status = "queued"
        row.attempts -= 1  # a snoozed attempt is not charged
        row.snoozes += 1
        self._show_at(row, now + item.seconds, now)
        self._notify_available(row.queue)
        return Snoozed.SNOOZED

    def _child_wait_decision(
        self, item: ChildWaitWrite, row: Row
    ) -> tuple[ChildWait, list[int], int | None]:
        """What ``await_children``'s ``decided`` reads for one fenced row: what it becomes,
        its unfinished children, and its lowest failed child."""
        children = [self._rows[i] for i in self._children.get(row.id, ()) if i in self._rows]
        unfinished = [c.id for c in children if not c.finished]
        failed = min((c.id for c in children if c.status == "failed"), default=None)
        if row.cancel_requested_at is not None:
            return ChildWait.CANCELLED, [], None
        if item.on_child_failure == "fail" and failed is not None:
            return ChildWait.FAILED, [], failed
        return ChildWait.WAITING, unfinished, failed

    def _await_one(
        self,
        item: ChildWaitWrite,
        row: Row,
        became: ChildWait,
        unfinished: list[int],
        failed: int | None,
        now: float,
    ) -> ChildWait:
        self._store_progress(row, item.progress)
        self._store_checkpoint(row, item.checkpoint, now)
        if became is ChildWait.CANCELLED:
            error = "cancelled: cancel requested"
            self._record_attempt(row, "cancelled", now, timing=item.timing, error=error)
            row.cancelled = True
            self._finish(row, "failed", error, now)
            return became
        if became is ChildWait.FAILED:
            error = f"dependency {failed} failed"
            self._record_attempt(row, "failed", now, timing=item.timing, error=error)
            self._finish(row, "failed", error, now)
            return became
        self._record_attempt(row, "awaiting", now, timing=item.timing)
        for child_id in unfinished:
            self._rows[child_id].has_dependents = True
        self._edges.add(unfinished, row.id)
        row.status = "queued"
        row.attempts -= 1  # the wait is not charged
        row.waiting = len(unfinished)
        row.dependency_failure = item.on_child_failure
        row.awaits_children = True
        if unfinished:
            self._show_at(row, math.inf, now)
        else:
            self._show_at(row, now, now)
            self._notify_available(row.queue)
        return became

    @staticmethod
    def _cancel_message(row: Row) -> str:
        if row.status == "running":
            return "cancelled: cancel requested after its lease expired"
        if row.attempts == 0:
            return "cancelled before it ran"
        return "cancelled while waiting to retry"

    def _notify_available(self, queue: str) -> None:
        self._outbox.append(Sent(Notice(NoticeKind.AVAILABLE, queue)))

    # -- schedules (docs/scheduling.rst) ---------------------------------------------------

    def set_schedule(self, now: float, request: ScheduleRequest) -> ScheduleInfo:
        """Create or replace a schedule; mirrors ``-- name: set_schedule``.

        Its next run is the first tick after ``now`` (the PostgreSQL backend computes it
        from the database's now() just before the statement); a replaced schedule keeps
        its ``last_run_at``.
        """
        next_run_at = next_tick(request.cron, request.timezone, self.to_datetime(now))
        old = self._schedules.get(request.name)
        row = ScheduleRow(request, next_run_at, None if old is None else old.last_run_at)
        if old is not None:
            row.enabled = old.enabled  # replacing a schedule does not switch it on or off
        self._schedules[request.name] = row
        return self._schedule_info(row)

    def delete_schedule(self, now: float, name: str) -> bool:
        """Delete a schedule, False when unknown; mirrors ``-- name: delete_schedule``."""
        return self._schedules.pop(name, None) is not None

    def list_schedules(self, now: float) -> list[ScheduleInfo]:
        """Every schedule, by name; mirrors ``-- name: list_schedules``."""
        return [self._schedule_info(self._schedules[name]) for name in sorted(self._schedules)]

    def due_schedules(self, now: float, limit: int) -> tuple[list[Due], datetime]:
        """The schedules due at ``now`` (at most ``limit``, earliest first) and ``now`` as a
        datetime; mirrors ``-- name: due_schedules``."""
        at = self.to_datetime(now)
        due = sorted(
            (row.next_run_at, name)
            for name, row in self._schedules.items()
            if row.enabled and row.next_run_at <= at
        )[:limit]
        rows = [(name, self._schedules[name]) for _, name in due]
        return [
            Due(name, r.request.cron, r.request.timezone, r.next_run_at) for name, r in rows
        ], at

    def advance_schedules(self, now: float, advances: Sequence[Advance]) -> list[int]:
        """For each advance whose schedule is still due at exactly ``expected``: move its
        next run to ``next`` and enqueue one job for the tick; mirrors
        ``-- name: advance_schedules``. A tick a job already holds (the unique index on
        ``(schedule_name, schedule_tick)``) is not enqueued again. Returns the new ids.
        """
        at = self.to_datetime(now)
        taken = {row.schedule_key for row in self._rows.values() if row.schedule_key}
        ids: list[int] = []
        for advance in sorted(advances, key=lambda a: (a.expected, a.name)):
            row = self._schedules.get(advance.name)
            if (
                row is None
                or not row.enabled
                or row.next_run_at != advance.expected
                or row.next_run_at > at
            ):
                continue  # deleted, disabled, or another pass advanced it: the CAS fails
            row.next_run_at, row.last_run_at = advance.next, at
            key = (advance.name, advance.expected)
            if key in taken:
                continue  # ON CONFLICT DO NOTHING
            taken.add(key)
            ids.append(self._insert_scheduled(row.request, key, now))
        for queue in sorted({self._rows[job_id].queue for job_id in ids}):
            self._notify_available(queue)
        return sorted(ids)

    def move_schedule(self, name: str, next_run_at: datetime) -> None:
        """Testing hook: set a schedule's next run (see ``MemoryBackend.move_schedule``)."""
        row = self._schedules.get(name)
        if row is None:
            raise LookupError(f"no schedule named {name!r}")
        row.next_run_at = next_run_at.astimezone(UTC)

    def _insert_scheduled(
        self, schedule: ScheduleRequest, key: tuple[str, datetime], now: float
    ) -> int:
        request = EnqueueRequest(
            queue=schedule.queue,
            payloads=(schedule.payload,),
            priority=schedule.priority,
            delay=0.0,
            max_attempts=schedule.max_attempts,
            dedup_key=None,
        )
        job_id = self._insert(request, schedule.payload, now)
        self._rows[job_id].schedule_key = key
        return job_id

    def _schedule_info(self, row: ScheduleRow) -> ScheduleInfo:
        r = row.request
        return ScheduleInfo(
            name=r.name,
            queue=r.queue,
            cron=r.cron,
            timezone=r.timezone,
            payload=decode_payload(r.payload),
            priority=r.priority,
            max_attempts=r.max_attempts,
            next_run_at=row.next_run_at,
            last_run_at=row.last_run_at,
            enabled=row.enabled,
        )

    def _notify_finished(self, row: Row) -> None:
        """``f:<id>:<queue>``: only for a row someone waits for (``await_job`` marked it)."""
        if row.awaited:
            self._outbox.append(Sent(Notice(NoticeKind.FINISHED, row.queue, row.id)))

    # -- operator controls, audit log, table health (operator.sql) -----------------------

    def retry_matching(
        self,
        now: float,
        after: int,
        queue: str | None,
        status: JobStatus | None,
        search: str | None,
        limit: int,
        cancelled: bool | None = None,
        *,
        dead: DeadFilter | None = None,
    ) -> tuple[int, int | None, int]:
        """One batch of a bulk retry; mirrors ``-- name: retry_matching``: the first
        ``limit`` failed, unlocked, matching jobs after id ``after`` (and matching ``dead``,
        a redrive's dead-letter filters), each retried as :meth:`retry` does (of failed
        jobs sharing a dedup key, the first by id). Returns how many were picked, the last
        picked id, and how many were retried."""
        picked = self._pick(
            now, after, queue, status, search, cancelled, limit, failed_only=True, dead=dead
        )
        done = sum(self.retry(now, row.id) for row in picked)
        return len(picked), picked[-1].id if picked else None, done

    def delete_matching(
        self,
        now: float,
        after: int,
        queue: str | None,
        status: JobStatus | None,
        search: str | None,
        limit: int,
        cancelled: bool | None = None,
    ) -> tuple[int, int | None, int]:
        """One batch of a bulk delete; mirrors ``-- name: delete_matching``: the picked
        jobs are deleted as :meth:`delete_job` deletes one (never under a live lease)."""
        picked = self._pick(now, after, queue, status, search, cancelled, limit, failed_only=False)
        done = sum(self.delete_job(now, row.id) for row in picked)
        return len(picked), picked[-1].id if picked else None, done

    def _pick(
        self,
        now: float,
        after: int,
        queue: str | None,
        status: JobStatus | None,
        search: str | None,
        cancelled: bool | None,
        limit: int,
        *,
        failed_only: bool,
        dead: DeadFilter | None = None,
    ) -> list[Row]:
        """A batch's rows: the filters of ``count_jobs`` (its cancelled filter too), after
        the cursor, in id order, skipping locked rows (``SKIP LOCKED``)."""
        rows = [
            row
            for row in self._matching(now, queue, status, search, cancelled)
            if row.id > after
            and row.id not in self._locked
            and (not failed_only or row.status == "failed")
            and (dead is None or self._is_dead_match(row, dead))
        ]
        return rows[:limit]

    # -- dead letters (dead_letters.sql, docs/protocol.rst §19) ---------------------------

    def list_dead_letters(
        self, now: float, found: DeadFilter, limit: int, after: int | None, cut: int
    ) -> list[DeadLetter]:
        """One page of dead letters, highest id first, ids below ``after``, ``last_error``
        cut to ``cut`` characters; mirrors ``-- name: list_dead_letters``."""
        rows = [row for row in self._dead_rows(found) if after is None or row.id < after]
        return [self._dead_letter(row, cut) for row in rows[:limit]]

    def dead_letter_summary(
        self, now: float, found: DeadFilter, sample: int | None
    ) -> list[tuple[str, str | None, int]]:
        """The summary's rows ``(kind, name, n)``: ``total``, the matches of the newest
        ``sample`` plus at most one more, then the sample's counts per queue and per error
        type; mirrors ``-- name: dead_letter_summary``."""
        rows = self._dead_rows(found)
        picked = rows if sample is None else rows[: sample + 1]
        kept = picked if sample is None else picked[:sample]
        queues = Counter(row.queue for row in kept)
        types = Counter(self._error_type(row) for row in kept)
        return [
            ("total", None, len(picked)),
            *(("queue", name, n) for name, n in queues.items()),
            *(("error_type", name, n) for name, n in types.items()),
        ]

    def _dead_rows(self, found: DeadFilter) -> list[Row]:
        """The failed rows matching ``found``, highest id first (``jobs_dead_idx``)."""
        rows = [
            row
            for row in self._rows.values()
            if row.status == "failed" and self._is_dead_match(row, found)
        ]
        return rows[::-1]  # ids ascend in insertion order

    def _is_dead_match(self, row: Row, found: DeadFilter) -> bool:
        """Whether a failed row matches the dead-letter filters (each None: no filter)."""
        finished = None if row.finished_at is None else self.to_datetime(row.finished_at)
        error = None if found.error is None else found.error.lower()
        return (
            (found.queue is None or row.queue == found.queue)
            and (error is None or (row.last_error is not None and error in row.last_error.lower()))
            and (found.error_type is None or (self._error_type(row) or "") == found.error_type)
            and (
                found.failed_since is None
                or (finished is not None and finished >= found.failed_since)
            )
            and (
                found.failed_before is None
                or (finished is not None and finished < found.failed_before)
            )
            and (found.cancelled is None or row.cancelled == found.cancelled)
        )

    def _error_type(self, row: Row) -> str | None:
        """The error type of ``row``'s last attempt row (highest claim_seq); None without."""
        attempts = self._attempts.get(row.id)
        return max(attempts, key=lambda r: r.claim_seq).error_type if attempts else None

    def _dead_letter(self, row: Row, cut: int) -> DeadLetter:
        assert row.finished_at is not None  # a failed row is finished
        return DeadLetter(
            id=row.id,
            queue=row.queue,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            priority=row.priority,
            last_error=None if row.last_error is None else row.last_error[:cut],
            error_type=self._error_type(row),
            cancelled=row.cancelled,
            created_at=self.to_datetime(row.created_at),
            finished_at=self.to_datetime(row.finished_at),
        )

    def set_schedule_enabled(self, now: float, name: str, enabled: bool) -> bool:
        """Enable or disable a schedule; mirrors ``-- name: set_schedule_enabled``.
        Enabling a disabled one moves its next run to the first tick after ``now``. False
        when there is no such schedule."""
        row = self._schedules.get(name)
        if row is None:
            return False
        if enabled and not row.enabled:
            row.next_run_at = next_tick(
                row.request.cron, row.request.timezone, self.to_datetime(now)
            )
        row.enabled = enabled
        return True

    def run_schedule_now(self, now: float, name: str) -> int | None:
        """One job of the schedule now, standing for no tick, its next run unmoved;
        mirrors ``-- name: run_schedule_now``. None when there is no such schedule."""
        row = self._schedules.get(name)
        if row is None:
            return None
        schedule = row.request
        request = EnqueueRequest(
            queue=schedule.queue,
            payloads=(schedule.payload,),
            priority=schedule.priority,
            delay=0.0,
            max_attempts=schedule.max_attempts,
            dedup_key=None,
        )
        job_id = self._insert(request, schedule.payload, now)
        row.last_run_at = self.to_datetime(now)
        self._notify_available(schedule.queue)
        return job_id

    def record_audit(self, now: float, action: str, target: str, session: str, detail: str) -> int:
        """Append an audit entry (``detail``: its JSON text); mirrors ``record_audit``."""
        self._last_audit_id += 1  # an identity: never reused after retention deletes some
        entry = AuditEntry(
            id=self._last_audit_id,
            at=self.to_datetime(now),
            action=action,
            target=target,
            session=session,
            detail=read_detail(detail),
        )
        self._audit.append(entry)
        return entry.id

    def list_audit(
        self, now: float, limit: int, offset: int, action: str | None
    ) -> list[AuditEntry]:
        """Audit entries newest first, optionally of one action; mirrors ``list_audit``.
        Each comes with its detail decoded afresh, so that no caller shares it."""
        newest = [e for e in reversed(self._audit) if action is None or e.action == action]
        return [
            AuditEntry(e.id, e.at, e.action, e.target, e.session, json.loads(json.dumps(e.detail)))
            for e in newest[offset : offset + limit]
        ]

    def table_health(self, now: float) -> TableHealth:
        """The tables' row counts (no sizes: nothing is on disk) and the oldest running and
        ready jobs; mirrors ``table_sizes`` and ``oldest_work``."""
        counts = {
            "attempts": sum(len(rows) for rows in self._attempts.values()),
            "audit_log": len(self._audit),
            "job_edges": len(self._edges),  # 0018
            "jobs": len(self._rows),
            "maintainer": 0 if self._maintainer_row is None else 1,
            "queues": len(self._settings),
            "retention": len(self._policies.queues),
            "retention_settings": 1,
            "schedules": len(self._schedules),
            "workers": len(self._pools),
        }
        tables = tuple(TableSize(name, 0, n, 0, None, None) for name, n in counts.items())
        running = min(
            (r for r in self._rows.values() if r.leased(now)),
            key=lambda r: (r.claimed_at or 0.0, r.id),
            default=None,
        )
        ready = min(
            (r for r in self._rows.values() if r.state(now) == "ready"),
            key=lambda r: (r.not_visible_until, r.id),
            default=None,
        )
        return TableHealth(
            tables=tables,
            indexes=(),
            oldest_running_since=None
            if running is None
            else self.to_datetime(running.claimed_at or 0.0),
            oldest_running_id=None if running is None else running.id,
            oldest_ready_since=None if ready is None else self.to_datetime(ready.not_visible_until),
            oldest_ready_id=None if ready is None else ready.id,
        )

    # -- retention and the maintainer lease (retention.sql, docs/protocol.rst §15) -------

    def get_retention(self, now: float) -> Retention:
        """Every retention setting; mirrors ``-- name: get_retention``."""
        return self._policies.retention()

    def set_retention(
        self, now: float, queue: str | None, succeeded: float | None, failed: float | None
    ) -> RetentionPolicy:
        """Set a queue's own policy, or the default (``queue`` None); mirrors
        ``-- name: set_retention``."""
        if queue is None:
            self._policies.default_succeeded = succeeded
            self._policies.default_failed = failed
        else:
            self._policies.queues[queue] = (succeeded, failed)
        return self._policies.policy(queue)

    def clear_retention(self, now: float, queue: str) -> bool:
        """Drop a queue's own policy; mirrors ``-- name: clear_retention``."""
        return self._policies.queues.pop(queue, None) is not None

    def set_audit_retention(self, now: float, seconds: float | None) -> None:
        """Mirrors ``-- name: set_audit_retention``."""
        self._policies.audit = seconds

    def maintainer(self, now: float) -> MaintainerInfo | None:
        """The lease row as it stands; mirrors ``-- name: maintainer``."""
        lease = self._maintainer_row
        if lease is None:
            return None
        return MaintainerInfo(
            holder=lease.holder,
            seq=lease.seq,
            acquired_at=self.to_datetime(lease.acquired_at),
            expires_at=self.to_datetime(lease.not_visible_until),
        )

    def claim_maintainer(self, now: float, holder: str, lease: float) -> int | None:
        """Take the lease when it is free or has run out, moving its fence on; mirrors
        ``-- name: claim_maintainer``. None while a lease is live, the holder's own too."""
        row = self._maintainer_row
        if row is not None and row.live(now):
            return None
        seq = 1 if row is None else row.seq + 1
        self._maintainer_row = LeaseRow(holder, seq, now, now + lease)
        return seq

    def renew_maintainer(self, now: float, holder: str, seq: int, lease: float) -> bool:
        """Extend a live lease, fenced by ``seq``, never shortening it; mirrors
        ``-- name: renew_maintainer``."""
        row = self._maintainer_row
        if row is None or not row.held(holder, seq, now):
            return False
        row.not_visible_until = max(row.not_visible_until, now + lease)
        return True

    def release_maintainer(self, now: float, holder: str, seq: int) -> bool:
        """End a live lease now, fenced by ``seq`` (it is free at once); mirrors
        ``-- name: release_maintainer``."""
        row = self._maintainer_row
        if row is None or not row.held(holder, seq, now):
            return False
        row.not_visible_until = now
        return True

    def prune_retained(self, now: float, seq: int, limit: int) -> PruneBatch | None:
        """One retention batch under lease ``seq``; mirrors ``-- name: prune_retained``.

        None, and nothing deleted, unless ``seq`` is the live lease's fence. Else the
        ``limit`` oldest finished jobs past their queue's policy are the candidates (the
        statement picks them before it locks), and those not locked are deleted with
        their attempts; apart, up to ``limit`` of the oldest audit entries past the audit
        log's keep-time. ``more``: either list was full."""
        lease = self._maintainer_row
        if lease is None or lease.seq != seq or not lease.live(now):
            return None
        candidates = self._past_policy(now)[:limit]
        deleted: dict[tuple[str, str], int] = {}
        for row in candidates:
            if row.id in self._locked:  # FOR UPDATE SKIP LOCKED
                continue
            del self._rows[row.id]  # a finished row holds no dedup key; heap entries go stale
            self._attempts.pop(row.id, None)  # its attempts go with it (§14)
            self._forget_dependents(row, now)
            key = (row.queue, row.status)
            deleted[key] = deleted.get(key, 0) + 1
        audit = self._audit_past_policy(now)[:limit]
        gone = {entry.id for entry in audit}
        self._audit = [entry for entry in self._audit if entry.id not in gone]
        oldest = min(
            (r.finished_at for r in self._rows.values() if r.finished_at is not None),
            default=None,
        )
        return PruneBatch(
            deleted=deleted,
            audit_deleted=len(audit),
            more=len(candidates) == limit or len(audit) == limit,
            oldest_finished_age=None if oldest is None else now - oldest,
        )

    def retention_preview(self, now: float, older_than: float | None) -> RetentionPreview:
        """What a prune would delete now, counted; mirrors ``-- name: retention_preview``.

        By the policies (``older_than`` None): the jobs of :meth:`_past_policy` and the
        audit entries of :meth:`_audit_past_policy`, all of them (no batch limit, locked
        rows included). By age: every job finished more than ``older_than`` seconds before
        ``now`` (the rows ``prune`` would delete), and no audit entries."""
        if older_than is None:
            jobs, audit = self._past_policy(now), len(self._audit_past_policy(now))
        else:
            jobs = [
                row
                for row in self._rows.values()
                if row.finished_at is not None and row.finished_at < now - older_than
            ]
            audit = 0
        due: dict[tuple[str, str], int] = {}
        for row in jobs:
            key = (row.queue, row.status)
            due[key] = due.get(key, 0) + 1
        return RetentionPreview(due=dict(sorted(due.items())), audit_due=audit)

    def _past_policy(self, now: float) -> list[Row]:
        """Every finished job older than its queue's policy keeps it, oldest first."""
        past = []
        for row in self._rows.values():
            if row.finished_at is None:
                continue  # never a job that is not finished (I16)
            keep = self._policies.keep(row.queue, row.status)
            if keep is not None and row.finished_at < now - keep:
                past.append(row)
        past.sort(key=lambda r: (r.finished_at, r.id))
        return past

    def _audit_past_policy(self, now: float) -> list[AuditEntry]:
        """Audit entries older than the audit log's keep-time, oldest first."""
        keep = self._policies.audit
        if keep is None:
            return []
        cutoff = self.to_datetime(now - keep)
        return sorted((e for e in self._audit if e.at < cutoff), key=lambda e: (e.at, e.id))


def _printed(text: str) -> str:
    """Stored JSON text as PostgreSQL prints ``jsonb`` (``", "`` and ``": "`` between
    items, non-ASCII characters as themselves), so that searches and previews of short
    texts agree with it."""
    return json.dumps(json.loads(text), ensure_ascii=False)


def _json_preview(text: str, preview: int | None) -> Any:
    """A stored payload or result, decoded; or, with ``preview`` and longer than it once
    printed, its first ``preview`` characters; mirrors ``list_jobs``' ``left(...)``."""
    if preview is not None:
        printed = _printed(text)
        if len(printed) > preview:
            return TruncatedText(printed[:preview], len(printed))
    return decode_payload(text)


def _text_preview(text: str | None, preview: int | None) -> str | None:
    if text is None or preview is None or len(text) <= preview:
        return text
    return TruncatedText(text[:preview], len(text))


def _contains(row: Row, needle: str) -> bool:
    """Whether the payload's JSON text (:func:`_printed`) or ``last_error`` contains
    ``needle`` (lower case): short searches match alike in both backends."""
    text = _printed(row.payload)
    if needle in text.lower():
        return True
    return row.last_error is not None and needle in row.last_error.lower()


def _sorted(rows: list[Row], sort: JobSort, when: Callable[[float], datetime]) -> list[Row]:
    """``rows`` (in id order) in ``sort`` order; ties by id in the same direction, and rows
    without ``finished_at`` last in both ``finished_at`` orders (``NULLS LAST``). Times
    compare as the datetimes ``when`` makes of them (what PostgreSQL stores, and what a
    cursor holds)."""
    descending = sort.startswith("-")
    column = sort.lstrip("-")
    if column == "id":
        return rows[::-1] if descending else rows
    if column == "finished_at":
        done = [row for row in rows if row.finished_at is not None]
        rest = [row for row in rows if row.finished_at is None]
        done.sort(key=lambda r: (when(r.finished_at or 0.0), r.id), reverse=descending)
        return done + (rest[::-1] if descending else rest)
    if column == "priority":
        return sorted(rows, key=lambda r: (r.priority, r.id), reverse=descending)
    return sorted(rows, key=lambda r: (when(r.created_at), r.id), reverse=descending)


def _follows(key: tuple[object, int], cursor: Cursor) -> bool:
    """Whether a row of this (sort key, id) comes after ``cursor``'s row in its sort."""
    value, job_id = key
    if cursor.column == "finished_at" and (value is None or cursor.key is None):
        if value is None and cursor.key is None:  # both unfinished: by id
            return job_id < cursor.id if cursor.descending else job_id > cursor.id
        return value is None  # unfinished rows come last, in both orders
    pair: Any = (value, job_id)
    mark: Any = (cursor.key, cursor.id)
    return bool(pair < mark) if cursor.descending else bool(pair > mark)


def _precedes(key: tuple[object, int], cursor: Cursor) -> bool:
    """Whether a row of this (sort key, id) comes before ``cursor``'s row in its sort."""
    return key != (cursor.key, cursor.id) and not _follows(key, cursor)
