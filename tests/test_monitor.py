"""The blocking monitor names the job whose step blocked the loop, and not for GC pauses.

These tests block the thread on purpose (``time.sleep``): blocking is the behaviour measured.
"""

from __future__ import annotations

import time

import pytest
import trio

from trioqueue._monitor import BlockingMonitor


def _one_step(monitor: BlockingMonitor, *, blocked: float, in_gc: float) -> None:
    async def main() -> None:
        task = trio.lowlevel.current_task()
        monitor.watch(job_id=7)
        time.sleep(blocked)  # noqa: ASYNC251 - the job's own blocking code
        monitor._on_gc("start", {})
        time.sleep(in_gc)  # noqa: ASYNC251 - stands in for a collection's pause
        monitor._on_gc("stop", {})
        monitor.after_task_step(task)
        monitor.unwatch()

    trio.run(main)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trioqueue.blocking"]


def test_a_blocking_step_is_logged_with_its_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _one_step(BlockingMonitor(threshold=0.05), blocked=0.1, in_gc=0.0)
    [message] = _warnings(caplog)
    assert message.startswith("job 7 blocked the event loop for 0.1")


def test_garbage_collection_is_not_blamed_on_the_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _one_step(BlockingMonitor(threshold=0.05), blocked=0.0, in_gc=0.1)
    assert _warnings(caplog) == []
