"""The driver's connection pool (``trioqueue/_backends/postgres/connections.py``) on a real server, and how
the driver reads DSNs and gives up on a server that does not answer.

What the pool promises: the driver's own statements cost no extra round trip (no session
reset after a claim, a renewal or an ack); connections lent to callers come back clean (their
session settings and open transactions do not leak to the next user); callers beyond the
pool's size wait their turn; a connection the server closed is replaced (test_postgres_backend.py).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trioqueue import cli
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.driver import (
    DEFAULT_CONNECT_TIMEOUT,
    MAX_CACHED_STATEMENT_BYTES,
    Dsn,
    DsnError,
    mask_dsn,
    parse_dsn,
)
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._core.wire import RenewItem
from trioqueue._errors import BackendError

pytestmark = pytest.mark.postgres

Q = "drv"

LAST_QUERIES = (
    "SELECT query FROM pg_stat_activity "
    "WHERE application_name = $1 AND pid <> pg_backend_pid() AND state = 'idle'"
)


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=2) as backend:
        await backend.migrate()
        yield backend


def test_every_named_query_fits_the_statement_cache() -> None:
    """Rendered for the longest schema name, no named query is too long for asyncpg to
    keep prepared (a longer one would be prepared again on every call)."""
    longest = "s" * 63
    sizes = {name: len(render(sql, longest).encode()) for name, sql in QUERIES.items()}
    assert max(sizes.values()) <= MAX_CACHED_STATEMENT_BYTES / 2, sizes


async def test_the_claim_statement_is_prepared_once(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """Claims on one connection reuse one prepared claim statement."""
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=1) as backend:
        await backend.migrate()
        for _ in range(3):
            await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
        async with backend.acquire() as connection:
            plans = await connection.fetch(
                "SELECT generic_plans + custom_plans AS runs FROM pg_prepared_statements "
                "WHERE statement = $1",
                render(QUERIES["claim"], postgres_schema),
            )
    assert [row["runs"] for row in plans] == [3]


async def test_driver_statements_leave_no_session_reset_behind(backend: PostgresBackend) -> None:
    """A claim's connection goes back to the pool as it is: its last statement is the claim."""
    await backend.enqueue(Q, "x")
    async with backend.acquire() as watcher:  # holds one connection: the claim gets the other
        [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
        rows = await watcher.fetch(LAST_QUERIES, f"trioqueue:{backend.schema}")
    [query] = [row["query"] for row in rows]
    assert query[:200] == render(QUERIES["claim"], backend.schema)[:200]  # (cut at 1 KiB)
    assert "RESET ALL" not in query
    assert claimed.job.payload == "x"


async def test_lent_connection_is_reset_when_it_comes_back(backend: PostgresBackend) -> None:
    async with backend.acquire() as watcher:  # so that the other connection is the lent one
        async with backend.acquire() as lent:
            await lent.execute("SET statement_timeout = '4321ms'")
            await lent.execute("BEGIN")  # left open on purpose
            await lent.execute("SELECT 1")
        [query] = [
            row["query"] for row in await watcher.fetch(LAST_QUERIES, f"trioqueue:{backend.schema}")
        ]
        assert "RESET ALL" in query
        async with backend.acquire() as again:  # the only idle connection: the lent one
            assert await again.fetchval("SHOW statement_timeout") == "0"
            assert not again.is_in_transaction()


async def test_callers_beyond_the_pool_size_wait_their_turn(backend: PostgresBackend) -> None:
    """Two connections, eight concurrent operations, one of them held a while: all succeed."""
    released = trio.Event()

    async def hold_one(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with backend.acquire() as connection:
            await connection.execute("SELECT 1")
            task_status.started()  # one connection is out: the eight share the other
            await released.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(hold_one)
        async with trio.open_nursery() as producers:
            for n in range(8):
                producers.start_soon(backend.enqueue, Q, n)
        assert backend.statistics()["peak_connections_in_use"] == 2
        released.set()
    assert (await backend.counts())[Q] == {"ready": 8}
    assert backend.statistics()["connections_in_use"] == 0


async def test_a_caller_cancelled_while_waiting_for_a_connection_takes_no_place(
    backend: PostgresBackend,
) -> None:
    async with backend.acquire(), backend.acquire():  # both connections out
        with trio.move_on_after(0.2) as waited:
            await backend.enqueue(Q, "never")
        assert waited.cancelled_caught
        assert backend.statistics()["connections_in_use"] == 2
    # The places are all free again: two callers at once get one each.
    async with trio.open_nursery() as nursery:
        for n in range(2):
            nursery.start_soon(backend.enqueue, Q, n)
    assert (await backend.counts())[Q] == {"ready": 2}
    assert backend.statistics()["connections_in_use"] == 0


# -- DSNs (no server needed) ----------------------------------------------------------------

MALFORMED_DSNS = [
    pytest.param(
        "postgresql://app:s3cret@127.0.0.1:99999/db", "port 99999 is out of range", id="port-99999"
    ),
    pytest.param("postgresql://app:s3cret@127.0.0.1:0/db", "port 0 is out of range", id="port-0"),
    pytest.param(
        "postgresql://app:s3cret@127.0.0.1:abc/db", "port 'abc' is not a number", id="abc"
    ),
    pytest.param("postgresql://app:s3cret@[::1/db", "unclosed '['", id="unclosed-ipv6"),
    pytest.param("postgresql://app:s3cret@[::1]x/db", "unexpected 'x'", id="after-ipv6"),
    pytest.param("postgresql://app:s3cret@h1:5432,h2:70000/db", "port 70000", id="second-host"),
    pytest.param("postgresql://app:s3cret@h/db?port=99999", "port 99999", id="port-parameter"),
    pytest.param("postgresql://app:s3cret@h/db?sslmode=sometimes", "sslmode", id="sslmode"),
    pytest.param("mysql://app:s3cret@h/db", "scheme", id="scheme"),
    pytest.param("host=h password=s3cret", "scheme", id="keyword-form"),
    pytest.param("postgresql://app:s3cret@h/db?connect_timeout=soon", "connect_timeout", id="ct"),
    pytest.param("postgresql://app:s3cret@h/db?connect_timeout=-1", "connect_timeout", id="ct<0"),
]


@pytest.mark.parametrize(("dsn", "problem"), MALFORMED_DSNS)
async def test_a_malformed_dsn_is_one_clear_error_naming_it(dsn: str, problem: str) -> None:
    """A ValueError (the CLI's exit 2) that names the DSN with its password masked, before
    anything connects."""
    with pytest.raises(DsnError) as caught:
        async with open_postgres(dsn):
            pass  # pragma: no cover
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert problem in message
    assert mask_dsn(dsn) in message
    assert "s3cret" not in message


@pytest.mark.parametrize(("dsn", "problem"), MALFORMED_DSNS[:4])
def test_the_cli_reports_a_malformed_dsn_in_one_line(
    dsn: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", "--dsn", dsn]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert problem in err and "s3cret" not in err


@pytest.mark.parametrize(
    ("dsn", "masked"),
    [
        ("postgresql://app:s3cret@h/db", "postgresql://app:***@h/db"),
        ("postgresql://app:@h/db", "postgresql://app:***@h/db"),
        ("postgresql://app@h/db?password=s3cret&x=1", "postgresql://app@h/db?password=***&x=1"),
        ("postgresql://app:s3cret@[::1/db", "postgresql://app:***@[::1/db"),
        ("host=h password=s3cret user=u", "host=h password=*** user=u"),
        ("postgresql://h/db", "postgresql://h/db"),
    ],
)
def test_mask_dsn(dsn: str, masked: str) -> None:
    assert mask_dsn(dsn) == masked


def test_connect_timeout_comes_from_the_argument_the_dsn_or_the_default() -> None:
    dsn = "postgresql://u@h/db?application_name=x&connect_timeout=2.5#f"
    assert parse_dsn(dsn) == Dsn("postgresql://u@h/db?application_name=x#f", dsn, 2.5)
    assert parse_dsn(dsn, 7.0).connect_timeout == 7.0
    assert parse_dsn("postgresql://u@h/db?connect_timeout=0").connect_timeout is None  # libpq
    assert parse_dsn("postgresql://u@h/db").connect_timeout == DEFAULT_CONNECT_TIMEOUT == 10.0


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1, ValueError), (math.nan, ValueError), (10**400, ValueError),
     ("5", TypeError), (True, TypeError)],
)  # fmt: skip
async def test_a_bad_connect_timeout_argument_is_refused(
    value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="connect_timeout"):
        async with open_postgres("postgresql://u@h/db", connect_timeout=value):  # type: ignore[arg-type]
            pass  # pragma: no cover


