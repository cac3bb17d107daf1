"""The driver bridge: asyncpg, which needs asyncio, driven from trio through trio-asyncio.

Theory of operation
-------------------
:func:`open_driver` opens a trio-asyncio loop (``trio_asyncio.open_loop``) and, inside it,
an asyncpg connection pool. asyncpg objects belong to the loop that made them, so they
never leave it: trio code hands the driver an *asyncio* coroutine function, and
:meth:`Driver.run` runs it on one pooled connection, crossing the trio↔asyncio bridge
**once per logical operation**, however many statements the function issues (a crossing
costs tens of microseconds; docs/performance.rst). The loop is passed explicitly on every crossing, so
any trio task may call the driver, not only those started inside the loop's block. The loop
runs the asyncio callbacks that are ready together, in one pass, as asyncio's own loop does
(``loop_passes.py``).

Cancelling a trio caller cancels the asyncio task once; asyncpg then asks the server to
cancel the statement, and the call returns when its connection is back in the pool. A call
whose server or network is wedged can therefore outlive its caller's deadline: the guard
copes with that (it abandons one such renewal at a time, docs/protocol.rst §6), and the
connection counts as in use until it really is free.

asyncpg ships no type information, so its objects are ``Any`` and stay inside this module
and the backend's asyncio coroutines; trio code sees :class:`Driver`, :class:`PgConnection`
and :class:`Listener`.

Connection poolers (PgBouncer): a pooler in ``pool_mode = transaction`` hands each transaction
to whichever server connection is free, so nothing may outlive a transaction on the server:
no named prepared statements (asyncpg's statement cache names them ``__asyncpg_stmt_N__``
on every connection alike, and another client's statement of that name would run instead),
no ``LISTEN`` through it, no session reset of a lent connection (it would reach some other
client's server connection). ``pooling`` says which kind of server connection the DSN gives;
by default it is detected once at open (:func:`_pooler_in_between`). docs/pgbouncer.rst says
what each mode does.

Connection budget: ``max_connections`` pooled connections serve every operation (claims,
renewals, including at most one abandoned renewal per pool, outcome writes, producers and
transactional handlers, each of which holds one connection from before its handler starts
until its transaction ends); each :meth:`Driver.listen` holds one more connection of its
own, outside the pool. The backend keeps part of the pool out of the handlers' reach
(``transactions.py``), so transactional handlers can never starve the renewals that keep their
leases.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar
from urllib.parse import unquote

import asyncpg
import asyncpg.connect_utils
import trio
import trio_asyncio

from trioqueue._backends.postgres.connections import ConnectionPool, PooledConnection
from trioqueue._backends.postgres.loop_passes import run_ready_callbacks_together
from trioqueue._backends.postgres.sqlstate import backend_error
from trioqueue._backends.postgres.stray_errors import log_stray_errors
from trioqueue._backends.validation import MAX_SECONDS
from trioqueue._errors import BackendError, leaves

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "Driver",
    "DsnError",
    "Listener",
    "PgConnection",
    "Pooling",
    "mask_dsn",
    "open_driver",
    "parse_dsn",
]

log = logging.getLogger("trioqueue.postgres")

T = TypeVar("T")
P = ParamSpec("P")

#: How long closing may wait for connections to come back before it terminates them.
CLOSE_TIMEOUT = 5.0

#: How long opening a connection may take (seconds) when neither the ``connect_timeout``
#: argument nor the DSN's ``connect_timeout`` says: long enough for a distant server's TLS
#: handshake, short enough that a server that never answers is reported soon (asyncpg's
#: own default is 60 s). docs/postgres.rst documents it.
DEFAULT_CONNECT_TIMEOUT = 10.0

#: The largest statement asyncpg keeps prepared (bytes). Its default, 15 KiB, is less than
#: the claim statement with its comments and a long schema name: such a statement is
#: parsed, planned and described again on every call, which doubled a drain's time per
#: job. Every named query fits well within this (tests/postgres/test_postgres_driver.py).
MAX_CACHED_STATEMENT_BYTES = 64 * 1024

#: What the DSN's connections keep between transactions: ``"session"`` (a direct server
#: connection, or a pooler in session mode) or ``"transaction"`` (a pooler that may hand
#: each transaction to another server connection).
Pooling = Literal["session", "transaction"]
POOLING_MODES: tuple[Pooling, ...] = ("session", "transaction")

#: Errors of the database or the connection to it; they surface as ``BackendError``.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # A pooled connection the server terminated while it was idle (pg_terminate_backend, a
    # restart) fails its next use this way, before anything is sent (asyncpg issue #1069).
    asyncpg.InternalClientError,
    OSError,  # includes TimeoutError and refused or reset connections
)


@asynccontextmanager
async def open_driver(
    dsn: str,
    *,
    max_connections: int,
    application_name: str = "trioqueue",
    pooling: Pooling | None = None,
    listen_dsn: str | None = None,
    connect_timeout: float | None = None,
) -> AsyncIterator[Driver]:
    """A driver with a pool of at most ``max_connections``, for the duration of the block.

    Its connections show ``application_name`` in ``pg_stat_activity``, unless the DSN
    names one itself. ``pooling`` (None: detected at open), ``listen_dsn`` and
    ``connect_timeout`` are :func:`~trioqueue.open_postgres`'s; the caller has checked them
    (:func:`check_options`).

    Raises:
        DsnError: a malformed ``dsn`` or ``listen_dsn`` (nothing is connected).
        BackendError: the database cannot be reached.
    """
    target = parse_dsn(dsn, connect_timeout)
    listen_target = None if listen_dsn is None else parse_dsn(listen_dsn, connect_timeout)
    settings = {} if "application_name" in dsn else {"application_name": application_name[:63]}
    try:
        async with trio_asyncio.open_loop() as loop:
            run_ready_callbacks_together(loop)
            log_stray_errors(loop)
            driver = Driver(loop, target, max_connections, settings, pooling, listen_target)
            await driver._open()
            try:
                yield driver
            finally:
                with trio.CancelScope(shield=True):
                    await driver._close()
    except BaseExceptionGroup as group:
        # open_loop's nurseries wrap whatever leaves the block, the caller's own exceptions
        # included; a single exception is given back as itself, so that `except
        # BackendError` (or the caller's own `except KeyError`) works as with any context
        # manager.
        _raise_sole_exception(group)
        raise


def check_options(
    pooling: object, listen_dsn: object, connect_timeout: object
) -> tuple[Pooling | None, str | None, float | None]:
    """:func:`~trioqueue.open_postgres`'s connection options, checked (TypeError, ValueError)."""
    if pooling is not None and pooling not in POOLING_MODES:
        raise ValueError(
            f"pooling must be 'session', 'transaction' or None (detect), not {pooling!r}"
            + ("; statement pooling is not supported" if pooling == "statement" else "")
        )
    if listen_dsn is not None and not isinstance(listen_dsn, str):
        raise TypeError(f"listen_dsn must be a str or None, not {type(listen_dsn).__name__}")
    if connect_timeout is not None:
        if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float):
            raise TypeError(
                f"connect_timeout must be a number or None, not {type(connect_timeout).__name__}"
            )
        if not (0 < connect_timeout <= MAX_SECONDS):  # also refuses NaN
            raise ValueError(
                f"connect_timeout must be a number > 0 and <= {MAX_SECONDS:.0f}, "
                f"not {connect_timeout!r}"
            )
        connect_timeout = float(connect_timeout)
    return pooling, listen_dsn, connect_timeout


