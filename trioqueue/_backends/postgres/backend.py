"""The PostgreSQL backend: the memory backend's semantics, on real rows and real leases.

Theory of operation
-------------------
Each operation of the :class:`~trioqueue._backends.interface.Backend` protocol is one asyncio
coroutine (the ``_aio_*`` methods, or a helper of ``statements.py``) that runs on one pooled
connection and issues one statement, or a few in one transaction (migrations, a dedup
lookup), so each operation crosses the trio↔asyncio bridge once (``driver.py``). Argument
checks and JSON encoding come from ``trioqueue._backends.validation``, shared with the memory
backend, so both refuse the same inputs the same way and write nothing when they do.

Row times are the database's (``now()``), returned as epoch seconds; ``wall_time()`` is
``time.time()``, the worker's reading of the same clock. Worker and database clocks must
agree (docs/protocol.rst §7).

The SQL lives in ``queries.sql`` and ``migrations/``; ``sql.py`` explains the naming and the
one spliced value, the checked and quoted schema name.

Layout
------
:class:`PostgresBackend` is one class assembled from one class of calls per topic, as
``queries.sql`` is sectioned; each shares the state declared by ``base.py``, which this
module's ``__init__`` sets:

- ``maintenance.py``: migrate, pending_migrations, prune.
- ``transactions.py``: acquire, and transactional mode (``job_transaction``, the commit
  with the fenced ack, the connection budget).
- ``producers.py``: enqueue, enqueue_many, dedup keys.
- ``controls.py``: cancel, retry, delete one job or many; the audit log; table health.
- ``reads.py``: get_job(s), list and count jobs, counts, queue_stats, workers, history,
  attempts; ``waits.py``: wait_for.
- ``flow.py``: pause, resume, queue limits; ``schedules.py``: schedules and the
  scheduling pass.
- ``claims.py``: claims, renewals, pool registration, clocks; ``outcomes.py``: ack, fail,
  release (fenced, batched); ``notices.py``: listen and watch.
- ``retention.py``: retention policies and the maintainer lease (docs/protocol.rst §15).
- Helpers: ``statements.py`` (one statement on one connection), ``arguments.py`` (values
  as statements take them), ``rows.py`` (rows as the protocol's types).

The reads of ``reads.py``, ``list_schedules`` and ``list_audit`` go through ``_reads``
(``replica.py``): to a read replica when ``open_postgres`` was given a ``read_dsn``, else
to the primary like everything else.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from trioqueue._backends.interface import (
    MAINTENANCE_OPERATIONS,
    OPERATIONS,
    READ_OPERATIONS,
    Backend,
)
from trioqueue._backends.postgres.claims import ClaimCalls
from trioqueue._backends.postgres.controls import ControlCalls
from trioqueue._backends.postgres.dead_letters import DeadLetterStatements
from trioqueue._backends.postgres.dependencies import DependencyCalls
from trioqueue._backends.postgres.driver import Driver, Pooling, check_options, open_driver
from trioqueue._backends.postgres.finishes import FinishWatch
from trioqueue._backends.postgres.flow import FlowCalls
from trioqueue._backends.postgres.maintenance import MaintenanceCalls
from trioqueue._backends.postgres.notices import NoticeCalls
from trioqueue._backends.postgres.outcomes import OutcomeCalls
from trioqueue._backends.postgres.producers import ProducerCalls
from trioqueue._backends.postgres.reads import ReadCalls
from trioqueue._backends.postgres.replica import ReadRoute, check_replica_options, open_read_route
from trioqueue._backends.postgres.retention import RetentionCalls
from trioqueue._backends.postgres.schedules import ScheduleCalls
from trioqueue._backends.postgres.sql import QUERIES, channel_name, check_schema, render
from trioqueue._backends.postgres.transactions import RUNTIME_RESERVE, TransactionCalls
from trioqueue._backends.postgres.waits import WaitCalls
from trioqueue._backends.validation import check_int
from trioqueue._types import BackendStatistics

__all__ = ["PostgresBackend", "open_postgres"]

#: Pooled connections when ``max_connections`` is not given.
DEFAULT_MAX_CONNECTIONS = 10

#: Operations counted in ``statistics().calls`` besides the protocol's writes: the
#: operators' calls, and migrations.
COUNTED_READS = (*READ_OPERATIONS, *MAINTENANCE_OPERATIONS, "migrate", "prune")


@asynccontextmanager
async def open_postgres(
    dsn: str,
    *,
    schema: str = "trioqueue",
    max_connections: int | None = None,
    pooling: Pooling | None = None,
    listen_dsn: str | None = None,
    connect_timeout: float | None = None,
    read_dsn: str | None = None,
    max_read_connections: int | None = None,
    max_read_lag: float | None = None,
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
        read_dsn: a streaming replica of ``dsn``'s database: the operators' read-only calls
            read there (each one's documentation says so), and fall back to the primary
            when it is down or too far behind. Never claims, renewals, outcomes, writes or
            ``wait_for``. See docs/postgres.rst, "Read replicas".
        max_read_connections: the replica's pool size (default 4; needs ``read_dsn``).
        max_read_lag: how far behind, in seconds, the replica may be for a read to go to
            it (None, the default: any lag); a read beyond it goes to the primary.

    Raises:
        TypeError, ValueError: a bad ``dsn`` (a ``ValueError`` naming it, its password
            masked), ``listen_dsn``, ``schema``, ``max_connections``, ``pooling``,
            ``connect_timeout``, ``read_dsn``, ``max_read_connections`` or
            ``max_read_lag``; nothing is connected and no SQL runs.
        BackendError: the database cannot be reached.
    """
    if not isinstance(dsn, str):
        raise TypeError(f"dsn must be a str, not {type(dsn).__name__}")
    schema = check_schema(schema)
    size = _check_max_connections(max_connections)
    pooling, listen_dsn, connect_timeout = check_options(pooling, listen_dsn, connect_timeout)
    replica = check_replica_options(read_dsn, max_read_connections, max_read_lag, connect_timeout)
    async with (
        open_driver(
            dsn,
            max_connections=size,
            application_name=f"trioqueue:{schema}",
            pooling=pooling,
            listen_dsn=listen_dsn,
            connect_timeout=connect_timeout,
        ) as driver,
        open_read_route(driver, replica, QUERIES["replica_lag"]) as reads,
    ):
        backend = PostgresBackend(driver, schema, reads)
        try:
            yield backend
        finally:
            await backend._finishes.aclose()  # wait_for's shared LISTEN, if one was opened