async def test_a_bad_pooling_argument_is_refused() -> None:
    with pytest.raises(ValueError, match="statement pooling is not supported"):
        async with open_postgres("postgresql://u@h/db", pooling="statement"):  # type: ignore[arg-type]
            pass  # pragma: no cover
    with pytest.raises(DsnError, match="port 99999"):
        async with open_postgres("postgresql://u@h/db", listen_dsn="postgresql://u@h:99999/db"):
            pass  # pragma: no cover


# -- a server that never answers ------------------------------------------------------------


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A port on 127.0.0.1 that accepts connections and never says a word."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[trio.socket.SocketType] = []

    async def accept() -> None:
        while True:
            connection, _ = await listener.accept()
            accepted.append(connection)  # kept open, never read nor written

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        try:
            yield listener.getsockname()[1]
        finally:
            nursery.cancel_scope.cancel()
            for connection in accepted:
                connection.close()
            listener.close()


@pytest.mark.parametrize("where", ["dsn", "argument"])
async def test_a_server_that_never_answers_is_given_up_on_after_connect_timeout(
    where: str,
) -> None:
    """Not asyncpg's 60 s: the DSN's connect_timeout, or the argument's (here 0.5 s)."""
    async with silent_server() as port:
        dsn = f"postgresql://app:s3cret@127.0.0.1:{port}/db"
        options: dict[str, Any] = {}
        if where == "dsn":
            dsn += "?connect_timeout=0.5"
        else:
            options["connect_timeout"] = 0.5
        with trio.fail_after(20), pytest.raises(BackendError) as caught:
            async with open_postgres(dsn, **options):
                pass  # pragma: no cover
    message = str(caught.value)
    assert "within 0.5 s (connect_timeout)" in message
    assert f"127.0.0.1:{port}" in message and "s3cret" not in message


