"""The blocking monitor names the job whose step holds the event loop, and not for GC pauses.

The monitor's looks are driven by hand here, on a fake clock, from the loop's own thread
(where the job's frame is on the stack, as the watchdog thread would see it); one test runs
the real watchdog thread against a job that really blocks. A job's frame is one of
``job_step``, which the monitor recognises as the runtime's attempt frames are recognised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from types import FrameType

import pytest
import trio

from trioqueue._runtime.monitor import BlockingMonitor, shared_monitor


async def job_step(job_id: int, threshold: float, step: Callable[[], Awaitable[None]]) -> None:
    """Runs ``step`` as job ``job_id``'s, held to ``threshold``."""
    await step()


def _job_of(frame: FrameType) -> tuple[int, float]:
    return frame.f_locals["job_id"], frame.f_locals["threshold"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _blocked_step(
    *,
    blocked: float,
    in_gc: float = 0.0,
    threshold: float | None = None,
    checkpoint: bool = False,
    lowered_to: float | None = None,
) -> None:
    """A job (id 7) whose step is looked at, then held for ``blocked`` + ``in_gc`` seconds
    of fake time (``in_gc`` of it in a collection), then looked at again. The job's
    threshold is ``threshold``, else the monitor's, 0.05; ``lowered_to`` lowers the
    monitor's once the job runs, as a second pool with a stricter threshold joining does."""
    clock = FakeClock()
    monitor = BlockingMonitor(0.05, clock=clock)
    monitor.recognise(job_step.__code__, _job_of)

    async def step() -> None:
        if lowered_to is not None:
            monitor.threshold = lowered_to
        monitor.look()
        if checkpoint:
            await trio.lowlevel.checkpoint()  # the step ends: the next look is another turn
        clock.now += blocked
        monitor._on_gc("start", {})
        monitor.look()  # looks away during a collection
        clock.now += in_gc
        monitor._on_gc("stop", {})
        monitor.look()

    async def main() -> None:
        trio.lowlevel.add_instrument(monitor)  # counts the loop's turns (no thread here)
        await job_step(7, 0.05 if threshold is None else threshold, step)

    trio.run(main)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trioqueue.blocking"]


def test_a_blocking_step_is_logged_with_its_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _blocked_step(blocked=0.1)
    [message] = _warnings(caplog)
    assert message.startswith("job 7 blocked the event loop for 0.100s")
    [record] = [r for r in caplog.records if r.name == "trioqueue.blocking"]
    fields = record.__dict__  # for --log-format json
    assert (fields["job_id"], fields["event"]) == (7, "blocking")


def test_garbage_collection_is_not_blamed_on_the_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _blocked_step(blocked=0.0, in_gc=0.1)
    assert _warnings(caplog) == []


def test_a_checkpoint_between_looks_is_not_a_block(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _blocked_step(blocked=0.1, checkpoint=True)
    assert _warnings(caplog) == []


def test_each_job_is_held_to_its_own_pools_threshold(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _blocked_step(blocked=0.1, threshold=1.0)
    assert _warnings(caplog) == []


def test_a_stricter_pools_job_is_held_to_its_threshold(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _blocked_step(blocked=0.03, threshold=0.02)
    [message] = _warnings(caplog)
    assert message.startswith("job 7 blocked the event loop for 0.030s")


def test_a_job_keeps_its_threshold_when_a_stricter_pool_joins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _blocked_step(blocked=0.03, threshold=0.05, lowered_to=0.02)
    assert _warnings(caplog) == []


def test_the_watchdog_reports_a_job_while_it_still_blocks() -> None:
    """The real thread: the job blocks until the warning about it has been logged (or 10 s)."""
    logged = threading.Event()

    class Signal(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.set()

    signal = Signal(logging.WARNING)
    logger = logging.getLogger("trioqueue.blocking")
    logger.addHandler(signal)

    async def block() -> None:
        logged.wait(10)  # blocks the event loop: the behaviour under test

    async def main() -> float:
        with shared_monitor(0.05) as monitor:
            monitor.recognise(job_step.__code__, _job_of)
            began = time.perf_counter()
            await job_step(9, 0.05, block)
            return time.perf_counter() - began

    try:
        blocked_for = trio.run(main)
    finally:
        logger.removeHandler(signal)
    assert logged.is_set()
    assert blocked_for < 10


async def test_pools_of_one_run_share_one_monitor_installed_while_used() -> None:
    """One watchdog and one instrument per run, not one per pool."""
    with shared_monitor(0.1) as first:
        with shared_monitor(0.02) as second:
            assert second is first
            assert first.threshold == 0.02  # the watchdog looks often enough for both
        trio.lowlevel.remove_instrument(first)  # still installed: the first pool uses it
        trio.lowlevel.add_instrument(first)
    with pytest.raises(KeyError):  # the last user left: uninstalled
        trio.lowlevel.remove_instrument(first)
    with shared_monitor(0.1) as third:
        assert third is not first


def test_a_frame_whose_reader_finds_no_job_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    monitor = BlockingMonitor(0.05, clock=clock)
    monitor.recognise(job_step.__code__, lambda frame: None)

    async def step() -> None:
        monitor.look()
        clock.now += 1.0
        monitor.look()

    async def main() -> None:
        trio.lowlevel.add_instrument(monitor)
        await job_step(7, 0.05, step)

    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        trio.run(main)
    assert _warnings(caplog) == []
