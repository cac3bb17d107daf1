"""A whole-pool test of the lease fence: the renewals hang for good, and the
handler must still be stopped when its lease runs out."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import trioqueue
from trioqueue.testing import hang


async def test_fence_stops_handler_when_renewals_hang(autojump_clock: object) -> None:
    claimed: list[float] = []
    lost: list[tuple[int, str, float]] = []

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        await trio.sleep_forever()

    async def on_job_claimed(job: trioqueue.Job) -> None:
        claimed.append(trio.current_time())

    async def on_job_unavailable(job: trioqueue.Job, reason: str) -> None:
        lost.append((job.id, reason, trio.current_time()))

    config = trioqueue.WorkerConfig(
        handler=handler,
        queue="q",
        visibility_timeout=60,
        heartbeat_interval=20,
        on_job_claimed=on_job_claimed,
        on_job_unavailable=on_job_unavailable,
    )
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {"n": 1}, max_attempts=1)  # run once
        backend.inject("renew", hang(interruptible=False))
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await trio.sleep(120)
            backend.inject("renew", None)  # release the wedged calls
            nursery.cancel_scope.cancel()

    [(lost_id, reason, when)] = lost
    assert lost_id == job_id
    assert "lease expired" in reason
    # at most V after the claim, plus the in-flight allowance and a little slack
    assert when - claimed[0] <= 60 + 0.25 + 0.01


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
