"""What a batch handler sees of its batch: :class:`BatchContext` (docs/protocol.rst §20).

A batch handler runs every job of its batch in one call, so one job's stop (a cancel, a
lost row) cannot cancel the call without cancelling its siblings' work too. The context
says instead which jobs are stopped (:meth:`BatchContext.stop_requested`), for the handler
to skip or abandon; their outcomes are decided by the stop whatever the handler answers.
A stop of the batch itself (lease fence, max_job_duration, shutdown) cancels the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

from trioqueue._core.guard_rules import JobLease
from trioqueue._core.progress import valid_progress
from trioqueue._runtime.context import PoolShare
from trioqueue._types import Job

if TYPE_CHECKING:
    from trioqueue._runtime.guard import BatchHandle


@final
class BatchContext:
    """The batch handler's view of its batch's attempts: one per job of ``jobs``."""

    __slots__ = ("_batch", "_share")

    def __init__(self, batch: BatchHandle, share: PoolShare) -> None:
        self._batch = batch  # the scopes and leases of the batch
        self._share = share

    def _lease(self, job_id: int) -> JobLease:
        try:
            return self._batch.leases[job_id]
        except KeyError:
            raise KeyError(f"job {job_id!r} is not in this batch") from None

    @property
    def jobs(self) -> tuple[Job, ...]:
        """The jobs of the batch, in the order the handler got them."""
        return self._batch.jobs

    @property
    def queue(self) -> str:
        return self._batch.jobs[0].queue

    def report_progress(self, job_id: int, value: float) -> None:
        """Record the progress of one job of the batch, sent with the next heartbeat.

        Only finite values in [0, 1] count; anything else is ignored without an error. The
        latest valid value wins (docs/protocol.rst §5).

        Raises:
            KeyError: ``job_id`` is not a job of this batch.
        """
        lease = self._lease(job_id)
        progress = valid_progress(value)
        if progress is not None:
            lease.progress = progress

    def progress(self, job_id: int) -> float | None:
        """The latest valid progress reported for the job in this attempt, or None.

        Raises:
            KeyError: ``job_id`` is not a job of this batch.
        """
        return self._lease(job_id).progress

    def stop_requested(self, job_id: int) -> bool:
        """True once the job's outcome no longer depends on the handler's answer.

        That is a cancel directive for the job, its row lost (reclaimed by another worker,
        or gone), or a stop of the whole batch (:attr:`cancel_requested`). The call goes on
        for the other jobs; the handler may skip this one. Its outcome is the stop's.

        Raises:
            KeyError: ``job_id`` is not a job of this batch.
        """
        return self._lease(job_id).stop is not None or self._batch.scope.cancel_called

    @property
    def cancel_requested(self) -> bool:
        """True once the whole batch was asked to stop: its lease fence, max_job_duration,
        shutdown, or a stop of every one of its jobs. The call is cancelled at its next
        checkpoint."""
        return self._batch.scope.cancel_called

    @property
    def deadline(self) -> float:
        """The batch's current local deadline, on trio's clock."""
        return self._batch.scope.deadline

    @property
    def resources(self) -> Any:
        """What the pool's resources hook yielded, as ``JobContext.resources``; None
        without one."""
        return self._share.resources
