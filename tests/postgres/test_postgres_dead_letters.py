"""Dead letters on PostgreSQL (docs/protocol.rst §19): what the conformance suite cannot
see from outside. A redrive's batches pick ``FOR UPDATE SKIP LOCKED``: a failed row another
transaction holds is passed over at once and left as it is. A page and the summary reach
the failed rows by their partial index (``jobs_dead_idx``), not by walking the finished
rows around them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._types import Failure

from .._postgres_harness import jobs_table

pytestmark = pytest.mark.postgres

Q = "dead"


async def _dead(backend: PostgresBackend, n: int) -> list[int]:
    ids = await backend.enqueue_many(Q, list(range(n)), max_attempts=1)
    claimed = await backend.claim(Q, limit=n, worker_id="w", visibility_timeout=60)
    failures = [
        Failure(c.job.id, c.job.claim_seq, "KeyError: k", None, error_type="builtins.KeyError")
        for c in claimed
    ]
    await backend.fail(failures)
    return ids


async def test_a_redrive_skips_a_row_another_transaction_holds(backend: PostgresBackend) -> None:
    ids = await _dead(backend, 3)
    held = ids[1]
    async with backend.acquire() as connection:
        await connection.execute("BEGIN")
        await connection.execute(
            f"SELECT 1 FROM {jobs_table(backend)} WHERE id = $1 FOR UPDATE", held
        )
        # A lock wait would hang the call: the bound turns that into a failure.
        with trio.fail_after(10):
            done = await backend.retry_matching(error_type="builtins.KeyError", batch_size=2)
        await connection.execute("ROLLBACK")
    assert done == 2
    infos = await backend.get_jobs(ids)
    assert [infos[i].status for i in ids] == ["ready", "failed", "ready"]
    assert [d.id for d in await backend.list_dead_letters()] == [held]


@pytest.mark.parametrize("name", ["list_dead_letters", "dead_letter_summary"])
async def test_the_dead_letters_are_read_by_their_partial_index(
    backend: PostgresBackend, name: str
) -> None:
    await _dead(backend, 5)
    async with backend.acquire() as connection:
        await connection.execute(
            f"INSERT INTO {jobs_table(backend)} (queue, payload, status, max_attempts, "
            "attempts, claim_seq, finished_at) "
            "SELECT $1, '{}'::jsonb, 'succeeded', 1, 1, 1, now() "
            "FROM generate_series(1, 20000)",
            Q,
        )
        await connection.execute(f"ANALYZE {jobs_table(backend)}")
        arguments: tuple[Any, ...] = (None,) * 6
        if name == "list_dead_letters":
            arguments += (None, 50, 1000)
        else:
            arguments += (10_000,)
        explained = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + render(QUERIES[name], backend.schema), *arguments
        )
    [plan] = json.loads(explained)
    on_jobs = [
        (kind, index) for kind, relation, index in _scans(plan["Plan"]) if relation == "jobs"
    ]
    assert any(index == "jobs_dead_idx" for _, index in on_jobs), on_jobs
    assert all(kind != "Seq Scan" for kind, _ in on_jobs), on_jobs


def _scans(node: dict[str, Any]) -> Iterator[tuple[str, str | None, str | None]]:
    if "Relation Name" in node or "Index Name" in node:
        yield node["Node Type"], node.get("Relation Name"), node.get("Index Name")
    for child in node.get("Plans", []):
        yield from _scans(child)