# -- pooling, on a direct server --------------------------------------------------------------

PREPARED = "SELECT name FROM pg_prepared_statements ORDER BY name"


async def test_a_direct_connection_is_detected_as_keeping_its_session(
    backend: PostgresBackend,
) -> None:
    assert backend._driver.pooling == "session"


@pytest.mark.parametrize("pooling", ["transaction", "session"])
async def test_transaction_pooling_prepares_no_named_statement_and_resets_no_session(
    postgres_dsn: str, postgres_schema: str, pooling: str
) -> None:
    """Nothing of ours may stay on a server connection a transaction pooler shares: the
    one pooled connection here has run every kind of statement, and holds no named one. A
    lent connection's session is not reset (it would reach another client's); with session
    pooling both are as before."""
    async with open_postgres(
        postgres_dsn,
        schema=postgres_schema,
        max_connections=1,
        pooling=pooling,  # type: ignore[arg-type]
    ) as backend:
        await backend.migrate()
        [job_id] = await backend.enqueue_many(Q, ["x"])
        await backend.get_job(job_id)
        [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
        await backend.renew([RenewItem(job_id, claimed.job.claim_seq, 0.5)], visibility_timeout=60)
        assert await backend.cancel(job_id)
        async with backend.acquire() as connection:
            named = [row["name"] for row in await connection.fetch(PREPARED)]
            await connection.execute("SET statement_timeout = '4321ms'")
        async with backend.acquire() as connection:  # the same one: the pool has one
            timeout = await connection.fetchval("SHOW statement_timeout")
    if pooling == "transaction":
        assert (named, timeout) == ([], "4321ms")
    else:
        assert named and all(name.startswith("__asyncpg_stmt_") for name in named)
        assert timeout == "0"
