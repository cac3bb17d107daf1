"""The pool's maintainer task: the lease that elects one pruner per database, and its passes.

Theory of operation
-------------------
Every worker pool with a ``maintenance_interval`` is a candidate for the store's maintainer
lease (docs/protocol.rst §15). The timing decisions are the sans-IO core's
(:class:`trioqueue._core.maintainer.MaintainerCore`); this task carries them out with two
child tasks:

- the **lease loop** claims the lease every ``H`` while another pool holds it, and renews
  it every ``H`` while this one does, for ``V`` each time (the pool's own heartbeat interval
  and visibility timeout). Each call is bounded by a deadline, and its answer is judged by
  the core against the local fence: a late answer never revives a lease.
- the **pass loop** makes a retention pass when one is due and the pool holds the lease:
  batches of :meth:`Backend.prune_retained` until one says there is no more. Each batch runs
  inside a cancel scope whose deadline is the fence: when the lease lapses without a
  renewal, the batch is cancelled where it stands (a batch is one statement, so what it
  deleted is committed or not at all). A renewal moves the deadline on; a refused one
  cancels the batch at once.

On shutdown (the pool's ``stopping``) both loops stop and the lease is released, fenced by
its seq, so another pool takes over at once rather than after ``V``. Errors of the database
are logged and tried again at the next cadence; none stops the pool.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field

import trio

from trioqueue._backends.interface import Backend
from trioqueue._core.maintainer import Change, LeaseCall, MaintainerCore
from trioqueue._core.timing import Timing
from trioqueue._operator_types import PruneBatch
from trioqueue._runtime.logfields import pool_fields
from trioqueue._runtime.observer import PassResult, PoolObserver

__all__ = ["PRUNE_LIMIT", "RELEASE_TIMEOUT", "run_maintainer"]

log = logging.getLogger("trioqueue.maintainer")

#: Jobs (and audit entries) one batch deletes at most: one short statement each, so no
#: batch holds locks or a snapshot long enough to slow the claims (docs/howto/retention.rst).
PRUNE_LIMIT = 1000

#: How long releasing the lease on shutdown may take (seconds) before it is given up; the
#: lease then runs out by itself within ``V``.
RELEASE_TIMEOUT = 5.0


async def run_maintainer(
    backend: Backend,
    timing: Timing,
    interval: float,
    worker_id: str,
    queue: str,
    stopping: trio.Event,
    observer: PoolObserver | None = None,
) -> None:
    """Take part in maintenance as ``worker_id`` until ``stopping`` is set, then give the
    lease up if held. ``queue`` names the pool in log records."""
    core = MaintainerCore(timing.visibility_timeout, timing.heartbeat_interval, interval)
    maintainer = _Maintainer(backend, core, worker_id, queue, observer)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(maintainer.lease_loop, name="trioqueue.maintainer.lease")
            nursery.start_soon(maintainer.pass_loop, name="trioqueue.maintainer.passes")
            await stopping.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await maintainer.release()


@dataclass
class _PassTotals:
    """What one pass deleted, batch by batch."""

    deleted: Counter[tuple[str, str]] = field(default_factory=Counter)
    audit_deleted: int = 0
    batches: int = 0
    oldest_finished_age: float | None = None

    @property
    def jobs(self) -> int:
        return sum(self.deleted.values())

    def add(self, batch: PruneBatch) -> None:
        self.batches += 1
        self.deleted.update(batch.deleted)
        self.audit_deleted += batch.audit_deleted
        # The latest batch's word; 0 when no finished job is kept (None stays "not known").
        age = batch.oldest_finished_age
        self.oldest_finished_age = 0.0 if age is None else age


class _Maintainer:
    def __init__(
        self,
        backend: Backend,
        core: MaintainerCore,
        worker_id: str,
        queue: str,
        observer: PoolObserver | None,
    ) -> None:
        self.backend = backend
        self.core = core
        self.worker_id = worker_id
        self.queue = queue
        self.observer = observer
        self._changed = trio.Event()  # set (and replaced) whenever the holding changes
        self._batch: trio.CancelScope | None = None  # the batch in flight, if any
        self._batch_limit = math.inf  # when the batch in flight has taken one lease
        self._lease_failures = 0

    # -- the lease ------------------------------------------------------------------------

    async def lease_loop(self) -> None:
        while True:
            with trio.move_on_at(self.core.wake_at()):
                await trio.sleep_forever()
            now = trio.current_time()
            self._apply(self.core.tick(now))
            call = self.core.call(now)
            if call is not None:
                self._apply(await self._send(call))

    async def _send(self, call: LeaseCall) -> Change:
        """One claim or renewal, bounded by its timeout; the core judges the answer."""
        try:
            with trio.fail_after(call.timeout):
                if call.seq is None:
                    seq = await self.backend.claim_maintainer(self.worker_id, self.core.lease)
                    return self._answered(self.core.claimed(call, seq, trio.current_time()))
                extended = await self.backend.renew_maintainer(
                    self.worker_id, call.seq, self.core.lease
                )
                return self._answered(self.core.renewed(call, extended, trio.current_time()))
        except Exception as exc:  # trio.TooSlowError included
            self._log_lease_failure(call, exc)
            return self.core.failed(call, trio.current_time())

    def _answered(self, change: Change) -> Change:
        self._lease_failures = 0
        return change

    def _apply(self, change: Change) -> None:
        """Tell the batch in flight, the pass loop, the log and the observer."""
        if self._batch is not None:
            if self.core.seq is None:
                self._batch.cancel()
            else:
                self._batch.deadline = self._batch_deadline()  # the fence moved on
        if change is Change.NONE:
            return
        self._changed.set()
        self._changed = trio.Event()
        holding = change is Change.BECAME
        if holding:
            log.info(
                "worker pool %s is the maintainer now (lease %d for %gs, renewed every %gs)",
                self.worker_id, self.core.seq, self.core.lease, self.core.cadence,
                extra=pool_fields(self.queue, "maintainer"),
            )  # fmt: skip
        elif change is Change.LOST:
            log.warning(
                "worker pool %s is no longer the maintainer: its lease was not renewed in "
                "time or was taken over; it stands as a candidate again",
                self.worker_id,
                extra=pool_fields(self.queue, "maintainer_lost"),
            )
        if self.observer is not None:
            self.observer.maintainer_changed(self.worker_id, holding)

    def _log_lease_failure(self, call: LeaseCall, exc: Exception) -> None:
        """The 1st, 2nd, 4th, 8th... failure of a run, so that an outage does not flood."""
        self._lease_failures += 1
        failures = self._lease_failures
        if failures & (failures - 1) == 0:
            what = "claiming" if call.seq is None else "renewing"
            log.warning(
                "%s the maintainer lease failed (%d in a row); trying again: %r",
                what, failures, exc,
                extra=pool_fields(self.queue, "maintainer_lease_failed"),
            )  # fmt: skip

    async def release(self) -> None:
        """Give the lease up, if held, so that another pool takes over now (bounded)."""
        seq = self.core.seq
        held = self.core.holding(trio.current_time())
        self.core.released()
        if seq is None:
            return
        released = False
        with trio.move_on_after(RELEASE_TIMEOUT):
            try:
                released = await self.backend.release_maintainer(self.worker_id, seq)
            except Exception as exc:
                log.warning(
                    "releasing the maintainer lease failed (it runs out within %gs): %r",
                    self.core.lease, exc,
                    extra=pool_fields(self.queue, "maintainer_release_failed"),
                )  # fmt: skip
        if held:
            log.info(
                "worker pool %s is no longer the maintainer: it stopped%s",
                self.worker_id,
                " and released the lease" if released else "",
                extra=pool_fields(self.queue, "maintainer_released"),
            )
        if self.observer is not None:
            self.observer.maintainer_changed(self.worker_id, False)

    # -- the passes -----------------------------------------------------------------------

    async def pass_loop(self) -> None:
        while True:
            changed = self._changed  # before reading the core: no change is missed
            due = self.core.pass_due(trio.current_time())
            if due is None or due > trio.current_time():
                with trio.move_on_at(math.inf if due is None else due):
                    await changed.wait()
                continue
            await self._one_pass()

    async def _one_pass(self) -> None:
        started = trio.current_time()
        self.core.pass_started(started)
        seq = self.core.seq
        assert seq is not None  # pass_due said the pool holds the lease
        totals = _PassTotals()
        result: PassResult = "complete"
        try:
            result = await self._batches(seq, totals)
        except Exception as exc:
            result = "failed"
            log.warning(
                "maintenance pass failed after %d batches (%d jobs pruned); trying again "
                "in %gs: %r",
                totals.batches, totals.jobs, self.core.interval, exc,
                extra=pool_fields(self.queue, "prune_failed"),
            )  # fmt: skip
        self._report(result, totals, trio.current_time() - started)

    async def _batches(self, seq: int, totals: _PassTotals) -> PassResult:
        """Batches until one says there is no more; "cut" when the lease ended first.

        Raises:
            trio.TooSlowError: a batch took longer than one lease while the lease held.
        """
        while True:
            batch: PruneBatch | None = None
            self._batch_limit = trio.current_time() + self.core.lease
            with trio.CancelScope(deadline=self._batch_deadline()) as scope:
                self._batch = scope
                batch = await self.backend.prune_retained(seq, limit=PRUNE_LIMIT)
            self._batch = None
            now = trio.current_time()
            if scope.cancelled_caught and self.core.holding(now):
                raise trio.TooSlowError(f"a batch took over {self.core.lease:g}s")
            if batch is None:
                # Cancelled at the fence or by a refused renewal, or the store refused the
                # seq itself: the lease is over either way.
                self._apply(self.core.refused(now))
                return "cut"
            totals.add(batch)  # committed, whenever its answer came
            self._apply(self.core.tick(now))
            if self.core.seq is None:
                return "cut"
            if not batch.more:
                return "complete"

    def _batch_deadline(self) -> float:
        """A batch ends at the fence, and takes one lease at most: a statement stuck while
        renewals still get through would otherwise hold the pass for ever."""
        return min(self.core.fence, self._batch_limit)

    def _report(self, result: PassResult, totals: _PassTotals, seconds: float) -> None:
        if result != "failed":
            self._log_pass(result, totals, seconds)
        if self.observer is not None:
            self.observer.maintenance_pass(
                result,
                dict(totals.deleted),
                totals.audit_deleted,
                totals.oldest_finished_age,
                seconds,
            )

    def _log_pass(self, result: PassResult, totals: _PassTotals, seconds: float) -> None:
        per = ", ".join(
            f"{queue!r} {status} {count}"
            for (queue, status), count in sorted(totals.deleted.items())
        )
        age = totals.oldest_finished_age
        oldest = "unknown" if age is None else f"{age:.0f}s"
        text = (
            f"pruned {totals.jobs} jobs ({per or 'none'}) and {totals.audit_deleted} audit "
            f"entries in {totals.batches} batches, {seconds:.3f}s; oldest finished job: {oldest}"
        )
        if result == "cut":
            log.warning(
                "maintenance pass cut short: the maintainer lease ended; %s", text,
                extra=pool_fields(self.queue, "prune_cut"),
            )  # fmt: skip
        else:
            log.info("%s", text, extra=pool_fields(self.queue, "pruned"))
