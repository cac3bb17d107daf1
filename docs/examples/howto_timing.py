"""How-to: choose the lease length V and the heartbeat interval H."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue


async def render(payload: Any, ctx: trioqueue.JobContext) -> None:
    await trio.sleep(200)  # longer than V: the heartbeats keep the lease


async def main() -> None:
    # Outlives a database outage of up to V - H = 90 s; a dead worker's jobs run
    # again within V = 120 s; one renewal statement per pool every H = 30 s.
    config = trioqueue.WorkerConfig(
        handler=render,
        queue="renders",
        visibility_timeout=120,
        heartbeat_interval=30,
        max_job_duration=900,
    )
    # Refused before anything is touched, every problem listed at once.
    bad = trioqueue.WorkerConfig(
        handler=render, queue="renders", visibility_timeout=20, heartbeat_interval=30
    )
    async with trioqueue.open_memory() as backend:
        try:
            await trioqueue.run_worker_pool(backend, bad)
        except trioqueue.ConfigError as exc:
            print(exc)  # heartbeat_interval (30s) must be less than ...
        else:
            raise AssertionError("a heartbeat as long as the lease was accepted")

        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("renders", {"scene": 7})
            info = await backend.wait_for(job_id, timeout=600)
            print(info.status, "after", info.attempts, "attempt")
            assert info.status == "succeeded"
            assert info.attempts == 1
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
