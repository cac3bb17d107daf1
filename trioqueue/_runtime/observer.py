"""What a worker pool tells an observer: the events metrics are made of (docs/metrics.rst).

A pool calls its observer's methods from its own trio tasks, at the moments it already
knows about: it started and stopped, a job was claimed, its outcome settled, its claim
hook and handler exited, a renewal statement came back, a lease was lost, a renewal was
abandoned, this pool became or stopped being the maintainer, a retention pass ended.
The methods are plain
functions: they must return quickly and must not raise (a raise would stop the task that
called, the guard among them), so the pool wraps the observer it is given in a
:class:`ShieldedObserver`, which logs what a method raised and goes on. Without an observer
a pool makes none of these calls.

:class:`trioqueue.metrics.PrometheusObserver` is the one the project ships; any subclass
of :class:`PoolObserver` may override just the methods it cares about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Literal, ParamSpec

from trioqueue._core.rules import OutcomeKind, StopReason

__all__ = ["JobOutcome", "LeaseLoss", "PassResult", "PoolObserver", "ShieldedObserver"]

logger = logging.getLogger("trioqueue.observer")
P = ParamSpec("P")

#: How a job's attempt ended, as the ``outcome`` label says it. ``retried``: a charged
#: failure with attempts left; ``failed``: final; ``cancelled``: final, because a cancel
#: was requested; ``unavailable``: the attempt wrote nothing of its own (its lease was
#: lost, it arrived expired, or it was released uncharged, as at shutdown) — the same
#: cases as the ``on_job_unavailable`` hook.
JobOutcome = Literal["succeeded", "failed", "retried", "snoozed", "unavailable", "cancelled"]

#: Why an attempt lost its lease: its fence passed without a renewal (``lease_expired``),
#: a renewal found the row claimed again (``reclaimed``), or found it gone (``gone``).
LeaseLoss = Literal["lease_expired", "reclaimed", "gone"]

#: How a retention pass of the maintainer ended (docs/howto/retention.rst): ``complete``,
#: every batch done; ``cut``, the maintainer lease ended first (its fence passed, or the
#: store refused it); ``failed``, a batch raised (tried again at the next interval).
PassResult = Literal["complete", "cut", "failed"]

#: The ``outcome`` label of each outcome kind; a cancelled failure says ``cancelled``.
OUTCOME_LABELS: dict[OutcomeKind, JobOutcome] = {
    OutcomeKind.SUCCEEDED: "succeeded",
    OutcomeKind.RETRY: "retried",
    OutcomeKind.FAILED: "failed",
    OutcomeKind.RELEASE: "unavailable",
    OutcomeKind.SNOOZE: "snoozed",
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

    def pool_started(self, queue: str, worker_id: str, in_flight: Callable[[], int]) -> None:
        """A pool (``worker_id``, as the list of pools names it) started on ``queue``.
        ``in_flight()`` says how many of its jobs are in flight at the moment it is called:
        it reads one number the pool keeps, so it may be called from any thread (a
        metrics scrape's, say), and it answers 0 once the pool has stopped."""

    def pool_stopped(self, queue: str, worker_id: str) -> None:
        """The pool has stopped: nothing of it is in flight any more."""

    def job_claimed(self, queue: str, waited: float | None) -> None:
        """A job was claimed, ``waited`` seconds after it became claimable (enqueued, its
        delay over, put back: ``Job.waited``); None where the backend does not say."""

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

    def maintainer_changed(self, worker_id: str, holding: bool) -> None:
        """The pool ``worker_id`` became (``holding``) or stopped being the store's
        maintainer, the one pool that prunes (docs/protocol.rst §15)."""

    def maintenance_pass(
        self,
        result: PassResult,
        deleted: Mapping[tuple[str, str], int],
        audit_deleted: int,
        oldest_finished_age: float | None,
        seconds: float,
    ) -> None:
        """The maintainer's retention pass ended: ``deleted`` jobs per ``(queue, status)``
        (status ``succeeded`` or ``failed``), audit entries deleted, the age in seconds of
        the oldest finished job still kept (0.0 when none is; None when no batch
        answered), and the pass's duration in seconds."""


class ShieldedObserver(PoolObserver):
    """Passes every event on to ``inner``; what ``inner`` raises is logged, never raised.

    An observer is user code called from the guard's and the batches' own tasks: a raise
    there would stop the guard (and with it every renewal) over a metrics bug. Each
    method's first failure is logged with its traceback, later ones are counted only, so a
    broken observer cannot flood the log at the pool's job rate.
    """

    def __init__(self, inner: PoolObserver) -> None:
        self.inner = inner
        self.failures: dict[str, int] = {}

    def _call(self, method: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except Exception:
            name = method.__name__
            seen = self.failures.get(name, 0)
            self.failures[name] = seen + 1
            if not seen:
                logger.exception(
                    "observer %s.%s raised; the pool goes on (later failures of this "
                    "method are not logged)",
                    type(self.inner).__name__,
                    name,
                )

    def pool_started(self, queue: str, worker_id: str, in_flight: Callable[[], int]) -> None:
        self._call(self.inner.pool_started, queue, worker_id, in_flight)

    def pool_stopped(self, queue: str, worker_id: str) -> None:
        self._call(self.inner.pool_stopped, queue, worker_id)

    def job_claimed(self, queue: str, waited: float | None) -> None:
        self._call(self.inner.job_claimed, queue, waited)

    def job_finished(self, queue: str, outcome: JobOutcome) -> None:
        self._call(self.inner.job_finished, queue, outcome)

    def handler_finished(self, queue: str, seconds: float) -> None:
        self._call(self.inner.handler_finished, queue, seconds)

    def renewal_finished(self, seconds: float) -> None:
        self._call(self.inner.renewal_finished, seconds)

    def lease_lost(self, reason: LeaseLoss) -> None:
        self._call(self.inner.lease_lost, reason)

    def renewal_abandoned(self) -> None:
        self._call(self.inner.renewal_abandoned)

    def maintainer_changed(self, worker_id: str, holding: bool) -> None:
        self._call(self.inner.maintainer_changed, worker_id, holding)

    def maintenance_pass(
        self,
        result: PassResult,
        deleted: Mapping[tuple[str, str], int],
        audit_deleted: int,
        oldest_finished_age: float | None,
        seconds: float,
    ) -> None:
        self._call(
            self.inner.maintenance_pass,
            result,
            deleted,
            audit_deleted,
            oldest_finished_age,
            seconds,
        )
