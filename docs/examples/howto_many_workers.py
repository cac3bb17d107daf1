"""How-to: many workers on many machines, one database.

Each ``open_postgres`` below stands for a worker process on a machine of its own: the
processes share nothing but the database, and the leases give each job to one of them.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import trio

import trioqueue


async def thumbnail(payload: Any, ctx: trioqueue.JobContext, *, machine: str) -> str:
    await trio.sleep(0.05)  # the work
    return machine  # the result says who did it, for this example


async def worker_process(
    dsn: str, schema: str, machine: str, *, task_status: trio.TaskStatus[None]
) -> None:
    """What ``trioqueue worker`` does on each machine: its own backend, its own pool."""
    config = trioqueue.WorkerConfig(
        handler=functools.partial(thumbnail, machine=machine),
        queue="thumbnails",
        concurrency=4,
        max_job_duration=60,
    )
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await trioqueue.run_worker_pool(backend, config, task_status=task_status)


async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()  # once, before the workers start (idempotent)
        async with trio.open_nursery() as nursery:
            for machine in ("web-1", "web-2", "batch-1"):
                await nursery.start(worker_process, dsn, schema, machine)
            print(len(await backend.list_workers()), "worker pools registered")

            payloads = [{"n": n} for n in range(30)]
            ids = await backend.enqueue_many("thumbnails", payloads)
            done = [await backend.wait_for(job_id, timeout=60) for job_id in ids]
            nursery.cancel_scope.cancel()

    by_machine: dict[str, int] = {}
    for info in done:
        assert info.status == "succeeded"
        assert info.attempts == 1  # each job ran once
        by_machine[info.result] = by_machine.get(info.result, 0) + 1
    print(by_machine)  # e.g. {'web-1': 11, 'web-2': 10, 'batch-1': 9}


if __name__ == "__main__":
    trio.run(main, os.environ["TRIOQUEUE_DSN"])
