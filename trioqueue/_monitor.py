"""Detect async handlers that block the event loop, and say which job did it.

A handler that calls blocking code stalls every task in the process: heartbeats, fences,
other jobs. A trio :class:`~trio.abc.Instrument` times each step of the tasks that run job
code (claim hook and handler) and logs the job whose single step took longer than the
threshold. It costs two clock reads per step of a watched task, and a set lookup per step of
any other task.

A garbage collection that happens to run during a job's step is not the job's doing: the
monitor times collections (``gc.callbacks``) and leaves them out of the step's duration.

Trio calls every instrument at every step of every task, so the pools of one run share one
monitor (:func:`shared_monitor`), each job watched with its own pool's threshold.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import trio

log = logging.getLogger("trioqueue.blocking")


class BlockingMonitor(trio.abc.Instrument):
    """Logs job tasks whose single step ran longer than ``threshold`` seconds."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        # Watched tasks: their job id and threshold.
        self._watched: dict[trio.lowlevel.Task, tuple[int, float]] = {}
        # The watched step under way: (task, (job id, threshold), when it started).
        self._step: tuple[trio.lowlevel.Task, tuple[int, float], float] | None = None
        self._gc_started = 0.0
        self._gc_seconds = 0.0  # collection time since the watched step started

    def install(self) -> None:
        """Start observing: add this instrument to the run, and time garbage collections."""
        trio.lowlevel.add_instrument(self)
        gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        gc.callbacks.remove(self._on_gc)
        trio.lowlevel.remove_instrument(self)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self._gc_seconds += time.perf_counter() - self._gc_started

    def watch(self, job_id: int, threshold: float | None = None) -> None:
        """Time the current task's steps as job ``job_id``'s (``threshold``: this job's,
        else the monitor's)."""
        task = trio.lowlevel.current_task()
        job = (job_id, self.threshold if threshold is None else threshold)
        self._watched[task] = job
        # Called mid-step: time the rest of this step too (a job may never checkpoint).
        self._step = (task, job, time.perf_counter())
        self._gc_seconds = 0.0

    def unwatch(self) -> None:
        self._watched.pop(trio.lowlevel.current_task(), None)  # this step still counts

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        job = self._watched.get(task)
        if job is not None:
            self._step = (task, job, time.perf_counter())
            self._gc_seconds = 0.0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        step = self._step
        if step is None or step[0] is not task:
            return
        self._step = None
        took = time.perf_counter() - step[2] - self._gc_seconds
        job_id, threshold = step[1]
        if took > threshold:
            log.warning(
                "job %d blocked the event loop for %.3fs without a checkpoint: heartbeats "
                "and fences of every job stalled meanwhile (run blocking code in a sync "
                "handler or trio.to_thread.run_sync)",
                job_id,
                took,
            )


@dataclass
class _Sharing:
    monitor: BlockingMonitor | None = None
    users: int = 0


_SHARED: trio.lowlevel.RunVar[_Sharing] = trio.lowlevel.RunVar("trioqueue.monitor")


@contextmanager
def shared_monitor(threshold: float) -> Iterator[BlockingMonitor]:
    """The run's one monitor, installed while at least one pool uses it.

    ``threshold`` becomes the monitor's default if this call installs it; each pool passes
    its own to :meth:`BlockingMonitor.watch`.
    """
    try:
        sharing = _SHARED.get()
    except LookupError:
        sharing = _Sharing()
        _SHARED.set(sharing)
    if sharing.monitor is None:
        sharing.monitor = BlockingMonitor(threshold)
        sharing.monitor.install()
    monitor = sharing.monitor
    sharing.users += 1
    try:
        yield monitor
    finally:
        sharing.users -= 1
        if sharing.users == 0:
            sharing.monitor = None
            monitor.uninstall()
