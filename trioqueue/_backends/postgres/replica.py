"""Reads on a streaming replica (``open_postgres(..., read_dsn=...)``; docs/postgres.rst,
"Read replicas").

Theory of operation
-------------------
The backend sends the operators' read-only calls (lists, counts, statistics, history, a
job's snapshot) through a :class:`ReadRoute`; everything else (claims, renewals, outcomes,
every write, ``wait_for``, and every read that a write or a lease decision follows) goes to
the primary's driver directly and never reaches this module. So no write and no lease
decision can depend on a replica's answer: the route is for what a person or a dashboard
looks at.

A read runs on the replica's own, smaller pool, in one crossing, and falls back to the
primary, for that call, when the replica cannot answer it:

* **down**: the replica refused or lost the connection, or did not answer at all. The
  reads then go to the primary for ``RETRY_AFTER`` seconds before the replica is tried
  again; one warning is logged per outage, and one line when it is back.
* **lagging**: with ``max_read_lag``, each read first asks the replica how far behind it
  is (``replica_lag`` in ``replica.sql``, on the same connection, in the same crossing);
  beyond the bound, that read goes to the primary. The measure is conservative: a replica
  that has replayed everything it received counts as 0 s behind only while its WAL
  receiver runs; otherwise it counts the time since the last transaction it replayed.
* **error**: the replica answered with an error about the statement (a recovery conflict
  cancelled it, a table a migration has not reached it yet): that read goes to the
  primary, which answers or raises as it would have.

``statistics()`` shows each of these (``replica_*`` keys).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import trio

from trioqueue._backends.postgres.driver import Driver, Dsn, parse_dsn
from trioqueue._backends.postgres.sqlstate import connection_refused
from trioqueue._backends.validation import MAX_SECONDS, check_int
from trioqueue._errors import BackendError, causes

__all__ = [
    "DEFAULT_MAX_READ_CONNECTIONS",
    "RETRY_AFTER",
    "ReadRoute",
    "ReplicaOptions",
    "check_replica_options",
    "open_read_route",
]

log = logging.getLogger("trioqueue.postgres")

T = TypeVar("T")
P = ParamSpec("P")

#: The replica's pool size when ``max_read_connections`` is not given: the operators' reads
#: are few and short (a dashboard's page is a handful of statements).
DEFAULT_MAX_READ_CONNECTIONS = 4

#: Seconds the reads stay on the primary after the replica was found down, before the next
#: read tries the replica again (a module constant, so that tests can shorten it).
RETRY_AFTER = 5.0

#: Why a read went to the primary instead of the replica.
Fallback = Literal["down", "lagging", "error"]
ReplicaState = Literal["up", "down", "lagging"]


class _TooFarBehind:
    """The answer of a replica beyond ``max_read_lag`` (a value, not an exception: an
    exception would mark its connection for a session reset, one more round trip)."""


_TOO_FAR_BEHIND = _TooFarBehind()


class ReplicaOptions:
    """``open_postgres``'s replica options, checked: the replica's DSN (parsed, not
    connected), its pool size and the lag bound (seconds, None: no bound)."""

    def __init__(self, dsn: Dsn, max_connections: int, max_lag: float | None) -> None:
        self.dsn = dsn
        self.max_connections = max_connections
        self.max_lag = max_lag


def check_replica_options(
    read_dsn: object,
    max_read_connections: object,
    max_read_lag: object,
    connect_timeout: float | None,
) -> ReplicaOptions | None:
    """The replica options, or None without ``read_dsn``.

    Raises:
        TypeError, ValueError: every bad option, in one message (``read_dsn``'s password
            masked; a ``TypeError`` when every problem is a wrong type); nothing is
            connected.
    """
    problems: list[Exception] = []
    dsn = _check_read_dsn(read_dsn, connect_timeout, problems)
    size = DEFAULT_MAX_READ_CONNECTIONS
    if max_read_connections is not None:
        try:
            size = check_int("max_read_connections", max_read_connections, minimum=1)
        except (TypeError, ValueError) as exc:
            problems.append(exc)
    lag = _check_lag(max_read_lag, problems)
    if read_dsn is None and (max_read_connections is not None or max_read_lag is not None):
        problems.append(ValueError("max_read_connections and max_read_lag need a read_dsn"))
    if problems:
        kind = TypeError if all(isinstance(p, TypeError) for p in problems) else ValueError
        raise kind("; ".join(map(str, problems)))
    return None if dsn is None else ReplicaOptions(dsn, size, lag)


def _check_read_dsn(
    value: object, connect_timeout: float | None, problems: list[Exception]
) -> Dsn | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(TypeError(f"read_dsn must be a str or None, not {type(value).__name__}"))
        return None
    try:
        return parse_dsn(value, connect_timeout)
    except ValueError as exc:
        problems.append(ValueError(f"read_dsn: {exc}"))
        return None


def _check_lag(value: object, problems: list[Exception]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        message = f"max_read_lag must be a number or None, not {type(value).__name__}"
        problems.append(TypeError(message))
        return None
    if not (0 <= value <= MAX_SECONDS):  # also refuses NaN
        message = f"max_read_lag must be >= 0 and <= {MAX_SECONDS:.0f} seconds, not {value!r}"
        problems.append(ValueError(message))
        return None
    return float(value)


@asynccontextmanager
async def open_read_route(
    primary: Driver, options: ReplicaOptions | None, lag_sql: str
) -> AsyncIterator[ReadRoute]:
    """The route for the block: to the replica when ``options`` name one, else the primary.

    The replica's pool opens here; a replica that cannot be reached now does not stop the
    backend from opening: its reads go to the primary until it answers (logged).
    """
    if options is None:
        yield ReadRoute(primary, None, None, lag_sql)
        return
    replica = primary.sibling(options.dsn, options.max_connections)
    route = ReadRoute(primary, replica, options.max_lag, lag_sql)
    try:
        await route.try_open()
        yield route
    finally:
        await replica.close()


class ReadRoute:
    """Runs the operators' reads on the replica when it can answer them, else on the primary."""

    def __init__(
        self, primary: Driver, replica: Driver | None, max_lag: float | None, lag_sql: str
    ) -> None:
        self._primary = primary
        self._replica = replica
        self._max_lag = max_lag
        self._lag_sql = lag_sql
        self._failed_at = 0.0  # time.monotonic() of the last failure that found it down
        self._opening = trio.Lock()  # held while the replica's pool is being opened
        self._state: ReplicaState = "up"
        self.reads = 0  #: reads the replica answered
        self.fallbacks: Counter[Fallback] = Counter()  #: reads sent to the primary instead
        self.last_lag: float | None = None  #: the replica's lag at the last check (seconds)

    @property
    def configured(self) -> bool:
        return self._replica is not None

    @property
    def state(self) -> ReplicaState | None:
        """``"up"``, ``"down"`` or ``"lagging"`` (at the last read); None without a replica."""
        return None if self._replica is None else self._state

    @property
    def replica(self) -> Driver | None:
        return self._replica

    async def try_open(self) -> None:
        """Open the replica's pool; when it cannot be reached, mark it down (logged)."""
        assert self._replica is not None
        try:
            await self._replica.open()
        except BackendError as exc:
            self._went_down(exc)

    async def run(
        self,
        op: str,
        fn: Callable[Concatenate[Any, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``await fn(connection, *args, **kwargs)`` on the replica, or on the primary when
        there is none or it cannot answer (see the module docstring). ``op`` is counted in
        ``statistics().calls`` once, on whichever server ran the read.

        Raises:
            BackendError: the primary failed (the replica's failures are not raised).
        """
        replica = self._replica
        if replica is None:
            return await self._primary.run(op, fn, *args, **kwargs)
        reason = await self._replica_unusable(replica)
        if reason is None:
            try:
                result = await replica.run(None, self._on_replica, replica, op, fn, *args, **kwargs)
            except BackendError as exc:
                reason = self._failed(exc)
            else:
                if not isinstance(result, _TooFarBehind):
                    self._came_back()
                    return result
                reason = self._lagging()
        self.fallbacks[reason] += 1
        return await self._primary.run(op, fn, *args, **kwargs)

    async def _replica_unusable(self, replica: Driver) -> Fallback | None:
        """Why the replica cannot be asked now ("down" while a down replica rests), or None,
        after opening its pool if needed: one task opens it, and the reads arriving
        meanwhile wait for that rather than open pools of their own."""
        if self._resting():
            return "down"
        if not replica.is_open:
            async with self._opening:
                if not replica.is_open and not self._resting():
                    await self.try_open()
            if not replica.is_open:
                return "down"
        return None

    def _resting(self) -> bool:
        """Whether the replica was found down less than ``RETRY_AFTER`` seconds ago."""
        return self._state == "down" and time.monotonic() < self._failed_at + RETRY_AFTER

    async def _on_replica(
        self,
        connection: Any,
        replica: Driver,
        op: str,
        fn: Callable[Concatenate[Any, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T | _TooFarBehind:
        """On the replica's connection: the lag check (with a bound), then the read;
        nothing is read when the replica is too far behind."""
        if self._max_lag is not None:
            lag = float(await connection.fetchval(self._lag_sql))
            self.last_lag = lag
            if lag > self._max_lag:
                return _TOO_FAR_BEHIND
        replica.calls[op] += 1
        return await fn(connection, *args, **kwargs)

    def _failed(self, exc: BackendError) -> Fallback:
        if _unreachable(exc):
            self._went_down(exc)
            return "down"
        log.debug("a read on the replica failed, read on the primary instead: %s", exc)
        return "error"

    def _went_down(self, exc: BaseException) -> None:
        self._failed_at = time.monotonic()
        if self._state != "down":
            assert self._replica is not None
            log.warning(
                "the read replica %s cannot be reached, reads go to the primary "
                "(tried again every %g s): %s",
                self._replica_name(),
                RETRY_AFTER,
                exc,
            )
        self._state = "down"

    def _lagging(self) -> Fallback:
        if self._state != "lagging":
            log.warning(
                "the read replica %s is %.1f s behind (max_read_lag %g s): reads go to "
                "the primary until it catches up",
                self._replica_name(),
                self.last_lag or 0.0,
                self._max_lag or 0.0,
            )
        self._state = "lagging"
        return "lagging"

    def _came_back(self) -> None:
        self.reads += 1
        if self._state != "up":
            log.warning("the read replica %s answers again: reads go to it", self._replica_name())
        self._state = "up"

    def _replica_name(self) -> str:
        assert self._replica is not None
        return self._replica.masked_dsn

    def statistics(self) -> dict[str, Any]:
        """The ``replica_*`` entries of ``statistics()`` (empty without a replica)."""
        replica = self._replica
        if replica is None:
            return {}
        return {
            "replica_state": self._state,
            "replica_reads": self.reads,
            "replica_fallbacks": dict.fromkeys(("down", "lagging", "error"), 0)
            | dict(self.fallbacks),
            "replica_lag": self.last_lag,
            "replica_connections": replica.max_connections,
            "replica_connections_in_use": replica.connections_in_use,
            "replica_calls": {op: n for op, n in replica.calls.items() if n},
        }


def _unreachable(exc: BackendError) -> bool:
    """Whether the replica itself is the trouble (no connection, or no answer), rather than
    one statement: a failure without any SQLSTATE, or one that refuses connections."""
    if connection_refused(exc):
        return True
    return not any(isinstance(getattr(seen, "sqlstate", None), str) for seen in causes(exc))
