"""Detect async handlers that block the event loop, and say which job did it.

A handler that calls blocking code stalls every task in the process: heartbeats, fences,
other jobs. A trio :class:`~trio.abc.Instrument` times each step of the tasks that run job
code (claim hook and handler) and logs the job whose single step took longer than the
threshold. It costs two clock reads per step of a watched task, and a set lookup per step of
any other task.
"""

from __future__ import annotations

import logging
import time

import trio

log = logging.getLogger("trioqueue.blocking")


class BlockingMonitor(trio.abc.Instrument):
    """Logs job tasks whose single step ran longer than ``threshold`` seconds."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._watched: dict[trio.lowlevel.Task, int] = {}
        # The watched step under way: (task, job id, when it started).
        self._step: tuple[trio.lowlevel.Task, int, float] | None = None

    def watch(self, job_id: int) -> None:
        task = trio.lowlevel.current_task()
        self._watched[task] = job_id
        # Called mid-step: time the rest of this step too (a job may never checkpoint).
        self._step = (task, job_id, time.perf_counter())

    def unwatch(self) -> None:
        self._watched.pop(trio.lowlevel.current_task(), None)  # this step still counts

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        job_id = self._watched.get(task)
        if job_id is not None:
            self._step = (task, job_id, time.perf_counter())

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        step = self._step
        if step is None or step[0] is not task:
            return
        self._step = None
        took = time.perf_counter() - step[2]
        if took > self.threshold:
            log.warning(
                "job %d blocked the event loop for %.3fs without a checkpoint: heartbeats "
                "and fences of every job stalled meanwhile (run blocking code in a sync "
                "handler or trio.to_thread.run_sync)",
                step[1],
                took,
            )
