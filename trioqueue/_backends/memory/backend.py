"""The in-memory backend: the PostgreSQL backend's semantics, on trio's clock, in one process.

Theory of operation
-------------------
The rows and every statement's effect are the reference model,
:class:`~trioqueue._backends.memory.model.MemoryModel`: synchronous, with no trio in it.
:class:`MemoryBackend` is the async shell around it. It checks arguments (as the PostgreSQL
backend does before it sends a statement), reads ``trio.current_time()`` once per statement
and hands it to the model as ``now`` (so under ``MockClock(autojump_threshold=0)`` row
leases and the worker's fences run on one fake clock), and adds what a database connection
adds: the connection model, injected faults, and delivering notices.

Each operation holds a *connection*, one of ``connections`` slots, for its whole duration,
and this is where injected faults act: a fault stalls or fails the call while it holds its
connection, before its effect (``after=False``) or after it, holding back the answer
(``after=True``). So a wedged call really pins a connection, which is what the guard's
two-connection ceiling is about. The effect itself, one model call, is atomic, as one SQL
statement is.

Notices (PostgreSQL's LISTEN/NOTIFY) go to bounded memory channels and are dropped when a
listener falls behind: a notice is only a hint, and workers poll as a fallback.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from trioqueue._backends.dead_letter_checks import (
    MAX_DEAD_ERROR,
    DeadFilter,
    DeadLetterCalls,
    DeadRows,
)
from trioqueue._backends.dependency_checks import (
    Dependencies,
    check_dependencies,
    parent_refused,
)
from trioqueue._backends.interface import (
    MAINTENANCE_OPERATIONS,
    OPERATIONS,
    READ_OPERATIONS,
    Backend,
)
from trioqueue._backends.memory.faults import DelayFault, ErrorFault, Fault, HangFault, OmitFault
from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.operator_checks import (
    Matching,
    check_audit,
    check_enabled,
    check_list_audit,
    check_matching,
)
from trioqueue._backends.retention_checks import (
    check_audit_retention,
    check_clear_retention,
    check_lease,
    check_preview_age,
    check_prune_limit,
    check_retention,
    check_seq,
)
from trioqueue._backends.validation import (
    EnqueueRequest,
    check_beat,
    check_cancelled,
    check_checkpoint_texts,
    check_child_waits,
    check_claim,
    check_cursors,
    check_enqueue,
    check_filters,
    check_history,
    check_job_id,
    check_job_ids,
    check_list_jobs,
    check_on_duplicate,
    check_preview,
    check_queue,
    check_queue_limits,
    check_registration,
    check_renew_items,
    check_retry_delay,
    check_schedule,
    check_schedule_name,
    check_search_window,
    check_snoozes,
    check_sort,
    check_timeout,
    check_worker_id,
    revision_outcome,
)
from trioqueue._backends.waiting import wait_finished
from trioqueue._core.schedule import plan_advances
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import BackendError, UnknownDependencyError, UnknownJobError
from trioqueue._operator_types import (
    AttemptBucket,
    AttemptInfo,
    AuditEntry,
    DeadLetter,
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
    Claims,
    Enqueued,
    EnqueueOutcome,
    Failure,
    FinishedBucket,
    JobCount,
    JobDependencies,
    JobInfo,
    JobSort,
    JobStatus,
    Notice,
    NoticeKind,
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

__all__ = ["MemoryBackend", "open_memory"]

#: Schedules one scheduling pass enqueues at most (the rest wait for the next pass).
SCHEDULES_PER_PASS = 1000

T = TypeVar("T")

log = logging.getLogger("trioqueue.schedule")

#: Notices buffered per listener before new ones are dropped.
NOTICE_BUFFER = 1000

#: The statements that can finish (or delete) a job: wait_for reads again after each.
_FINISHING = frozenset(
    {"claim", "ack", "fail", "release", "snooze", "await_children", "cancel", "delete_job"}
)


@asynccontextmanager
async def open_memory(
    *, connections: int = 10, now: datetime | None = None
) -> AsyncIterator[MemoryBackend]:
    """Open an in-memory backend for the duration of the block.

    Args:
        connections: the size of the modelled connection pool; every operation holds one
            connection for its whole duration (injected stalls included).
        now: the wall-clock time trio's clock stands for at this moment (an aware
            datetime); default: the real time now. The backend's datetimes (job times,
            schedules' ticks) follow trio's clock from there, so under a ``MockClock`` a
            test can run schedules across a chosen date, such as a DST change.

    Raises:
        TypeError, ValueError: ``connections`` is not an int >= 1, or ``now`` is not an
            aware datetime.
    """
    if isinstance(connections, bool) or not isinstance(connections, int):
        raise TypeError(f"connections must be an int, not {type(connections).__name__}")
    if connections < 1:
        raise ValueError(f"connections must be at least 1, not {connections}")
    if now is not None and not isinstance(now, datetime):
        raise TypeError(f"now must be a datetime or None, not {type(now).__name__}")
    if now is not None and now.utcoffset() is None:
        raise ValueError("now must be an aware datetime (with a tzinfo)")
    backend = MemoryBackend(connections=connections, now=now)
    try:
        yield backend
    finally:
        backend._close()


#: The operations a fault can be injected into: the protocol's, and the maintainer's
#: (docs/protocol.rst §15), so that a test can wedge a lease renewal or a prune batch.
FAULTABLE = (*OPERATIONS, *MAINTENANCE_OPERATIONS)


@dataclass(slots=True, eq=False)
class _Listener:
    queue: str | None  # None: every queue, and every cancel (``watch``)
    worker_id: str
    send: trio.MemorySendChannel[Notice]


@dataclass(slots=True)
class _Injected:
    fault: Fault
    remaining: int | None  # calls left before it clears itself; None: until cleared


class _FaultTable:
    """The faults injected per operation, and the calls they are holding.

    Held calls wait on their operation's *release* event. Clearing an operation's fault
    sets that event (ending every stall at once) and installs a fresh one for later calls.
    Replacing a fault does not release anything: a test may wedge one call for good and
    then inject something else for the calls after it.
    """

    def __init__(self) -> None:
        self._injected: dict[str, _Injected] = {}
        self._released = {op: trio.Event() for op in FAULTABLE}

    def inject(self, op: str, fault: object) -> None:
        if op not in FAULTABLE:
            raise ValueError(f"op must be one of {', '.join(FAULTABLE)}, not {op!r}")
        if isinstance(fault, OmitFault) and op != "renew":
            raise ValueError(f"omit() only applies to 'renew', not {op!r}")
        if fault is None:
            self._injected.pop(op, None)
            self.release(op)
        elif isinstance(fault, HangFault | DelayFault | ErrorFault | OmitFault):
            self._injected[op] = _Injected(fault, fault.times)
        else:
            raise TypeError(f"fault must come from trioqueue.testing, not {fault!r}")

    def release(self, op: str) -> None:
        self._released[op].set()
        self._released[op] = trio.Event()

    def release_all(self) -> None:
        for op in FAULTABLE:
            self.release(op)

    def take(self, op: str) -> Fault | None:
        """The fault the next call of ``op`` suffers, counting it against ``times``."""
        injected = self._injected.get(op)
        if injected is None:
            return None
        if injected.remaining is not None:
            injected.remaining -= 1
            if injected.remaining <= 0:
                del self._injected[op]
        return injected.fault

    async def act(self, op: str, fault: Fault | None, *, after: bool) -> None:
        """Carry out ``fault``'s stall or error, if it belongs at this point of the call."""
        if isinstance(fault, HangFault) and fault.after is after:
            await self._hold(op, fault.seconds, shield=not fault.interruptible)
        elif isinstance(fault, DelayFault) and fault.after is after:
            await self._hold(op, fault.seconds, shield=False)
        elif isinstance(fault, ErrorFault) and fault.after is after:
            if fault.exc is None:
                raise BackendError(f"injected error in {op}")
            # Reset the traceback: the same instance may be raised many times.
            raise fault.exc.with_traceback(None)

    async def _hold(self, op: str, seconds: float, *, shield: bool) -> None:
        released = self._released[op]  # the event current when the stall began
        with trio.CancelScope(shield=shield), trio.move_on_after(seconds):
            await released.wait()


