"""The PostgreSQL backend's operator reads: jobs, counts, queue stats, workers, history, attempts.

Each read is one statement; ``list_jobs`` splices one of the fixed :data:`ORDER_BY` lists
into its statement, never caller text.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from trioqueue._backends.postgres.arguments import INT64, is_bigint, like_pattern
from trioqueue._backends.postgres.attempts import attempt_buckets, attempt_infos, queue_timings
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.rows import job_info
from trioqueue._backends.postgres.statements import fetch, fetchrow, fetchval
from trioqueue._backends.validation import (
    check_cancelled,
    check_filters,
    check_history,
    check_job_id,
    check_job_ids,
    check_list_jobs,
    check_preview,
    check_sort,
)
from trioqueue._errors import UnknownJobError
from trioqueue._operator_types import AttemptBucket, AttemptInfo, QueueTimings
from trioqueue._types import FinishedBucket, JobInfo, JobSort, JobStatus, QueueStats, WorkerInfo

#: The ORDER BY list of each ``list_jobs`` sort: the only text spliced into that query
#: besides the schema, and only from this table. Ties go by id the same way; unfinished
#: jobs come last in both ``finished_at`` orders.
ORDER_BY: dict[JobSort, str] = {
    "id": "info.id",
    "-id": "info.id DESC",
    "priority": "info.priority, info.id",
    "-priority": "info.priority DESC, info.id DESC",
    "created_at": "info.created_at, info.id",
    "-created_at": "info.created_at DESC, info.id DESC",
    "finished_at": "info.finished_at NULLS LAST, info.id",
    "-finished_at": "info.finished_at DESC NULLS LAST, info.id DESC",
}


class ReadCalls(BackendBase):
    """Snapshots of jobs, workers and their history."""

    async def get_job(self, job_id: int) -> JobInfo:
        """A snapshot of one job.

        Raises:
            UnknownJobError: (a ``LookupError``) no job has this id.
            TypeError: ``job_id`` is not an int.
        """
        check_job_id(job_id)
        if not is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            raise UnknownJobError(job_id)
        row = await self._driver.run("get_job", fetchrow, self._sql["get_job"], job_id)
        if row is None:
            raise UnknownJobError(job_id)
        return job_info(row)

    async def get_jobs(
        self, job_ids: Sequence[int], *, preview: int | None = None
    ) -> dict[int, JobInfo]:
        """Snapshots of many jobs in one statement: each known job's JobInfo by id
        (``preview`` as in :meth:`list_jobs`).

        Raises:
            TypeError: an id is not an int.
            ValueError: more than 10,000 ids, or a negative ``preview``.
        """
        ids = [job_id for job_id in check_job_ids(job_ids) if is_bigint(job_id)]
        cut = check_preview(preview)
        if not ids:
            await trio.lowlevel.checkpoint()
            return {}
        rows = await self._driver.run("get_jobs", fetch, self._sql["get_jobs"], ids, cut)
        return {row["id"]: job_info(row) for row in rows}

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
    ) -> list[JobInfo]:
        """Snapshots of jobs, by id unless ``sort`` says otherwise, optionally of one
        queue and one status, and whose payload's JSON text or ``last_error`` contains
        ``search`` (case-insensitive ``ILIKE``; a search reads every row of the queue).
        With ``preview=n``, payloads, results and errors longer than ``n`` characters are
        cut by the query (``left(payload::text, n)``) and come back as
        :class:`~trioqueue.TruncatedText`.

        Raises:
            ValueError: an unknown ``status`` or ``sort``, ``limit`` outside 1..10000,
                ``offset`` < 0, a negative ``preview``, or a ``search`` longer than 1000
                characters or holding NUL.
        """
        queue, status, limit, offset = check_list_jobs(queue, status, limit, offset)
        pattern = like_pattern(check_filters(queue, status, search)[2])
        sql = self._list_sql[check_sort(sort)]
        cut = check_preview(preview)
        only = check_cancelled(cancelled, status)
        rows = await self._driver.run(
            "list_jobs", fetch, sql, queue, status, limit, min(offset, INT64), pattern, cut, only
        )
        return [job_info(row) for row in rows]

    async def count_jobs(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
    ) -> int:
        """How many jobs :meth:`list_jobs` would list with these filters and no paging."""
        queue, status, search = check_filters(queue, status, search)
        only = check_cancelled(cancelled, status)
        count: int = await self._driver.run(
            "count_jobs",
            fetchval,
            self._sql["count_jobs"],
            queue,
            status,
            like_pattern(search),
            only,
        )
        return count

    async def counts(self) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state (states with no jobs are left out)."""
        rows = await self._driver.run("counts", fetch, self._sql["counts"])
        counts: dict[str, dict[JobStatus, int]] = {}
        for row in rows:
            counts.setdefault(row["queue"], {})[row["state"]] = row["n"]
        return counts

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue: its counts and the age of its oldest ready job (None when none is)."""
        rows = await self._driver.run("queue_stats", fetch, self._sql["queue_stats"])
        counts: dict[str, dict[JobStatus, int]] = {}
        ages: dict[str, float] = {}
        flow: dict[str, tuple[bool, int | None, float | None]] = {}
        for row in rows:
            per_state = counts.setdefault(row["queue"], {})
            if row["state"] is not None:  # None: a configured queue without jobs
                per_state[row["state"]] = row["n"]
            if row["oldest_ready_age"] is not None:
                ages[row["queue"]] = row["oldest_ready_age"]
            flow[row["queue"]] = (row["paused"], row["max_running"], row["max_per_second"])
        return {
            queue: QueueStats(counts[queue], ages.get(queue), *flow[queue])
            for queue in sorted(counts)
        }

    async def list_workers(self) -> list[WorkerInfo]:
        """Every registered worker pool, ordered by queue then start time."""
        rows = await self._driver.run("list_workers", fetch, self._sql["list_workers"])
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
        rows = await self._driver.run(
            "finished_history", fetch, self._sql["finished_history"], window, buckets, queue
        )
        return [FinishedBucket(row["start"], row["succeeded"], row["failed"]) for row in rows]

    async def list_attempts(self, job_id: int) -> list[AttemptInfo]:
        """Every recorded attempt of one job, oldest first (docs/protocol.rst §14).

        Raises:
            UnknownJobError: no job has this id.
        """
        check_job_id(job_id)
        rows = []
        if is_bigint(job_id):
            rows = await self._driver.run(
                "list_attempts", fetch, self._sql["list_attempts"], job_id
            )
        else:
            await trio.lowlevel.checkpoint()
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
        rows = await self._driver.run(
            "queue_timings", fetch, self._sql["queue_timings"], window, queue
        )
        return queue_timings(rows)

    async def attempt_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[AttemptBucket]:
        """Attempts finished per equal time bucket over the last ``window`` seconds, with
        their percentiles: exactly ``buckets`` entries, oldest first."""
        window, buckets, queue = check_history(window, buckets, queue)
        rows = await self._driver.run(
            "attempt_history", fetch, self._sql["attempt_history"], window, buckets, queue
        )
        return attempt_buckets(rows)
