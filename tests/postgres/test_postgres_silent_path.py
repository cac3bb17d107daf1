"""A pool whose path to the database goes silent still shuts down, within its bounds.

The path runs through a small TCP proxy on 127.0.0.1 that forwards to the real server until
the test silences it: from then on it forwards nothing either way and leaves new
connections unanswered, as a network blackhole or a vanished host does. Nothing sent is
ever answered then, statement cancels included.

A cancelled call on such a path used to wait for ever: asyncpg's statement cancel waits for
the server to take its CancelRequest, with no limit, and the connection's release after the
call waits for that cancel (docs/howto/deploy.rst, "How it stops"). The
tests below shut a pool down on a silent path and check that it ends on its own, by the
mechanism meant for it (the unacknowledged cancel terminates the connection), long before a
rescue that would otherwise have to terminate every connection by hand.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend, driver, open_postgres
from trioqueue._runtime import pool as pool_module

pytestmark = pytest.mark.postgres

#: The bounds of the shutdown, made short for the test (seconds).
CONNECT_TIMEOUT = 1.0
GRACE = 0.5
V = 2.0
H = 0.5
ROW_TIMEOUT = 1.0
CLOSE_TIMEOUT = 1.0

#: What the shutdown may take at most by its bounds: the grace, the release write (V) and
#: its unacknowledged cancel, unregistering and its cancel, closing the pool and the
#: listener. The rescue comes at three times that: a generous margin, not a race.
SHUTDOWN_BOUND = GRACE + V + CONNECT_TIMEOUT + ROW_TIMEOUT + 2 * CONNECT_TIMEOUT + 3 * CLOSE_TIMEOUT
RESCUE_AFTER = 3 * SHUTDOWN_BOUND

UNACKNOWLEDGED = "did not acknowledge a statement cancel within 1 s"


class SilenceableProxy:
    """Forwards TCP connections to ``target`` until :meth:`silence` is called."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.silent = False

    def silence(self) -> None:
        self.silent = True

    async def handle(self, client: trio.SocketStream) -> None:
        if self.silent:
            await trio.sleep_forever()  # accepted, and never a word
        server = await trio.open_tcp_stream(*self.target)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, client, server)
            nursery.start_soon(self._pump, server, client)

    async def _pump(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while data := await source.receive_some(65536):
                if not self.silent:  # silent: read and dropped, as a blackhole drops it
                    await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the other direction ended first and closed this stream
        await sink.aclose()


@asynccontextmanager
async def silenceable_proxy(dsn: str) -> AsyncIterator[tuple[SilenceableProxy, str]]:
    """A proxy in front of ``dsn``'s server, and the DSN that goes through it."""
    parts = urlsplit(dsn)
    if parts.hostname is None or parts.port is None:
        pytest.skip(f"the test server's DSN names no TCP host and port: {dsn!r}")
    proxy = SilenceableProxy((parts.hostname, parts.port))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1"))
        proxy.port = listeners[0].socket.getsockname()[1]
        user = f"{parts.username}@" if parts.username else ""
        through = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
        try:
            yield proxy, through
        finally:
            nursery.cancel_scope.cancel()


class Rescue:
    """Terminates every connection of ``backend`` after ``after`` seconds, unless the
    shutdown it watches has ended by then: what an operator's SIGKILL stands for."""

    def __init__(self, backend: PostgresBackend, after: float) -> None:
        self.backend = backend
        self.after = after
        self.fired = False

    async def run(self) -> None:
        await trio.sleep(self.after)
        self.fired = True
        pool = self.backend._driver._pool
        assert pool is not None
        for connection in list(pool._connections):
            connection.terminate()


@pytest.fixture(autouse=True)
def short_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "POOL_ROW_TIMEOUT", ROW_TIMEOUT)
    monkeypatch.setattr(driver, "CLOSE_TIMEOUT", CLOSE_TIMEOUT)


def worker_config(handler: Any) -> trioqueue.WorkerConfig:
    return trioqueue.WorkerConfig(
        handler=handler,
        queue="silent",
        visibility_timeout=V,
        heartbeat_interval=H,
        shutdown_grace=GRACE,
        poll_interval=0.2,
        max_job_duration=60,
    )


