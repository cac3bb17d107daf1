"""Jobs through a transaction pooler, LISTEN on a direct connection.

See docs/pgbouncer.rst.

Behind PgBouncer, ``pooler_dsn`` is ``postgresql://app@pgbouncer:6432/appdb`` and
``direct_dsn`` is ``postgresql://app@db:5432/appdb``; the tests run it against one plain
PostgreSQL server, giving both the same DSN.
"""

import sys

import trio

import trioqueue


async def make_report(payload, ctx: trioqueue.JobContext) -> None:
    pass


async def run(pooler_dsn: str, direct_dsn: str, schema: str = "trioqueue") -> None:
    # [start open]
    # PgBouncer with pool_mode = transaction: jobs through the pooler,
    # LISTEN on a direct connection to the database.
    async with trioqueue.open_postgres(
        pooler_dsn,  # "postgresql://app@pgbouncer:6432/appdb"
        listen_dsn=direct_dsn,  # "postgresql://app@db:5432/appdb"
        schema=schema,
    ) as backend:
        await backend.migrate()  # ... and everything else as on a direct connection
        # [end open]
        config = trioqueue.WorkerConfig(
            handler=make_report, queue="reports", max_job_duration=60, poll_interval=30
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await trio.sleep(0.5)  # the pool is idle, waiting for a wake-up
            job_id = await backend.enqueue("reports", {"month": "2026-11"})
            # The notice on the LISTEN connection wakes the pool long before its poll.
            info = await backend.wait_for(job_id, timeout=10)
            assert info.status == "succeeded"
            nursery.cancel_scope.cancel()


async def main(dsn: str, schema: str = "trioqueue") -> None:
    await run(dsn, dsn, schema)


if __name__ == "__main__":
    trio.run(run, sys.argv[1], sys.argv[2])
