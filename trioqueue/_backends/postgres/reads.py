"""The PostgreSQL backend's operator reads: jobs, counts, queue stats, workers, history, attempts.

Each read is one statement (the counts: a few on one connection); ``list_jobs`` and its
counts are built of fixed fragments (job_lists.py), never caller text. Every read here goes through
``self._reads``: to a read replica when the backend has one (``replica.py``;
docs/postgres.rst, "Read replicas"). ``get_job``, ``get_jobs`` and ``list_attempts`` read a
job the replica does not know (yet) on the primary, and ``fresh=True`` reads the primary.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from trioqueue._backends.postgres.arguments import INT64, is_bigint, like_pattern
from trioqueue._backends.postgres.attempts import attempt_buckets, attempt_infos, queue_timings
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.counting import estimate_jobs, read_counts, stats_from
from trioqueue._backends.postgres.job_lists import JobFilter, count_statement, list_statement
from trioqueue._backends.postgres.rows import job_info
from trioqueue._backends.postgres.sql import render
from trioqueue._backends.postgres.statements import fetch, fetchrow, fetchval
from trioqueue._backends.validation import (
    check_cancelled,
    check_cursors,
    check_filters,
    check_history,
    check_job_id,
    check_job_ids,
    check_list_jobs,
    check_preview,
    check_search_window,
    check_sort,
)
from trioqueue._errors import UnknownJobError
from trioqueue._operator_types import AttemptBucket, AttemptInfo, QueueTimings
from trioqueue._types import (
    FinishedBucket,
    JobCount,
    JobInfo,
    JobSort,
    JobStatus,
    QueueStats,
    WorkerInfo,
)

#: Past this many finished jobs in the table, their counts are estimates
#: (counting.py); a filtered count counts this many at most.
EXACT_UP_TO = 10_000
#: How long the exact part of a filtered count may take (seconds) before it gives way to
#: the planner's estimate.
COUNT_TIMEOUT = 0.1


async def known_bigint(job_id: object) -> None:
    """Refuse a ``job_id`` that is not an int (``TypeError``), and one out of bigint range,
    which names no job (``UnknownJobError``, with no statement sent)."""
    check_job_id(job_id)
    assert isinstance(job_id, int)
    if not is_bigint(job_id):
        await trio.lowlevel.checkpoint()
        raise UnknownJobError(job_id)


class ReadCalls(BackendBase):
    """Snapshots of jobs, workers and their history."""

    #: Finished jobs counted exactly up to this many (docs/dashboard.rst, "Big tables").
    exact_finished_up_to: int = EXACT_UP_TO
    #: ``estimate_jobs``: rows counted exactly at most, and for how long (seconds).
    exact_count_up_to: int = EXACT_UP_TO
    count_timeout: float = COUNT_TIMEOUT

    async def get_job(self, job_id: int, *, fresh: bool = False) -> JobInfo:
        """A snapshot of one job.

        With a read replica (``read_dsn``) it is read there unless ``fresh=True``, so it
        may be as old as the replica's lag; a job the replica does not know (yet) is read
        on the primary, so a job just enqueued is never reported unknown. ``fresh=True``
        reads the primary: what a decision that follows must see.

        Raises:
            UnknownJobError: (a ``LookupError``) no job has this id.
            TypeError: ``job_id`` is not an int.
        """
        await known_bigint(job_id)
        row = None
        if not fresh and self._reads.configured:
            row = await self._reads.run("get_job", fetchrow, self._sql["get_job"], job_id)
        if row is None:
            row = await self._driver.run("get_job", fetchrow, self._sql["get_job"], job_id)
        if row is None:
            raise UnknownJobError(job_id)
        return job_info(row)

    async def get_jobs(
        self, job_ids: Sequence[int], *, preview: int | None = None, fresh: bool = False
    ) -> dict[int, JobInfo]:
        """Snapshots of many jobs in one statement: each known job's JobInfo by id
        (``preview`` as in :meth:`list_jobs`). With a read replica it is read there unless
        ``fresh=True``, and the jobs the replica does not know are read on the primary
        (as :meth:`get_job`).

        Raises:
            TypeError: an id is not an int.
            ValueError: more than 10,000 ids, or a negative ``preview``.
        """
        ids = [job_id for job_id in check_job_ids(job_ids) if is_bigint(job_id)]
        cut = check_preview(preview)
        if not ids:
            await trio.lowlevel.checkpoint()
            return {}
        found: dict[int, JobInfo] = {}
        if not fresh and self._reads.configured:
            rows = await self._reads.run("get_jobs", fetch, self._sql["get_jobs"], ids, cut)
            found = {row["id"]: job_info(row) for row in rows}
            ids = [job_id for job_id in ids if job_id not in found]
            if not ids:
                return found
        rows = await self._driver.run("get_jobs", fetch, self._sql["get_jobs"], ids, cut)
        return found | {row["id"]: job_info(row) for row in rows}

    async def list_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        search: str | None = None,
        sort: JobSort = "id",
        preview: int | None = None,
        cancelled: bool | None = None,
        after: str | None = None,
        before: str | None = None,
        search_window: int | None = None,
    ) -> list[JobInfo]:
        """Snapshots of jobs, by id unless ``sort`` says otherwise, optionally of one
        queue and one status, and whose payload's JSON text or ``last_error`` contains
        ``search`` (case-insensitive ``ILIKE``; a search reads every row of the queue,
        or only the ``search_window`` newest jobs when given).
        With ``preview=n``, payloads, results and errors longer than ``n`` characters are
        cut by the query (``left(payload::text, n)``) and come back as
        :class:`~trioqueue.TruncatedText`. ``after``/``before``: a cursor
        (:func:`trioqueue.job_cursor`) of a job; the page starts right after (ends right
        before) it in ``sort`` order, ``offset`` counted from there.

        Raises:
            ValueError: an unknown ``status`` or ``sort``, ``limit`` outside 1..10000,
                ``offset`` < 0, a negative ``preview``, a ``search`` longer than 1000
                characters or holding NUL, a cursor that is not one of ``sort``'s, both
                ``after`` and ``before``, or a ``search_window`` < 1.
        """
        queue, status, limit, offset = check_list_jobs(queue, status, limit, offset)
        where = self._job_filter(queue, status, search, cancelled, search_window)
        sort = check_sort(sort)
        cut = check_preview(preview)
        start, end = check_cursors(after, before, sort)
        sql, args, backwards = list_statement(
            where, sort, limit, min(offset, INT64), cut, start, end
        )
        rows = await self._reads.run("list_jobs", fetch, render(sql, self._schema), *args)
        infos = [job_info(row) for row in rows]
        return infos[::-1] if backwards else infos

    def _job_filter(
        self,
        queue: str | None,
        status: JobStatus | None,
        search: str | None,
        cancelled: bool | None,
        search_window: int | None = None,
    ) -> JobFilter:
        queue, status, search = check_filters(queue, status, search)
        only = check_cancelled(cancelled, status)
        window = check_search_window(search_window)
        return JobFilter(queue, status, like_pattern(search), only, window)

    async def count_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
    ) -> int:
        """How many jobs :meth:`list_jobs` would list with these filters and no paging
        (exactly: on a big table, :meth:`estimate_jobs` answers sooner)."""
        sql, args = count_statement(self._job_filter(queue, status, search, cancelled), None)
        count: int = await self._reads.run("count_jobs", fetchval, render(sql, self._schema), *args)
        return count

    async def estimate_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        search_window: int | None = None,
    ) -> JobCount:
        """How many jobs :meth:`list_jobs` would list with these filters: exact up to
        ``exact_count_up_to`` (counted within ``count_timeout``), else the planner's
        estimate, flagged ``estimated`` (docs/dashboard.rst, "Big tables")."""
        where = self._job_filter(queue, status, search, cancelled, search_window)
        return await self._reads.run(
            "count_jobs",
            estimate_jobs,
            self._schema,
            where,
            self.exact_count_up_to,
            self.count_timeout,
        )

    async def counts(self) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state (states with no jobs are left out); finished ones
        estimated past ``exact_finished_up_to`` (:meth:`queue_stats` says when)."""
        return {
            queue: dict(stats.counts)
            for queue, stats in (await self._stats("counts")).items()
            if stats.counts
        }

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue: its counts and the age of its oldest ready job (None when none is).
        Live counts are exact; finished ones are estimates past ``exact_finished_up_to``
        finished jobs in the table (``QueueStats.estimated``)."""
        return await self._stats("queue_stats")

    async def _stats(self, op: str) -> dict[str, QueueStats]:
        rows = await self._reads.run(
            op, read_counts, self._sql, self._schema, self.exact_finished_up_to
        )
        return stats_from(rows)

    async def list_workers(self) -> list[WorkerInfo]:
        """Every registered worker pool, ordered by queue then start time."""
        rows = await self._reads.run("list_workers", fetch, self._sql["list_workers"])
        return [WorkerInfo(**row) for row in rows]  # the query names WorkerInfo's fields

    async def finished_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[FinishedBucket]:
        """Jobs finished per equal time bucket over the last ``window`` seconds, oldest
        first, exactly ``buckets`` entries (one statement; a range scan of finished rows).

        Raises:
            ValueError: ``window`` not > 0 (or past a century), ``buckets`` outside 1..1000.
        """
        window, buckets, queue = check_history(window, buckets, queue)
        rows = await self._reads.run(
            "finished_history", fetch, self._sql["finished_history"], window, buckets, queue
        )
        return [FinishedBucket(row["start"], row["succeeded"], row["failed"]) for row in rows]

    async def list_attempts(self, job_id: int) -> list[AttemptInfo]:
        """Every recorded attempt of one job, oldest first (docs/protocol.rst §14). With a
        read replica it is read there, and on the primary when the replica does not know
        the job (yet), as :meth:`get_job`.

        Raises:
            UnknownJobError: no job has this id.
        """
        await known_bigint(job_id)
        sql = self._sql["list_attempts"]
        attempts = attempt_infos(job_id, await self._reads.run("list_attempts", fetch, sql, job_id))
        if attempts is None and self._reads.configured:
            rows = await self._driver.run("list_attempts", fetch, sql, job_id)
            attempts = attempt_infos(job_id, rows)
        if attempts is None:
            raise UnknownJobError(job_id)
        return attempts

    async def queue_timings(
        self, *, window: float = 3600.0, queue: str | None = None
    ) -> dict[str, QueueTimings]:
        """Per queue (or only ``queue``): run time and wait percentiles of the attempts
        finished in the last ``window`` seconds (``percentile_cont``)."""
        window, _, queue = check_history(window, 1, queue)
        rows = await self._reads.run(
            "queue_timings", fetch, self._sql["queue_timings"], window, queue
        )
        return queue_timings(rows)

    async def attempt_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[AttemptBucket]:
        """Attempts finished per equal time bucket over the last ``window`` seconds, with
        their percentiles: exactly ``buckets`` entries, oldest first."""
        window, buckets, queue = check_history(window, buckets, queue)
        rows = await self._reads.run(
            "attempt_history", fetch, self._sql["attempt_history"], window, buckets, queue
        )
        return attempt_buckets(rows)
