"""The PostgreSQL backend's producer calls: enqueue, enqueue_many, dedup keys.

A held dedup key is answered by policy (docs/protocol.rst §18): ``keep`` reads the holder
(``find_dedup``); ``replace`` and ``debounce`` change it, if it waits, in one statement that
locks it first (``revise_duplicate``), so a claim taking it at the same moment either
takes the changed row or wins and leaves it unchanged.

Every enqueue is one ``INSERT`` of all its payloads (``unnest``), which also sends the
queue's NOTIFY; inside a caller's transaction (``connection=``) both take effect only if it
commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from trioqueue._backends.dependency_checks import (
    Dependencies,
    check_dependencies,
    parent_refused,
)
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.driver import PgConnection
from trioqueue._backends.validation import (
    EnqueueRequest,
    check_enqueue,
    check_on_duplicate,
    revision_outcome,
)
from trioqueue._errors import UnknownDependencyError
from trioqueue._types import Enqueued, EnqueueOutcome, OnDependencyFailure, OnDuplicate


class ProducerCalls(BackendBase):
    """Adding jobs."""

    async def enqueue(
        self,
        queue: str,
        payload: Any,
        *,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        dedup_key: str | None = None,
        group: str | None = None,
        on_duplicate: OnDuplicate = "keep",
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: OnDependencyFailure = "fail",
        parent_id: int | None = None,
        connection: PgConnection | None = None,
    ) -> int:
        """Add one job; with ``dedup_key``, return the unfinished duplicate's id instead.

        Args:
            on_duplicate: what to do to that duplicate while it waits (docs/protocol.rst
                §18): ``"keep"`` it (the default), ``"replace"`` its payload, priority and
                run time, or ``"debounce"`` it (run time now + ``delay``). A running
                duplicate is never changed; :meth:`enqueue_deduplicated` says what happened.
            depends_on: ids of jobs this one runs after (docs/protocol.rst §21): it waits
                until every one has succeeded. Excludes ``dedup_key`` and ``delay``.
            on_dependency_failure: when a dependency fails for good, ``"fail"`` this job
                (the default) or ``"cancel"`` it; either way it never runs.
            parent_id: enqueue the job as a child of this unfinished job (docs/protocol.rst
                §22); ``UnknownJobError`` if there is none, ``ValueError`` if it finished.
            connection: enqueue inside the caller's transaction on this connection (from
                :meth:`acquire`, or ``ctx.connection`` of a transactional handler): the job
                exists, and its NOTIFY is sent, only if that transaction commits.

        Raises:
            TypeError: ``payload`` is not JSON-serialisable, or an option has a wrong type.
            ValueError: an option is out of range, ``on_duplicate`` lacks what it needs, or
                ``connection`` is not one of this backend's connections.
            UnknownDependencyError: ``depends_on`` names a job that does not exist.
        """
        [job_id] = await self.enqueue_many(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            on_duplicate=on_duplicate,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            parent_id=parent_id,
            connection=connection,
        )
        return job_id

    async def enqueue_deduplicated(
        self,
        queue: str,
        payload: Any,
        *,
        dedup_key: str,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        group: str | None = None,
        on_duplicate: OnDuplicate = "keep",
        connection: PgConnection | None = None,
    ) -> Enqueued:
        """:meth:`enqueue` with a ``dedup_key``, also saying what happened.

        Returns:
            An :class:`~trioqueue.Enqueued`, which unpacks as ``(id, added)``: ``(id,
            True)`` for a new job; ``(id, False)`` when an unfinished job of the queue
            already held ``dedup_key`` (``id`` is that job's), and its ``outcome`` says
            whether it was kept, replaced, debounced, or left alone as running.
        """
        [job_id], outcome = await self._enqueue(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            on_duplicate=on_duplicate,
            connection=connection,
        )
        return Enqueued(job_id, outcome)

    async def enqueue_many(
        self,
        queue: str,
        payloads: Sequence[Any],
        *,
        priority: int = 0,
        delay: float | None = None,
        max_attempts: int = 10,
        dedup_key: str | None = None,
        group: str | None = None,
        on_duplicate: OnDuplicate = "keep",
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: OnDependencyFailure = "fail",
        parent_id: int | None = None,
        connection: PgConnection | None = None,
    ) -> list[int]:
        """Add several jobs in one statement (counted as one ``"enqueue"`` call).

        Everything is validated first: on any error nothing is written. An empty list
        issues no statement. One NOTIFY wakes the queue's listeners. ``on_duplicate`` as
        in :meth:`enqueue` (with a ``dedup_key``, so one payload).

        Args:
            connection: enqueue inside the caller's transaction on this connection; see
                :meth:`enqueue`. Without one, the jobs are committed at once.

        Raises:
            TypeError: a payload is not JSON-serialisable, or an option has a wrong type.
            ValueError: an option is out of range, ``dedup_key`` comes with several payloads,
                or ``connection`` is not one of this backend's connections.
        """
        ids, _ = await self._enqueue(
            queue,
            payloads,
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            on_duplicate=on_duplicate,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            parent_id=parent_id,
            connection=connection,
        )
        return ids

    async def _enqueue(
        self,
        queue: str,
        payloads: Sequence[Any],
        *,
        priority: int,
        delay: float | None,
        max_attempts: int,
        dedup_key: str | None,
        group: str | None,
        on_duplicate: OnDuplicate,
        connection: PgConnection | None,
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: OnDependencyFailure = "fail",
        parent_id: int | None = None,
    ) -> tuple[list[int], EnqueueOutcome]:
        """The ids, and what was done (``added``, or what befell a dedup key's holder)."""
        self._check_connection(connection)
        dependencies = check_dependencies(
            depends_on, on_dependency_failure, dedup_key=dedup_key, delay=delay, parent_id=parent_id
        )
        policy = check_on_duplicate(on_duplicate, dedup_key=dedup_key, delay=delay)
        request = check_enqueue(
            queue,
            payloads,
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
        )
        if not request.payloads:
            await trio.lowlevel.checkpoint()
            return [], "added"
        run = self._driver.run if connection is None else connection.run
        if dependencies is not None:
            ids = await run("enqueue", self._aio_enqueue_after, request, dependencies)
            return ids, "added"
        return await run(
            "enqueue",
            self._aio_enqueue,
            request.queue,
            list(request.payloads),
            request.priority,
            request.max_attempts,
            request.delay,
            request.dedup_key,
            request.group,
            request.trace_context,
            policy,
        )

    def _check_connection(self, connection: object) -> None:
        if connection is None:
            return
        if not isinstance(connection, PgConnection):
            raise TypeError(
                f"connection must come from backend.acquire() or ctx.connection, "
                f"not {type(connection).__name__}"
            )
        if connection._driver is not self._driver:
            # asyncpg connections belong to their own event loop: another backend's is unusable.
            raise ValueError("connection belongs to another backend")

    async def _aio_enqueue(
        self,
        connection: Any,
        queue: str,
        payloads: list[str],
        priority: int,
        max_attempts: int,
        delay: float,
        dedup_key: str | None,
        group: str | None,
        trace_context: str | None,
        policy: OnDuplicate = "keep",
    ) -> tuple[list[int], EnqueueOutcome]:
        args = (queue, payloads, priority, max_attempts, delay, dedup_key, group, trace_context)
        while True:
            ids = [row["id"] for row in await connection.fetch(self._sql["enqueue"], *args)]
            if ids or dedup_key is None:
                return ids, "added"
            # A duplicate holds the key. It may finish before we read (or revise) it; then
            # insert again.
            if policy == "keep":
                existing = await connection.fetchval(self._sql["find_dedup"], queue, dedup_key)
                if existing is not None:
                    return [existing], "kept"
                continue
            holder = await connection.fetchrow(
                self._sql["revise_duplicate"],
                queue,
                dedup_key,
                policy,
                payloads[0],
                priority,
                delay,
            )
            if holder is not None:
                return [holder["id"]], revision_outcome(policy, holder["changed"])

    async def _aio_enqueue_after(
        self, connection: Any, request: EnqueueRequest, dependencies: Dependencies
    ) -> list[int]:
        """``enqueue_after`` (docs/protocol.rst §21); no row means an unknown dependency."""
        wanted = [str(job_id) for job_id in dependencies.ids]
        while True:
            rows = await connection.fetch(
                self._sql["enqueue_after"],
                request.queue,
                list(request.payloads),
                request.priority,
                request.max_attempts,
                request.group,
                request.trace_context,
                wanted,
                dependencies.policy,
                dependencies.parent_id,
            )
            if rows:
                return [row["id"] for row in rows]
            unknown = [
                row["id"] for row in await connection.fetch(self._sql["unknown_jobs"], wanted)
            ]
            if unknown:
                raise UnknownDependencyError(unknown)
            parent = dependencies.parent_id
            if parent is not None:
                missing = await connection.fetch(self._sql["unknown_jobs"], [str(parent)])
                raise parent_refused(parent, bool(missing))
            # Every id exists now, so none was missing then either (ids are never reused,
            # and a deleted job stays deleted): cannot happen, but never return nothing.