def _check_max_connections(value: object) -> int:
    if value is None:
        return DEFAULT_MAX_CONNECTIONS
    return check_int("max_connections", value, minimum=1)


class PostgresBackend(
    MaintenanceCalls,
    TransactionCalls,
    ProducerCalls,
    ControlCalls,
    WaitCalls,
    ReadCalls,
    FlowCalls,
    ScheduleCalls,
    ClaimCalls,
    OutcomeCalls,
    NoticeCalls,
    RetentionCalls,
    DeadLetterStatements,
    DependencyCalls,
):
    """A :class:`~trioqueue._backends.interface.Backend` on PostgreSQL. Create it with :func:`open_postgres`.

    Jobs live in ``<schema>.jobs`` (columns documented in docs/api.rst and in the first migration).
    Besides the Backend protocol it offers :meth:`migrate`, :meth:`prune` (retention),
    :meth:`acquire` (a pooled connection for the caller's own SQL, also for transactional
    enqueue) and :meth:`job_transaction` (transactional mode).
    """

    supports_transactions: bool = True

    def __init__(self, driver: Driver, schema: str, reads: ReadRoute | None = None) -> None:
        self._driver = driver
        self._reads = reads if reads is not None else ReadRoute(driver, None, None, "")
        # Transactional handlers share what the runtime's own operations leave over.
        self._transaction_slots = trio.CapacityLimiter(
            max(1, driver.max_connections - RUNTIME_RESERVE)
        )
        self._schema = check_schema(schema)
        self._channel = channel_name(schema)
        self._sql = {name: render(sql, schema) for name, sql in QUERIES.items()}
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

    def statistics(self) -> BackendStatistics:
        """The primary's connections; ``calls`` counts statements on the primary and the
        read replica together, and the ``replica_*`` entries tell the replica's reads
        apart (docs/postgres.rst, "Read replicas")."""
        driver = self._driver
        calls = Counter(driver.calls)
        if self._reads.replica is not None:
            calls.update(self._reads.replica.calls)
        return BackendStatistics(
            connections_in_use=driver.connections_in_use,
            peak_connections_in_use=driver.peak_connections_in_use,
            calls=dict(calls),
            extra={
                "connections": driver.max_connections,
                "listeners": driver.listeners,
                "notices_dropped": self._dropped_notices,
                "finish_waiters": self._finishes.waiters,
                **self._reads.statistics(),
            },
        )


if TYPE_CHECKING:
    # mypy proves here that PostgresBackend implements the Backend protocol.
    _implements: type[Backend] = PostgresBackend
