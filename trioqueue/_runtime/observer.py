"""What a worker pool tells an observer: the events metrics are made of (docs/metrics.rst).

A pool calls its observer's methods from its own trio tasks, at the moments it already
knows about: a job's outcome settled, its claim hook and handler exited, a renewal
statement came back, a lease was lost, a renewal was abandoned. The methods are plain
functions: they must return quickly and must not raise (a raise would stop the task that
called, the guard among them). Without an observer a pool makes none of these calls.

:class:`trioqueue.metrics.PrometheusObserver` is the one the project ships; any subclass
of :class:`PoolObserver` may override just the methods it cares about.
"""

from __future__ import annotations

from typing import Literal

from trioqueue._core.rules import OutcomeKind, StopReason

__all__ = ["JobOutcome", "LeaseLoss", "PoolObserver"]

#: How a job's attempt ended, as the ``outcome`` label says it. ``retried``: a charged
#: failure with attempts left; ``failed``: final; ``cancelled``: final, because a cancel
#: was requested; ``unavailable``: the attempt wrote nothing of its own (its lease was
#: lost, it arrived expired, or it was released uncharged, as at shutdown) — the same
#: cases as the ``on_job_unavailable`` hook.
JobOutcome = Literal["succeeded", "failed", "retried", "unavailable", "cancelled"]

#: Why an attempt lost its lease: its fence passed without a renewal (``lease_expired``),
#: a renewal found the row claimed again (``reclaimed``), or found it gone (``gone``).
LeaseLoss = Literal["lease_expired", "reclaimed", "gone"]

#: The ``outcome`` label of each outcome kind; a cancelled failure says ``cancelled``.
OUTCOME_LABELS: dict[OutcomeKind, JobOutcome] = {
    OutcomeKind.SUCCEEDED: "succeeded",
    OutcomeKind.RETRY: "retried",
    OutcomeKind.FAILED: "failed",
    OutcomeKind.RELEASE: "unavailable",
    OutcomeKind.UNAVAILABLE: "unavailable",
}

#: The stops that are lost leases, with their ``reason`` label.
LEASE_LOSSES: dict[StopReason, LeaseLoss] = {
    StopReason.LEASE_EXPIRED: "lease_expired",
    StopReason.RECLAIMED: "reclaimed",
    StopReason.GONE: "gone",
}


class PoolObserver:
    """Receives a worker pool's events; every method does nothing unless overridden.

    Pass one to :func:`trioqueue.run_worker_pool` as ``observer=``. One observer may serve
    several pools: the job events name the queue.
    """

    def job_finished(self, queue: str, outcome: JobOutcome) -> None:
        """A job's attempt has its outcome (written, or known to be nobody's to write)."""

    def handler_finished(self, queue: str, seconds: float) -> None:
        """A job's claim hook and handler have exited, ``seconds`` after the hook began."""

    def renewal_finished(self, seconds: float) -> None:
        """A renewal statement answered, raised or timed out after ``seconds``."""

    def lease_lost(self, reason: LeaseLoss) -> None:
        """A job's attempt lost its lease (reported once per job, with its outcome)."""

    def renewal_abandoned(self) -> None:
        """A renewal stuck past its timeout was abandoned (docs/protocol.rst §6)."""
