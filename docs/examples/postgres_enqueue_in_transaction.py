"""Enqueue inside your own transaction (docs/postgres.rst, "Transactional mode")."""

import sys

import trio

import trioqueue


class Refused(Exception):
    pass


async def pay(backend: trioqueue.PostgresBackend, order_id: int) -> None:
    # [start enqueue]
    async with backend.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE orders SET state = 'paid' WHERE id = $1", order_id)
        await backend.enqueue("receipts", {"order": order_id}, connection=conn)
    # [end enqueue]


async def main(dsn: str, schema: str = "trioqueue") -> None:
    dsn += ("&" if "?" in dsn else "?") + f"search_path={schema}"  # finds "orders"
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        async with backend.acquire() as conn:
            await conn.execute("CREATE TABLE orders (id int PRIMARY KEY, state text)")
            await conn.execute("INSERT INTO orders VALUES (1, 'new'), (2, 'new')")

        await pay(backend, 1)
        [job] = await backend.list_jobs(queue="receipts")
        assert job.payload == {"order": 1}

        # A transaction that rolls back leaves neither the update nor the job.
        try:
            async with backend.acquire() as conn, conn.transaction():
                await conn.execute("UPDATE orders SET state = 'paid' WHERE id = 2")
                await backend.enqueue("receipts", {"order": 2}, connection=conn)
                raise Refused
        except Refused:
            pass
        assert len(await backend.list_jobs(queue="receipts")) == 1
        async with backend.acquire() as conn:
            states = await conn.fetch("SELECT id, state FROM orders ORDER BY id")
        assert [tuple(row) for row in states] == [(1, "paid"), (2, "new")]


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
