"""PostgreSQL fixtures: a server for the session, a fresh schema for each test.

The server is, in order of preference: the DSN in ``TRIOQUEUE_TEST_DSN``; the local server
at 127.0.0.1:5432 (user ``postgres``, database ``test``) if it answers; else an embedded
server started with ``pgserver`` in a temporary directory and stopped at the end of the
session. Without any of them, PostgreSQL tests are skipped.

Test connections run with ``synchronous_commit=off``: durability is not under test, and a
flushed commit costs milliseconds on a small machine, which would dominate the suite.

Fixtures here are synchronous: pytest-trio runs each test in its own ``trio.run``, so
nothing asynchronous can span the session. Dropping a schema's tables takes tens of
milliseconds of DDL, so a janitor thread drops each test's schema while the next tests
run; the session waits for it at the end and fails if a drop failed. (Migrating schemas
ahead on a thread as well was tried: on a 2-core machine it made the suite slower.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import secrets
import threading
from collections.abc import Iterator

import asyncpg
import pytest

from trioqueue._backends.postgres.embedded import EmbeddedPostgresError, fast_commits, find_postgres


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN of a PostgreSQL server for the whole session."""
    with contextlib.ExitStack() as stack:
        try:
            dsn, _ = stack.enter_context(find_postgres(os.environ.get("TRIOQUEUE_TEST_DSN")))
        except EmbeddedPostgresError as exc:
            pytest.skip(f"no PostgreSQL (set TRIOQUEUE_TEST_DSN or run one on :5432): {exc}")
        yield fast_commits(dsn)


class Janitor:
    """Drops schemas on a thread of its own, on one connection, in the order given."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._schemas: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="schema-janitor", daemon=True)
        self._thread.start()

    def drop(self, schema: str) -> None:
        """Drop ``schema`` and everything in it, soon (before the session ends)."""
        self._schemas.put(schema)

    def close(self) -> None:
        """Wait until every schema handed over is dropped; raise the first failure."""
        self._schemas.put(None)
        self._thread.join()
        if self._errors:
            raise self._errors[0]

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._errors.append(exc)

    async def _main(self) -> None:
        # A lingering session holding a lock would otherwise stall the drop, and the session.
        connection = await asyncpg.connect(
            self._dsn, timeout=10, server_settings={"lock_timeout": "10s"}
        )
        try:
            while (schema := await asyncio.to_thread(self._schemas.get)) is not None:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()


@pytest.fixture(scope="session")
def postgres_janitor(postgres_dsn: str) -> Iterator[Janitor]:
    """Drops the session's test schemas in the background."""
    janitor = Janitor(postgres_dsn)
    yield janitor
    janitor.close()


@pytest.fixture
def postgres_schema(postgres_janitor: Janitor) -> Iterator[str]:
    """A fresh schema name (``tq_test_<hex>``), not created yet; dropped afterwards."""
    schema = f"tq_test_{secrets.token_hex(6)}"
    yield schema
    postgres_janitor.drop(schema)
