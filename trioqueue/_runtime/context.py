"""What a handler sees of its job: :class:`JobContext`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from trioqueue._backends.validation import encode_checkpoint
from trioqueue._core.checkpoint import CheckpointSlot
from trioqueue._core.guard_rules import JobLease
from trioqueue._core.progress import valid_progress
from trioqueue._types import Job

if TYPE_CHECKING:
    from trioqueue._runtime.guard import BatchHandle


@final
@dataclass(frozen=True, slots=True)
class PoolShare:
    """What every handler of one pool shares: one object per pool, not two fields per job
    in flight (memory per job is a bench goal, docs/performance.rst)."""

    #: What the pool's resources hook yielded; None without one.
    resources: Any
    #: The trio thread's id: a handler in any other thread is a sync handler's.
    trio_thread: int


@final
class JobContext:
    """The handler's view of its job attempt.

    Safe to use from a worker thread (sync handlers): every member only reads or writes
    plain attributes.
    """

    __slots__ = ("_batch", "_connection", "_job", "_share", "_stop_seen")

    def __init__(
        self, job: Job, batch: BatchHandle, share: PoolShare, connection: Any = None
    ) -> None:
        self._job = job
        self._batch = batch  # the scopes and leases of the job's batch
        self._share = share
        self._connection = connection
        # Set by the runtime for handlers in a worker thread, which must not touch trio.
        self._stop_seen = False

    @property
    def _lease(self) -> JobLease:
        return self._batch.leases[self._job.id]

    @property
    def job(self) -> Job:
        return self._job

    @property
    def job_id(self) -> int:
        return self._job.id

    @property
    def attempt(self) -> int:
        """1 for the first attempt."""
        return self._job.attempt

    @property
    def queue(self) -> str:
        return self._job.queue

    def report_progress(self, value: float) -> None:
        """Record progress, sent with the next heartbeat.

        Only finite values in [0, 1] count; anything else is ignored without an error. The
        latest valid value wins.
        """
        progress = valid_progress(value)
        if progress is not None:
            self._lease.progress = progress

    @property
    def progress(self) -> float | None:
        """The latest valid progress reported in this attempt, or None."""
        return self._lease.progress

    def checkpoint(self, value: Any) -> None:
        """Record how far this attempt got: a JSON value the next renewal stores, fenced by
        ``claim_seq``, as the attempt's outcome write does (docs/protocol.rst §16).

        The latest value wins, and one the database already holds is not sent again. The
        next attempt of the job, after a retry, a release or a lapsed lease, gets the
        latest stored value as :attr:`last_checkpoint`; a success keeps it on the finished
        job (``JobInfo.checkpoint``). ``None`` is a value too: it says "start over".
        Safe to call from a sync handler's thread.

        Raises:
            TypeError: ``value`` has no JSON form (nothing is recorded).
            ValueError: its JSON text is over ``MAX_CHECKPOINT_BYTES`` (64 KiB; nothing
                is recorded).
        """
        text = encode_checkpoint(value)  # refused here, at the call, before anything else
        lease = self._lease
        slot = lease.checkpoint
        if slot is None:
            lease.checkpoint = CheckpointSlot(text)
        else:
            slot.latest = text

    @property
    def last_checkpoint(self) -> Any:
        """The checkpoint an earlier attempt of this job stored, as the claim delivered it
        (decoded JSON), or None when none did. It does not change while this attempt runs:
        this attempt's own checkpoints are for the next one."""
        return self._job.checkpoint

    @property
    def cancel_requested(self) -> bool:
        """True once this attempt was asked to stop.

        That is a cancel directive, lease loss, ``max_job_duration`` or shutdown. Async
        handlers are cancelled at their next checkpoint anyway; sync handlers (run in a
        thread) should poll this and return.
        """
        if threading.get_ident() != self._share.trio_thread:
            return self._stop_seen
        batch = self._batch
        return batch.scope_of(self._job.id).cancel_called or batch.scope.cancel_called

    def _mark_stop_seen(self) -> None:
        self._stop_seen = True

    @property
    def deadline(self) -> float:
        """The current local deadline of this attempt, on trio's clock."""
        batch = self._batch
        return min(batch.scope.deadline, batch.scope_of(self._job.id).deadline)

    @property
    def resources(self) -> Any:
        """What the pool's resources hook yielded (an HTTP client, say), shared by every
        handler of the process; None without one. See ``trioqueue.run_workers`` and
        docs/usage.rst, "Shared resources"."""
        return self._share.resources

    @property
    def connection(self) -> Any:
        """The transaction's connection (transactional mode only).

        On PostgreSQL it has asyncpg's query methods (``execute``, ``executemany``,
        ``fetch``, ``fetchrow``, ``fetchval``, same arguments, no ``timeout=``: use a trio
        cancel scope) as trio coroutines, each one bridge crossing, inside a transaction
        opened for this attempt. The job's ack commits in that same transaction, fenced by
        ``claim_seq``; if the handler raises, is stopped (cancel, lease loss, duration,
        shutdown) or the ack's fence no longer matches, everything it wrote is rolled back.
        Pass it to ``backend.enqueue(..., connection=ctx.connection)`` to enqueue follow-up
        jobs that exist only if this attempt commits. ``connection.transaction()`` nests a
        savepoint; never run ``COMMIT`` or ``ROLLBACK`` yourself (the attempt then fails).
        The connection is unusable once the attempt ends. A sync handler (run in a thread)
        calls it through ``trio.from_thread.run(ctx.connection.execute, query, ...)``.

        Raises:
            RuntimeError: when the pool is not in transactional mode.
        """
        if self._connection is None:
            raise RuntimeError(
                "ctx.connection exists only in transactional mode "
                "(see trioqueue.transactional_worker_config)"
            )
        return self._connection
