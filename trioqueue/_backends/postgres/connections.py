"""The connection pool under the driver: asyncio code, run on the trio-asyncio loop.

Why not asyncpg's pool: under trio-asyncio every asyncio callback costs a pass of the
bridged loop (tens of microseconds, docs/performance.rst), and asyncpg's pool spends several of them on
every check-out and return (a queue, a timeout, a connection proxy), then one more round
trip on the return to reset the session (``RESET ALL``, ``UNLISTEN *``, ...). For a worker
whose every claim, renewal and ack is one short statement, that doubled the cost of each
(measured: ten bridged loop passes per statement instead of five). This pool checks out and
returns an idle connection without awaiting anything.

What it keeps of asyncpg's pool:

* at most ``size`` connections, opened on demand, most recently used first;
* a connection whose call failed or was cancelled is reset before anyone reuses it, and the
  reset waits for an in-flight statement cancel to finish, so a wedged call keeps its
  connection checked out until the server lets go (docs/protocol.rst §6 counts on it);
* a connection lent to code outside the driver (``acquire()``, ``transaction()``) gets the
  full session reset when it comes back, as user code may have run ``SET`` or ``LISTEN``
  (not behind a transaction pooler, where there is no session of its own to reset);
* an open transaction is rolled back on return; a connection that cannot be reset, or that
  the server closed, is dropped and its place freed.

What it adds: no wait at shutdown is unbounded, even when the path to the server has gone
silent (a network blackhole, a vanished host). A statement cancel the server has not even
acknowledged within a bound terminates the connection (the wait for a cancel the server took
is what a wedged call's connection waits on, and stays unbounded: docs/protocol.rst §6), and
closing gives every connection one deadline, then terminates what is left.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

__all__ = ["ConnectionPool", "PooledConnection"]

log = logging.getLogger("trioqueue.postgres")


class PooledConnection(asyncpg.Connection):  # type: ignore[misc, no-any-unimported]
    """An asyncpg connection that knows whether it needs a session reset."""

    __slots__ = ("_trioqueue_cancel_bound", "_trioqueue_dirty", "_trioqueue_no_session")

    def mark_dirty(self) -> None:
        """Reset this connection's session before it is used again."""
        self._trioqueue_dirty = True

    def is_dirty(self) -> bool:
        return bool(getattr(self, "_trioqueue_dirty", False))

    def keep_session_reset(self, keep: bool) -> None:
        """Whether a dirty connection's session is reset (``RESET ALL``, ``UNLISTEN *``, ...).

        Not behind a transaction pooler: outside a transaction each statement may reach
        another server connection, so the reset would hit some other client's session and
        not the one the lent code changed (docs/pgbouncer.rst). Rolling back an open
        transaction still happens: that one stays on its server connection.
        """
        self._trioqueue_no_session = not keep

    def bound_cancel_requests(self, seconds: float) -> None:
        """Terminate this connection when the server has not acknowledged a statement cancel
        within ``seconds``.

        A cancelled call (a trio deadline, a shutdown) makes asyncpg send a CancelRequest on
        a connection of its own and wait, with no limit, for the server to close it; the
        connection's release waits for that in turn, and the trio caller for the release.
        A live server, even a wedged one, closes it at once; no answer means the path to the
        server is gone, and nothing sent on this connection will ever be answered either.
        """
        self._trioqueue_cancel_bound = seconds

    def _cancel_current_command(self, waiter: Any, cancel_waiter: Any = None) -> None:
        # asyncpg's hook (0.32) for a cancelled call: ``waiter`` resolves once the server has
        # taken the CancelRequest, ``cancel_waiter`` once the cancelled statement has ended
        # (the latter is not bounded here: a wedged call keeps its connection, §6).
        super()._cancel_current_command(waiter, cancel_waiter)
        bound = getattr(self, "_trioqueue_cancel_bound", None)
        if bound is not None and not waiter.done():
            timer = self._loop.call_later(bound, self._cancel_unanswered, waiter, bound)
            waiter.add_done_callback(lambda _: timer.cancel())

    def _cancel_unanswered(self, waiter: Any, bound: float) -> None:
        if waiter.done() or self.is_closed():
            return
        log.warning(
            "PostgreSQL did not acknowledge a statement cancel within %g s "
            "(connect_timeout): the path to the server is gone; terminating the connection",
            bound,
        )
        self.terminate()  # its waiters fail, and the release waiting on them ends

    def get_reset_query(self) -> str:
        # asyncpg's reset() runs this after rolling back any open transaction; a clean
        # connection needs nothing more (and so costs no round trip).
        if not self.is_dirty():
            return ""
        self._trioqueue_dirty = False
        if getattr(self, "_trioqueue_no_session", False):
            return ""
        query: str = super().get_reset_query()
        return query


