"""The PostgreSQL backend's connections for callers: ``acquire`` and transactional mode.

Transactional mode
------------------
:meth:`TransactionCalls.job_transaction` gives one handler a pooled connection inside an
open transaction (``ctx.connection``). On success the runtime calls
:meth:`PgJobTransaction.commit_with_ack`: the fenced ack statement and ``COMMIT`` run in one
crossing, and the ack's fence decides: when ``claim_seq`` moved on (the lease was lost and
the job reclaimed) the ack touches no row and the transaction is rolled back, so the
handler's writes are discarded. The ack's row lock then serialises the commit against any
reclaim (claims skip locked rows), so a job's effects commit exactly once (I13). Anything
else (the handler raised or was stopped, the fence fired) rolls back; failures and retries
are written outside the transaction, fenced as usual (``outcomes.py``).

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

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from trioqueue._backends.interface import ConnectionUnavailable
from trioqueue._backends.postgres.arguments import (
    checkpoint_texts,
    ints,
    progress_texts,
    result_texts,
)
from trioqueue._backends.postgres.attempts import timing_arrays
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.driver import PgConnection
from trioqueue._backends.postgres.sqlstate import connection_refused, never_sent
from trioqueue._errors import BackendError
from trioqueue._types import Ack

#: Pooled connections transactional handlers never get: one claim, the current renewal, one
#: abandoned renewal, the outcome writer, a scheduling pass (see the module docstring).
RUNTIME_RESERVE = 5


class TransactionCalls(BackendBase):
    """Connections for the caller's own SQL, and one handler's transaction."""

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
    async def job_transaction(self) -> AsyncIterator[PgJobTransaction]:
        """A connection inside an open transaction, for one transactional handler.

        Used by the runtime in transactional mode (see the module docstring for the
        connection budget). Entering may wait for one of the handlers' connections; leaving
        rolls back unless :meth:`PgJobTransaction.commit_with_ack` committed.

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
            yield PgJobTransaction(connection, self._sql["ack"])


class PgJobTransaction:
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
            ints(i.job_id for i in items),
            ints(i.claim_seq for i in items),
            progress_texts(items),
            result_texts(items),
            *timing_arrays(items),
            checkpoint_texts(items),
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
