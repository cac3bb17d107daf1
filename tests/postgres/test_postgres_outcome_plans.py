"""The fenced outcome statements find their rows by primary key, whatever the statistics
say (docs/performance.rst, "PostgreSQL: history and the hot path").

With statistics taken while no job ran, the planner once judged the partial index of
running rows the cheapest way to the rows an ack names, and walked every running row (and
every dead entry) for each ack: 347 ms for an ack of 2 jobs on a table with 30,000 running
jobs. The statements now say ``(status = 'running') IS TRUE``, which no partial index of
running rows can serve.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.sql import QUERIES, render

from .._postgres_harness import jobs_table

pytestmark = pytest.mark.postgres

FINISHED = 20_000
RUNNING = 5_000


async def _stale_statistics(backend: PostgresBackend) -> list[int]:
    """Finished history analyzed while nothing ran, then many running jobs the statistics
    do not know of; answers the ids of two of those."""
    table = jobs_table(backend)
    async with backend.acquire() as connection:
        # No autovacuum on this table during the test: the statistics must stay stale.
        await connection.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        await connection.execute(
            f"INSERT INTO {table} (queue, payload, status, attempts, max_attempts,"
            " claim_seq, finished_at) SELECT 'q', '1', 'succeeded', 1, 3, 1, now()"
            f" FROM generate_series(1, {FINISHED})"
        )
        await connection.execute(f"ANALYZE {table}")
        rows = await connection.fetch(
            f"INSERT INTO {table} (queue, payload, status, attempts, max_attempts,"
            " claim_seq, not_visible_until, claimed_at, lease_floor)"
            " SELECT 'q', '1', 'running', 1, 3, 1, now() + interval '1 hour', now(),"
            f" now() + interval '1 hour' FROM generate_series(1, {RUNNING}) RETURNING id"
        )
    ids = [row["id"] for row in rows]
    return [ids[10], ids[-10]]


def _scans(node: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    if node.get("Relation Name") == "jobs":
        yield node["Node Type"], node.get("Index Name")
    for child in node.get("Plans", []):
        yield from _scans(child)


async def _plan(backend: PostgresBackend, name: str, *arguments: Any) -> list[tuple[str, Any]]:
    async with backend.acquire() as connection:
        explained = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + render(QUERIES[name], backend.schema), *arguments
        )
    [plan] = json.loads(explained)
    return [scan for scan in _scans(plan["Plan"]) if scan[0] != "ModifyTable"]


def _arguments(name: str, ids: list[int]) -> tuple[Any, ...]:
    fence = ([str(i) for i in ids], ["1"] * len(ids))
    # The last argument of each is the checkpoints (docs/protocol.rst §16): none here.
    if name == "ack":
        return (*fence, None, None, None, None, None)
    if name == "fail":
        return (*fence, ["E: x"] * len(ids), [None] * len(ids), None, None, None, None, None, None)
    return (*fence, None, None, None, None)


@pytest.mark.parametrize("name", ["ack", "fail", "release"])
async def test_an_outcome_finds_its_rows_by_primary_key_with_stale_statistics(
    backend: PostgresBackend, name: str
) -> None:
    ids = await _stale_statistics(backend)
    scans = await _plan(backend, name, *_arguments(name, ids))
    assert scans, "the plan reads no jobs row"
    assert all(index == "jobs_pkey" for _, index in scans), scans