# -- DSNs ---------------------------------------------------------------------------------


class DsnError(ValueError):
    """A malformed DSN. The message names the DSN, its password masked."""


@dataclass(frozen=True)
class Dsn:
    """A checked DSN: what asyncpg gets, and how long a connection may take to open."""

    dsn: str  #: the DSN for asyncpg, without ``connect_timeout`` (asyncpg does not know it)
    masked: str  #: the DSN as messages show it
    connect_timeout: float | None  #: seconds; None: no limit


_PASSWORD_IN_NETLOC = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*):[^@/?#]*@")
_PASSWORD_PARAMETER = re.compile(r"(?i)((?:^|[?&\s])password\s*=\s*)('[^']*'|[^&\s]*)")


def mask_dsn(dsn: str) -> str:
    """``dsn`` with its password (in the user part or a ``password`` parameter) as ``***``;
    works on malformed DSNs too."""
    masked = _PASSWORD_IN_NETLOC.sub(r"\1:***@", dsn)
    return _PASSWORD_PARAMETER.sub(r"\1***", masked)


def parse_dsn(dsn: str, connect_timeout: float | None = None) -> Dsn:
    """Check ``dsn`` as asyncpg will read it, without connecting.

    ``connect_timeout`` (the argument, else the DSN's ``connect_timeout`` parameter, else
    ``DEFAULT_CONNECT_TIMEOUT``) bounds each connection's opening. As in libpq, the DSN's
    value is in seconds and 0 means no limit.

    Raises:
        DsnError: the DSN is malformed: a bad scheme, host, port or parameter.
    """
    masked = mask_dsn(dsn)

    def error(problem: str) -> DsnError:
        return DsnError(f"invalid DSN {masked!r}: {problem}")

    base, parameters = _split_parameter(dsn, "connect_timeout")
    timeout = DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
    if connect_timeout is None and parameters:
        text = parameters[-1]
        try:
            seconds = float(text)
        except ValueError:
            raise error(f"connect_timeout must be a number of seconds, not {text!r}") from None
        if not (0 <= seconds <= MAX_SECONDS):
            raise error(
                f"connect_timeout must be between 0 (no limit) and {MAX_SECONDS:.0f} seconds, "
                f"not {text!r}"
            )
        timeout = seconds or math.inf
    problem = _host_problem(base)
    if problem is not None:
        raise error(problem)
    try:
        addresses = _addresses(base)
    except Exception as exc:  # asyncpg's parser raises ValueError, its own errors, ...
        message = str(exc).removeprefix("invalid DSN: ")
        raise error(message or type(exc).__name__) from None
    for address in addresses:
        if isinstance(address, tuple):
            port = address[1]
            if isinstance(port, int) and not 1 <= port <= 65535:
                raise error(f"port {port} is out of range (1-65535)")
    return Dsn(base, masked, None if math.isinf(timeout) else timeout)


def _host_problem(dsn: str) -> str | None:
    """What is wrong with a URI's hosts and ports (``host:port,[::1]:port``), if anything:
    asyncpg's own messages for these do not say which part is wrong."""
    _scheme, separator, rest = dsn.partition("://")
    if not separator:
        return None  # asyncpg's parser explains what it expects
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    ports: list[str] = []
    for spec in netloc.split(","):
        if spec.startswith("["):
            address, bracket, after = spec[1:].partition("]")
            if not bracket:
                return f"unclosed '[' in the host {spec!r}"
            if after and not after.startswith(":"):
                return f"unexpected {after!r} after the host [{address}]"
            ports.append(after[1:])
        else:
            ports.append(unquote(spec.partition(":")[2]))
    query = re.split(r"#", rest.partition("?")[2], maxsplit=1)[0]
    for item in query.split("&") if query else ():
        key, _, value = item.partition("=")
        if unquote(key) == "port":
            ports.extend(unquote(value).split(","))
    for port in ports:
        if port and not (port.isascii() and port.isdigit()):
            return f"port {port!r} is not a number"
        if port and not 1 <= int(port) <= 65535:
            return f"port {int(port)} is out of range (1-65535)"
    return None


def _split_parameter(dsn: str, name: str) -> tuple[str, list[str]]:
    """``dsn`` without the URI query parameter ``name``, and that parameter's values."""
    head, mark, rest = dsn.partition("?")
    if not mark or "://" not in head:
        return dsn, []
    query, hash_mark, fragment = rest.partition("#")
    kept: list[str] = []
    values: list[str] = []
    for item in query.split("&"):
        key, _, value = item.partition("=")
        if unquote(key) == name:
            values.append(unquote(value))
        else:
            kept.append(item)
    rebuilt = head + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return rebuilt, values


def _addresses(dsn: str) -> list[Any]:
    """The (host, port) pairs or socket paths asyncpg would connect to, by asyncpg's own DSN
    parser: it refuses what asyncpg would refuse when connecting, without a connection.

    The parser is asyncpg's private function (of 0.32). Should another asyncpg version not
    have it, or call it differently, this checks nothing and connecting still does.
    """
    parse = getattr(asyncpg.connect_utils, "_parse_connect_dsn_and_args", None)
    if parse is None:
        return []
    try:
        arguments = inspect.signature(parse).bind(dsn=dsn, **_PARSER_ARGUMENTS)
    except (TypeError, ValueError):
        return []
    addresses, _parameters = parse(*arguments.args, **arguments.kwargs)
    return list(addresses)


#: What ``_addresses`` passes to asyncpg's DSN parser besides the DSN: nothing else is given.
_PARSER_ARGUMENTS: dict[str, Any] = dict.fromkeys(
    (
        "host",
        "port",
        "user",
        "password",
        "passfile",
        "database",
        "ssl",
        "service",
        "servicefile",
        "direct_tls",
        "server_settings",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
    )
)


def _raise_sole_exception(group: BaseExceptionGroup[BaseException]) -> None:
    """Raise the only leaf exception of ``group`` unchanged, if it has exactly one."""
    found = list(leaves(group))
    if len(found) != 1:
        return
    [leaf] = found
    context = leaf.__context__
    try:
        raise leaf
    finally:
        leaf.__context__ = context  # not the group: it only wrapped this very exception


class Driver:
    """A pool of asyncpg connections in a trio-asyncio loop, used from trio."""

    def __init__(
        self,
        loop: Any,
        dsn: Dsn,
        max_connections: int,
        server_settings: dict[str, str],
        pooling: Pooling | None = None,
        listen_dsn: Dsn | None = None,
    ) -> None:
        self._loop = loop
        self._dsn = dsn
        self._listen_dsn = listen_dsn
        self._server_settings = server_settings
        self._max_connections = max_connections
        self._pooling = pooling
        self._said_polling = False
        self._pool: ConnectionPool | None = None
        self._in_use = 0
        self._peak = 0
        self._listeners = 0
        self.calls: Counter[str] = Counter()

    # -- statistics ----------------------------------------------------------------------

    @property
    def max_connections(self) -> int:
        return self._max_connections

    @property
    def connections_in_use(self) -> int:
        """Pooled connections checked out now (a wedged call keeps its one)."""
        return self._in_use

    @property
    def peak_connections_in_use(self) -> int:
        return self._peak

    @property
    def listeners(self) -> int:
        """Dedicated LISTEN connections open now."""
        return self._listeners

    @property
    def masked_dsn(self) -> str:
        """The DSN as messages show it (its password masked)."""
        return self._dsn.masked

    @property
    def pooling(self) -> Pooling | None:
        """What the DSN's server connections keep between transactions (None before open)."""
        return self._pooling

    # -- running operations --------------------------------------------------------------

    async def run(
        self,
        op: str | None,
        fn: Callable[Concatenate[Any, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``await fn(connection, *args, **kwargs)`` in asyncio, on one pooled connection.

        One bridge crossing. ``op`` names the operation for ``statistics().calls``; it is
        counted once the connection is had, as the statement is then issued.

        Raises:
            BackendError: the database or the connection failed.
        """
        return await self.cross(self._on_connection(op, fn, *args, **kwargs))

    async def cross(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run an asyncio coroutine on the driver's loop: one bridge crossing."""
        try:
            result: T = await self._loop.run_aio_coroutine(coro)
        except DRIVER_ERRORS as exc:
            raise backend_error(exc) from exc
        return result

    async def _on_connection(
        self,
        op: str | None,
        fn: Callable[Concatenate[Any, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        connection = await self._acquire()
        failed = True
        try:
            if op is not None:
                self.calls[op] += 1
            result = await fn(connection, *args, **kwargs)
            failed = False
            return result
        except asyncpg.InternalClientError:
            connection.terminate()  # its protocol state is broken: never reuse it
            raise
        finally:
            await self._release(connection, failed=failed)

    async def _acquire(self, *, lend: bool = False) -> Any:
        assert self._pool is not None, "the driver is not open"
        connection = await self._pool.acquire()
        if lend:
            connection.mark_dirty()  # code outside the driver may change its session
        self._in_use += 1
        self._peak = max(self._peak, self._in_use)
        return connection

    async def _release(
        self, connection: Any, *, failed: bool = False, give_up_after: float | None = None
    ) -> None:
        # Without a timeout, a connection whose statement is being cancelled stays checked
        # out until the server confirms (docs/protocol.rst §6: a wedged call keeps its connection).
        assert self._pool is not None, "the driver is not open"
        try:
            await self._pool.release(connection, failed=failed, give_up_after=give_up_after)
        finally:
            self._in_use -= 1

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[PgConnection]:
        """Hold one pooled connection in trio code; each query on it is one crossing."""
        connection = await self.cross(self._acquire(lend=True))
        async with self._lend(connection) as held:
            yield held

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        """A pooled connection inside an open transaction, for the duration of the block.

        Checking out and ``BEGIN`` share one crossing. Leaving the block rolls back
        whatever is still open (a committed transaction is not, so it stays committed) and
        returns the connection, in one more crossing, shielded and bounded: if the server
        does not answer within ``CLOSE_TIMEOUT`` the connection is terminated, and the
        server rolls the transaction back by itself.
        """
        connection = await self.cross(self._begin())
        async with self._lend(connection) as held:
            yield held

    @asynccontextmanager
    async def _lend(self, connection: Any) -> AsyncIterator[PgConnection]:
        """``connection`` in trio code for the block; then back to the pool, reset (an open
        transaction rolled back) in one shielded crossing, bounded by ``CLOSE_TIMEOUT``. A
        connection that cannot be reset in time is terminated, and the server then rolls
        back whatever it still held."""
        held = PgConnection(self, connection)
        try:
            yield held
        finally:
            held._detach()
            with trio.CancelScope(shield=True):
                try:
                    await self.cross(self._release(connection, give_up_after=CLOSE_TIMEOUT))
                except BackendError:
                    pass  # terminated by the pool: nothing of it is kept

    async def _begin(self) -> Any:
        connection = await self._acquire(lend=True)
        try:
            await _terminated_if_broken(connection, connection.execute("BEGIN"))
        except BaseException:
            await self._release(connection, failed=True, give_up_after=CLOSE_TIMEOUT)
            raise
        return connection

    # -- listening -----------------------------------------------------------------------

    async def listen(
        self, channel: str, on_payload: Callable[[str], None], on_lost: Callable[[], None]
    ) -> Listener:
        """LISTEN on ``channel`` on a dedicated connection.

        ``on_payload`` gets each notification's payload, and ``on_lost`` is called once if the
        connection dies. Both run in the loop's task, on trio's thread, so they may use trio's
        synchronous APIs (``send_nowait`` into a memory channel).
        """
        if self._listen_dsn is None and self._pooling == "transaction":
            # LISTEN through a transaction pooler would subscribe whichever server connection
            # ran it, and notices would reach whoever holds that one later, or nobody.
            if not self._said_polling:
                self._said_polling = True
                log.warning(
                    "LISTEN needs a connection of its own, and %s is pooled per transaction: "
                    "wake-ups fall back to polling (pass listen_dsn, a direct DSN, to listen)",
                    self._dsn.masked,
                )
            await trio.lowlevel.checkpoint()
            return Listener(self, None)
        return await self.cross(self._listen(channel, on_payload, on_lost))

    async def _listen(
        self, channel: str, on_payload: Callable[[str], None], on_lost: Callable[[], None]
    ) -> Listener:
        target = self._dsn if self._listen_dsn is None else self._listen_dsn
        connection = await self._connect_to(target)
        self._listeners += 1
        listener = Listener(self, connection)

        def notified(_connection: Any, _pid: int, _channel: str, payload: str) -> None:
            on_payload(payload)

        def terminated(_connection: Any) -> None:
            if not listener.closing:
                on_lost()

        try:
            connection.add_termination_listener(terminated)
            await connection.add_listener(channel, notified)
        except BaseException:
            await listener._close()
            raise
        return listener

    # -- opening and closing -------------------------------------------------------------

    def sibling(self, dsn: Dsn, max_connections: int) -> Driver:
        """A driver for another server (a read replica, ``replica.py``) on this driver's
        loop, with its server settings; closed until :meth:`open`, its pooler detected
        there. The caller closes it (:meth:`close`) before this driver's loop ends."""
        return Driver(self._loop, dsn, max_connections, self._server_settings)

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(self) -> None:
        """Open the pool with its first connection; on failure it stays closed.

        Raises:
            BackendError: the server cannot be reached.
        """
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the pool (bounded, as at the end of :func:`open_driver`); it may be opened again."""
        with trio.CancelScope(shield=True):
            await self._close()
        self._pool = None

    async def _open(self) -> None:
        await self.cross(self._create_pool())

    async def _create_pool(self) -> None:
        self._pool = ConnectionPool(self._connect, self._max_connections)
        # The first connection shows that the database can be reached, and where there is no
        # pooler in between (the usual case) it stays in the pool.
        connection = await self._pool.acquire()
        failed = True
        try:
            if self._pooling is None:
                if await self._pooler_in_between(connection):
                    self._pooling = "transaction"
                    # Made with the statement cache: not one for transaction pooling.
                    await connection.close(timeout=CLOSE_TIMEOUT)
                else:
                    self._pooling = "session"
            failed = False
        finally:
            await self._pool.release(connection, failed=failed, give_up_after=CLOSE_TIMEOUT)

    async def _pooler_in_between(self, connection: Any) -> bool:
        """Whether a connection pooler sits between us and the server.

        A server tells each new connection its process id (the cancel key); PgBouncer, like
        any pooler that shares server connections, makes up a key of its own instead, as a
        client's cancel request must reach whichever server connection it has at the time.
        So the reported id and ``pg_backend_pid()`` differ exactly when a pooler is there. Its
        mode cannot be seen from a client: it is taken as transaction pooling, which is
        correct in both modes (docs/pgbouncer.rst).

        The query runs as ``COPY ... TO STDOUT`` in the simple query protocol: it leaves no
        prepared statement behind on a server connection that a pooler may share.
        """
        output = bytearray()

        async def receive(data: bytes) -> None:
            output.extend(data)

        await connection.copy_from_query("SELECT pg_backend_pid()", output=receive)
        pooled = bool(int(output) != connection.get_server_pid())
        if pooled:
            log.info(
                "a connection pooler is between trioqueue and PostgreSQL at %s: taken as "
                "transaction pooling (no named prepared statements; LISTEN only on listen_dsn); "
                "pass pooling='session' if it keeps sessions",
                self._dsn.masked,
            )
        return pooled

    async def _connect(self) -> Any:
        transaction_pooling = self._pooling == "transaction"
        # Without a statement cache asyncpg runs every query as the unnamed statement: parsed
        # and executed in one exchange that a pooler keeps on one server connection.
        options: dict[str, int] = (
            {"statement_cache_size": 0}
            if transaction_pooling
            else {"max_cacheable_statement_size": MAX_CACHED_STATEMENT_BYTES}
        )
        connection = await self._connect_to(self._dsn, connection_class=PooledConnection, **options)
        connection.keep_session_reset(not transaction_pooling)
        # A CancelRequest opens a connection: what bounds opening one bounds it too, and a
        # shutdown must end even when the DSN's connect_timeout is 0 (no limit).
        connection.bound_cancel_requests(self._dsn.connect_timeout or DEFAULT_CONNECT_TIMEOUT)
        return connection

    async def _connect_to(self, target: Dsn, **options: Any) -> Any:
        """``asyncpg.connect`` within the target's connect timeout; a timeout, or a setting a
        pooler refuses, is reported as such (``BackendError``)."""
        try:
            return await asyncpg.connect(
                target.dsn,
                server_settings=self._server_settings,
                timeout=target.connect_timeout,
                **options,
            )
        except TimeoutError:
            if target.connect_timeout is None:
                raise  # the system's own (ETIMEDOUT)
            raise BackendError(
                f"PostgreSQL: no connection to {target.masked} within "
                f"{target.connect_timeout:g} s (connect_timeout)"
            ) from None
        except asyncpg.ProtocolViolationError as exc:
            if "unsupported startup parameter" not in str(exc):
                raise
            raise BackendError(
                f"PostgreSQL: {exc} (a connection pooler refused a server setting of the DSN "
                f"{target.masked}: drop it, or list it in PgBouncer's ignore_startup_parameters)"
            ) from exc

    async def _close(self) -> None:
        if self._pool is not None:
            try:
                await self.cross(self._close_pool())
            except BackendError:
                pass  # closing anyway: terminate() already dropped what would not close

    async def _close_pool(self) -> None:
        assert self._pool is not None
        await self._pool.close(CLOSE_TIMEOUT)


async def _terminated_if_broken(connection: Any, call: Awaitable[T]) -> T:
    """``await call``, a call of ``connection``'s. A connection whose protocol state
    asyncpg finds broken (``InternalClientError``: the server ended the session a moment
    ago, and its FATAL error was read while the connection was idle) is terminated at
    once, so that nothing resets it and puts it back in the pool: a reset behind a
    transaction pooler sends nothing, and would not notice (docs/postgres.rst,
    "Transactional mode")."""
    try:
        return await call
    except asyncpg.InternalClientError:
        connection.terminate()
        raise


class PgConnection:
    """A pooled connection held by trio code: asyncpg's query methods as trio coroutines.

    Each call crosses the bridge once; arguments and results are asyncpg's. There is no
    ``timeout=`` argument: bound a call with a trio cancel scope (``trio.move_on_after``),
    which cancels the statement on the server as asyncpg's timeout would.

    A ``PgConnection`` is only valid inside the block that handed it out: once the
    connection is back in the pool (where another task may be using it), every call raises
    ``BackendError`` instead of running on someone else's connection or transaction.
    """

    def __init__(self, driver: Driver, connection: Any) -> None:
        self._driver = driver
        self._connection: Any = connection

    def _detach(self) -> None:
        self._connection = None

    def _raw(self) -> Any:
        if self._connection is None:
            raise BackendError("this connection was returned to the pool; it cannot be used")
        return self._connection

    async def run(
        self,
        op: str | None,
        fn: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``await fn(asyncpg_connection, *args, **kwargs)`` on this connection, in one crossing
        (like :meth:`Driver.run`, without checking a connection out)."""
        connection = self._raw()
        if op is not None:
            self._driver.calls[op] += 1
        return await self._cross(fn(connection, *args, **kwargs))

    async def _cross(self, call: Awaitable[T]) -> T:
        """One crossing for ``call`` on this connection, which is dropped if it breaks."""
        return await self._driver.cross(_terminated_if_broken(self._connection, call))

    async def execute(self, query: str, *args: Any) -> str:
        status: str = await self._cross(self._raw().execute(query, *args))
        return status

    async def executemany(self, command: str, args: Any) -> None:
        await self._cross(self._raw().executemany(command, args))

    async def fetch(self, query: str, *args: Any, record_class: Any = None) -> list[Any]:
        rows: list[Any] = await self._cross(
            self._raw().fetch(query, *args, record_class=record_class)
        )
        return rows

    async def fetchrow(self, query: str, *args: Any, record_class: Any = None) -> Any:
        return await self._cross(self._raw().fetchrow(query, *args, record_class=record_class))

    async def fetchval(self, query: str, *args: Any, column: int = 0) -> Any:
        return await self._cross(self._raw().fetchval(query, *args, column=column))

    def is_in_transaction(self) -> bool:
        """True while a transaction is open on the connection (no I/O)."""
        return bool(self._raw().is_in_transaction())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """A transaction (or savepoint, when nested): committed if the block succeeds."""
        transaction = self._raw().transaction()
        await self._cross(transaction.start())
        try:
            yield
        except BaseException:
            # Shielded, so that it runs whatever stopped the block, and bounded: on a path
            # that no longer answers, the deadline cancels the rollback, and the cancel
            # nobody acknowledges terminates the connection (connections.py). The server
            # rolls back by itself what it still holds of a terminated connection.
            with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await self._cross(transaction.rollback())
            raise
        else:
            await self._cross(transaction.commit())


class Listener:
    """A dedicated LISTEN connection; close it with :meth:`aclose`. Without a connection
    (None: nowhere to listen), it never hears anything."""

    def __init__(self, driver: Driver, connection: Any) -> None:
        self._driver = driver
        self._connection = connection
        self.closing = False

    @property
    def hears(self) -> bool:
        """Whether notices can arrive: False behind a transaction pooler without a
        ``listen_dsn`` (nothing was opened), and once the listener is closing."""
        return self._connection is not None and not self.closing

    async def aclose(self) -> None:
        """Close the connection (shielded, bounded; terminated if it does not close)."""
        with trio.CancelScope(shield=True):
            try:
                await self._driver.cross(self._close())
            except BackendError:
                pass

    async def _close(self) -> None:
        if self.closing:
            return
        self.closing = True
        if self._connection is None:
            return  # polling stands in for it: nothing was opened
        self._driver._listeners -= 1
        try:
            await asyncio.wait_for(self._connection.close(), CLOSE_TIMEOUT)
        except BaseException:
            self._connection.terminate()
            raise