class MemoryBackend(DeadLetterCalls):
    """A :class:`~trioqueue._backends.interface.Backend` that keeps its jobs in memory.

    Create it with :func:`open_memory`. Besides the Backend protocol it offers the testing
    hooks :meth:`inject` (fault injection) and :meth:`lock_rows` / :meth:`unlock_rows`
    (rows "locked by someone else", which a renewal reports as ``UNCHANGED``) and
    :meth:`expire` (a running job's lease runs out now).
    """

    supports_transactions: bool = False

    def __init__(self, *, connections: int = 10, now: datetime | None = None) -> None:
        # JobInfo wants datetimes: the model maps trio time onto the wall clock at one anchor.
        anchor_datetime = datetime.now(UTC) if now is None else now.astimezone(UTC)
        self._model = MemoryModel(anchor=trio.current_time(), anchor_datetime=anchor_datetime)
        self._listeners: list[_Listener] = []
        self._faults = _FaultTable()
        self._connections = connections
        self._pool = trio.Semaphore(connections)
        self._in_use = 0
        self._peak = 0
        self._calls = dict.fromkeys((*OPERATIONS, *READ_OPERATIONS, *MAINTENANCE_OPERATIONS), 0)
        self._dropped_notices = 0
        #: The worker's wall clock (:meth:`wall_time`); rows use trio's clock. A test seam:
        #: ``lambda: trio.current_time() + 60`` makes the worker's clock run 60 s ahead.
        self.wall_clock: Callable[[], float] = trio.current_time
        #: Testing hook: when True, every notice is lost, as if NOTIFY never arrived.
        self.drop_notices = False
        self._closed = False
        # Set (and replaced) after every statement that can finish a job: wait_for wakes on it.
        self._finishing = trio.Event()

    # -- producers and operators ---------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Nothing to migrate (it applies none); present so code can treat both backends alike."""
        await trio.lowlevel.checkpoint()
        return []

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
    ) -> int:
        """Add one job; with ``dedup_key``, return the unfinished duplicate's id instead.

        Args:
            on_duplicate: what to do to that duplicate while it waits (docs/protocol.rst
                §18): ``"keep"`` it (the default), ``"replace"`` its payload, priority and
                run time, or ``"debounce"`` it (run time now + ``delay``). A running
                duplicate is never changed; :meth:`enqueue_deduplicated` says what happened.

            depends_on: ids of jobs this one runs after (docs/protocol.rst §21): it waits
                until every one has succeeded. Excludes ``dedup_key`` and ``delay``.
            on_dependency_failure: when a dependency fails for good, ``"fail"`` this job
                (the default) or ``"cancel"`` it; either way it never runs.
            parent_id: enqueue the job as a child of this unfinished job (docs/protocol.rst
                §22); ``UnknownJobError`` if there is none, ``ValueError`` if it finished.

        Raises:
            TypeError: ``payload`` is not JSON-serialisable, or an option has a wrong type.
            ValueError: an option is out of range, or ``on_duplicate`` lacks what it needs.
            UnknownDependencyError: ``depends_on`` names a job that does not exist.
        """
        [job_id] = await self.enqueue_many(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            on_duplicate=on_duplicate,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            parent_id=parent_id,
        )
        return job_id

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
        """:meth:`enqueue` with a ``dedup_key``, also saying what happened.

        Returns:
            An :class:`~trioqueue.Enqueued`, which unpacks as ``(id, added)``: ``(id,
            True)`` for a new job; ``(id, False)`` when an unfinished job of the queue
            already held ``dedup_key`` (``id`` is that job's), and its ``outcome`` says
            whether it was kept, replaced, debounced, or left alone as running.
        """
        [job_id], outcome = await self._enqueue(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            on_duplicate=on_duplicate,
        )
        return Enqueued(job_id, outcome)

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
    ) -> list[int]:
        """Add several jobs in one statement (counted as one ``"enqueue"`` call).

        Everything is validated first: on any error nothing is written. An empty list
        issues no statement. ``on_duplicate`` as in :meth:`enqueue` (with a ``dedup_key``,
        so one payload).

        Raises:
            TypeError: a payload is not JSON-serialisable, or an option has a wrong type.
            ValueError: an option is out of range, or ``dedup_key`` comes with several payloads.
        """
        ids, _ = await self._enqueue(
            queue,
            payloads,
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            on_duplicate=on_duplicate,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            parent_id=parent_id,
        )
        return ids

    async def _enqueue(
        self,
        queue: str,
        payloads: Sequence[Any],
        *,
        priority: int,
        delay: float | None,
        max_attempts: int,
        dedup_key: str | None,
        group: str | None,
        on_duplicate: OnDuplicate,
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: OnDependencyFailure = "fail",
        parent_id: int | None = None,
    ) -> tuple[list[int], EnqueueOutcome]:
        """The ids, and what was done (``added``, or what befell a dedup key's holder)."""
        dependencies = check_dependencies(
            depends_on, on_dependency_failure, dedup_key=dedup_key, delay=delay, parent_id=parent_id
        )
        policy = check_on_duplicate(on_duplicate, dedup_key=dedup_key, delay=delay)
        request = check_enqueue(
            queue,
            payloads,
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
        )
        if not request.payloads:
            await trio.lowlevel.checkpoint()
            return [], "added"
        if dependencies is not None:
            return await self._enqueue_after(request, dependencies), "added"

        def enqueue(now: float, _: object) -> tuple[list[int], EnqueueOutcome]:
            # Both statements in one step: PostgreSQL runs them one after the other, and
            # what can come between them there (the holder finishing) is retried there.
            ids, added = self._model.enqueue(now, request)
            if added:
                return ids, "added"
            if policy == "keep":
                return ids, "kept"
            answer = self._model.revise_duplicate(now, request, policy)
            assert answer is not None  # the holder enqueue found, in the same step
            return [answer[0]], revision_outcome(policy, answer[1])

        return await self._execute("enqueue", enqueue)

    async def _enqueue_after(
        self, request: EnqueueRequest, dependencies: Dependencies
    ) -> list[int]:
        def enqueue(now: float, _: object) -> list[int]:
            ids = self._model.enqueue_after(now, request, dependencies)
            if ids is not None:
                return ids
            unknown = self._model.unknown_jobs(dependencies.ids)
            if unknown or dependencies.parent_id is None:
                raise UnknownDependencyError(unknown)
            parent = dependencies.parent_id
            raise parent_refused(parent, bool(self._model.unknown_jobs([parent])))

        return await self._execute("enqueue", enqueue)

    async def dependencies(self, job_id: int) -> JobDependencies:
        """The job's dependencies and dependents, each with its queue and current state
        (docs/protocol.rst §21).

        Raises:
            UnknownJobError: (a ``LookupError``) no job has this id.
            TypeError: ``job_id`` is not an int.
        """
        check_job_id(job_id)

        def read(now: float, _: object) -> JobDependencies:
            found = self._model.job_dependencies(now, job_id)
            if found is None:
                raise UnknownJobError(job_id)
            return found

        return await self._execute("dependencies", read)

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job: at once if it is not running, else by flagging its row.
        Its unfinished descendants (children, theirs...) are cancelled with it, each so
        (docs/protocol.rst §22).

        Returns:
            False when the job is unknown or already finished, else True.
        """
        check_job_id(job_id)
        return await self._execute("cancel", lambda now, _: self._model.cancel(now, job_id))

    async def counts(self) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state (states with no jobs are left out)."""
        return await self._execute("counts", lambda now, _: self._model.counts(now))

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue: its counts and the age of its oldest ready job (None when none is)."""
        return await self._execute("queue_stats", lambda now, _: self._model.queue_stats(now))

    async def retry(self, job_id: int) -> bool:
        """Put a failed job back on its queue for one more attempt.

        The attempt count and ``last_error`` are kept; ``max_attempts`` grows to allow one
        more attempt when it was used up, and a cancel flag is cleared.

        Returns:
            False when the job is unknown, not failed, or its dedup key is held by another
            unfinished job; else True.
        """
        check_job_id(job_id)
        return await self._execute("retry", lambda now, _: self._model.retry(now, job_id))

    async def pause_queue(self, queue: str) -> None:
        """Stop every pool claiming from ``queue``: claims give nothing until
        :meth:`resume_queue`; running jobs go on. Any queue name may be paused, also one
        that has no jobs yet."""
        queue = check_queue(queue)
        await self._execute("pause_queue", lambda now, _: self._model.pause_queue(now, queue))

    async def resume_queue(self, queue: str) -> None:
        """Let ``queue`` be claimed again; a notice wakes idle pools at once."""
        queue = check_queue(queue)
        await self._execute("resume_queue", lambda now, _: self._model.resume_queue(now, queue))

    async def set_queue_limits(
        self, queue: str, *, max_running: int | None = None, max_per_second: float | None = None
    ) -> None:
        """Cap ``queue`` across every pool (docs/flow.rst): at most ``max_running`` jobs
        under a live lease at once, and claims at ``max_per_second`` (a bucket of one
        second's worth). None lifts a limit; each call sets both.

        Raises:
            TypeError, ValueError: a limit is not None or a positive number (every wrong
                limit is named); nothing is written.
        """
        queue = check_queue(queue)
        running, rate = check_queue_limits(max_running, max_per_second)
        await self._execute(
            "set_queue_limits",
            lambda now, _: self._model.set_queue_limits(now, queue, running, rate),
        )

    async def get_job(self, job_id: int, *, fresh: bool = False) -> JobInfo:
        """A snapshot of one job (always fresh: this backend has no replica to read).

        Raises:
            UnknownJobError: (a ``LookupError``) no job has this id.
            TypeError: ``job_id`` is not an int.
        """
        check_job_id(job_id)

        def effect(now: float, _: Fault | None) -> JobInfo:
            info = self._model.get_job(now, job_id)
            if info is None:
                raise UnknownJobError(job_id)
            return info

        return await self._execute("get_job", effect)

    async def get_jobs(
        self, job_ids: Sequence[int], *, preview: int | None = None, fresh: bool = False
    ) -> dict[int, JobInfo]:
        """Snapshots of many jobs in one read: each known job's JobInfo by id
        (``preview`` as in :meth:`list_jobs`; always fresh, as :meth:`get_job`).

        Raises:
            TypeError: an id is not an int.
            ValueError: more than 10,000 ids, or a negative ``preview``.
        """
        ids = check_job_ids(job_ids)
        cut = check_preview(preview)
        return await self._execute("get_jobs", lambda now, _: self._model.get_jobs(now, ids, cut))

    async def wait_for(
        self,
        job_id: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a plain argument callers outside trio use)
    ) -> JobInfo:
        """Wait until the job is finished (succeeded or failed); its final JobInfo.

        Wakes on the statements that can finish a job (no polling). Each read marks an
        unfinished job awaited, as PostgreSQL's does, so its finish sends a ``FINISHED``
        notice to watchers. ``timeout`` is in seconds (None: no limit; 0: look once, and
        mark nothing).

        Raises:
            UnknownJobError: no job has this id, or it was deleted while waited for.
            TimeoutError: it was not finished within ``timeout`` seconds.
        """
        read = self.get_job if timeout == 0 else self._await_job  # a look marks nothing
        return await wait_finished(job_id, timeout, read, lambda: self._finishing.wait)

    async def _await_job(self, job_id: int) -> JobInfo:
        """wait_for's read: :meth:`get_job` that marks the job awaited (counted as one)."""

        def effect(now: float, _: Fault | None) -> JobInfo:
            info = self._model.await_job(now, job_id)
            if info is None:
                raise UnknownJobError(job_id)
            return info

        return await self._execute("get_job", effect)

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
        queue and one status, and whose payload's JSON text or ``last_error`` contains
        ``search`` (case-insensitive). With ``preview=n``, payloads, results and errors
        longer than ``n`` characters come back cut, as :class:`~trioqueue.TruncatedText`
        (the payload's text as PostgreSQL would print it). ``after``/``before``: a cursor
        (:func:`trioqueue.job_cursor`); ``search_window``: search the newest ids only.

        Raises:
            ValueError: an unknown ``status`` or ``sort``, ``limit`` outside 1..10000,
                ``offset`` < 0, a negative ``preview``, or a ``search`` longer than 1000
                characters or holding NUL, a cursor not of ``sort``, both cursors, or a
                ``search_window`` < 1.
        """
        queue, status, limit, offset = check_list_jobs(queue, status, limit, offset)
        search = check_filters(queue, status, search)[2]
        sort = check_sort(sort)
        cut = check_preview(preview)
        only = check_cancelled(cancelled, status)
        start, end = check_cursors(after, before, sort)
        window = check_search_window(search_window)

        return await self._execute(
            "list_jobs",
            lambda now, _: self._model.list_jobs(
                now,
                queue,
                status,
                limit,
                offset,
                search=search,
                sort=sort,
                preview=cut,
                cancelled=only,
                after=start,
                before=end,
                search_window=window,
            ),
        )

    async def count_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
    ) -> int:
        """How many jobs :meth:`list_jobs` would list with these filters and no paging."""
        queue, status, search = check_filters(queue, status, search)
        only = check_cancelled(cancelled, status)
        return await self._execute(
            "count_jobs",
            lambda now, _: self._model.count_jobs(now, queue, status, search, only),
        )

    async def estimate_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        search_window: int | None = None,
    ) -> JobCount:
        """:meth:`count_jobs` as a :class:`~trioqueue.JobCount`: the memory backend
        always counts exactly (``estimated`` False)."""
        queue, status, search = check_filters(queue, status, search)
        only = check_cancelled(cancelled, status)
        window = check_search_window(search_window)
        n = await self._execute(
            "count_jobs",
            lambda now, _: self._model.count_jobs(now, queue, status, search, only, window),
        )
        return JobCount(n)

    async def list_attempts(self, job_id: int) -> list[AttemptInfo]:
        """Every recorded attempt of one job, oldest first (docs/protocol.rst §14).

        Raises:
            UnknownJobError: no job has this id.
        """
        check_job_id(job_id)

        def effect(now: float, _: Fault | None) -> list[AttemptInfo]:
            attempts = self._model.list_attempts(now, job_id)
            if attempts is None:
                raise UnknownJobError(job_id)
            return attempts

        return await self._execute("list_attempts", effect)

    async def queue_timings(
        self, *, window: float = 3600.0, queue: str | None = None
    ) -> dict[str, QueueTimings]:
        """Per queue (or only ``queue``): run time and wait percentiles of the attempts
        finished in the last ``window`` seconds; queues with none are left out."""
        window, _, queue = check_history(window, 1, queue)
        return await self._execute(
            "queue_timings", lambda now, _: self._model.queue_timings(now, window, queue)
        )

    async def attempt_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[AttemptBucket]:
        """Attempts finished per equal time bucket over the last ``window`` seconds, with
        their percentiles: exactly ``buckets`` entries, oldest first."""
        window, buckets, queue = check_history(window, buckets, queue)
        return await self._execute(
            "attempt_history",
            lambda now, _: self._model.attempt_history(now, window, buckets, queue),
        )

    async def delete_job(self, job_id: int) -> bool:
        """Delete a job unless it is running under a live lease.

        Returns:
            False when the job is unknown or running under a live lease, else True.
        """
        check_job_id(job_id)
        return await self._execute("delete_job", lambda now, _: self._model.delete_job(now, job_id))

    async def list_workers(self) -> list[WorkerInfo]:
        """Every registered worker pool, ordered by queue then start time."""
        return await self._execute("list_workers", lambda now, _: self._model.list_workers(now))

    async def finished_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[FinishedBucket]:
        """Jobs finished per equal time bucket over the last ``window`` seconds, oldest
        first, exactly ``buckets`` entries.

        Raises:
            ValueError: ``window`` not > 0 (or past a century), ``buckets`` outside 1..1000.
        """
        window, buckets, queue = check_history(window, buckets, queue)
        return await self._execute(
            "finished_history",
            lambda now, _: self._model.finished_history(now, window, buckets, queue),
        )

    def statistics(self) -> BackendStatistics:
        return BackendStatistics(
            connections_in_use=self._in_use,
            peak_connections_in_use=self._peak,
            calls=dict(self._calls),
            extra={
                "connections": self._connections,
                "connections_waiting": self._pool.statistics().tasks_waiting,
                "notices_dropped": self._dropped_notices,
            },
        )

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
        """Create or replace a schedule; its next run is the first tick after now.

        Raises:
            TypeError, ValueError: listing every bad argument; nothing is written.
        """
        request = check_schedule(
            name,
            queue,
            cron,
            payload,
            timezone=timezone,
            priority=priority,
            max_attempts=max_attempts,
        )
        return await self._execute(
            "set_schedule", lambda now, _: self._model.set_schedule(now, request)
        )

    async def delete_schedule(self, name: str) -> bool:
        """Delete a schedule; False when there is none."""
        name = check_schedule_name(name)
        return await self._execute(
            "delete_schedule", lambda now, _: self._model.delete_schedule(now, name)
        )

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        return await self._execute("list_schedules", lambda now, _: self._model.list_schedules(now))

    async def enqueue_due(self) -> list[int]:
        """Enqueue one job per due schedule and advance each past now (one statement here;
        a read and a compare-and-set on PostgreSQL). Returns the new jobs' ids."""

        def effect(now: float, _: Fault | None) -> list[int]:
            due, at = self._model.due_schedules(now, SCHEDULES_PER_PASS)
            if not due:
                return []
            advances, problems = plan_advances(due, at)
            for problem in problems:
                log.warning("%s", problem)
            return self._model.advance_schedules(now, advances)

        return await self._execute("enqueue_due", effect)

    # -- the worker side -----------------------------------------------------------------

    def wall_time(self) -> float:
        """Row times are trio times here, so the worker's and the rows' clocks agree, unless
        a test set :attr:`wall_clock` (a clock ahead or behind, docs/protocol.rst §8)."""
        return self.wall_clock()

    async def database_clock(self) -> float:
        """The rows' clock (trio's), read as one statement: the ``"clock"`` operation."""
        return await self._execute("clock", lambda now, _: now)

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
        """Lease up to ``limit`` claimable jobs of ``queue``, priority DESC then id ASC.

        Rows whose lease expired on their final attempt, or that were asked to cancel
        while running, are moved to ``failed`` instead of being run again. Quarantined
        rows are taken only ``alone`` (docs/protocol.rst §13).
        """
        check_claim(queue, limit, worker_id, visibility_timeout, quarantine_after, alone)
        started = trio.current_time()  # as PostgreSQL's now(): the statement's start

        def effect(now: float, _: Fault | None) -> Claims:
            claims = self._model.claim(
                now,
                queue,
                limit,
                worker_id,
                visibility_timeout,
                started=started,
                quarantine_after=quarantine_after,
                alone=alone,
            )
            claims.database_clock = now  # the clock of the statement (docs/protocol.rst §8)
            return claims

        return await self._execute("claim", effect)

    async def renew(
        self,
        items: Sequence[RenewItem],
        *,
        visibility_timeout: float,
        beat: PoolBeat | None = None,
    ) -> Mapping[int, Verdict]:
        """Renew every item in one statement, storing progress; one verdict per job.

        With ``beat``, the same statement records the pool's heartbeat; a beat without
        items is a statement of its own, the ``"beat"`` operation.
        """
        check_timeout("visibility_timeout", visibility_timeout)
        items = check_renew_items(items)
        check_checkpoint_texts(items)
        beat = check_beat(beat)
        if not items:
            if beat is not None:
                await self._execute("beat", lambda now, _: self._model.beat(now, beat))
            else:
                await trio.lowlevel.checkpoint()
            return {}

        def effect(now: float, fault: Fault | None) -> dict[int, Verdict]:
            # An omitted job is left out of the statement, so it gets no verdict at all.
            omitted = fault.job_ids if isinstance(fault, OmitFault) else frozenset()
            kept = [item for item in items if item.job_id not in omitted]
            return self._model.renew(now, kept, visibility_timeout, beat)

        return await self._execute("renew", effect)

    async def register_pool(self, pool: PoolRegistration) -> None:
        """Register a worker pool, started now; first deletes pools stale for over an hour."""
        pool = check_registration(pool)
        await self._execute("register_pool", lambda now, _: self._model.register_pool(now, pool))

    async def unregister_pool(self, worker_id: str) -> bool:
        """Remove a pool's row (graceful shutdown); False when it had none."""
        worker_id = check_worker_id(worker_id)
        return await self._execute(
            "unregister_pool", lambda now, _: self._model.unregister_pool(now, worker_id)
        )

    async def ack(self, items: Sequence[Ack]) -> list[bool]:
        """Mark attempts succeeded. Fenced: True for each item that was applied."""
        items = tuple(items)
        check_checkpoint_texts(items)
        return await self._execute("ack", lambda now, _: self._model.ack(now, items))

    async def fail(self, items: Sequence[Failure]) -> list[Recorded | None]:
        """Record failed attempts. Fenced: per item, what it became (None: not applied).

        A retry is recorded as final when the attempt was the last one allowed, or when the
        job was asked to cancel (a cancelled job is never retried, docs/protocol.rst §5).
        """
        items = tuple(items)
        for item in items:
            check_retry_delay(item.retry_delay)
        check_checkpoint_texts(items)
        return await self._execute("fail", lambda now, _: self._model.fail(now, items))

    async def release(self, items: Sequence[Release]) -> list[bool]:
        """Give attempts back uncharged. Fenced: True for each item that was applied."""
        items = tuple(items)
        check_checkpoint_texts(items)
        return await self._execute("release", lambda now, _: self._model.release(now, items))

    async def snooze(
        self, items: Sequence[SnoozeWrite], *, max_snoozes: int
    ) -> list[Snoozed | None]:
        """Put jobs back after a delay, their attempts given back (docs/protocol.rst §17).
        Fenced: per item, what the job became (None: not applied)."""
        items = tuple(items)
        bound = check_snoozes(items, max_snoozes)
        return await self._execute("snooze", lambda now, _: self._model.snooze(now, items, bound))

    async def await_children(self, items: Sequence[ChildWaitWrite]) -> list[ChildWait | None]:
        """Put jobs back to wait for their unfinished children, their attempts given back
        (docs/protocol.rst §22). Fenced: per item, what the job became (None: not applied)."""
        items = tuple(items)
        check_child_waits(items)
        return await self._execute(
            "await_children", lambda now, _: self._model.await_children(now, items)
        )

    @asynccontextmanager
    async def listen(
        self, queue: str, worker_id: str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """Notices for ``queue``: new work, and cancel requests for ``worker_id``'s jobs.

        Listening uses no pooled connection (PostgreSQL keeps a dedicated one for LISTEN).
        """
        self._check_open()
        check_queue(queue)
        if not isinstance(worker_id, str):
            raise TypeError(f"worker_id must be a str, not {type(worker_id).__name__}")
        async with self._subscribe(queue, worker_id) as notices:
            yield notices

    @asynccontextmanager
    async def watch(self) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """Every notice of the backend, whatever its queue or worker: new work, cancel
        requests, and finishes of awaited jobs, for an operator's live view (the dashboard). Notices that do not fit the
        buffer are dropped; a watcher polls as well."""
        self._check_open()
        async with self._subscribe(None, "") as notices:
            yield notices

    @asynccontextmanager
    async def _subscribe(
        self, queue: str | None, worker_id: str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """A listener on ``queue`` (None: every queue and every cancel) for the block."""
        send, receive = trio.open_memory_channel[Notice](NOTICE_BUFFER)
        listener = _Listener(queue, worker_id, send)
        self._listeners.append(listener)
        try:
            async with receive:
                yield receive
        finally:
            self._listeners.remove(listener)
            send.close()

    # -- testing hooks -------------------------------------------------------------------

    def inject(self, op: str, fault: Fault | None) -> None:
        """Make calls of ``op`` misbehave; ``None`` clears the fault and releases held calls.

        Args:
            op: one of ``"claim" "renew" "ack" "fail" "release" "enqueue" "cancel"
                "beat" "register_pool" "unregister_pool" "enqueue_due" "clock"``, or of the
                maintainer's ``"claim_maintainer" "renew_maintainer" "release_maintainer"
                "prune_retained"``.
            fault: from :func:`trioqueue.testing.hang`, ``delay``, ``error`` or ``omit``
                (``omit`` for ``"renew"`` only). Replaces any fault already injected there.

        Raises:
            ValueError: an unknown ``op``, or ``omit`` for an operation other than renew.
        """
        self._faults.inject(op, fault)

    def lock_rows(self, job_ids: Iterable[int]) -> None:
        """Pretend another transaction holds these rows' locks.

        Renewals answer ``UNCHANGED`` for them and leave them untouched, and claims skip
        them, like PostgreSQL's ``SKIP LOCKED``. Fenced writes and cancel ignore the locks.
        """
        self._model.lock_rows(job_ids)

    def unlock_rows(self, job_ids: Iterable[int]) -> None:
        self._model.unlock_rows(job_ids)

    def expire(self, job_id: int) -> None:
        """Make a running job's lease expire now (one second ago), as if its worker died.

        The PostgreSQL equivalent is ``UPDATE jobs SET not_visible_until = now() - interval
        '1 second', lease_floor = now() - interval '1 second' WHERE id = ...`` (a claim
        looks for expired leases by their floor, docs/postgres.rst). The row stays
        ``running``: the next claim takes it again,
        or dead-letters it when its attempts are used up or it was asked to cancel.

        Raises:
            UnknownJobError: no job has this id.
            ValueError: the job is not running.
        """
        self._model.expire(trio.current_time(), job_id)

    def move_schedule(self, name: str, next_run_at: datetime) -> None:
        """Set a schedule's next run to ``next_run_at`` (an aware datetime), as if its ticks
        had come that far: in the past, the next scheduling pass enqueues it.

        The PostgreSQL equivalent is ``UPDATE schedules SET next_run_at = ... WHERE name =
        ...``.

        Raises:
            LookupError: no schedule has this name.
        """
        self._model.move_schedule(name, next_run_at)

    # -- connections and faults ----------------------------------------------------------

    async def _execute(self, op: str, effect: Callable[[float, Fault | None], T]) -> T:
        """Run ``effect`` as one statement: on a connection, with ``op``'s fault around it.

        ``effect`` gets the statement's time (trio's clock, read once, after any stall
        before it) and the fault; the notices the model queued go out as it returns.
        """
        self._check_open()
        async with self._connection(op):
            fault = self._faults.take(op) if op in FAULTABLE else None
            await self._faults.act(op, fault, after=False)
            try:
                result = effect(trio.current_time(), fault)
            finally:
                self._send_notices()
                if op in _FINISHING:
                    self._signal_finishing()
            await self._faults.act(op, fault, after=True)
            return result

    @asynccontextmanager
    async def _connection(self, op: str) -> AsyncIterator[None]:
        async with self._pool:
            self._in_use += 1
            self._peak = max(self._peak, self._in_use)
            self._calls[op] += 1  # the statement is issued once a connection is had
            try:
                yield
            finally:
                self._in_use -= 1

    def _signal_finishing(self) -> None:
        self._finishing.set()
        self._finishing = trio.Event()

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError("the memory backend is closed", transient=False)

    def _close(self) -> None:
        # End every held call so that nothing outlives the backend, and end every listener.
        self._closed = True
        self._signal_finishing()  # waiters read again, and hear that the backend is closed
        self._faults.release_all()
        for listener in list(self._listeners):
            listener.send.close()

    # -- notices -------------------------------------------------------------------------

    def _send_notices(self) -> None:
        for sent in self._model.take_notices():
            for listener in list(self._listeners):
                if listener.queue is None or (
                    # A finish is news for watchers only (PostgreSQL's listen ignores f:).
                    sent.notice.kind is not NoticeKind.FINISHED
                    and listener.queue == sent.notice.queue
                    and sent.worker_id in (None, listener.worker_id)
                ):
                    self._deliver(listener, sent.notice)

    def _deliver(self, listener: _Listener, notice: Notice) -> None:
        if self.drop_notices:
            self._dropped_notices += 1
            return
        try:
            listener.send.send_nowait(notice)
        except trio.WouldBlock:
            self._dropped_notices += 1  # the listener fell behind; polling covers it
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the listener is leaving

    # -- operator controls, audit log, table health --------------------------------

    async def _retry_batches(self, matching: Matching) -> int:
        return await self._run_matching("retry_matching", matching)

    async def delete_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
    ) -> int:
        """Delete every job matching the filters but those running under a live lease,
        ``batch_size`` per statement; how many were deleted.

        Raises:
            ValueError: a bad filter, or ``batch_size`` outside 1..10000.
        """
        matching = check_matching(queue, status, search, cancelled, batch_size, retry=False)
        return await self._run_matching("delete_matching", matching)

    async def _read_dead_page(
        self, found: DeadFilter, size: int, cursor: int | None
    ) -> list[DeadLetter]:
        return await self._execute(
            "list_dead_letters",
            lambda now, _: self._model.list_dead_letters(now, found, size, cursor, MAX_DEAD_ERROR),
        )

    async def _count_dead(self, found: DeadFilter, size: int | None) -> DeadRows:
        return await self._execute(
            "dead_letter_summary", lambda now, _: self._model.dead_letter_summary(now, found, size)
        )

    async def _run_matching(self, op: str, matching: Matching) -> int:
        """One statement per batch, as the PostgreSQL backend runs them (operator.py)."""
        batch = (
            self._model.retry_matching if op == "retry_matching" else self._model.delete_matching
        )
        m = matching
        cursor, done = 0, 0
        while True:

            def effect(
                now: float, _: Fault | None, after: int = cursor
            ) -> tuple[int, int | None, int]:
                if op == "retry_matching":
                    return self._model.retry_matching(
                        now, after, m.queue, m.status, m.search, m.batch_size, m.cancelled,
                        dead=m.dead,
                    )  # fmt: skip
                return batch(now, after, m.queue, m.status, m.search, m.batch_size, m.cancelled)

            picked, last_id, count = await self._execute(op, effect)
            done += count
            if picked < matching.batch_size or last_id is None:
                return done
            cursor = last_id

    async def record_audit(
        self, action: str, target: str, session: str, detail: Mapping[str, Any]
    ) -> int:
        """Append an entry to the audit log; its id.

        Raises:
            TypeError, ValueError: a field a database cannot store; nothing is written.
        """
        r = check_audit(action, target, session, detail)
        return await self._execute(
            "record_audit",
            lambda now, _: self._model.record_audit(now, r.action, r.target, r.session, r.detail),
        )

    async def list_audit(
        self, limit: int = 100, offset: int = 0, *, action: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally of one action."""
        limit, offset, action = check_list_audit(limit, offset, action)
        return await self._execute(
            "list_audit", lambda now, _: self._model.list_audit(now, limit, offset, action)
        )

    # -- retention and the maintainer (docs/protocol.rst §15) ------------------------------

    async def get_retention(self) -> Retention:
        """Every retention setting: the default policy, the queues' own, the audit log's."""
        return await self._execute("get_retention", lambda now, _: self._model.get_retention(now))

    async def set_retention(
        self, queue: str | None, *, succeeded: float | None, failed: float | None
    ) -> RetentionPolicy:
        """Set how long ``queue``'s finished jobs are kept (None: the default policy).

        Raises:
            TypeError, ValueError: naming every bad argument; nothing is written.
        """
        r = check_retention(queue, succeeded, failed)
        return await self._execute(
            "set_retention",
            lambda now, _: self._model.set_retention(now, r.queue, r.succeeded, r.failed),
        )

    async def clear_retention(self, queue: str) -> bool:
        """Drop ``queue``'s own policy; False if it had none."""
        name = check_clear_retention(queue)
        return await self._execute(
            "clear_retention", lambda now, _: self._model.clear_retention(now, name)
        )

    async def set_audit_retention(self, seconds: float | None) -> None:
        """Keep audit entries ``seconds`` (> 0), or for ever (None)."""
        keep = check_audit_retention(seconds)
        await self._execute(
            "set_audit_retention", lambda now, _: self._model.set_audit_retention(now, keep)
        )

    async def maintainer(self) -> MaintainerInfo | None:
        """The maintainer lease as it stands (None: never taken)."""
        return await self._execute("maintainer", lambda now, _: self._model.maintainer(now))

    async def claim_maintainer(self, holder: str, lease: float) -> int | None:
        """Take the maintainer lease if it is free or ran out; its new fence, or None."""
        name, seconds = check_lease(holder, lease)
        return await self._execute(
            "claim_maintainer", lambda now, _: self._model.claim_maintainer(now, name, seconds)
        )

    async def renew_maintainer(self, holder: str, seq: int, lease: float) -> bool:
        """Extend the maintainer lease, fenced by ``seq``."""
        name, seconds = check_lease(holder, lease)
        fence = check_seq(seq)
        return await self._execute(
            "renew_maintainer",
            lambda now, _: self._model.renew_maintainer(now, name, fence, seconds),
        )

    async def release_maintainer(self, holder: str, seq: int) -> bool:
        """Give the maintainer lease up, fenced by ``seq``."""
        name = check_worker_id(holder)
        fence = check_seq(seq)
        return await self._execute(
            "release_maintainer",
            lambda now, _: self._model.release_maintainer(now, name, fence),
        )

    async def prune_retained(self, seq: int, *, limit: int = 1000) -> PruneBatch | None:
        """One bounded batch of retention, fenced by the maintainer lease ``seq``."""
        fence = check_seq(seq)
        size = check_prune_limit(limit)
        return await self._execute(
            "prune_retained", lambda now, _: self._model.prune_retained(now, fence, size)
        )

    async def retention_preview(self, *, older_than: float | None = None) -> RetentionPreview:
        """What a prune would delete now (by the policies, or by age), counted."""
        age = check_preview_age(older_than)
        return await self._execute(
            "retention_preview", lambda now, _: self._model.retention_preview(now, age)
        )

    async def table_health(self) -> TableHealth:
        """Row counts (sizes are 0: nothing is on disk) and the oldest running and ready
        jobs."""
        return await self._execute("table_health", lambda now, _: self._model.table_health(now))

    async def set_schedule_enabled(self, name: str, enabled: bool) -> bool:
        """Enable or disable a schedule; False when there is none. Enabled again, its next
        run is the first tick after now."""
        name = check_schedule_name(name)
        on = check_enabled(enabled)
        return await self._execute(
            "set_schedule_enabled",
            lambda now, _: self._model.set_schedule_enabled(now, name, on),
        )

    async def run_schedule_now(self, name: str) -> int | None:
        """Enqueue one job of a schedule now, its next run unmoved; the job's id, or None
        when there is no such schedule."""
        name = check_schedule_name(name)
        return await self._execute(
            "run_schedule_now", lambda now, _: self._model.run_schedule_now(now, name)
        )


if TYPE_CHECKING:
    # mypy proves here that MemoryBackend implements the Backend protocol.
    _implements: type[Backend] = MemoryBackend
