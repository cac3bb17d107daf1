"""The PostgreSQL backend: the memory backend's semantics, on real rows and real leases.

Theory of operation
-------------------
Each operation of the :class:`~trioqueue._backends.interface.Backend` protocol is one asyncio
coroutine (the ``_aio_*`` methods) that runs on one pooled connection and issues one
statement, or a few in one transaction (migrations, a dedup lookup), so each operation
crosses the trio↔asyncio bridge once (``driver.py``). Argument checks and JSON encoding
come from ``trioqueue._backends.validation``, shared with the memory backend, so both refuse the
same inputs the same way and write nothing when they do.

Row times are the database's (``now()``), returned as epoch seconds; :meth:`wall_time` is
``time.time()``, the worker's reading of the same clock. Worker and database clocks must
agree (docs/protocol.rst §7).

The SQL lives in ``queries.sql`` and ``migrations/``; ``sql.py`` explains the naming and the
one spliced value, the checked and quoted schema name.

Transactional mode
------------------
:meth:`PostgresBackend.job_transaction` gives one handler a pooled connection inside an
open transaction (``ctx.connection``). On success the runtime calls
:meth:`_JobTransaction.commit_with_ack`: the fenced ack statement and ``COMMIT`` run in one
crossing, and the ack's fence decides: when ``claim_seq`` moved on (the lease was lost and
the job reclaimed) the ack touches no row and the transaction is rolled back, so the
handler's writes are discarded. The ack's row lock then serialises the commit against any
reclaim (claims skip locked rows), so a job's effects commit exactly once (I13). Anything
else (the handler raised or was stopped, the fence fired) rolls back; failures and retries
are written outside the transaction, fenced as usual.

Connection budget: every running transactional handler holds one pooled connection, from
just before its handler starts until its transaction ends. ``RUNTIME_RESERVE`` connections
are kept out of the handlers' reach for the pool's own work (a claim, the current renewal,
one abandoned renewal, the outcome writer, a scheduling pass), so handlers can never starve the renewals that
keep their leases: at most ``max_connections - RUNTIME_RESERVE`` (at least 1) handlers hold
a transaction at once, and the others wait for one inside their cancel scope (the lease
fence and ``max_job_duration`` bound the wait). Size ``max_connections`` as
``concurrency × batch_size + RUNTIME_RESERVE``, plus whatever producers in the same process
use, to run every handler at once.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import asyncpg
import trio

from trioqueue._backends.interface import (
    MAINTENANCE_OPERATIONS,
    OPERATIONS,
    READ_OPERATIONS,
    Backend,
    ConnectionUnavailable,
)
from trioqueue._backends.operator_checks import (
    check_audit,
    check_enabled,
    check_list_audit,
    check_matching,
)
from trioqueue._backends.postgres import operator
from trioqueue._backends.postgres.attempts import (
    attempt_buckets,
    attempt_infos,
    failure_texts,
    queue_timings,
    timing_arrays,
)
from trioqueue._backends.postgres.driver import (
    DRIVER_ERRORS,
    Driver,
    PgConnection,
    Pooling,
    check_options,
    open_driver,
)
from trioqueue._backends.postgres.finishes import FinishWatch, Waiter, parse_finished
from trioqueue._backends.postgres.retention import RetentionCalls
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, channel_name, check_schema, render
from trioqueue._backends.postgres.sqlstate import connection_refused, never_sent
from trioqueue._backends.validation import (
    ScheduleRequest,
    check_age,
    check_beat,
    check_cancelled,
    check_claim,
    check_enqueue,
    check_filters,
    check_history,
    check_int,
    check_job_id,
    check_job_ids,
    check_list_jobs,
    check_preview,
    check_queue,
    check_queue_limits,
    check_registration,
    check_renew_items,
    check_retry_delay,
    check_schedule,
    check_schedule_name,
    check_sort,
    check_timeout,
    check_worker_id,
    decode_payload,
    decode_trace_context,
)
from trioqueue._backends.waiting import FINISHED, wait_finished
from trioqueue._core.progress import valid_progress
from trioqueue._core.schedule import Due, next_tick, plan_advances
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import BackendError, UnknownJobError
from trioqueue._operator_types import (
    AttemptBucket,
    AttemptInfo,
    AuditEntry,
    QueueTimings,
    TableHealth,
)
from trioqueue._types import (
    Ack,
    BackendStatistics,
    Claimed,
    Claims,
    Failure,
    FinishedBucket,
    Job,
    JobInfo,
    JobSort,
    JobStatus,
    Notice,
    NoticeKind,
    PoolBeat,
    PoolRegistration,
    QueueStats,
    Recorded,
    Release,
    ScheduleInfo,
    TruncatedText,
    UndecodablePayload,
    WorkerInfo,
)

__all__ = ["PostgresBackend", "open_postgres"]

#: wait_for's first pause between reads, and the longest, when it cannot LISTEN (behind a
#: transaction pooler without listen_dsn; docs/postgres.rst, "Results").
WAIT_POLL_FIRST = 0.05
WAIT_POLL_MAX = 1.0

log = logging.getLogger("trioqueue.postgres")

#: Schedules one scheduling pass enqueues at most (the rest wait for the next pass).
SCHEDULES_PER_PASS = 1000

#: Pooled connections when ``max_connections`` is not given.
DEFAULT_MAX_CONNECTIONS = 10

#: Notices buffered per listener before new ones are dropped (a notice is only a hint).
NOTICE_BUFFER = 1000

#: Operations counted in ``statistics().calls`` besides the protocol's writes: the
#: operators' calls, and migrations.
COUNTED_READS = (*READ_OPERATIONS, *MAINTENANCE_OPERATIONS, "migrate", "prune")

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

# Ids and claim_seqs are bigint: a larger int names no row.
_INT64 = 2**63 - 1
#: Renewals of up to this many jobs run on PostgreSQL's cached (generic) plan of the
#: prepared statement, which saves planning the statement anew each time (planning took as
#: long as running it, for ten jobs). A generic plan cannot know how many jobs the arrays
#: hold and joins them as if they were few: for 10,000 jobs it was measured 45x slower (26 s
#: instead of 0.56 s), so larger renewals ask for a plan made for their arguments.
_GENERIC_PLAN_ITEMS = 100
#: The renew statement's verdicts by their text (a dict lookup: ``Verdict(text)`` per row
#: was a tenth of the Python time of a 10,000-job renewal).
_VERDICTS = {verdict.value: verdict for verdict in Verdict}
#: Enough jobs for any claim; larger limits are clamped to it.
_MAX_CLAIM = 2**31 - 1

#: Pooled connections transactional handlers never get: one claim, the current renewal, one
#: abandoned renewal, the outcome writer, a scheduling pass (see the module docstring).
RUNTIME_RESERVE = 5


@asynccontextmanager
async def open_postgres(
    dsn: str,
    *,
    schema: str = "trioqueue",
    max_connections: int | None = None,
    pooling: Pooling | None = None,
    listen_dsn: str | None = None,
    connect_timeout: float | None = None,
) -> AsyncIterator[PostgresBackend]:
    """Open a PostgreSQL backend for the duration of the block.

    Inside, a trio-asyncio loop runs the asyncpg connection pool; callers see only trio.
    Call :meth:`PostgresBackend.migrate` once to create or upgrade the schema.

    Args:
        dsn: a PostgreSQL connection URI (``postgresql://user@host:port/db?...``); query
            parameters asyncpg does not know are passed on as server settings, except
            ``connect_timeout`` (seconds, 0: no limit), which is honoured as in libpq.
        schema: the PostgreSQL schema holding the tables: a lower-case identifier matching
            ``[a-z_][a-z0-9_]{0,62}``, not ``information_schema`` nor starting with ``pg_``.
        max_connections: the pool size (default 10). Each ``listen`` holds one more
            connection of its own. Connections show ``application_name``
            ``trioqueue:<schema>`` in ``pg_stat_activity`` unless the DSN sets one.
        pooling: what ``dsn``'s connections keep between transactions: ``"session"`` (a
            direct connection, or PgBouncer's ``pool_mode = session``) or ``"transaction"``
            (``pool_mode = transaction``: no named prepared statements, LISTEN only on
            ``listen_dsn``). None (the default) detects a pooler once at open and takes one
            as transaction pooling. See docs/pgbouncer.rst.
        listen_dsn: where to LISTEN for wake-ups when it is not ``dsn``: a direct
            connection when ``dsn`` goes through a transaction pooler. Without it, wake-ups
            fall back to polling there (logged once).
        connect_timeout: how long opening a connection may take, in seconds; default: the
            DSN's ``connect_timeout``, else 10.

    Raises:
        TypeError, ValueError: a bad ``dsn`` (a ``ValueError`` naming it, its password
            masked), ``listen_dsn``, ``schema``, ``max_connections``, ``pooling`` or
            ``connect_timeout``; nothing is connected and no SQL runs.
        BackendError: the database cannot be reached.
    """
    if not isinstance(dsn, str):
        raise TypeError(f"dsn must be a str, not {type(dsn).__name__}")
    schema = check_schema(schema)
    size = _check_max_connections(max_connections)
    pooling, listen_dsn, connect_timeout = check_options(pooling, listen_dsn, connect_timeout)
    async with open_driver(
        dsn,
        max_connections=size,
        application_name=f"trioqueue:{schema}",
        pooling=pooling,
        listen_dsn=listen_dsn,
        connect_timeout=connect_timeout,
    ) as driver:
        backend = PostgresBackend(driver, schema)
        try:
            yield backend
        finally:
            await backend._finishes.aclose()  # wait_for's shared LISTEN, if one was opened


def _check_max_connections(value: object) -> int:
    if value is None:
        return DEFAULT_MAX_CONNECTIONS
    return check_int("max_connections", value, minimum=1)


class PostgresBackend(RetentionCalls):
    """A :class:`~trioqueue._backends.interface.Backend` on PostgreSQL. Create it with :func:`open_postgres`.

    Jobs live in ``<schema>.jobs`` (columns documented in docs/api.rst and in the first migration).
    Besides the Backend protocol it offers :meth:`migrate`, :meth:`prune` (retention),
    :meth:`acquire` (a pooled connection for the caller's own SQL, also for transactional
    enqueue) and :meth:`job_transaction` (transactional mode).
    """

    supports_transactions: bool = True

    def __init__(self, driver: Driver, schema: str) -> None:
        self._driver = driver
        # Transactional handlers share what the runtime's own operations leave over.
        self._transaction_slots = trio.CapacityLimiter(
            max(1, driver.max_connections - RUNTIME_RESERVE)
        )
        self._schema = check_schema(schema)
        self._channel = channel_name(schema)
        self._sql = {name: render(sql, schema) for name, sql in QUERIES.items()}
        self._list_sql = {
            sort: self._sql["list_jobs"].replace("{order}", order)
            for sort, order in ORDER_BY.items()
        }
        self._dropped_notices = 0
        self._finishes = FinishWatch(driver, self._channel)
        #: Queues whose last claim found limits: their claims start by locking the queue.
        self._limited_queues: set[str] = set()
        #: The worker's wall clock (:meth:`wall_time`). A test seam: ``lambda: time.time()
        #: + 60`` makes this worker's clock run 60 s ahead of the database's.
        self.wall_clock: Callable[[], float] = time.time
        for op in (*OPERATIONS, *COUNTED_READS):
            driver.calls[op] += 0  # every operation appears in statistics, even at zero

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def channel(self) -> str:
        """The NOTIFY channel of this backend's schema."""
        return self._channel

    # -- schema --------------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Create the schema or bring it up to date; safe to run any number of times.

        Migrations run in one transaction under an advisory lock, so concurrent migrators
        of one schema take turns and each migration is applied exactly once.

        Returns:
            The migrations this call applied, in order (``["0001_initial"]`` on a new
            schema); empty when the schema was already up to date.

        Raises:
            BackendError: the database failed, an applied migration's file was edited, or
                the schema was migrated by a newer trioqueue.
        """
        applied: list[str] = await self._driver.run("migrate", self._aio_migrate)
        return applied

    async def _aio_migrate(self, connection: Any) -> list[str]:
        done = []
        async with connection.transaction():
            await connection.execute(self._sql["migrate_lock"], f"trioqueue:{self._schema}")
            await connection.execute(self._sql["migrate_prepare"])
            applied = {
                row["version"]: row
                for row in await connection.fetch(self._sql["applied_migrations"])
            }
            self._refuse_newer(applied)
            for migration in MIGRATIONS:
                row = applied.get(migration.version)
                if row is None:
                    await connection.execute(render(migration.sql, self._schema))
                    await connection.execute(
                        self._sql["record_migration"],
                        migration.version,
                        migration.name,
                        migration.checksum,
                    )
                    done.append(f"{migration.version:04d}_{migration.name}")
                elif row["checksum"] != migration.checksum:
                    raise BackendError(
                        f"migration {migration.version:04d}_{migration.name} was changed after "
                        f"it was applied to schema {self._schema!r}"
                    )
        return done

    async def pending_migrations(self) -> list[str]:
        """The migrations this trioqueue knows that the schema lacks, in order
        (``["0004_flow_control"]``, say); empty when it is up to date. One read of the
        small ``schema_migrations`` table, nothing written: commands that run until
        stopped check it before they start (a schema missing a migration fails later,
        at the first statement that needs it).

        Raises:
            BackendError: the schema was never migrated (no ``schema_migrations`` table;
                its ``hint`` says to migrate), or it has migrations this trioqueue does
                not know: it was migrated by a newer trioqueue (``transient`` False).
        """
        rows = await self._driver.run(None, _fetch, self._sql["applied_migrations"])
        applied = {row["version"]: row for row in rows}
        self._refuse_newer(applied)
        return [
            f"{migration.version:04d}_{migration.name}"
            for migration in MIGRATIONS
            if migration.version not in applied
        ]

    def _refuse_newer(self, applied: Mapping[int, object]) -> None:
        unknown = sorted(version for version in applied if version > len(MIGRATIONS))
        if unknown:
            raise BackendError(
                f"schema {self._schema!r} has migrations this trioqueue does not know "
                f"({unknown}): it was migrated by a newer version; upgrade trioqueue",
                transient=False,
            )

    async def prune(self, older_than: float, *, limit: int = 10_000) -> int:
        """Delete up to ``limit`` jobs that finished more than ``older_than`` seconds ago.

        Returns:
            How many rows were deleted. Call again while it returns ``limit``.
        """
        older_than = check_age("older_than", older_than)
        check_int("limit", limit, minimum=1)
        deleted: int = await self._driver.run(
            "prune", _fetchval, self._sql["prune"], older_than, min(limit, _INT64)
        )
        return deleted

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[PgConnection]:
        """A pooled connection for the caller's own SQL (asyncpg's methods, as trio coroutines).

        It counts toward ``connections_in_use`` while held, and is unusable after the block.
        ``connection.transaction()`` opens a transaction on it, for example to enqueue jobs
        atomically with the caller's own writes::

            async with backend.acquire() as conn, conn.transaction():
                await conn.execute("INSERT INTO orders ...")
                await backend.enqueue("emails", {"order": 42}, connection=conn)
        """
        async with self._driver.acquire() as connection:
            yield connection

    @asynccontextmanager
    async def job_transaction(self) -> AsyncIterator[_JobTransaction]:
        """A connection inside an open transaction, for one transactional handler.

        Used by the runtime in transactional mode (see the module docstring for the
        connection budget). Entering may wait for one of the handlers' connections; leaving
        rolls back unless :meth:`_JobTransaction.commit_with_ack` committed.

        Raises:
            ConnectionUnavailable: (a ``BackendError``) the server refused the connection
                or could not be reached (see :func:`~trioqueue._backends.postgres.sqlstate.connection_refused`).
            BackendError: the database failed otherwise.
        """
        async with self._transaction_slots, AsyncExitStack() as stack:
            try:
                connection = await stack.enter_async_context(self._driver.transaction())
            except BackendError as exc:
                if connection_refused(exc):
                    raise ConnectionUnavailable(str(exc)) from exc
                raise
            yield _JobTransaction(connection, self._sql["ack"])

    # -- producers and operators ---------------------------------------------------------

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
        connection: PgConnection | None = None,
    ) -> int:
        """Add one job; with ``dedup_key``, return the unfinished duplicate's id instead.

        Args:
            connection: enqueue inside the caller's transaction on this connection (from
                :meth:`acquire`, or ``ctx.connection`` of a transactional handler): the job
                exists, and its NOTIFY is sent, only if that transaction commits.

        Raises:
            TypeError: ``payload`` is not JSON-serialisable, or an option has a wrong type.
            ValueError: an option is out of range, or ``connection`` is not one of this
                backend's connections.
        """
        [job_id] = await self.enqueue_many(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
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
        connection: PgConnection | None = None,
    ) -> tuple[int, bool]:
        """:meth:`enqueue` with a ``dedup_key``, also saying whether the job was added.

        Returns:
            ``(id, True)`` for a new job; ``(id, False)`` when an unfinished job of the
            queue already held ``dedup_key`` and nothing was added (``id`` is that job's).
        """
        [job_id], added = await self._enqueue(
            queue,
            [payload],
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            dedup_key=dedup_key,
            group=group,
            connection=connection,
        )
        return job_id, added

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
        connection: PgConnection | None = None,
    ) -> list[int]:
        """Add several jobs in one statement (counted as one ``"enqueue"`` call).

        Everything is validated first: on any error nothing is written. An empty list
        issues no statement. One NOTIFY wakes the queue's listeners.

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
        connection: PgConnection | None,
    ) -> tuple[list[int], bool]:
        """The ids, and False when a dedup key's holder was found instead of adding."""
        self._check_connection(connection)
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
            return [], True
        run = self._driver.run if connection is None else connection.run
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
    ) -> tuple[list[int], bool]:
        args = (queue, payloads, priority, max_attempts, delay, dedup_key, group, trace_context)
        while True:
            ids = [row["id"] for row in await connection.fetch(self._sql["enqueue"], *args)]
            if ids or dedup_key is None:
                return ids, True
            # A duplicate holds the key. It may finish before we read it; then insert again.
            existing = await connection.fetchval(self._sql["find_dedup"], queue, dedup_key)
            if existing is not None:
                return [existing], False

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job: at once if it is not running, else by flagging its row and notifying.

        Returns:
            False when the job is unknown or already finished, else True.
        """
        check_job_id(job_id)
        if not _is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            return False
        row = await self._driver.run("cancel", _fetchrow, self._sql["cancel"], job_id)
        return row is not None

    async def retry(self, job_id: int) -> bool:
        """Put a failed job back on its queue for one more attempt.

        The attempt count and ``last_error`` are kept; ``max_attempts`` grows to allow one
        more attempt when it was used up, and a cancel flag is cleared.

        Returns:
            False when the job is unknown, not failed, or its dedup key is held by another
            unfinished job; else True.
        """
        check_job_id(job_id)
        if not _is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            return False
        retried: int = await self._driver.run("retry", _fetchval, self._sql["retry"], job_id)
        return retried == 1

    async def get_job(self, job_id: int) -> JobInfo:
        """A snapshot of one job.

        Raises:
            UnknownJobError: (a ``LookupError``) no job has this id.
            TypeError: ``job_id`` is not an int.
        """
        check_job_id(job_id)
        if not _is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            raise UnknownJobError(job_id)
        row = await self._driver.run("get_job", _fetchrow, self._sql["get_job"], job_id)
        if row is None:
            raise UnknownJobError(job_id)
        return _job_info(row)

    async def get_jobs(
        self, job_ids: Sequence[int], *, preview: int | None = None
    ) -> dict[int, JobInfo]:
        """Snapshots of many jobs in one statement: each known job's JobInfo by id
        (``preview`` as in :meth:`list_jobs`).

        Raises:
            TypeError: an id is not an int.
            ValueError: more than 10,000 ids, or a negative ``preview``.
        """
        ids = [job_id for job_id in check_job_ids(job_ids) if _is_bigint(job_id)]
        cut = check_preview(preview)
        if not ids:
            await trio.lowlevel.checkpoint()
            return {}
        rows = await self._driver.run("get_jobs", _fetch, self._sql["get_jobs"], ids, cut)
        return {row["id"]: _job_info(row) for row in rows}

    async def wait_for(
        self,
        job_id: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a plain argument callers outside trio use)
    ) -> JobInfo:
        """Wait until the job is finished (succeeded or failed); its final JobInfo.

        Driven by NOTIFY: the first call LISTENs on one connection that every ``wait_for``
        of this backend shares (kept until the backend closes), then marks the job
        awaited and reads it in one statement; the statements that finish or delete a
        marked job send it a notice. A waiter also reads again every 2 s in case a notice
        was lost. ``timeout=0`` only looks: it neither listens nor marks. Without a LISTEN connection (a transaction pooler, no ``listen_dsn``)
        it polls instead: 0.05 s doubling to 1 s between reads (docs/postgres.rst,
        "Results"; ``finishes.py``). ``timeout`` is in seconds (None: no limit).

        Raises:
            UnknownJobError: no job has this id, or it was deleted while waited for.
            TimeoutError: it was not finished within ``timeout`` seconds.
            TypeError, ValueError: a bad ``job_id`` or ``timeout``; nothing is read.
        """
        checked_id = check_job_id(job_id)
        if timeout is not None:
            check_age("timeout", timeout)
        # timeout=0 looks once: nothing to listen for, no row to mark.
        if timeout == 0 or not await self._can_hear_finishes():
            delays = _poll_delays()
            return await wait_finished(
                checked_id, timeout, self.get_job, lambda: partial(trio.sleep, next(delays))
            )
        with self._finishes.register(checked_id) as waiter:
            read = partial(self._await_job, waiter=waiter)
            return await wait_finished(checked_id, timeout, read, waiter.arm)

    async def _can_hear_finishes(self) -> bool:
        """LISTEN for finishes unless already listening; False when notices cannot arrive."""
        try:
            return await self._finishes.ensure()
        except BackendError as exc:
            if self._finishes.closed:
                raise
            log.warning("wait_for cannot LISTEN, polling instead: %s", exc)
            return False

    async def _await_job(self, job_id: int, *, waiter: Waiter) -> JobInfo:
        """wait_for's read: the job after marking it awaited (counted as a ``get_job``).
        When its row was locked and could not be marked, ``waiter`` reads again soon."""
        if not _is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            raise UnknownJobError(job_id)
        row, marked = await self._driver.run("get_job", self._aio_await_job, job_id)
        if row is None:
            raise UnknownJobError(job_id)
        if not marked:
            waiter.read_again_soon()
        return _job_info(row)

    async def _aio_await_job(self, connection: Any, job_id: int) -> tuple[Any, bool]:
        """The job's row (None: unknown), and False when it is unfinished and unmarked."""
        row = await connection.fetchrow(self._sql["await_job"], job_id)
        if row is not None:
            return row, True
        # Finished, unknown, marked already, or locked: read it (a new snapshot, which also
        # sees a finish committed while the first statement ran).
        self._driver.calls["get_job"] += 1
        row = await connection.fetchrow(self._sql["get_job"], job_id)
        return row, row is None or row["awaited"] or row["state"] in FINISHED

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
        pattern = _like_pattern(check_filters(queue, status, search)[2])
        sql = self._list_sql[check_sort(sort)]
        cut = check_preview(preview)
        only = check_cancelled(cancelled, status)
        rows = await self._driver.run(
            "list_jobs", _fetch, sql, queue, status, limit, min(offset, _INT64), pattern, cut, only
        )
        return [_job_info(row) for row in rows]

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
            _fetchval,
            self._sql["count_jobs"],
            queue,
            status,
            _like_pattern(search),
            only,
        )
        return count

    async def delete_job(self, job_id: int) -> bool:
        """Delete a job unless it is running under a live lease.

        Returns:
            False when the job is unknown or running under a live lease, else True.
        """
        check_job_id(job_id)
        if not _is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            return False
        deleted = await self._driver.run("delete_job", _fetchval, self._sql["delete_job"], job_id)
        return deleted is not None

    async def list_workers(self) -> list[WorkerInfo]:
        """Every registered worker pool, ordered by queue then start time."""
        rows = await self._driver.run("list_workers", _fetch, self._sql["list_workers"])
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
            "finished_history", _fetch, self._sql["finished_history"], window, buckets, queue
        )
        return [FinishedBucket(row["start"], row["succeeded"], row["failed"]) for row in rows]

    async def register_pool(self, pool: PoolRegistration) -> None:
        """Register a worker pool, started now; first deletes pools stale for over an hour."""
        pool = check_registration(pool)
        await self._driver.run(
            "register_pool",
            _execute,
            self._sql["register_pool"],
            pool.worker_id,
            pool.host,
            pool.pid,
            pool.queue,
            pool.concurrency,
            float(pool.heartbeat_interval),
        )

    async def unregister_pool(self, worker_id: str) -> bool:
        """Remove a pool's row (graceful shutdown); False when it had none."""
        worker_id = check_worker_id(worker_id)
        deleted = await self._driver.run(
            "unregister_pool", _fetchval, self._sql["unregister_pool"], worker_id
        )
        return deleted is not None

    async def counts(self) -> dict[str, dict[JobStatus, int]]:
        """Jobs per queue and state (states with no jobs are left out)."""
        rows = await self._driver.run("counts", _fetch, self._sql["counts"])
        counts: dict[str, dict[JobStatus, int]] = {}
        for row in rows:
            counts.setdefault(row["queue"], {})[row["state"]] = row["n"]
        return counts

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue: its counts and the age of its oldest ready job (None when none is)."""
        rows = await self._driver.run("queue_stats", _fetch, self._sql["queue_stats"])
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

    async def pause_queue(self, queue: str) -> None:
        """Stop every pool claiming from ``queue``: claims give nothing until
        :meth:`resume_queue`; running jobs go on. Any queue name may be paused, also one
        that has no jobs yet. Persisted in the ``queues`` table; a notice tells listeners."""
        queue = check_queue(queue)
        await self._driver.run("pause_queue", _execute, self._sql["pause_queue"], queue)

    async def resume_queue(self, queue: str) -> None:
        """Let ``queue`` be claimed again; a notice wakes idle pools at once."""
        queue = check_queue(queue)
        await self._driver.run("resume_queue", _execute, self._sql["resume_queue"], queue)

    async def set_queue_limits(
        self, queue: str, *, max_running: int | None = None, max_per_second: float | None = None
    ) -> None:
        """Cap ``queue`` across every pool (docs/flow.rst): at most ``max_running`` jobs
        under a live lease at once, and claims at ``max_per_second`` (a bucket of one
        second's worth). The claim statement enforces both, with the queue's row locked.
        None lifts a limit; each call sets both.

        Raises:
            TypeError, ValueError: a limit is not None or a positive number (every wrong
                limit is named); nothing is written.
        """
        queue = check_queue(queue)
        running, rate = check_queue_limits(max_running, max_per_second)
        await self._driver.run(
            "set_queue_limits", _execute, self._sql["set_queue_limits"], queue, running, rate
        )

    def statistics(self) -> BackendStatistics:
        driver = self._driver
        return BackendStatistics(
            connections_in_use=driver.connections_in_use,
            peak_connections_in_use=driver.peak_connections_in_use,
            calls=dict(driver.calls),
            extra={
                "connections": driver.max_connections,
                "listeners": driver.listeners,
                "notices_dropped": self._dropped_notices,
                "finish_waiters": self._finishes.waiters,
            },
        )

    # -- schedules (docs/scheduling.rst) ---------------------------------------------------

    async def set_schedule(
        self,
        name: str,
        queue: str,
        cron: str,
        payload: Any = None,
        *,
        timezone: str = "UTC",
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> ScheduleInfo:
        """Create or replace a schedule; its next run is the first tick after the
        database's now() (read on the same connection, in the same crossing).

        Raises:
            TypeError, ValueError: listing every bad argument; nothing is written.
        """
        request = check_schedule(
            name,
            queue,
            cron,
            payload,
            timezone=timezone,
            priority=priority,
            max_attempts=max_attempts,
        )
        return await self._driver.run("set_schedule", self._aio_set_schedule, request)

    async def _aio_set_schedule(self, connection: Any, request: ScheduleRequest) -> ScheduleInfo:
        now = await connection.fetchval(self._sql["database_now"])
        next_run_at = next_tick(request.cron, request.timezone, now)
        await connection.execute(
            self._sql["set_schedule"],
            request.name,
            request.queue,
            request.cron,
            request.timezone,
            request.payload,
            request.priority,
            request.max_attempts,
            next_run_at.isoformat(),
        )
        row = await connection.fetchrow(self._sql["get_schedule"], request.name)
        return _schedule_info(row)

    async def delete_schedule(self, name: str) -> bool:
        """Delete a schedule; False when there is none. Its jobs stay."""
        name = check_schedule_name(name)
        deleted = await self._driver.run(
            "delete_schedule", _fetchval, self._sql["delete_schedule"], name
        )
        return deleted is not None

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        rows = await self._driver.run("list_schedules", _fetch, self._sql["list_schedules"])
        return [_schedule_info(row) for row in rows]

    async def enqueue_due(self) -> list[int]:
        """A scheduling pass, in one crossing: read the due schedules (one round trip, all
        of it when none is due), compute each one's next tick after the database's now(),
        then enqueue and advance them in one compare-and-set statement. Returns the new
        jobs' ids."""
        ids: list[int] = await self._driver.run("enqueue_due", self._aio_enqueue_due)
        return ids

    async def _aio_enqueue_due(self, connection: Any) -> list[int]:
        rows = await connection.fetch(self._sql["due_schedules"], SCHEDULES_PER_PASS)
        if not rows:
            return []
        due = [Due(r["name"], r["cron"], r["timezone"], r["next_run_at"]) for r in rows]
        advances, problems = plan_advances(due, rows[0]["now"])
        for problem in problems:
            log.warning("%s", problem)
        if not advances:
            return []
        inserted = await connection.fetch(
            self._sql["advance_schedules"],
            [a.name for a in advances],
            [a.expected.isoformat() for a in advances],
            [a.next.isoformat() for a in advances],
        )
        return [row["id"] for row in inserted]

    # -- the worker side -----------------------------------------------------------------

    def wall_time(self) -> float:
        """:attr:`wall_clock`, by default ``time.time()``: row times are the database's
        clock, assumed in sync with ours (docs/protocol.rst §8 says what a pool does when
        its claims prove otherwise)."""
        return self.wall_clock()

    async def database_clock(self) -> float:
        """``clock_timestamp()``, epoch seconds: one statement, the ``"clock"`` operation."""
        at: float = await self._driver.run("clock", _fetchval, self._sql["database_clock"])
        return at

    async def claim(
        self,
        queue: str,
        *,
        limit: int,
        worker_id: str,
        visibility_timeout: float,
        quarantine_after: int | None = None,
        alone: bool = False,
    ) -> list[Claimed]:
        """Lease up to ``limit`` claimable jobs of ``queue``, priority DESC then id ASC.

        One statement. Rows whose lease expired on their final attempt, or that were asked
        to cancel while running, are moved to ``failed`` instead of being run again. A
        queue with limits is claimed in a transaction holding its ``queues`` row, and the
        answer's ``retry_after`` says when the limits held rows back (docs/flow.rst).
        Quarantined rows are taken only ``alone`` (docs/protocol.rst §13).
        """
        check_claim(queue, limit, worker_id, visibility_timeout, quarantine_after, alone)
        claim = _Claim(queue, min(limit, _MAX_CLAIM), worker_id, float(visibility_timeout),
                       quarantine_after, alone)  # fmt: skip
        return await self._driver.run("claim", self._aio_claim, claim)

    async def _aio_claim(self, connection: Any, claim: _Claim) -> Claims:
        """The claim statement; then, on the same connection and in the same crossing, the
        final failure of any row whose payload does not decode.

        Decoding is per row, so such a row (another tool wrote it) costs its batch siblings
        nothing: they are delivered. The row itself is failed at once, fenced by its new
        ``claim_seq``, and not retried, since every attempt would decode the same payload
        the same way; an operator can fix the row and retry it. If that write fails, the
        row's lease runs out and a later claim tries again: only the row pays for it.
        """
        rows = await self._claim_rows(connection, claim)
        claimed = Claims()
        undecodable: list[Failure] = []
        for row in rows:
            if row["id"] is None:  # the clock's row, a waiting quarantined row, or limits
                if row["database_clock"] is not None:
                    claimed.database_clock = row["database_clock"]
                elif row["alone_waiting"]:
                    claimed.alone_waiting = True
                else:
                    claimed.retry_after = row["retry_after"]
                continue
            payload = _read_payload(row["payload"])
            if isinstance(payload, UndecodablePayload):
                error = _storable_text(f"payload cannot be decoded ({payload.error})")
                log.error("job %d fails without running: %s", row["id"], error)
                undecodable.append(Failure(row["id"], row["claim_seq"], error, None))
                continue
            # Job(id, queue, payload, attempt, max_attempts, claim_seq, waited,
            # trace_context): by position, a third cheaper than by keyword for every job.
            job = Job(
                row["id"],
                row["queue"],
                payload,
                row["attempts"],
                row["max_attempts"],
                row["claim_seq"],
                row["waited"],
                decode_trace_context(row["trace_context"]),
            )
            claimed.append(Claimed(job, row["lease_until"], row["locked_after"], row["alone"]))
        if undecodable:
            self._driver.calls["fail"] += 1
            errors = [f.error for f in undecodable]
            nothing: list[str | None] = [None] * len(undecodable)  # final; no progress
            try:
                await connection.fetch(
                    self._sql["fail"],
                    *_fences(undecodable),
                    errors,
                    nothing,
                    nothing,
                    *(None,) * 4,  # no error type, traceback or timing: it never ran
                )
            except DRIVER_ERRORS as exc:
                log.warning("failing %d undecodable job(s) failed: %r", len(undecodable), exc)
                if not isinstance(exc, asyncpg.PostgresError):
                    connection.terminate()  # the connection may be broken: never reuse it
        return claimed

    async def _claim_rows(self, connection: Any, claim: _Claim) -> list[Any]:
        """The claim statement's rows. A queue with limits is claimed with its ``queues`` row
        locked, in a transaction of two statements, so that the claim's snapshot counts
        what every claim before it took (queries.sql, ``claim``). Queues known to have
        limits go there at once; any other queue's claim says so when it has them."""
        sql, queue = self._sql["claim"], claim.queue
        if queue not in self._limited_queues:
            rows: list[Any] = await connection.fetch(sql, *claim.arguments(locked=False))
            if not any(row["retry_after"] is not None and row["retry_after"] < 0 for row in rows):
                return rows  # (the first step of a limited claim takes nothing)
            self._limited_queues.add(queue)
        async with connection.transaction():
            if not await connection.fetchval(self._sql["lock_queue"], queue):
                self._limited_queues.discard(queue)  # limits lifted: next time, one step
            rows = await connection.fetch(sql, *claim.arguments(locked=True))
        return rows

    async def renew(
        self,
        items: Sequence[RenewItem],
        *,
        visibility_timeout: float,
        beat: PoolBeat | None = None,
    ) -> Mapping[int, Verdict]:
        """Renew every item in one statement, storing progress; one verdict per job.

        A row locked by another transaction is skipped, never waited for: ``UNCHANGED``.
        With ``beat``, the same statement records the pool's heartbeat; a beat without
        items is that statement with no jobs in it (the ``"beat"`` operation).
        """
        lease = check_timeout("visibility_timeout", visibility_timeout)
        items = check_renew_items(items)
        beat = check_beat(beat)
        if not items and beat is None:
            await trio.lowlevel.checkpoint()
            return {}
        # An id out of bigint range names no row: it is gone without asking.
        verdicts = {item.job_id: Verdict.GONE for item in items if not _is_bigint(item.job_id)}
        if verdicts:
            items = tuple(item for item in items if item.job_id not in verdicts)
        if not items and beat is None:
            await trio.lowlevel.checkpoint()
            return verdicts
        rows = await self._driver.run(
            "renew" if items else "beat",
            _fetch if len(items) <= _GENERIC_PLAN_ITEMS else _fetch_planned_for_arguments,
            self._sql["renew"],
            *_fences(items),
            _progress(items),
            lease,
            *_beat_arguments(beat),
        )
        verdicts.update((row["id"], _VERDICTS[row["verdict"]]) for row in rows)
        return verdicts

    async def ack(self, items: Sequence[Ack]) -> list[bool]:
        """Mark attempts succeeded. Fenced: True for each item that was applied."""
        items = tuple(items)
        applied = await self._fenced_write(
            "ack", items, *_fences(items), _progress(items), _results(items), *timing_arrays(items)
        )
        return [row is not None for row in applied]

    async def fail(self, items: Sequence[Failure]) -> list[Recorded | None]:
        """Record failed attempts. Fenced: per item, what it became (None: not applied).

        A retry is recorded as final when the attempt was the last one allowed, or when the
        job was asked to cancel (a cancelled job is never retried, docs/protocol.rst §5).
        """
        items = tuple(items)
        delays = [check_retry_delay(item.retry_delay) for item in items]
        applied = await self._fenced_write(
            "fail",
            items,
            *_fences(items),
            [_storable_text(item.error) for item in items],
            _floats(delays),
            _progress(items),
            *failure_texts(items, _storable_text),
            *timing_arrays(items),
        )
        return [
            None if row is None else Recorded.RETRY if row["status"] == "queued" else Recorded.FINAL
            for row in applied
        ]

    async def release(self, items: Sequence[Release]) -> list[bool]:
        """Give attempts back uncharged. Fenced: True for each item that was applied."""
        items = tuple(items)
        applied = await self._fenced_write(
            "release", items, *_fences(items), _progress(items), *timing_arrays(items)
        )
        return [row is not None for row in applied]

    async def _fenced_write(
        self, op: str, items: Sequence[object], *arrays: list[Any] | str | None
    ) -> list[Any]:
        """Run a batched, fenced write: per item, the row its statement returned for it (the
        rows name the 1-based positions that applied), or None where the fence kept it out.
        ``arrays`` are the statement's parameters, one value per item (None: SQL NULL, a
        NULL for every item; a str: an array literal, ``timing_arrays``)."""
        if not items:
            await trio.lowlevel.checkpoint()
            return []
        rows = await self._driver.run(op, _fetch, self._sql[op], *arrays)
        by_position = {row["n"]: row for row in rows}
        return [by_position.get(n) for n in range(1, len(items) + 1)]

    @asynccontextmanager
    async def listen(
        self, queue: str, worker_id: str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """Notices for ``queue``: new work, and cancel requests for ``worker_id``'s jobs.

        LISTEN runs on a dedicated connection (outside the pool). If that connection is
        lost, the channel ends; listen again to resubscribe (the pool does so by itself).
        """
        check_queue(queue)
        if not isinstance(worker_id, str):
            raise TypeError(f"worker_id must be a str, not {type(worker_id).__name__}")
        async with self._subscribe(_NoticeParser(queue, worker_id)) as notices:
            yield notices

    @asynccontextmanager
    async def watch(self) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """Every notice of the schema's channel, whatever its queue or worker: new work,
        cancel requests, and finishes of awaited jobs, for an operator's live view (the
        dashboard).

        One dedicated LISTEN connection, as for :meth:`listen`; if it is lost the channel
        ends. Behind a transaction pooler without ``listen_dsn`` nothing arrives (the
        driver says so once), so a watcher polls as well.
        """
        async with self._subscribe(_any_notice) as notices:
            yield notices

    @asynccontextmanager
    async def _subscribe(
        self, parse: Callable[[str], Notice | None]
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """LISTEN on the schema's channel for the block; ``parse`` picks the notices."""
        send, receive = trio.open_memory_channel[Notice](NOTICE_BUFFER)

        def on_payload(payload: str) -> None:
            notice = parse(payload)
            if notice is None:
                return
            try:
                send.send_nowait(notice)
            except trio.WouldBlock:
                self._dropped_notices += 1  # the listener fell behind; polling covers it
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the listener is leaving

        listener = await self._driver.listen(self._channel, on_payload, send.close)
        try:
            async with receive:
                yield receive
        finally:
            send.close()
            await listener.aclose()

    # -- operator controls, audit log, table health (operator.py) --------------------

    async def retry_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = "failed",
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
    ) -> int:
        """Retry every failed job matching the filters, ``batch_size`` per statement (each
        ``FOR UPDATE SKIP LOCKED``, the cursor moving on by id); how many were retried.

        Raises:
            ValueError: a bad filter, a status other than ``"failed"`` or None, or
                ``batch_size`` outside 1..10000.
        """
        matching = check_matching(queue, status, search, cancelled, batch_size, retry=True)
        pattern = _like_pattern(matching.search)
        return await operator.run_matching(
            self._driver, self._sql, "retry_matching", matching, pattern
        )

    async def delete_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
    ) -> int:
        """Delete every job matching the filters but those running under a live lease,
        ``batch_size`` per statement; how many were deleted.

        Raises:
            ValueError: a bad filter, or ``batch_size`` outside 1..10000.
        """
        matching = check_matching(queue, status, search, cancelled, batch_size, retry=False)
        pattern = _like_pattern(matching.search)
        return await operator.run_matching(
            self._driver, self._sql, "delete_matching", matching, pattern
        )

    async def record_audit(
        self, action: str, target: str, session: str, detail: Mapping[str, Any]
    ) -> int:
        """Append an entry to the ``audit_log`` table; its id.

        Raises:
            TypeError, ValueError: a field a database cannot store; nothing is written.
        """
        record = check_audit(action, target, session, detail)
        return await operator.record_audit(self._driver, self._sql, record)

    async def list_audit(
        self, limit: int = 100, offset: int = 0, *, action: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally of one action."""
        checked = check_list_audit(limit, offset, action)
        return await operator.list_audit(self._driver, self._sql, *checked)

    async def table_health(self) -> TableHealth:
        """The schema's tables and indexes (from PostgreSQL's catalogs and statistics) and
        its oldest running and ready jobs."""
        return await operator.table_health(self._driver, self._sql, self._schema)

    async def set_schedule_enabled(self, name: str, enabled: bool) -> bool:
        """Enable or disable a schedule; False when there is none. Enabled again, its next
        run is the first tick after the database's now()."""
        name = check_schedule_name(name)
        return await operator.set_schedule_enabled(
            self._driver, self._sql, name, check_enabled(enabled)
        )

    async def run_schedule_now(self, name: str) -> int | None:
        """Enqueue one job of a schedule now, its next run unmoved; the job's id, or None
        when there is no such schedule."""
        name = check_schedule_name(name)
        return await operator.run_schedule_now(self._driver, self._sql, name)

    # -- attempt history (stubs until implemented) -------------------------------

    async def list_attempts(self, job_id: int) -> list[AttemptInfo]:
        """Every recorded attempt of one job, oldest first (docs/protocol.rst §14).

        Raises:
            UnknownJobError: no job has this id.
        """
        check_job_id(job_id)
        rows = []
        if _is_bigint(job_id):
            rows = await self._driver.run(
                "list_attempts", _fetch, self._sql["list_attempts"], job_id
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
            "queue_timings", _fetch, self._sql["queue_timings"], window, queue
        )
        return queue_timings(rows)

    async def attempt_history(
        self, *, window: float = 3600.0, buckets: int = 60, queue: str | None = None
    ) -> list[AttemptBucket]:
        """Attempts finished per equal time bucket over the last ``window`` seconds, with
        their percentiles: exactly ``buckets`` entries, oldest first."""
        window, buckets, queue = check_history(window, buckets, queue)
        rows = await self._driver.run(
            "attempt_history", _fetch, self._sql["attempt_history"], window, buckets, queue
        )
        return attempt_buckets(rows)


class _JobTransaction:
    """One handler's transaction: :class:`~trioqueue._backends.interface.JobTransaction` on PostgreSQL."""

    def __init__(self, connection: PgConnection, ack_sql: str) -> None:
        self._connection = connection
        self._ack_sql = ack_sql
        self._commit_sent = False

    @property
    def connection(self) -> PgConnection:
        return self._connection

    @property
    def commit_sent(self) -> bool:
        return self._commit_sent

    async def commit_with_ack(self, item: Ack) -> bool:
        """The fenced ack and COMMIT, in one crossing; False (and nothing committed) when
        the fence did not match.

        Raises:
            BackendError: the database failed, or the handler ended the transaction itself.
        """
        items = (item,)
        return await self._connection.run(
            "ack",
            self._aio_commit_with_ack,
            _ints(i.job_id for i in items),
            _ints(i.claim_seq for i in items),
            _progress(items),
            _results(items),
            *timing_arrays(items),
        )

    async def _aio_commit_with_ack(self, connection: Any, *arrays: list[Any] | str | None) -> bool:
        if not connection.is_in_transaction():
            # The handler ran COMMIT or ROLLBACK itself: its writes were not made together
            # with the ack, so the ack must not be made as if they were.
            raise BackendError("the handler ended ctx.connection's transaction itself")
        if not await connection.fetch(self._ack_sql, *arrays):
            return False  # claim_seq moved on: the caller's block rolls back
        self._commit_sent = True
        try:
            await connection.execute("COMMIT")
        except BaseException as exc:
            if never_sent(exc):
                # asyncpg refused to send it (the server had ended the session): nothing
                # was committed, so the commit is not in doubt (docs/postgres.rst,
                # "Transactional mode").
                self._commit_sent = False
            raise
        return True


def _any_notice(payload: str) -> Notice | None:
    """A NOTIFY payload of the schema's channel as a Notice, whoever it was meant for:
    ``a:QUEUE`` (new work), ``c:ID:WORKER_HASH:QUEUE`` (a cancel request) or ``f:ID:QUEUE``
    (a job someone waits for finished or was deleted)."""
    if payload.startswith("a:"):
        return Notice(NoticeKind.AVAILABLE, payload[2:])
    finished = parse_finished(payload)
    if finished is not None:
        return Notice(NoticeKind.FINISHED, finished[1], finished[0])
    if payload.startswith("c:"):
        job_id, _, rest = payload[2:].partition(":")
        _, _, queue = rest.partition(":")
        if job_id.isdigit() and queue:
            return Notice(NoticeKind.CANCEL, queue, int(job_id))
    return None


class _NoticeParser:
    """Turns a NOTIFY payload of the schema's channel into a Notice for one listener."""

    def __init__(self, queue: str, worker_id: str) -> None:
        self._queue = queue
        self._available = f"a:{queue}"
        worker_hash = hashlib.md5(worker_id.encode(), usedforsecurity=False).hexdigest()
        self._cancel_suffix = f":{worker_hash}:{queue}"

    def __call__(self, payload: str) -> Notice | None:
        if payload == self._available:
            return Notice(NoticeKind.AVAILABLE, self._queue)
        if payload.startswith("c:") and payload.endswith(self._cancel_suffix):
            job_id = payload[2 : -len(self._cancel_suffix)]
            if job_id.isdigit():
                return Notice(NoticeKind.CANCEL, self._queue, int(job_id))
        return None


# -- asyncio helpers: each runs on the connection the driver hands it ---------------------


async def _fetch(connection: Any, query: str, *args: Any) -> list[Any]:
    rows: list[Any] = await connection.fetch(query, *args)
    return rows


async def _fetch_planned_for_arguments(connection: Any, query: str, *args: Any) -> list[Any]:
    """``_fetch`` with a plan made for these very arguments (see ``_GENERIC_PLAN_ITEMS``).

    ``SET LOCAL`` needs a transaction: two more round trips, which a statement this large
    does not notice.
    """
    async with connection.transaction():
        await connection.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        rows: list[Any] = await connection.fetch(query, *args)
    return rows


async def _fetchrow(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchrow(query, *args)


async def _fetchval(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchval(query, *args)


async def _execute(connection: Any, query: str, *args: Any) -> None:
    await connection.execute(query, *args)


# -- conversions and checks ---------------------------------------------------------------


def _read_payload(text: str) -> Any:
    """A stored payload, decoded; or, when Python's json refuses the text (more digits than
    ``int()`` takes, nesting deeper than the recursion limit), the text itself, marked."""
    try:
        return decode_payload(text)
    except (ValueError, RecursionError) as exc:
        return UndecodablePayload(text, f"{type(exc).__name__}: {exc}")


def _job_info(row: Any) -> JobInfo:
    state = row["state"]
    running = state == "running"
    return JobInfo(
        id=row["id"],
        queue=row["queue"],
        payload=_read_cut(row, "payload"),
        status=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        priority=row["priority"],
        progress=row["progress"],
        last_error=_cut(row, "last_error"),
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        lease_expires_at=row["not_visible_until"] if running else None,
        last_renewed_at=row["last_renewed_at"],
        cancel_requested_at=row["cancel_requested_at"],
        cancel_acknowledged_at=row["cancel_acknowledged_at"],
        worker_id=row["worker_id"] if running else None,
        result=None if row["result"] is None else _read_cut(row, "result"),
        group=row["group_key"],
        cancelled=row["cancelled"],
        next_attempt_at=row["not_visible_until"] if state == "scheduled" else None,
        # The pool that ran the last attempt: the row keeps worker_id until a retry.
        finished_by=row["worker_id"] if state in ("succeeded", "failed") else None,
    )


def _cut(row: Any, column: str) -> Any:
    """A text column of a list read with a preview: a :class:`TruncatedText` when the
    query cut it (its ``<column>_length`` is longer than what came); else the text."""
    text = row[column]
    length = row.get(f"{column}_length")  # absent from get_job's row
    if text is not None and length is not None and length > len(text):
        return TruncatedText(text, length)
    return text


def _read_cut(row: Any, column: str) -> Any:
    """A payload or result: decoded, unless the query cut it (:func:`_cut`)."""
    text = _cut(row, column)
    return text if isinstance(text, TruncatedText) else _read_payload(text)


def _schedule_info(row: Any) -> ScheduleInfo:
    return ScheduleInfo(
        name=row["name"],
        queue=row["queue"],
        cron=row["cron"],
        timezone=row["timezone"],
        payload=_read_payload(row["payload"]),
        priority=row["priority"],
        max_attempts=row["max_attempts"],
        next_run_at=row["next_run_at"],
        last_run_at=row["last_run_at"],
        enabled=row["enabled"],
    )


def _poll_delays() -> Iterator[float]:
    """wait_for's pauses between reads: 0.05 s, doubling up to 1 s."""
    delay = WAIT_POLL_FIRST
    while True:
        yield delay
        delay = min(2 * delay, WAIT_POLL_MAX)


def _like_pattern(search: str | None) -> str | None:
    """``search`` as an ILIKE pattern matching it anywhere, its wildcards and the escape
    character (backslash, as the queries say) taken literally."""
    if search is None:
        return None
    escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _beat_arguments(beat: PoolBeat | None) -> tuple[Any, ...]:
    """The beat's parameters of the renew statement ($5..$14); all NULL without a beat."""
    if beat is None:
        return (None,) * 10
    pool = beat.pool
    return (
        pool.worker_id,
        pool.host,
        pool.pid,
        pool.queue,
        pool.concurrency,
        float(pool.heartbeat_interval),
        beat.in_flight,
        beat.abandoned_renewals,
        None if beat.clock_skew is None else float(beat.clock_skew),
        beat.clock_verdict,
    )


def _is_bigint(value: int) -> bool:
    return -_INT64 - 1 <= value <= _INT64


def _ints(values: Iterable[int]) -> list[str]:
    """Ids or claim_seqs as a text[] parameter (see queries.sql). A value out of bigint range
    names no row, so 0, which names none either, stands in for it."""
    # (The range check inline: a call per value was half the cost for 10,000 jobs.)
    return [str(value) if -_INT64 - 1 <= value <= _INT64 else "0" for value in values]


@dataclass(frozen=True, slots=True)
class _Claim:
    """One claim's arguments, checked: the claim statement's parameters but the last."""

    queue: str
    limit: int
    worker_id: str
    lease: float
    quarantine_after: int | None
    alone: bool

    def arguments(self, *, locked: bool) -> tuple[object, ...]:
        """$1..$7 of the claim statement; ``locked``: the queue's row is held ($5)."""
        return (self.queue, self.limit, self.worker_id, self.lease, locked,
                self.quarantine_after, self.alone)  # fmt: skip


def _fences(items: Sequence[RenewItem | Ack | Failure | Release]) -> tuple[list[str], list[str]]:
    """The ``(id, claim_seq)`` arrays every fenced statement starts with."""
    return _ints(item.job_id for item in items), _ints(item.claim_seq for item in items)


def _progress(items: Sequence[RenewItem | Ack | Failure | Release]) -> list[str | None] | None:
    """Each item's progress as a text[] parameter, invalid values (never stored) as None; or
    None (SQL NULL) when no item carries one, the usual case: the statements' ``unnest``
    reads a NULL array as a NULL per item. (Building and sending 10,000 NULLs took 3 ms of
    a 75 ms renewal.)"""
    if all(item.progress is None for item in items):
        return None
    return _floats(valid_progress(item.progress) for item in items)


def _results(items: Sequence[Ack]) -> list[str | None] | None:
    """Each ack's result (JSON text) as a text[] parameter; None (SQL NULL) when no handler
    returned anything, as ``_progress``."""
    results = [item.result for item in items]
    return None if all(result is None for result in results) else results


def _floats(values: Iterable[float | None]) -> list[str | None]:
    """Finite floats (or None) as a text[] parameter; ``repr`` round-trips exactly."""
    return [None if value is None else repr(float(value)) for value in values]


def _storable_text(text: str) -> str:
    """``text`` as a ``text`` column can hold it: no NUL, no lone surrogates.

    Error messages come from arbitrary exceptions; one odd character must not make a whole
    batch of outcomes fail to write.
    """
    text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


if TYPE_CHECKING:
    # mypy proves here that PostgresBackend implements the Backend protocol.
    _implements: type[Backend] = PostgresBackend
