"""Retention: delete finished jobs older than a week.

See docs/postgres.rst, "Retention".
"""

import sys

import trio

import trioqueue


async def prune(backend: trioqueue.PostgresBackend) -> None:
    # [start prune]
    while await backend.prune(older_than=7 * 86400, limit=10_000) == 10_000:
        pass
    # [end prune]


async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        ids = await backend.enqueue_many("reports", [{"n": n} for n in range(3)])
        for job_id in ids:
            assert await backend.cancel(job_id)  # finished (failed) now
        # Two of them finished eight days ago.
        async with backend.acquire() as conn:
            await conn.execute(
                f"UPDATE {schema}.jobs SET finished_at = now() - interval '8 days'"
                " WHERE id = ANY($1::bigint[])",
                ids[:2],
            )
        await prune(backend)
        assert [job.id for job in await backend.list_jobs()] == ids[2:]


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
