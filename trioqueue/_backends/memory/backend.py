"""The in-memory backend: the PostgreSQL backend's semantics, on trio's clock, in one process.

Theory of operation
-------------------
A job is a :class:`_Row` in a dict, with the columns the PostgreSQL table has. Every time is
``trio.current_time()``, so under ``MockClock(autojump_threshold=0)`` row leases and the
worker's fences run on one fake clock. A row is *claimable* when it is not finished and its
``not_visible_until`` has passed; there is no other "running" bookkeeping, exactly as in the
protocol (an expired lease makes a row claimable by itself).

Operations are atomic: each applies its whole effect in one synchronous step, as one SQL
statement would. Around that step each operation holds a *connection*, one of
``connections`` slots, for its whole duration, and this is where injected faults act: a
fault stalls or fails the call while it holds its connection, before its effect
(``after=False``) or after it, holding back the answer (``after=True``). So a wedged call
really pins a connection, which is what the guard's two-connection ceiling is about.

Claim order (priority DESC, id ASC) is kept incrementally per queue (:class:`_QueueIndex`)
so that a claim costs ``O(k log n)`` rather than a scan of every row: demos and property
tests drain thousands of jobs.

Notices (PostgreSQL's LISTEN/NOTIFY) go to bounded memory channels and are dropped when a
listener falls behind: a notice is only a hint, and workers poll as a fallback.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import trio

from trioqueue._backends.interface import OPERATIONS, Backend
from trioqueue._backends.memory.faults import DelayFault, ErrorFault, Fault, HangFault, OmitFault
from trioqueue._backends.validation import (
    EnqueueRequest,
    check_claim,
    check_enqueue,
    check_job_id,
    check_list_jobs,
    check_queue,
    check_renew_items,
    check_retry_delay,
    check_timeout,
    decode_payload,
)
from trioqueue._core.progress import valid_progress
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import BackendError, UnknownJobError
from trioqueue._types import (
    Ack,
    BackendStatistics,
    Claimed,
    Failure,
    Job,
    JobInfo,
    JobStatus,
    Notice,
    NoticeKind,
    Recorded,
    Release,
)

__all__ = ["MemoryBackend", "open_memory"]

T = TypeVar("T")

RowStatus = Literal["queued", "running", "succeeded", "failed"]

#: Notices buffered per listener before new ones are dropped.
NOTICE_BUFFER = 1000

#: Operations counted in ``statistics().calls`` besides the fault-injectable ones.
READ_OPERATIONS = ("get_job", "list_jobs", "counts", "retry")


@asynccontextmanager
async def open_memory(*, connections: int = 10) -> AsyncIterator[MemoryBackend]:
    """Open an in-memory backend for the duration of the block.

    Args:
        connections: the size of the modelled connection pool; every operation holds one
            connection for its whole duration (injected stalls included).

    Raises:
        TypeError, ValueError: ``connections`` is not an int >= 1.
    """
    if isinstance(connections, bool) or not isinstance(connections, int):
        raise TypeError(f"connections must be an int, not {type(connections).__name__}")
    if connections < 1:
        raise ValueError(f"connections must be at least 1, not {connections}")
    backend = MemoryBackend(connections=connections)
    try:
        yield backend
    finally:
        backend._close()


@dataclass(slots=True, eq=False)
class _Row:
    """One job, with the columns of the PostgreSQL table (times are trio times)."""

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
    finished_at: float | None = None
    worker_id: str | None = None
    in_ready: bool = False  # an entry for it is in its queue's ready heap

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed")

    def leased(self, now: float) -> bool:
        """Running under a lease that has not expired yet."""
        return self.status == "running" and self.not_visible_until > now


@dataclass(slots=True)
class _QueueIndex:
    """Claim order for one queue, kept incrementally.

    ``waiting`` holds ``(not_visible_until, id)`` for every visibility time a row was given.
    An entry is live only while it still equals the row's ``not_visible_until``: every
    change pushes a fresh entry, and stale ones are dropped when they surface. When a live
    entry comes due, its row moves to ``ready``, ordered ``(-priority, id)``. A ready entry
    is re-checked when popped, since the old owner of an expired lease may renew it.
    """

    waiting: list[tuple[float, int]] = field(default_factory=list)
    ready: list[tuple[int, int]] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class _Listener:
    queue: str
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
        self._released = {op: trio.Event() for op in OPERATIONS}

    def inject(self, op: str, fault: object) -> None:
        if op not in OPERATIONS:
            raise ValueError(f"op must be one of {', '.join(OPERATIONS)}, not {op!r}")
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
        for op in OPERATIONS:
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


class MemoryBackend:
    """A :class:`~trioqueue._backends.interface.Backend` that keeps its jobs in memory.

    Create it with :func:`open_memory`. Besides the Backend protocol it offers the testing
    hooks :meth:`inject` (fault injection) and :meth:`lock_rows` / :meth:`unlock_rows`
    (rows "locked by someone else", which a renewal reports as ``UNCHANGED``) and
    :meth:`expire` (a running job's lease runs out now).
    """

    supports_transactions: bool = False

    def __init__(self, *, connections: int = 10) -> None:
        self._rows: dict[int, _Row] = {}
        self._queues: dict[str, _QueueIndex] = {}
        self._dedup: dict[tuple[str, str], int] = {}  # unfinished jobs only
        self._locked: set[int] = set()
        self._listeners: list[_Listener] = []
        self._faults = _FaultTable()
        self._connections = connections
        self._pool = trio.Semaphore(connections)
        self._in_use = 0
        self._peak = 0
        self._calls = dict.fromkeys((*OPERATIONS, *READ_OPERATIONS), 0)
        self._dropped_notices = 0
        #: Testing hook: when True, every notice is lost, as if NOTIFY never arrived.
        self.drop_notices = False
        self._closed = False
        # JobInfo wants datetimes: map trio time onto the wall clock at one anchor.
        self._anchor_time = trio.current_time()
        self._anchor_datetime = datetime.now(UTC)

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
    ) -> int:
        """Add one job; with ``dedup_key``, return the unfinished duplicate's id instead.

        Raises:
            TypeError: ``payload`` is not JSON-serialisable, or an option has a wrong type.
            ValueError: an option is out of range.
        """
        [job_id] = await self.enqueue_many(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
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
    ) -> tuple[int, bool]:
        """:meth:`enqueue` with a ``dedup_key``, also saying whether the job was added.

        Returns:
            ``(id, True)`` for a new job; ``(id, False)`` when an unfinished job of the
            queue already held ``dedup_key`` and nothing was added (``id`` is that job's).
        """
        [job_id], added = await self._enqueue(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
        )
        return job_id, added

    async def enqueue_many(
        self,
        queue: str,
        payloads: Sequence[Any],
        *,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        dedup_key: str | None = None,
    ) -> list[int]:
        """Add several jobs in one statement (counted as one ``"enqueue"`` call).

        Everything is validated first: on any error nothing is written. An empty list
        issues no statement.

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
    ) -> tuple[list[int], bool]:
        """The ids, and False when a dedup key's holder was found instead of adding."""
        request = check_enqueue(
            queue,
            payloads,
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
        )
        if not request.payloads:
            await trio.lowlevel.checkpoint()
            return [], True

        def effect(_: Fault | None) -> tuple[list[int], bool]:
            if request.dedup_key is not None:
                existing = self._dedup.get((request.queue, request.dedup_key))
                if existing is not None:
                    return [existing], False
            now = trio.current_time()
            ids = [self._insert(request.queue, text, request, now) for text in request.payloads]
            self._notify_available(request.queue)
            return ids, True

        return await self._execute("enqueue", effect)

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job: at once if it is not running, else by flagging its row.

        Returns:
            False when the job is unknown or already finished, else True.
        """
        check_job_id(job_id)
        return await self._execute("cancel", lambda _: self._cancel_now(job_id))

    async def counts(self) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state (states with no jobs are left out)."""
        return await self._execute("counts", lambda _: self._counts_now())

    def _counts_now(self) -> dict[str, dict[JobStatus, int]]:
        now = trio.current_time()
        counts: dict[str, dict[JobStatus, int]] = {}
        for row in self._rows.values():
            per_state = counts.setdefault(row.queue, {})
            state = self._public_status(row, now)
            per_state[state] = per_state.get(state, 0) + 1
        return counts

    async def retry(self, job_id: int) -> bool:
        """Put a failed job back on its queue for one more attempt.

        The attempt count and ``last_error`` are kept; ``max_attempts`` grows to allow one
        more attempt when it was used up, and a cancel flag is cleared.

        Returns:
            False when the job is unknown, not failed, or its dedup key is held by another
            unfinished job; else True.
        """
        check_job_id(job_id)
        return await self._execute("retry", lambda _: self._retry_now(job_id))

    async def get_job(self, job_id: int) -> JobInfo:
        """A snapshot of one job.

        Raises:
            UnknownJobError: (a ``LookupError``) no job has this id.
            TypeError: ``job_id`` is not an int.
        """
        check_job_id(job_id)

        def effect(_: Fault | None) -> JobInfo:
            row = self._rows.get(job_id)
            if row is None:
                raise UnknownJobError(job_id)
            return self._info(row, trio.current_time())

        return await self._execute("get_job", effect)

    async def list_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[JobInfo]:
        """Snapshots of jobs ordered by id, optionally of one queue and one status.

        Raises:
            ValueError: an unknown ``status``, ``limit`` outside 1..10000 or ``offset`` < 0.
        """
        queue, status, limit, offset = check_list_jobs(queue, status, limit, offset)

        def effect(_: Fault | None) -> list[JobInfo]:
            now = trio.current_time()
            matching = [
                row
                for row in self._rows.values()
                if (queue is None or row.queue == queue)
                and (status is None or self._public_status(row, now) == status)
            ]
            return [self._info(row, now) for row in matching[offset : offset + limit]]

        return await self._execute("list_jobs", effect)

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

    # -- the worker side -----------------------------------------------------------------

    def wall_time(self) -> float:
        """Row times are trio times here, so the worker's and the rows' clocks agree."""
        return trio.current_time()

    async def claim(
        self, queue: str, *, limit: int, worker_id: str, visibility_timeout: float
    ) -> list[Claimed]:
        """Lease up to ``limit`` claimable jobs of ``queue``, priority DESC then id ASC.

        Rows whose lease expired on their final attempt, or that were asked to cancel
        while running, are moved to ``failed`` instead of being run again.
        """
        check_claim(queue, limit, worker_id, visibility_timeout)
        started = trio.current_time()  # as PostgreSQL's now(): the statement's start
        return await self._execute(
            "claim", lambda _: self._claim_now(queue, limit, worker_id, visibility_timeout, started)
        )

    async def renew(
        self, items: Sequence[RenewItem], *, visibility_timeout: float
    ) -> Mapping[int, Verdict]:
        """Renew every item in one statement, storing progress; one verdict per job."""
        check_timeout("visibility_timeout", visibility_timeout)
        items = check_renew_items(items)

        def effect(fault: Fault | None) -> dict[int, Verdict]:
            omitted = fault.job_ids if isinstance(fault, OmitFault) else frozenset()
            lease_until = trio.current_time() + visibility_timeout
            return {
                item.job_id: self._renew_one(item, lease_until)
                for item in items
                if item.job_id not in omitted
            }

        return await self._execute("renew", effect)

    async def ack(self, items: Sequence[Ack]) -> list[bool]:
        """Mark attempts succeeded. Fenced: True for each item that was applied."""
        items = tuple(items)
        return await self._execute("ack", lambda _: [self._ack_one(item) for item in items])

    async def fail(self, items: Sequence[Failure]) -> list[Recorded | None]:
        """Record failed attempts. Fenced: per item, what it became (None: not applied).

        A retry is recorded as final when the attempt was the last one allowed, or when the
        job was asked to cancel (a cancelled job is never retried, docs/protocol.rst §5).
        """
        items = tuple(items)
        for item in items:
            check_retry_delay(item.retry_delay)
        return await self._execute("fail", lambda _: [self._fail_one(item) for item in items])

    async def release(self, items: Sequence[Release]) -> list[bool]:
        """Give attempts back uncharged. Fenced: True for each item that was applied."""
        items = tuple(items)
        return await self._execute("release", lambda _: [self._release_one(item) for item in items])

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
            op: one of ``"claim" "renew" "ack" "fail" "release" "enqueue" "cancel"``.
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
        self._locked.update(job_ids)

    def unlock_rows(self, job_ids: Iterable[int]) -> None:
        self._locked.difference_update(job_ids)

    def expire(self, job_id: int) -> None:
        """Make a running job's lease expire now (one second ago), as if its worker died.

        The PostgreSQL equivalent is ``UPDATE jobs SET not_visible_until = now() - interval
        '1 second' WHERE id = ...``. The row stays ``running``: the next claim takes it again,
        or dead-letters it when its attempts are used up or it was asked to cancel.

        Raises:
            UnknownJobError: no job has this id.
            ValueError: the job is not running.
        """
        row = self._rows.get(job_id)
        if row is None:
            raise UnknownJobError(job_id)
        if row.status != "running":
            raise ValueError(f"job {job_id} is {row.status}, not running")
        self._show_at(row, trio.current_time() - 1.0)  # pushes a live heap entry, due now

    # -- connections and faults ----------------------------------------------------------

    async def _execute(self, op: str, effect: Callable[[Fault | None], T]) -> T:
        """Run ``effect`` as one statement: on a connection, with ``op``'s fault around it."""
        self._check_open()
        async with self._connection(op):
            fault = self._faults.take(op) if op in OPERATIONS else None
            await self._faults.act(op, fault, after=False)
            result = effect(fault)
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

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError("the memory backend is closed", transient=False)

    def _close(self) -> None:
        # End every held call so that nothing outlives the backend, and end every listener.
        self._closed = True
        self._faults.release_all()
        for listener in list(self._listeners):
            listener.send.close()

    # -- rows ----------------------------------------------------------------------------

    def _insert(self, queue: str, payload: str, request: EnqueueRequest, now: float) -> int:
        row = _Row(
            id=len(self._rows) + 1,
            queue=queue,
            payload=payload,
            priority=request.priority,
            max_attempts=request.max_attempts,
            not_visible_until=now + request.delay,
            created_at=now,
            dedup_key=request.dedup_key,
        )
        self._rows[row.id] = row
        self._index(queue)
        self._show_at(row, row.not_visible_until)
        if row.dedup_key is not None:
            self._dedup[(queue, row.dedup_key)] = row.id
        return row.id

    def _finish(self, row: _Row, status: RowStatus, error: str | None, now: float) -> None:
        row.status = status
        row.finished_at = now
        if error is not None:
            row.last_error = error
        if row.dedup_key is not None and self._dedup.get((row.queue, row.dedup_key)) == row.id:
            del self._dedup[(row.queue, row.dedup_key)]

    def _fenced(self, job_id: int, claim_seq: int) -> _Row | None:
        """The row, if a write naming ``(job_id, claim_seq)`` may apply to it (I9)."""
        row = self._rows.get(job_id)
        if row is None or row.status != "running" or row.claim_seq != claim_seq:
            return None
        return row

    @staticmethod
    def _store_progress(row: _Row, progress: float | None) -> None:
        # The runtime filters progress already; a backend must never store junk anyway.
        value = valid_progress(progress)
        if value is not None:
            row.progress = value

    def _info(self, row: _Row, now: float) -> JobInfo:
        return JobInfo(
            id=row.id,
            queue=row.queue,
            payload=decode_payload(row.payload),
            status=self._public_status(row, now),
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            priority=row.priority,
            progress=row.progress,
            last_error=row.last_error,
            created_at=self._datetime(row.created_at),
            finished_at=None if row.finished_at is None else self._datetime(row.finished_at),
        )

    @staticmethod
    def _public_status(row: _Row, now: float) -> JobStatus:
        if row.status == "succeeded" or row.status == "failed":
            return row.status
        if row.leased(now):
            return "running"
        return "scheduled" if row.not_visible_until > now else "ready"

    def _datetime(self, t: float) -> datetime:
        return self._anchor_datetime + timedelta(seconds=t - self._anchor_time)

    # -- claim order ---------------------------------------------------------------------

    def _index(self, queue: str) -> _QueueIndex:
        index = self._queues.get(queue)
        if index is None:
            index = self._queues[queue] = _QueueIndex()
        return index

    def _show_at(self, row: _Row, t: float) -> None:
        """Set the row's visibility time; it becomes claimable once ``t`` has passed."""
        row.not_visible_until = t
        heapq.heappush(self._index(row.queue).waiting, (t, row.id))

    def _promote(self, index: _QueueIndex, now: float) -> None:
        """Move rows that came due to ``ready``, failing those that must not run again."""
        waiting = index.waiting
        while waiting and waiting[0][0] <= now:
            t, job_id = heapq.heappop(waiting)
            row = self._rows[job_id]
            if row.finished or row.not_visible_until != t or self._settle_expired(row, now):
                continue
            if not row.in_ready:
                row.in_ready = True
                heapq.heappush(index.ready, (-row.priority, row.id))

    def _settle_expired(self, row: _Row, now: float) -> bool:
        """Fail a row whose lease expired when it must not run again; True if it did.

        A cancel flag means the user wants the job dead, even if its worker never saw the
        flag. A lease expired on the final attempt is dead-lettered (docs/protocol.rst §1).
        """
        if row.status != "running" or row.not_visible_until > now or row.id in self._locked:
            return False  # still leased; or locked, so skipped as SKIP LOCKED would
        if row.cancel_requested_at is not None:
            self._finish(row, "failed", "cancelled: cancel requested", now)
        elif row.attempts >= row.max_attempts:
            n = row.max_attempts
            self._finish(row, "failed", f"lease expired on the final attempt ({n} of {n})", now)
        else:
            return False
        return True

    def _pop_ready(self, index: _QueueIndex, now: float, limit: int) -> list[_Row]:
        taken: list[_Row] = []
        skipped: list[_Row] = []  # locked by someone else: SKIP LOCKED passes them over
        while index.ready and len(taken) < limit:
            _, job_id = heapq.heappop(index.ready)
            row = self._rows[job_id]
            row.in_ready = False
            if row.finished or row.not_visible_until > now or self._settle_expired(row, now):
                continue  # finished, or hidden again by its old owner's renewal
            (skipped if row.id in self._locked else taken).append(row)
        for row in skipped:
            row.in_ready = True
            heapq.heappush(index.ready, (-row.priority, row.id))
        return taken

    # -- statements ----------------------------------------------------------------------

    def _claim_now(
        self, queue: str, limit: int, worker_id: str, visibility_timeout: float, started: float
    ) -> list[Claimed]:
        index = self._queues.get(queue)
        if index is None:
            return []
        now = trio.current_time()
        self._promote(index, now)
        # The lease counts from now, when the rows are taken, however long the call waited
        # for its connection or a stall before it (docs/protocol.rst, "Rows, attempts and
        # fencing"); the answer says how long that was.
        return [
            self._lease(row, worker_id, now + visibility_timeout, now - started)
            for row in self._pop_ready(index, now, limit)
        ]

    def _lease(self, row: _Row, worker_id: str, lease_until: float, locked_after: float) -> Claimed:
        row.status = "running"
        row.attempts += 1
        row.claim_seq += 1
        row.worker_id = worker_id
        row.progress = None  # the new attempt has reported none; an old attempt's is not its own
        self._show_at(row, lease_until)
        job = Job(
            id=row.id,
            queue=row.queue,
            payload=decode_payload(row.payload),
            attempt=row.attempts,
            max_attempts=row.max_attempts,
            claim_seq=row.claim_seq,
        )
        return Claimed(job, lease_until, locked_after)

    def _renew_one(self, item: RenewItem, lease_until: float) -> Verdict:
        if item.job_id in self._locked:
            return Verdict.UNCHANGED  # the statement skips rows it cannot lock at once
        row = self._rows.get(item.job_id)
        if row is None or row.status != "running":
            return Verdict.GONE
        if row.claim_seq != item.claim_seq:
            return Verdict.RECLAIMED
        self._store_progress(row, item.progress)
        self._show_at(row, max(row.not_visible_until, lease_until))  # never back, as in SQL
        if row.cancel_requested_at is not None:
            return Verdict.CANCEL_REQUESTED
        return Verdict.EXTENDED

    def _ack_one(self, item: Ack) -> bool:
        row = self._fenced(item.job_id, item.claim_seq)
        if row is None:
            return False
        self._store_progress(row, item.progress)
        self._finish(row, "succeeded", None, trio.current_time())
        return True

    def _fail_one(self, item: Failure) -> Recorded | None:
        row = self._fenced(item.job_id, item.claim_seq)
        if row is None:
            return None
        now = trio.current_time()
        self._store_progress(row, item.progress)
        if row.cancel_requested_at is not None:
            # A cancelled job is never retried; keep the worker's own words when it knew.
            error = item.error
            if not error.startswith("cancelled"):
                error = f"cancelled: cancel requested ({error})"
            self._finish(row, "failed", error, now)
        elif item.retry_delay is None or row.attempts >= row.max_attempts:
            self._finish(row, "failed", item.error, now)
        else:
            row.status = "queued"
            row.last_error = item.error
            self._show_at(row, now + item.retry_delay)
            self._notify_available(row.queue)
            return Recorded.RETRY
        return Recorded.FINAL

    def _release_one(self, item: Release) -> bool:
        row = self._fenced(item.job_id, item.claim_seq)
        if row is None:
            return False
        now = trio.current_time()
        self._store_progress(row, item.progress)
        if row.cancel_requested_at is not None:
            # Released at shutdown after a cancel request: honour the cancel, don't rerun.
            self._finish(row, "failed", "cancelled: cancel requested", now)
            return True
        row.status = "queued"
        row.attempts -= 1  # a released attempt is not charged
        self._show_at(row, now)
        self._notify_available(row.queue)
        return True

    def _retry_now(self, job_id: int) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.status != "failed":
            return False
        if row.dedup_key is not None:
            key = (row.queue, row.dedup_key)
            if key in self._dedup:
                return False  # another unfinished job holds the key
            self._dedup[key] = row.id
        row.status = "queued"
        row.finished_at = row.cancel_requested_at = row.worker_id = None
        row.max_attempts = max(row.max_attempts, row.attempts + 1)
        self._show_at(row, trio.current_time())
        self._notify_available(row.queue)
        return True

    def _cancel_now(self, job_id: int) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.finished:
            return False
        now = trio.current_time()
        if row.leased(now):
            # The worker stops the handler when its renewal says CANCEL_REQUESTED; the
            # notice only makes that renewal happen now rather than at the next beat.
            if row.cancel_requested_at is None:
                row.cancel_requested_at = now
            self._notify_cancel(row)
        else:
            self._finish(row, "failed", self._cancel_message(row), now)
        return True

    @staticmethod
    def _cancel_message(row: _Row) -> str:
        if row.status == "running":
            return "cancelled: cancel requested after its lease expired"
        if row.attempts == 0:
            return "cancelled before it ran"
        return "cancelled while waiting to retry"

    # -- notices -------------------------------------------------------------------------

    def _notify_available(self, queue: str) -> None:
        notice = Notice(NoticeKind.AVAILABLE, queue)
        for listener in self._listeners:
            if listener.queue == queue:
                self._deliver(listener, notice)

    def _notify_cancel(self, row: _Row) -> None:
        notice = Notice(NoticeKind.CANCEL, row.queue, row.id)
        for listener in self._listeners:
            if listener.queue == row.queue and listener.worker_id == row.worker_id:
                self._deliver(listener, notice)

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


if TYPE_CHECKING:
    # mypy proves here that MemoryBackend implements the Backend protocol.
    _implements: type[Backend] = MemoryBackend
