"""Reads on big tables, on the memory backend (docs/dashboard.rst, "Big tables"): keyset
cursors page through jobs without duplicates or gaps while jobs are inserted, cancelled
and deleted between pages; cursors are checked; estimated counts are shown as such."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trioqueue
from trioqueue._types import JOB_SORTS
from trioqueue.web.counts import count_text

QUEUES = ("a", "b")


def _walk_plan() -> st.SearchStrategy[Any]:
    change = st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from(QUEUES), st.integers(-2, 2)),
        st.tuples(st.just("delete"), st.integers(0, 10**6)),
        st.tuples(st.just("cancel"), st.integers(0, 10**6)),
        st.tuples(st.just("sleep"), st.floats(0.000001, 5)),
    )
    return st.fixed_dictionaries(
        {
            "jobs": st.lists(st.tuples(st.sampled_from(QUEUES), st.integers(-2, 2)), max_size=30),
            "sort": st.sampled_from(JOB_SORTS),
            "queue": st.sampled_from((None, *QUEUES)),
            "limit": st.integers(1, 7),
            "backwards": st.booleans(),
            "changes": st.lists(st.lists(change, max_size=4), max_size=12),
        }
    )


async def _walk(plan: dict[str, Any]) -> None:
    """Page through every job with cursors, changing the table between pages: no job whose
    sort key stayed is shown twice, the pages keep the sort's order, and every job that was
    there from the start to the end with its sort key unchanged is shown."""
    sort, queue = plan["sort"], plan["queue"]
    async with trioqueue.open_memory() as backend:
        for q, priority in plan["jobs"]:
            await backend.enqueue(q, {}, priority=priority)
            await trio.sleep(0.25)
        start = {j.id: j for j in await backend.list_jobs(queue, limit=10_000, sort=sort)}
        moved: set[int] = set()  # deleted or with a new sort key meanwhile
        seen: list[trioqueue.JobInfo] = []
        page = await _page(backend, plan, None)
        changes = iter(plan["changes"])
        # Each page shows at least one job not seen before, of those there ever were.
        pages_at_most = len(start) + sum(len(c) for c in plan["changes"]) + 1
        while page:
            pages_at_most -= 1
            assert pages_at_most >= 0, "the pages did not end (a job shown again and again)"
            seen.extend(page if not plan["backwards"] else reversed(page))
            for change in next(changes, []):
                moved |= await _change(backend, change, sorted(start))
            page = await _page(backend, plan, page[0] if plan["backwards"] else page[-1])
        ids = [j.id for j in seen]
        steady = [i for i in ids if i not in moved]  # a row whose key moved may be met again
        assert len(steady) == len(set(steady)), "a job was shown twice"
        kept = {i for i in start if i not in moved}
        assert kept <= set(ids), "a job that stayed put was skipped"
        order = await backend.list_jobs(queue, limit=10_000, sort=sort)
        rank = {j.id: n for n, j in enumerate(order)}
        still = [i for i in ids if i in rank and i in kept]
        expected = sorted(still, key=rank.__getitem__, reverse=plan["backwards"])
        assert still == expected, "pages out of the sort's order"


async def _page(
    backend: trioqueue.MemoryBackend, plan: dict[str, Any], last: trioqueue.JobInfo | None
) -> list[trioqueue.JobInfo]:
    sort = plan["sort"]
    cursor = None if last is None else trioqueue.job_cursor(last, sort)
    if plan["backwards"] and cursor is None:
        # From the end: the first page read backwards starts after the last job there is.
        every = await backend.list_jobs(plan["queue"], limit=10_000, sort=sort)
        if not every:
            return []
        tail = every[-1]
        return [*await backend.list_jobs(
            plan["queue"], limit=plan["limit"] - 1, sort=sort,
            before=trioqueue.job_cursor(tail, sort),
        ), tail] if plan["limit"] > 1 else [tail]  # fmt: skip
    if plan["backwards"]:
        return await backend.list_jobs(plan["queue"], limit=plan["limit"], sort=sort, before=cursor)
    return await backend.list_jobs(plan["queue"], limit=plan["limit"], sort=sort, after=cursor)


async def _change(
    backend: trioqueue.MemoryBackend, change: tuple[Any, ...], ids: list[int]
) -> set[int]:
    """Apply one change; the ids whose row moved (deleted, or a new sort key)."""
    kind = change[0]
    if kind == "enqueue":
        await backend.enqueue(change[1], {}, priority=change[2])
    elif kind == "sleep":
        await trio.sleep(change[1])
    elif ids:
        job_id = ids[change[1] % len(ids)]
        done = await (backend.delete_job(job_id) if kind == "delete" else backend.cancel(job_id))
        return {job_id} if done else set()
    return set()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_cursor_pages_have_no_duplicates_or_gaps_under_change(data: st.DataObject) -> None:
    plan = data.draw(_walk_plan())
    trio.run(_walk, plan, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_cursor_of_another_sort_or_garbage_is_refused() -> None:
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("a", {})
        [info] = await backend.list_jobs()
        cursor = trioqueue.job_cursor(info, "id")
        assert [j.id for j in await backend.list_jobs(after=cursor)] == []
        assert [j.id for j in await backend.list_jobs(before=cursor)] == []
        assert [
            j.id
            for j in await backend.list_jobs(sort="-id", after=trioqueue.job_cursor(info, "-id"))
        ] == []
        with pytest.raises(ValueError, match="made for sort 'id', not '-priority'"):
            await backend.list_jobs(sort="-priority", after=cursor)
        for bad in ("", "x", "!!!", "W10", "WyJpZCIsMSwwXQ", "a" * 300):
            with pytest.raises(ValueError):
                await backend.list_jobs(after=bad)
        with pytest.raises(ValueError, match="not both"):
            await backend.list_jobs(after=cursor, before=cursor)
        with pytest.raises(TypeError):
            await backend.list_jobs(after=job_id)  # type: ignore[arg-type]


async def test_an_unfinished_job_cursor_in_the_finished_at_orders() -> None:
    async with trioqueue.open_memory() as backend:
        done = await backend.enqueue("a", {})
        await backend.cancel(done)
        waiting = [await backend.enqueue("a", {}) for _ in range(3)]
        for sort in ("finished_at", "-finished_at"):
            every = await backend.list_jobs(sort=sort)
            assert every[0].id == done  # unfinished jobs last, in both orders
            after_first = trioqueue.job_cursor(every[1], sort)
            rest = await backend.list_jobs(sort=sort, after=after_first)
            assert [j.id for j in rest] == [j.id for j in every[2:]]
            before_last = trioqueue.job_cursor(every[-1], sort)
            assert [j.id for j in await backend.list_jobs(sort=sort, before=before_last)] == [
                j.id for j in every[:-1]
            ]
        assert sorted(waiting) == waiting


async def test_search_window_bounds_a_search_to_the_newest_jobs() -> None:
    async with trioqueue.open_memory() as backend:
        old = await backend.enqueue("a", {"note": "needle"})
        for _ in range(5):
            await backend.enqueue("a", {"note": "hay"})
        new = await backend.enqueue("a", {"note": "needle"})
        assert [j.id for j in await backend.list_jobs(search="needle")] == [old, new]
        assert [j.id for j in await backend.list_jobs(search="needle", search_window=3)] == [new]
        assert await backend.count_jobs(search="needle") == 2
        count = await backend.estimate_jobs(search="needle", search_window=3)
        assert count == trioqueue.JobCount(1, estimated=False)
        with pytest.raises(ValueError):
            await backend.list_jobs(search="needle", search_window=0)


async def test_memory_counts_are_never_estimates() -> None:
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {})
        stats = await backend.queue_stats()
        assert stats["a"].estimated is False
        assert await backend.estimate_jobs("a") == trioqueue.JobCount(1)


@pytest.mark.parametrize(
    ("n", "estimated", "text"),
    [
        (0, False, "0"),
        (1234567, False, "1234567"),
        (950, True, "~950"),
        (1000, True, "~1k"),
        (12_345, True, "~12k"),
        (1_234_567, True, "~1.2M"),
        (10_000_000, True, "~10M"),
        (2_500_000_000, True, "~2.5G"),
    ],
)
def test_count_text_marks_estimates(n: int, estimated: bool, text: str) -> None:
    assert count_text(n, estimated) == text