class ConnectionPool:
    """At most ``size`` connections made by ``connect``, shared by asyncio tasks."""

    def __init__(self, connect: Callable[[], Awaitable[Any]], size: int) -> None:
        self._connect = connect
        self._size = size
        self._open = 0  # connections open or being opened, idle or checked out
        self._idle: list[Any] = []  # a stack: the warmest connection is reused first
        # Tasks waiting for a connection; each future gets one, or None to mean "a place
        # is free: open one yourself".
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._connections: set[Any] = set()  # every open one, to terminate at the end
        self._closing = False
        self._returned = asyncio.Event()  # set when a connection comes back or goes

    async def acquire(self) -> Any:
        """A connection, checked out; give it back with :meth:`release`."""
        while True:
            if self._closing:
                raise asyncpg.InterfaceError("the connection pool is closing")
            while self._idle:
                connection = self._idle.pop()
                if not connection.is_closed():
                    return connection
                self._free_place(connection)  # the server closed it while it was idle
            if self._open < self._size:
                return await self._open_one()
            connection = await self._wait()
            if connection is not None:
                return connection

    async def _open_one(self) -> Any:
        self._open += 1
        try:
            connection = await self._connect()
        except BaseException:
            self._free_place(None)
            raise
        self._connections.add(connection)
        return connection

    async def _wait(self) -> Any:
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._put(waiter.result())  # handed over just as this task was cancelled
            raise

    async def release(self, connection: Any, *, failed: bool, give_up_after: float | None) -> None:
        """Take ``connection`` back; ``failed`` if its call raised or was cancelled.

        Waits, up to ``give_up_after`` seconds (None: as long as it takes), for whatever the connection
        still needs before reuse: a rollback, the end of a statement cancel, a session
        reset. A connection that cannot be made clean is terminated.
        """
        try:
            if failed:
                connection.mark_dirty()
            if not connection.is_closed() and (
                connection.is_dirty() or connection.is_in_transaction()
            ):
                async with asyncio.timeout(give_up_after):
                    if connection.is_in_transaction():
                        # A caller's own BEGIN: roll it back here, as asyncpg's reset would
                        # (it also reports that as an error to the event loop).
                        await connection.execute("ROLLBACK")
                    await connection.reset()
        except BaseException:
            connection.terminate()
            raise
        finally:
            self._put(connection)

    def _put(self, connection: Any) -> None:
        if connection.is_closed():
            self._free_place(connection)
            return
        if self._closing:
            connection.terminate()
            self._free_place(connection)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self._idle.append(connection)
        self._returned.set()

    def _free_place(self, connection: Any) -> None:
        self._connections.discard(connection)
        self._open -= 1
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # it opens a connection of its own
                return
        self._returned.set()

    async def _all_returned(self) -> None:
        while len(self._idle) < self._open:
            self._returned = asyncio.Event()
            await self._returned.wait()

    async def close(self, give_up_after: float) -> None:
        """Close every connection: wait up to ``give_up_after`` seconds for checked-out ones
        to come back, then terminate whatever is still out."""
        self._closing = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(asyncpg.InterfaceError("the connection pool is closing"))
        self._waiters.clear()
        try:
            await asyncio.wait_for(self._all_returned(), give_up_after)
        except TimeoutError:
            pass
        idle, self._idle = self._idle, []
        for connection in idle:
            self._free_place(connection)
        try:
            # One deadline for all of them: closed one after the other, each waiting for a
            # server that no longer answers, ten connections took ten times as long.
            async with asyncio.timeout(give_up_after):
                await asyncio.gather(*(c.close() for c in idle), return_exceptions=True)
        except TimeoutError:
            pass
        finally:
            for connection in [*idle, *self._connections]:  # still out: a wedged call's
                if not connection.is_closed():
                    connection.terminate()
