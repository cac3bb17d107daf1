"""Open the PostgreSQL backend, migrate, enqueue (docs/postgres.rst)."""

import sys

import trio

import trioqueue


# [start open]
async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()  # idempotent: creates or upgrades the schema
        await backend.enqueue("reports", {"month": "2026-11"})
        # [end open]
        assert await backend.migrate() == []  # up to date: nothing applied
        [job] = await backend.list_jobs(queue="reports")
        assert job.status == "ready"
        assert job.payload == {"month": "2026-11"}


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
