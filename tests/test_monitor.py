"""The blocking monitor names the job whose step blocked the loop, and not for GC pauses.

These tests block the thread on purpose (``time.sleep``): blocking is the behaviour measured.
"""

from __future__ import annotations

import time

import pytest
import trio

from trioqueue._monitor import BlockingMonitor, shared_monitor


def _one_step(
    monitor: BlockingMonitor, *, blocked: float, in_gc: float, threshold: float | None = None
) -> None:
    async def main() -> None:
        task = trio.lowlevel.current_task()
        monitor.watch(job_id=7, threshold=threshold)
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


def test_each_job_is_held_to_its_own_pools_threshold(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        _one_step(BlockingMonitor(threshold=0.05), blocked=0.1, in_gc=0.0, threshold=1.0)
    assert _warnings(caplog) == []


async def test_pools_of_one_run_share_one_monitor_installed_while_used() -> None:
    """Trio calls every instrument at every task step: one per run, not one per pool."""
    with shared_monitor(0.1) as first:
        with shared_monitor(0.2) as second:
            assert second is first
        trio.lowlevel.remove_instrument(first)  # still installed: the first pool uses it
        trio.lowlevel.add_instrument(first)
    with pytest.raises(KeyError):  # the last user left: uninstalled
        trio.lowlevel.remove_instrument(first)
    with shared_monitor(0.1) as third:
        assert third is not first
