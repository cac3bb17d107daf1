"""Detect async handlers that block the event loop, and say which job did it.

A handler that calls blocking code stalls every task in the process: heartbeats, fences,
other jobs. A trio :class:`~trio.abc.Instrument` times each step of the tasks that run job
code (claim hook and handler) and logs the job whose single step took longer than the
threshold. It costs two clock reads per step of a watched task, and a set lookup per step of
any other task.

A garbage collection that happens to run during a job's step is not the job's doing: the
monitor times collections (``gc.callbacks``) and leaves them out of the step's duration.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import trio

log = logging.getLogger("trioqueue.blocking")


class BlockingMonitor(trio.abc.Instrument):
    """Logs job tasks whose single step ran longer than ``threshold`` seconds."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._watched: dict[trio.lowlevel.Task, int] = {}
        # The watched step under way: (task, job id, when it started).
        self._step: tuple[trio.lowlevel.Task, int, float] | None = None
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

    def watch(self, job_id: int) -> None:
        task = trio.lowlevel.current_task()
        self._watched[task] = job_id
        # Called mid-step: time the rest of this step too (a job may never checkpoint).
        self._step = (task, job_id, time.perf_counter())
        self._gc_seconds = 0.0

    def unwatch(self) -> None:
        self._watched.pop(trio.lowlevel.current_task(), None)  # this step still counts

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        job_id = self._watched.get(task)
        if job_id is not None:
            self._step = (task, job_id, time.perf_counter())
            self._gc_seconds = 0.0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        step = self._step
        if step is None or step[0] is not task:
            return
        self._step = None
        took = time.perf_counter() - step[2] - self._gc_seconds
        if took > self.threshold:
            log.warning(
                "job %d blocked the event loop for %.3fs without a checkpoint: heartbeats "
                "and fences of every job stalled meanwhile (run blocking code in a sync "
                "handler or trio.to_thread.run_sync)",
                step[1],
                took,
            )
