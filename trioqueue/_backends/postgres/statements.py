"""The asyncio side of one statement: each runs on the connection the driver hands it.

The backend's calls pass one of these, with a statement of ``queries.sql`` and its
arguments, to ``Driver.run`` (``driver.py``): one crossing of the trio↔asyncio bridge.
"""

from __future__ import annotations

from typing import Any


async def fetch(connection: Any, query: str, *args: Any) -> list[Any]:
    rows: list[Any] = await connection.fetch(query, *args)
    return rows


async def fetch_planned_for_arguments(connection: Any, query: str, *args: Any) -> list[Any]:
    """``fetch`` with a plan made for these very arguments (see ``_GENERIC_PLAN_ITEMS`` in ``claims.py``).

    ``SET LOCAL`` needs a transaction: two more round trips, which a statement this large
    does not notice.
    """
    async with connection.transaction():
        await connection.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        rows: list[Any] = await connection.fetch(query, *args)
    return rows


async def fetchrow(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchrow(query, *args)


async def fetchval(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchval(query, *args)


async def execute(connection: Any, query: str, *args: Any) -> None:
    await connection.execute(query, *args)
