"""PostgreSQL behind a real PgBouncer, in transaction and in session pooling (docs/pgbouncer.rst).

Each mode gets a PgBouncer of its own, started for this module in front of the test server
(``tests/_pgbouncer_harness.py``), with a few server connections so that clients share them
as in production. The backend opens through it with the options docs/pgbouncer.rst gives
for the mode:

* ``transaction``: the defaults (the pooler is detected) and ``listen_dsn``, the direct DSN;
* ``session``: ``pooling="session"``, LISTEN through PgBouncer itself.

On it run the conformance suite and the scenarios that went wrong under transaction
pooling: reading jobs while another client cancels others, cancelling a running job,
transactional mode, two worker pools draining one queue, wake-ups. Without the
``pgbouncer`` binary these tests are skipped.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import BackendError, JobContext
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._types import Ack
from trioqueue.cli._commands import worker as worker_command
from trioqueue.testing import BackendConformance

from .._pgbouncer_harness import pgbouncer_binary, run_pgbouncer
from .._postgres_harness import wait_until_finished

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        pgbouncer_binary() is None,
        reason="pgbouncer is not installed (Debian: apt-get install pgbouncer)",
    ),
]

Q = "bouncer"
#: Server connections per PgBouncer. Under transaction pooling, fewer than the clients use, so
#: that they share them. Session pooling gives each client connection a server connection
#: of its own for as long as it is open, so there it must be enough for all of them.
SERVER_CONNECTIONS = {"transaction": 4, "session": 50}


@dataclass(frozen=True)
class Bouncer:
    mode: str  #: PgBouncer's pool_mode
    dsn: str  #: the test database through PgBouncer
    direct_dsn: str  #: the test database itself

    def options(self) -> dict[str, Any]:
        """open_postgres's options for this mode, as docs/pgbouncer.rst gives them."""
        if self.mode == "transaction":
            return {"listen_dsn": self.direct_dsn}
        return {"pooling": "session"}


@pytest.fixture(scope="module", params=["transaction", "session"])
def bouncer(request: pytest.FixtureRequest, postgres_dsn: str) -> Iterator[Bouncer]:
    mode: str = request.param
    with run_pgbouncer(postgres_dsn, mode, pool_size=SERVER_CONNECTIONS[mode]) as dsn:
        yield Bouncer(mode, dsn, postgres_dsn)


@asynccontextmanager
async def through(bouncer: Bouncer, schema: str, **options: Any) -> AsyncIterator[PostgresBackend]:
    """A backend on ``schema`` through PgBouncer (migrated through it too)."""
    async with open_postgres(bouncer.dsn, schema=schema, **bouncer.options(), **options) as backend:
        await backend.migrate()
        yield backend


