"""``trioqueue.cli._several.SeveralBackends``: what the worker's health checks and metrics
read of several databases at once (each queue from its own database only)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import trioqueue
from trioqueue.cli._several import SeveralBackends


async def test_each_queue_is_read_from_its_own_database(autojump_clock: trio.abc.Clock) -> None:
    async with trioqueue.open_memory() as a, trioqueue.open_memory() as b:
        await a.enqueue("emails", {})
        await a.enqueue("reports", {})  # not served from `a`: left out
        await b.enqueue("reports", {})
        await b.enqueue("reports", {})
        several = SeveralBackends({a: ["emails"], b: ["reports"]})
        stats = await several.queue_stats()
        assert {queue: dict(s.counts) for queue, s in stats.items()} == {
            "emails": {"ready": 1},
            "reports": {"ready": 2},
        }
        calls = several.statistics().calls
        assert calls["queue_stats"] == 2  # one read of each database


async def test_the_registry_of_every_database_is_read_for_its_own_queues(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None: ...

    async with trioqueue.open_memory() as a, trioqueue.open_memory() as b:
        groups = {
            a: [trioqueue.WorkerConfig(handler=handler, queue="emails", max_job_duration=5)],
            b: [trioqueue.WorkerConfig(handler=handler, queue="reports", max_job_duration=5)],
        }
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_workers, groups)
            workers = await SeveralBackends({a: ["emails"], b: ["reports"]}).list_workers()
            assert sorted(w.queue for w in workers) == ["emails", "reports"]
            nursery.cancel_scope.cancel()


async def test_a_database_that_fails_fails_the_whole_read(autojump_clock: trio.abc.Clock) -> None:
    async with trioqueue.open_memory() as a, trioqueue.open_memory() as b:

        async def down() -> Any:
            raise trioqueue.BackendError("connection refused")

        b.queue_stats = down  # type: ignore[method-assign]
        with pytest.raises(ExceptionGroup) as caught:
            await SeveralBackends({a: ["emails"], b: ["reports"]}).queue_stats()
        assert caught.group_contains(trioqueue.BackendError)
