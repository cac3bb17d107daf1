"""How-to: run behind PgBouncer in transaction mode.

Jobs go through the pooler; LISTEN (wake-ups for new work and cancels) goes to the
database directly. Run it with ``TRIOQUEUE_DSN`` pointing at PgBouncer and
``TRIOQUEUE_LISTEN_DSN`` at the database. The docs' tests give both the same server:
transaction pooling is correct on a direct connection too.
"""

from __future__ import annotations

import os
from typing import Any

import trio

import trioqueue


async def resize(payload: Any, ctx: trioqueue.JobContext) -> dict[str, int]:
    return {"width": payload["width"] // 2}


async def run(pooler_dsn: str, direct_dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(
        pooler_dsn,  # e.g. postgresql://app@pgbouncer:6432/appdb
        schema=schema,
        pooling="transaction",  # say so, rather than rely on the detection
        listen_dsn=direct_dsn,  # e.g. postgresql://app@db:5432/appdb
    ) as backend:
        await backend.migrate()  # transaction-level lock only: safe through the pooler
        config = trioqueue.WorkerConfig(
            handler=resize,
            queue="images",
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("images", {"width": 640})
            info = await backend.wait_for(job_id, timeout=60)
            print(info.status, info.result)
            assert info.status == "succeeded"
            assert info.result == {"width": 320}
            nursery.cancel_scope.cancel()


async def main(dsn: str, schema: str = "trioqueue") -> None:
    """The docs' tests: one server stands for both, PgBouncer and the database."""
    await run(dsn, dsn, schema)


if __name__ == "__main__":
    trio.run(run, os.environ["TRIOQUEUE_DSN"], os.environ["TRIOQUEUE_LISTEN_DSN"])
