"""Counts that stay cheap on a big table: ``queue_stats``, ``counts`` and ``estimate_jobs``
(docs/dashboard.rst, "Big tables").

Theory of operation
-------------------
A year of history is millions of finished rows, and a grouped ``count(*)`` over them reads
every one (seconds, on each dashboard refresh). So counts come in three kinds:

- live jobs (scheduled, ready, running) are counted exactly from the claim path's partial
  indexes, which hold unfinished rows only: their cost follows the backlog, not history.
- finished jobs are counted exactly while the table holds at most ``exact_up_to`` of them
  (a bounded probe of ``jobs_finished_idx`` tells), and estimated past that from the
  planner's statistics (reads.sql ``finished_estimates``); the answer says which.
- a filtered count (the jobs page's total) is counted exactly up to ``exact_up_to`` rows,
  under a statement timeout; past either, it is the planner's row estimate for the filter.

All the statements of one call run on one connection (one crossing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import asyncpg

from trioqueue._backends.postgres.job_lists import JobFilter, count_statement, estimate_statement
from trioqueue._backends.postgres.sql import render
from trioqueue._types import JobCount, JobStatus, QueueStats

__all__ = ["Counts", "estimate_jobs", "read_counts", "stats_from"]

Counts = tuple[list[Any], list[Any], list[Any], bool]

#: A planner's estimate this many times past the exact limit is not counted at all.
CLEARLY_MORE = 10


async def read_counts(
    connection: Any, sql: Mapping[str, str], schema: str, exact_up_to: int
) -> Counts:
    """Live rows, configured queues, finished rows, and whether the finished are estimates."""
    live = await connection.fetch(sql["live_stats"])
    configured = await connection.fetch(sql["configured_queues"])
    finished_rows = await connection.fetchval(sql["finished_probe"], exact_up_to)
    if finished_rows <= exact_up_to:
        return live, configured, await connection.fetch(sql["finished_counts"]), False
    estimates = await connection.fetch(sql["finished_estimates"], schema)
    if not estimates:  # no statistics yet (never analyzed): count, this once
        return live, configured, await connection.fetch(sql["finished_counts"]), False
    return live, configured, estimates, True


def stats_from(counts: Counts) -> dict[str, QueueStats]:
    """``queue_stats``' answer from :func:`read_counts`' rows."""
    live, configured, finished, estimated = counts
    per_queue: dict[str, dict[JobStatus, int]] = {}
    ages: dict[str, float] = {}
    for row in (*live, *finished):
        if row["n"] > 0:
            per_queue.setdefault(row["queue"], {})[row["state"]] = row["n"]
    for row in live:
        if row["state"] == "ready":
            ages[row["queue"]] = row["age"]
    flow = {
        row["queue"]: (row["paused"], row["max_running"], row["max_per_second"])
        for row in configured
    }
    return {
        queue: QueueStats(
            per_queue.get(queue, {}),
            ages.get(queue),
            *flow.get(queue, (False, None, None)),
            estimated=estimated,
        )
        for queue in sorted(per_queue.keys() | flow.keys())
    }


async def estimate_jobs(
    connection: Any, schema: str, where: JobFilter, exact_up_to: int, time_limit: float
) -> JobCount:
    """The matching jobs, counted up to ``exact_up_to`` within ``time_limit`` seconds (a statement timeout: PostgreSQL stops the count), else
    the planner's estimate. The estimate comes first: one far past ``exact_up_to`` is
    answered at once (counting would only run into the cap or the timeout)."""
    sql, args = estimate_statement(where)
    plan = json.loads(await connection.fetchval(render(sql, schema), *args))
    estimate = int(plan[0]["Plan"]["Plan Rows"])
    if estimate > exact_up_to * CLEARLY_MORE:
        return JobCount(estimate, estimated=True)
    sql, args = count_statement(where, exact_up_to + 1)
    try:
        async with connection.transaction():
            await connection.execute(
                f"SET LOCAL statement_timeout = {max(1, int(time_limit * 1000))}"
            )
            n: int | None = await connection.fetchval(render(sql, schema), *args)
    except asyncpg.QueryCanceledError:
        n = None
    if n is not None and n <= exact_up_to:
        return JobCount(n)
    # Past the cap (then at least cap + 1), or out of time: the planner's estimate.
    return JobCount(max(estimate, 0 if n is None else n), estimated=True)