@pytest.fixture
async def backend(bouncer: Bouncer, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    async with through(bouncer, postgres_schema, max_connections=16) as backend:
        yield backend


@pytest.fixture
async def other(bouncer: Bouncer, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    """A second client of the same schema, with connections of its own (another process)."""
    async with through(bouncer, postgres_schema, max_connections=16) as backend:
        yield backend


class TestConformanceThroughPgBouncer(BackendConformance):
    @pytest.fixture
    async def backend(self, bouncer: Bouncer, postgres_schema: str) -> AsyncIterator[Any]:
        async with through(bouncer, postgres_schema) as backend:
            yield backend


def trouble(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings and errors logged: failed statements, retried writes, lost leases."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.WARNING and "max_job_duration is not set" not in record.msg
    ]


def config(handler: Any, **overrides: Any) -> trioqueue.WorkerConfig:
    base: dict[str, Any] = {
        "handler": handler,
        "queue": Q,
        "visibility_timeout": 30,
        "heartbeat_interval": 10,
        "poll_interval": 3600,  # only a NOTIFY wakes these pools
        "shutdown_grace": 1,
    }
    return trioqueue.WorkerConfig(**{**base, **overrides})


async def test_the_mode_is_what_the_docs_say(bouncer: Bouncer, backend: PostgresBackend) -> None:
    """Detected as transaction pooling (PgBouncer's made-up cancel key), or as asked."""
    assert backend._driver.pooling == bouncer.mode


async def test_reading_jobs_while_another_client_cancels_others(
    backend: PostgresBackend, other: PostgresBackend
) -> None:
    """Under transaction pooling, named prepared statements crossed between clients: a
    reader's statement ran another client's cancel, or failed. Each client here reads or
    cancels on connections of its own, sharing PgBouncer's few server connections."""
    reads = await backend.enqueue_many(Q, [{"read": n} for n in range(20)])
    cancels = await backend.enqueue_many(Q, [{"cancel": n} for n in range(20)])
    seen: Counter[str] = Counter()

    async def read() -> None:
        for _ in range(5):
            for job_id in reads:
                seen[(await backend.get_job(job_id)).status] += 1

    async def cancel(job_ids: list[int]) -> None:
        for job_id in job_ids:
            assert await other.cancel(job_id) is True

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(read)
        nursery.start_soon(cancel, cancels[::2])
        nursery.start_soon(cancel, cancels[1::2])
    assert seen == {"ready": 3 * 5 * 20}
    infos = {info.id: info for info in await backend.list_jobs(Q, limit=100)}
    assert {infos[job_id].status for job_id in reads} == {"ready"}
    assert {(infos[i].status, infos[i].last_error) for i in cancels} == {
        ("failed", "cancelled before it ran")
    }


async def test_cancel_reaches_a_running_handler(
    backend: PostgresBackend, other: PostgresBackend
) -> None:
    """The cancel NOTIFY reaches the pool's listener (H = 30 s: no renewal stops it first)."""
    started = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        started.set()
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        cfg = config(handler, visibility_timeout=90, heartbeat_interval=30)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job_id = await other.enqueue(Q, "forever")
        with trio.fail_after(10):
            await started.wait()
        assert await other.cancel(job_id) is True
        [info] = await wait_until_finished(other, [job_id], within=8)
        nursery.cancel_scope.cancel()
    assert info.status == "failed"
    assert info.last_error is not None and info.last_error.startswith("cancelled")
    assert info.attempts == 1


async def test_transactional_handlers_commit_their_writes_once(
    backend: PostgresBackend, other: PostgresBackend, caplog: pytest.LogCaptureFixture
) -> None:
    effects = f'"{backend.schema}".effects'
    async with other.acquire() as connection:
        await connection.execute(f"CREATE TABLE {effects} (job_id bigint NOT NULL)")

    async def handler(payload: Any, ctx: JobContext) -> None:
        await ctx.connection.execute(f"INSERT INTO {effects} VALUES ($1)", ctx.job_id)

    cfg = trioqueue.transactional_worker_config(
        4,
        handler,
        queue=Q,
        batch_size=5,
        visibility_timeout=30,
        heartbeat_interval=1,
        poll_interval=1,
        shutdown_grace=1,
    )
    caplog.set_level(logging.WARNING, logger="trioqueue")
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        ids = await other.enqueue_many(Q, list(range(100)))
        infos = await wait_until_finished(other, ids, within=60)
        nursery.cancel_scope.cancel()
    assert Counter(i.status for i in infos) == {"succeeded": 100}
    async with other.acquire() as connection:
        rows = await connection.fetch(f"SELECT job_id, count(*) AS n FROM {effects} GROUP BY 1")
    assert {row["job_id"]: row["n"] for row in rows} == dict.fromkeys(ids, 1)
    assert trouble(caplog) == []


async def test_two_worker_pools_drain_one_queue(
    backend: PostgresBackend, other: PostgresBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """Two pools, each with its backend and connections (as two processes would have):
    every job runs once and succeeds."""
    runs: Counter[int] = Counter()

    async def handler(payload: Any, ctx: JobContext) -> None:
        runs[ctx.job_id] += 1
        await trio.sleep(0.01)  # so that renewals interleave with claims and acks

    cfg = config(handler, concurrency=4, batch_size=5, heartbeat_interval=1, poll_interval=1)
    caplog.set_level(logging.WARNING, logger="trioqueue")
    ids = await backend.enqueue_many(Q, list(range(300)))
    await other.counts()  # processes have histories of their own
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await nursery.start(trioqueue.run_worker_pool, other, cfg)
        infos = await wait_until_finished(backend, ids, within=60)
        nursery.cancel_scope.cancel()
    assert Counter(i.status for i in infos) == {"succeeded": 300}
    assert runs == dict.fromkeys(ids, 1)
    assert trouble(caplog) == []


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
async def test_wake_ups_without_a_listen_dsn_fall_back_to_polling(
    bouncer: Bouncer, postgres_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Under transaction pooling LISTEN cannot work through PgBouncer: without listen_dsn no
    LISTEN is sent, it says so once, and polling finds the work."""
    done = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        done.set()

    caplog.set_level(logging.INFO, logger="trioqueue")
    async with open_postgres(bouncer.dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        cfg = config(handler, poll_interval=0.2)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            async with backend.listen(Q, "another listener"):  # a second one says nothing
                pass
            await backend.enqueue(Q, "found by polling")
            with trio.fail_after(10):
                await done.wait()
            assert backend.statistics()["listeners"] == 0
            nursery.cancel_scope.cancel()
    fallbacks = [r for r in caplog.records if "fall back to polling" in r.getMessage()]
    assert len(fallbacks) == 1
    assert fallbacks[0].levelno == logging.WARNING
    assert "listen_dsn" in fallbacks[0].getMessage()
    assert not [r for r in caplog.records if "listening for notices failed" in r.getMessage()]


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
async def test_the_cli_worker_listens_on_the_listen_dsn(
    bouncer: Bouncer, postgres_schema: str
) -> None:
    """``--listen-dsn`` / TRIOQUEUE_LISTEN_DSN: only the NOTIFY can wake this pool (poll 1 h)."""
    done = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        done.set()

    async with open_postgres(bouncer.direct_dsn, schema=postgres_schema) as direct:
        await direct.migrate()
        async with trio.open_nursery() as nursery:
            serve = functools.partial(worker_command.serve_worker, listen_dsn=bouncer.direct_dsn)
            await nursery.start(serve, bouncer.dsn, postgres_schema, config(handler))
            await direct.enqueue(Q, "wake up")
            with trio.fail_after(10):
                await done.wait()
            nursery.cancel_scope.cancel()


async def test_a_server_setting_pgbouncer_refuses_is_explained(
    bouncer: Bouncer, postgres_schema: str
) -> None:
    with pytest.raises(BackendError, match="ignore_startup_parameters"):
        async with open_postgres(bouncer.dsn + "?search_path=elsewhere", schema=postgres_schema):
            pass  # pragma: no cover


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
async def test_wait_for_without_a_listen_dsn_polls(bouncer: Bouncer, postgres_schema: str) -> None:
    """Nothing can be heard through a transaction pooler: wait_for opens no LISTEN, marks
    nothing (a finish sends no NOTIFY nobody hears), and its quick poll sees the finish."""
    async with open_postgres(bouncer.dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        job_id = await backend.enqueue(Q, "x")
        [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=30)
        got: list[trioqueue.JobInfo] = []

        async def waiter() -> None:
            got.append(await backend.wait_for(job_id, timeout=30))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            with trio.fail_after(10):
                while not backend.statistics()["calls"]["get_job"]:  # it has read once
                    await trio.sleep(0.01)
            assert got == []
            await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        assert [info.status for info in got] == ["succeeded"]
        assert backend.statistics()["listeners"] == 0
        async with backend.acquire() as connection:
            marked = await connection.fetchval(
                f'SELECT awaited FROM "{postgres_schema}".jobs WHERE id = $1', job_id
            )
        assert marked is False
