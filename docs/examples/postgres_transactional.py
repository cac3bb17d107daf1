"""Transactional mode: the handler's writes and the job's success commit together
(docs/postgres.rst, "Transactional mode")."""

import sys

import trio

import trioqueue


def with_search_path(dsn: str, schema: str) -> str:
    """``dsn`` whose connections find unqualified tables (``invoices``) in
    ``schema``."""
    return dsn + ("&" if "?" in dsn else "?") + f"search_path={schema}"


async def main(dsn: str, schema: str = "trioqueue") -> None:
    dsn = with_search_path(dsn, schema)
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        async with backend.acquire() as conn:
            await conn.execute(
                "CREATE TABLE invoices"
                " (customer int NOT NULL, amount int CHECK (amount > 0))"
            )

        # [start handler]
        async def record_invoice(payload, ctx: trioqueue.JobContext) -> None:
            await ctx.connection.execute(
                "INSERT INTO invoices (customer, amount) VALUES ($1, $2)",
                payload["customer"],
                payload["amount"],
            )
            # a follow-up job that exists only if this attempt commits
            await backend.enqueue(
                "emails", {"customer": payload["customer"]}, connection=ctx.connection
            )

        config = trioqueue.transactional_worker_config(
            4, record_invoice, queue="invoices"
        )
        # [end handler]

        paid = await backend.enqueue("invoices", {"customer": 42, "amount": 100})
        # The INSERT fails its CHECK: the attempt rolls back, with its follow-up job.
        refused = await backend.enqueue(
            "invoices", {"customer": 7, "amount": -5}, max_attempts=1
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            assert (await backend.wait_for(paid, timeout=60)).status == "succeeded"
            assert (await backend.wait_for(refused, timeout=60)).status == "failed"
            nursery.cancel_scope.cancel()

        async with backend.acquire() as conn:
            rows = await conn.fetch("SELECT customer, amount FROM invoices")
        assert [tuple(row) for row in rows] == [(42, 100)]
        emails = await backend.list_jobs(queue="emails")
        assert [job.payload for job in emails] == [{"customer": 42}]


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
