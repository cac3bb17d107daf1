"""Detect async handlers that block the event loop, and say which job did it.

A handler that calls blocking code stalls every task in the process: heartbeats, fences,
other jobs. The monitor is a loop-lag watchdog that costs the event loop almost nothing:

* the runtime names, once, the function whose frame runs a job attempt, and how to read
  from such a frame which job it runs (:meth:`BlockingMonitor.recognise`): nothing is
  registered per job;
* a trio instrument counts the event loop's turns (one call per turn, not per task step);
* a watchdog thread looks at the event-loop thread's stack every ``threshold / 4``. When
  two looks, ``threshold`` or more apart and within one turn of the loop, both find the
  same job's frame on the stack, that job's step has held the loop all along: it is logged
  once, by job id, while it is still blocking (a job that never returns is reported too).
  Only then is the frame read for its job, from the watchdog thread; reading a frame's
  locals changes nothing the frame's own thread sees.

A trio task runs at most one step per turn of the loop, so "same turn, same frame" means one
uninterrupted step. Steps are caught once they last about ``1.25 × threshold`` (the looks
are ``threshold / 4`` apart); shorter ones may be missed.

A garbage collection that happens to run during a job's step is not the job's doing: the
monitor times collections (``gc.callbacks``), looks away while one runs, and leaves their
time out of the step's.

The pools of one run share one monitor (:func:`shared_monitor`), each job held to its own
pool's threshold.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

import trio

from trioqueue._runtime.logfields import job_fields

log = logging.getLogger("trioqueue.blocking")

#: Reads, from a frame that runs a job attempt, the job's id and the threshold it is held
#: to; None when the frame runs no job.
JobReader = Callable[[FrameType], tuple[int, float] | None]


@dataclass(frozen=True, slots=True)
class _Suspect:
    """A job frame seen on the loop's stack: in which turn, when, after how much GC time.

    The frame is kept by ``id`` only, so that a finished job's frame (and its locals) is
    never kept alive by the watchdog; an id can only be reused once the frame is gone."""

    turn: int
    frame_id: int
    seen_at: float
    gc_seconds: float


class BlockingMonitor(trio.abc.Instrument):
    """Logs jobs whose single step holds the event loop for their pool's threshold or more
    (``threshold``, the smallest of them, sets how often the watchdog looks)."""

    def __init__(self, threshold: float, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.threshold = threshold
        self._clock = clock
        #: The code of each function whose frames run job attempts, and what reads the job's
        #: id and threshold from such a frame (None: the frame runs no job after all).
        self._readers: dict[CodeType, JobReader] = {}
        self._turn = 0  # turns of the event loop so far
        self._loop_thread = threading.get_ident()
        self._gc_started: float | None = None
        self._gc_seconds = 0.0  # all collection time so far
        self._suspect: _Suspect | None = None
        self._reported: tuple[int, int] | None = None  # (turn, frame id) last logged
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def install(self) -> None:
        """Start watching: count the loop's turns, time collections, start the thread."""
        self._loop_thread = threading.get_ident()
        trio.lowlevel.add_instrument(self)
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(
            target=self._watch, name="trioqueue-blocking-monitor", daemon=True
        )
        self._thread.start()

    def uninstall(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        gc.callbacks.remove(self._on_gc)
        trio.lowlevel.remove_instrument(self)

    # -- the event loop's side ---------------------------------------------------------

    def after_io_wait(self, timeout: float) -> None:
        self._turn += 1

    def recognise(self, code: CodeType, reader: JobReader) -> None:
        """Frames running ``code`` run job attempts; ``reader`` tells, from such a frame,
        which job and the threshold it is held to (each pool's own)."""
        self._readers[code] = reader

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = self._clock()
        elif self._gc_started is not None:
            self._gc_seconds += self._clock() - self._gc_started
            self._gc_started = None

    # -- the watchdog's side -----------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(self.threshold / 4):
            try:
                self.look()
            except Exception:  # a diagnostic must never take the process down
                log.exception("the blocking monitor failed; it stops watching")
                return

    def look(self) -> None:
        """One look at the event-loop thread's stack (the watchdog thread's every period)."""
        if self._gc_started is not None:
            return  # a collection holds the loop: not a job's doing
        now = self._clock()
        turn, frame = self._turn, self._job_frame()
        suspect = self._suspect
        if frame is None:
            self._suspect = None
        elif suspect is None or suspect.turn != turn or suspect.frame_id != id(frame):
            self._suspect = _Suspect(turn, id(frame), now, self._gc_seconds)
        else:
            self._judge(suspect, frame, now)

    def _job_frame(self) -> FrameType | None:
        """The innermost frame on the loop's stack that runs a job attempt, if any."""
        frame = sys._current_frames().get(self._loop_thread)
        while frame is not None:
            if frame.f_code in self._readers:
                return frame
            frame = frame.f_back
        return None

    def _judge(self, suspect: _Suspect, frame: FrameType, now: float) -> None:
        job = self._readers[frame.f_code](frame)
        if job is None:
            return
        job_id, threshold = job
        held = now - suspect.seen_at - (self._gc_seconds - suspect.gc_seconds)
        seen = (suspect.turn, suspect.frame_id)
        if held < threshold or self._reported == seen:
            return
        self._reported = seen
        log.warning(
            "job %d blocked the event loop for %.3fs and counting, without a checkpoint: "
            "heartbeats and fences of every job stall meanwhile (run blocking code in a "
            "sync handler or trio.to_thread.run_sync)",
            job_id,
            held,
            extra=job_fields(job_id, "blocking"),
        )


@dataclass
class _Sharing:
    monitor: BlockingMonitor | None = None
    users: int = 0


_SHARED: trio.lowlevel.RunVar[_Sharing] = trio.lowlevel.RunVar("trioqueue.monitor")


@contextmanager
def shared_monitor(threshold: float) -> Iterator[BlockingMonitor]:
    """The run's one monitor, installed while at least one pool uses it.

    The monitor's own threshold (a quarter of it is the watchdog's period) is the smallest
    of its users'; each job is held to its own pool's, which the reader of its frame tells.
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
    # The watchdog looks every threshold / 4: often enough for the strictest pool.
    monitor.threshold = min(monitor.threshold, threshold)
    sharing.users += 1
    try:
        yield monitor
    finally:
        sharing.users -= 1
        if sharing.users == 0:
            sharing.monitor = None
            monitor.uninstall()