async def shut_down_on_a_silent_path(
    postgres_dsn: str, schema: str, handler: Any, started: trio.Event | None
) -> Rescue:
    """Start a pool through the proxy, silence the path, cancel the pool, and close the
    backend; returns the rescue, which says whether it had to step in."""
    async with open_postgres(postgres_dsn, schema=schema) as direct:
        await direct.migrate()
        if started is not None:
            await direct.enqueue("silent", {})
    async with (
        silenceable_proxy(postgres_dsn) as (proxy, dsn),
        trio.open_nursery() as outer,
    ):
        async with open_postgres(dsn, schema=schema, connect_timeout=CONNECT_TIMEOUT) as backend:
            rescue = Rescue(backend, RESCUE_AFTER)
            async with trio.open_nursery() as nursery:
                await nursery.start(trioqueue.run_worker_pool, backend, worker_config(handler))
                if started is not None:
                    await started.wait()
                await trio.sleep(2 * H)  # renewals (or claims) under way
                proxy.silence()
                await trio.sleep(2 * H)  # some of them now sent into the silence
                outer.start_soon(rescue.run)
                nursery.cancel_scope.cancel()  # SIGTERM
        outer.cancel_scope.cancel()  # the backend is closed: the rescue is not needed
    return rescue


async def test_a_pool_with_a_job_in_flight_stops_on_a_silent_path(
    postgres_dsn: str, postgres_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The job's release at the end of the grace is sent into the silence; its write times
    out at V, and the cancel of it is never acknowledged: the connection is terminated."""
    started = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        started.set()
        await trio.sleep_forever()

    caplog.set_level(logging.WARNING, "trioqueue")
    rescue = await shut_down_on_a_silent_path(postgres_dsn, postgres_schema, handler, started)
    assert not rescue.fired
    assert any(UNACKNOWLEDGED in r.getMessage() for r in caplog.records)


async def test_an_idle_pool_stops_on_a_silent_path(
    postgres_dsn: str, postgres_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Claims (every 0.2 s) and beats go into the silence; unregistering times out."""

    async def handler(payload: Any, ctx: JobContext) -> None:
        raise AssertionError("no job was enqueued")  # pragma: no cover

    caplog.set_level(logging.WARNING, "trioqueue")
    rescue = await shut_down_on_a_silent_path(postgres_dsn, postgres_schema, handler, None)
    assert not rescue.fired
    assert any(UNACKNOWLEDGED in r.getMessage() for r in caplog.records)


async def test_closing_gives_every_idle_connection_one_deadline_on_a_silent_path(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """Ten idle connections, none of whose closes is answered: closing ends after one
    ``CLOSE_TIMEOUT`` for them all (then terminates them), not after ten of them."""
    size = 10
    async with (
        silenceable_proxy(postgres_dsn) as (proxy, dsn),
        trio.open_nursery() as outer,
    ):
        async with open_postgres(
            dsn, schema=postgres_schema, max_connections=size, connect_timeout=CONNECT_TIMEOUT
        ) as backend:
            held = trio.Event()
            async with trio.open_nursery() as nursery:
                for _ in range(size):  # every connection of the pool opened, then idle
                    await nursery.start(_hold_one, backend, held)
                held.set()
            proxy.silence()
            # Waiting for checked-out ones (none) and then the closes: two CLOSE_TIMEOUTs at
            # most; closed one after the other it took ten.
            rescue = Rescue(backend, 2 * CLOSE_TIMEOUT + size * CLOSE_TIMEOUT / 2)
            outer.start_soon(rescue.run)
        outer.cancel_scope.cancel()
    assert not rescue.fired


async def _hold_one(
    backend: PostgresBackend,
    held: trio.Event,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Hold a connection of ``backend``, once used, until ``held`` is set (started once it
    is held)."""
    async with backend.acquire() as connection:
        await connection.execute("SELECT 1")
        task_status.started()
        await held.wait()


async def test_a_rollback_sent_into_the_silence_is_bounded(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """A block of ``connection.transaction()`` that raises rolls back, shielded: on a
    silent path the rollback times out after ``CLOSE_TIMEOUT`` and its cancel is never
    acknowledged, so the connection is terminated, and the block's own error comes out."""
    async with (
        silenceable_proxy(postgres_dsn) as (proxy, dsn),
        trio.open_nursery() as outer,
    ):
        async with open_postgres(dsn, schema=postgres_schema, connect_timeout=CONNECT_TIMEOUT) as b:
            rescue = Rescue(b, 3 * (CLOSE_TIMEOUT + CONNECT_TIMEOUT) + 2 * CLOSE_TIMEOUT)

            async def fail_in_a_transaction() -> None:
                async with b.acquire() as connection, connection.transaction():
                    await connection.execute("SELECT 1")
                    proxy.silence()
                    outer.start_soon(rescue.run)
                    raise KeyError("the block failed")

            with pytest.raises(KeyError):
                await fail_in_a_transaction()
        outer.cancel_scope.cancel()
    assert not rescue.fired
