"""The pool's scheduler task: scheduling passes, every ``schedule_interval`` seconds.

Theory of operation
-------------------
Every worker pool takes part in scheduling (docs/scheduling.rst): a service task of the pool
(beside the guard, the writer and the listener; never in the claim path) calls
:meth:`Backend.enqueue_due` at once when the pool starts, so a tick missed while no pool ran
is enqueued at startup, and then every ``schedule_interval`` seconds until the pool stops.
Which pool enqueues a tick does not matter: the backend's compare-and-set lets exactly one
pass enqueue it, however many run at once, in however many processes.

So correctness never depends on how many passes run. Cost does: :func:`run_workers` runs
several pools on one backend in one process, and their passes would all ask the same
question. A pass therefore first takes its backend's *turn*: when another pool of this
process made a pass on the same backend less than ``interval`` ago, this one skips it
(:func:`_take_turn`). A process of ten pools makes about one pass per interval, not ten.

A failing pass is logged and tried again at the next interval; it never stops the pool.
Each pass is bounded by :data:`PASS_TIMEOUT`, so a wedged database call cannot hold the task.
"""

from __future__ import annotations

import logging
import weakref

import trio

from trioqueue._backends.interface import Backend
from trioqueue._runtime.logfields import job_fields, pool_fields
from trioqueue._types import JobInfo

__all__ = ["PASS_TIMEOUT", "run_scheduler"]

log = logging.getLogger("trioqueue.schedule")

#: How long one scheduling pass may take (seconds) before it is given up until the next.
PASS_TIMEOUT = 30.0

#: Whether pools of one process on one backend share their passes (see the module
#: docstring). Tests turn it off to make every pool race for every tick.
SHARE_PASSES = True

#: When a pool of this process last began a pass on each backend (trio time).
_last_pass: weakref.WeakKeyDictionary[Backend, float] = weakref.WeakKeyDictionary()


async def run_scheduler(
    backend: Backend, interval: float, queue: str, stopping: trio.Event
) -> None:
    """Make scheduling passes on ``backend``: one now, then one every ``interval`` seconds,
    until ``stopping`` is set. ``queue`` names the pool in log records."""
    failures = 0
    while not stopping.is_set():
        if _take_turn(backend, interval):
            failures = 0 if await _one_pass(backend, queue, failures) else failures + 1
        with trio.move_on_after(interval):
            await stopping.wait()


async def _one_pass(backend: Backend, queue: str, failures: int) -> bool:
    """One pass; True when it got through. Failures are logged: the first of a run, then
    the 2nd, 4th, 8th... so that a long outage does not flood the log."""
    try:
        with trio.fail_after(PASS_TIMEOUT):
            ids = await backend.enqueue_due()
    except Exception as exc:  # trio.TooSlowError included
        failures += 1
        if failures & (failures - 1) == 0:
            log.warning(
                "scheduling pass failed (%d in a row); trying again: %r",
                failures,
                exc,
                extra=pool_fields(queue, "schedule_failed"),
            )
        return False
    if failures:
        log.info("scheduling passes get through again", extra=pool_fields(queue, "scheduling"))
    if ids and log.isEnabledFor(logging.INFO):
        await _log_scheduled(backend, ids)
    return True


async def _log_scheduled(backend: Backend, ids: list[int]) -> None:
    """A record per job the pass enqueued, naming the job and its own queue (a schedule's
    queue, not the pool's). The pass answers ids only, so the jobs' queues are read back
    in one read (:meth:`Backend.get_jobs`), and only when the records are wanted. A job
    no longer there (deleted, or the read failing or slow) is named by its id alone; it
    never fails the pass."""
    jobs: dict[int, JobInfo] = {}
    with trio.move_on_after(PASS_TIMEOUT):
        try:
            jobs = await backend.get_jobs(ids, preview=0)
        except Exception:  # a BackendError: the records go out without the queues
            pass
    for job_id in ids:
        info = jobs.get(job_id)
        queue = None if info is None else info.queue
        where = "" if queue is None else f" on queue {queue!r}"
        log.info(
            "scheduled job %d%s",
            job_id,
            where,
            extra=job_fields(job_id, "scheduled", queue=queue),
        )


def _take_turn(backend: Backend, interval: float) -> bool:
    """Whether this pool makes the pass now: no other pool of this process began one on
    ``backend`` less than ``interval`` ago (always, when passes are not shared)."""
    if not SHARE_PASSES:
        return True
    now = trio.current_time()
    last = _last_pass.get(backend)
    if last is not None and now - last < interval:
        return False
    _last_pass[backend] = now
    return True
