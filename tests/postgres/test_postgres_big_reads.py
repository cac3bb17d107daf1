"""Reads on a big table, on PostgreSQL (docs/dashboard.rst, "Big tables").

A modest fill (20,000 finished jobs and a few live ones, ANALYZE'd, as autovacuum leaves a
table) is enough for the planner to choose the plans a big table gets. The checks are on
what a statement reads, measured: ``EXPLAIN (ANALYZE, BUFFERS)``'s buffers against the
table's pages, and the scans' relations and indexes; never a planner switch turned off.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import trioqueue
from trioqueue._backends.cursors import read_cursor
from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.job_lists import JobFilter, count_statement, list_statement
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._types import JobSort, JobStatus

FINISHED = 20_000
QUEUES = ("mail", "sms")

_FILL = """
INSERT INTO {schema}.jobs (queue, payload, status, attempts, max_attempts, claim_seq,
                           not_visible_until, created_at, finished_at, last_error, cancelled)
SELECT CASE WHEN g % 2 = 0 THEN 'mail' ELSE 'sms' END,
       jsonb_build_object('n', g, 'note', repeat('x', 200)),
       CASE WHEN g % 20 IN (0, 1) THEN 'failed' ELSE 'succeeded' END,
       1, 3, 1,
       now() - make_interval(secs => 86400.0 * ($1 - g) / $1),
       now() - make_interval(secs => 86400.0 * ($1 - g) / $1 + 1),
       now() - make_interval(secs => 86400.0 * ($1 - g) / $1),
       CASE WHEN g % 20 IN (0, 1) THEN 'ValueError: no' END,
       g % 50 = 0
FROM generate_series(1, $1::int) AS g
"""


@pytest.fixture
async def filled(backend: PostgresBackend) -> PostgresBackend:
    """The backend's table with FINISHED finished jobs, then 30 live ones, analyzed."""
    async with backend.acquire() as connection:
        await connection.execute(render(_FILL, backend.schema), FINISHED)
    for n in range(30):
        await backend.enqueue(QUEUES[n % 2], {"live": n}, delay=3600 if n % 3 == 0 else None)
    async with backend.acquire() as connection:
        await connection.execute(render("VACUUM ANALYZE {schema}.jobs", backend.schema))
    return backend


async def _explain(backend: PostgresBackend, sql: str, *args: Any) -> tuple[dict[str, Any], int]:
    """The executed plan of ``sql`` and the jobs table's pages."""
    async with backend.acquire() as connection:
        text = await connection.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + render(sql, backend.schema), *args
        )
        pages = await connection.fetchval(
            "SELECT relpages FROM pg_class WHERE oid = $1::regclass",
            f'"{backend.schema}".jobs',
        )
    [plan] = json.loads(text)
    return plan["Plan"], pages


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _buffers(plan: dict[str, Any]) -> int:
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def _assert_reads_little(plan: dict[str, Any], pages: int, *, seq_ok: bool = False) -> None:
    """A tenth of the jobs table's pages read at most, and (unless ``seq_ok``: a scan cut
    short by a LIMIT may be the cheapest) no sequential scan of it."""
    assert pages > 500  # the fill is big enough to tell (about 1,000 pages)
    assert _buffers(plan) < pages / 10, (_buffers(plan), pages)
    if seq_ok:
        return
    seq = [
        n for n in _nodes(plan) if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "jobs"
    ]
    assert not seq, "a sequential scan of jobs"


def _indexes(plan: dict[str, Any]) -> set[str]:
    return {n["Index Name"] for n in _nodes(plan) if "Index Name" in n}


async def test_live_counts_read_the_claim_indexes_only(filled: PostgresBackend) -> None:
    plan, pages = await _explain(filled, QUERIES["live_stats"])
    _assert_reads_little(plan, pages)
    assert _indexes(plan) <= {"jobs_claim_queued_idx", "jobs_claim_leased_floor_idx"}
    assert "jobs_claim_queued_idx" in _indexes(plan)


async def test_the_finished_probe_reads_at_most_its_limit(filled: PostgresBackend) -> None:
    plan, pages = await _explain(filled, QUERIES["finished_probe"], 1000)
    _assert_reads_little(plan, pages, seq_ok=True)  # here nearly every row is finished


def _list(
    sort: JobSort, where: JobFilter | None = None, after: str | None = None
) -> tuple[str, list[Any]]:
    cursor = None if after is None else read_cursor(after, sort)
    sql, args, _ = list_statement(where or JobFilter(), sort, 20, 0, 200, cursor)
    return sql, args


@pytest.mark.parametrize(
    ("sort", "where"),
    [
        ("-id", JobFilter()),
        ("id", JobFilter()),
        ("-id", JobFilter(status="failed")),
        ("-id", JobFilter(queue="mail", status="succeeded")),
        ("-id", JobFilter(status="ready")),
        ("-id", JobFilter(status="scheduled")),
        ("-finished_at", JobFilter(status="succeeded")),
        ("finished_at", JobFilter()),
        ("-finished_at", JobFilter()),
        ("-id", JobFilter(pattern="%x%", search_window=1000)),
        ("-id", JobFilter(pattern="%no such text%", search_window=1000)),
    ],
)
async def test_a_job_page_reads_a_page_not_the_table(
    filled: PostgresBackend, sort: JobSort, where: JobFilter
) -> None:
    sql, args = _list(sort, where)
    plan, pages = await _explain(filled, sql, *args)
    _assert_reads_little(plan, pages)


