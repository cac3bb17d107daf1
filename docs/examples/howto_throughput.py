"""How-to: tune a pool for throughput by batching short jobs.

The same 1,000 short jobs are drained twice by a pool of 4 slots: first one job
per batch, then 50. The backend counts the statements the pool sends. (Run by
``trioqueue worker`` as ``myapp.jobs:resize`` in docs/howto/throughput.rst.)
"""

from __future__ import annotations

from typing import Any

import trio

import trioqueue

JOBS = 1000


async def resize(payload: Any, ctx: trioqueue.JobContext) -> None:
    await trio.sleep(0.001)  # a short job


async def drain(batch_size: int) -> dict[str, int]:
    """Drain JOBS jobs; the claim, renewal and ack statements it took."""
    async with trioqueue.open_memory() as backend:
        await backend.enqueue_many("images", [{"n": n} for n in range(JOBS)])
        finished = 0
        all_done = trio.Event()

        async def count(job: trioqueue.Job) -> None:
            nonlocal finished
            finished += 1
            if finished == JOBS:
                all_done.set()

        config = trioqueue.WorkerConfig(
            handler=resize,
            queue="images",
            concurrency=4,  # batches at once
            batch_size=batch_size,  # jobs per batch: one lease, one ack
            max_job_duration=60,
            on_job_succeeded=count,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await all_done.wait()
            nursery.cancel_scope.cancel()
        calls = backend.statistics()["calls"]
    return {op: calls[op] for op in ("claim", "renew", "ack")}


async def main() -> None:
    one = await drain(batch_size=1)
    fifty = await drain(batch_size=50)
    print("batch_size=1: ", one)  # {'claim': 250, 'renew': 250, 'ack': 250}
    print("batch_size=50:", fifty)  # e.g. {'claim': 5, 'renew': 5, 'ack': 5}
    assert sum(fifty.values()) * 10 < sum(one.values())


if __name__ == "__main__":
    trio.run(main)