@pytest.mark.parametrize("sort", ["id", "-id", "finished_at", "-finished_at"])
async def test_a_deep_cursor_page_reads_a_page(filled: PostgresBackend, sort: JobSort) -> None:
    every = await filled.list_jobs(limit=10_000, sort=sort)
    middle = trioqueue.job_cursor(every[len(every) // 2], sort)
    sql, args = _list(sort, after=middle)
    plan, pages = await _explain(filled, sql, *args)
    _assert_reads_little(plan, pages)
    # The same page as an offset reads all the rows before it: what the cursor saves.
    sql, args, _ = list_statement(JobFilter(), sort, 20, len(every) // 2 + 1, 200)
    deep, _ = await _explain(filled, sql, *args)
    assert _buffers(deep) > 5 * _buffers(plan)


async def test_a_count_of_live_jobs_reads_the_live_rows(filled: PostgresBackend) -> None:
    for status in ("ready", "scheduled", "running"):
        sql, args = count_statement(JobFilter(status=status), None)
        plan, pages = await _explain(filled, sql, *args)
        _assert_reads_little(plan, pages)


async def test_finished_counts_are_estimated_past_the_limit_and_flagged(
    filled: PostgresBackend,
) -> None:
    default = await filled.queue_stats()  # 20,000 finished rows: past the default 10,000
    assert all(s.estimated for s in default.values())
    filled.exact_finished_up_to = FINISHED + 1000
    exact = await filled.queue_stats()
    assert not any(s.estimated for s in exact.values())
    assert exact["mail"].counts["succeeded"] + exact["sms"].counts["succeeded"] == 18_000
    assert exact["mail"].counts["ready"] == 10  # live counts: 20 ready, 10 scheduled
    filled.exact_finished_up_to = 1000
    estimated = await filled.queue_stats()
    assert all(s.estimated for s in estimated.values())
    finished: tuple[JobStatus, ...] = ("succeeded", "failed")
    live: tuple[JobStatus, ...] = ("ready", "scheduled")
    for queue in QUEUES:
        for state in finished:
            true, guess = exact[queue].counts[state], estimated[queue].counts[state]
            assert abs(guess - true) <= 0.25 * true, (queue, state, guess, true)
        for state in live:  # live counts stay exact
            assert estimated[queue].counts[state] == exact[queue].counts[state]
    assert await filled.counts() == {q: dict(s.counts) for q, s in estimated.items()}


async def test_estimate_jobs_counts_few_exactly_and_estimates_many(
    filled: PostgresBackend,
) -> None:
    assert await filled.estimate_jobs(status="ready") == trioqueue.JobCount(20)
    assert await filled.estimate_jobs(queue="mail", status="scheduled") == trioqueue.JobCount(5)
    filled.exact_count_up_to = 100
    many = await filled.estimate_jobs(status="succeeded")
    assert many.estimated and 12_000 <= many.n <= 24_000, many
    assert await filled.estimate_jobs(status="ready") == trioqueue.JobCount(20)
    assert await filled.count_jobs(status="succeeded") == 18_000  # count_jobs stays exact


@pytest.mark.parametrize(
    "sort", ["id", "-id", "priority", "-created_at", "finished_at", "-finished_at"]
)
async def test_cursor_pages_under_inserts_and_deletes(
    backend: PostgresBackend, sort: JobSort
) -> None:
    """Page through with cursors while jobs are enqueued, deleted and cancelled between
    pages: no job shown twice, none that stayed put skipped, the sort's order kept."""
    ids = [await backend.enqueue("q", {"n": n}, priority=n % 3) for n in range(40)]
    for job_id in ids[::4]:
        await backend.cancel(job_id)  # finished rows, for the finished_at orders
    start = {j.id for j in await backend.list_jobs(limit=10_000, sort=sort)}
    moved: set[int] = set()  # deleted during the walk
    seen: list[int] = []
    page = await backend.list_jobs(limit=7, sort=sort)
    step = 0
    while page:
        seen.extend(j.id for j in page)
        step += 1
        assert step < 20, "the pages did not end"
        if step <= 5:  # (in ascending id order a walk meets every job enqueued meanwhile)
            await backend.enqueue("q", {"new": step}, priority=step % 3)
            victim = ids[(step * 7) % len(ids)]
            if await backend.delete_job(victim):
                moved.add(victim)
        page = await backend.list_jobs(
            limit=7, sort=sort, after=trioqueue.job_cursor(page[-1], sort)
        )
    assert len(seen) == len(set(seen))
    assert start - moved <= set(seen)
    order = [j.id for j in await backend.list_jobs(limit=10_000, sort=sort)]
    kept = [i for i in seen if i in order]
    assert kept == sorted(kept, key=order.index)
    # And backwards from the last job: the jobs before it, in the sort's order.
    every = await backend.list_jobs(limit=10_000, sort=sort)
    back = await backend.list_jobs(limit=5, sort=sort, before=trioqueue.job_cursor(every[-1], sort))
    assert [j.id for j in back] == [j.id for j in every[-6:-1]]
