"""Bad input and failures that retrying cannot fix, on PostgreSQL (issue 7).

Each test that needs a server runs in a schema of its own.
"""

from __future__ import annotations

import re

import asyncpg
import pytest
import trio

import trioqueue
from tests.unit.test_bad_input import assert_unsafe_names_refused
from trioqueue import BackendError
from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.sqlstate import MIGRATE_HINT, backend_error
from trioqueue.cli import main

# -- values no backend can take ---------------------------------------------------------


@pytest.mark.postgres
async def test_prune_refuses_an_age_beyond_float_range(backend: PostgresBackend) -> None:
    with pytest.raises(ValueError, match="older_than must be None or a number >= 0"):
        await backend.prune(10**400)


@pytest.mark.postgres
def test_cli_enqueue_refuses_a_dedup_key_past_the_limit_in_one_line(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, a 3 KB key reached the unique index: ProgramLimitExceededError, exit 1."""
    database = ["--dsn", postgres_dsn, "--schema", postgres_schema]
    assert main([*database, "migrate"]) == 0
    key = "k" * 3000
    code = main([*database, "enqueue", "q", '{"n": 1}', "--dedup-key", key])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "trioqueue enqueue: error: dedup_key must be at most 1024 bytes of UTF-8, not 3000 "
        "(hash a longer key)\n"
    )
    assert main([*database, "jobs"]) == 0
    assert '"n"' not in capsys.readouterr().out  # nothing written


@pytest.mark.postgres
async def test_unsafe_queue_and_schedule_names_are_refused_and_nothing_is_written(
    backend: PostgresBackend,
) -> None:
    """The same checks as on the memory backend (issue 22, item 8): one shared validation."""
    await assert_unsafe_names_refused(backend)


# -- which errors pass by themselves (no server needed) -----------------------------------

TRANSIENT = [
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
    asyncpg.exceptions.ConnectionFailureError("connection failure"),
    asyncpg.exceptions.SerializationError("could not serialize access"),
    asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
    asyncpg.exceptions.TooManyConnectionsError("too many connections for role"),
    asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    asyncpg.exceptions.LockNotAvailableError("canceling statement due to lock timeout"),
    asyncpg.exceptions.InterfaceError("connection is closed"),
    asyncpg.exceptions.InternalClientError("unexpected connection state"),
    ConnectionRefusedError("connection refused"),
    TimeoutError(),
]

LASTING = [
    asyncpg.exceptions.InsufficientPrivilegeError("permission denied for table jobs"),
    asyncpg.exceptions.DataError("invalid input for query argument $4"),
    asyncpg.exceptions.NumericValueOutOfRangeError("value out of range"),
    asyncpg.exceptions.InvalidCatalogNameError('database "nope" does not exist'),
    asyncpg.exceptions.InvalidPasswordError("password authentication failed"),
    asyncpg.exceptions.ProgramLimitExceededError("index row size exceeds btree maximum"),
]

UNMIGRATED = [
    asyncpg.exceptions.UndefinedTableError('relation "s.jobs" does not exist'),
    asyncpg.exceptions.InvalidSchemaNameError('schema "s" does not exist'),
    asyncpg.exceptions.UndefinedColumnError('column "worker_id" does not exist'),
]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_connection_and_concurrency_trouble_is_transient(exc: Exception) -> None:
    error = backend_error(exc)
    assert error.transient
    assert str(error) == f"PostgreSQL: {type(exc).__name__}: {exc}"


@pytest.mark.parametrize("exc", LASTING, ids=lambda e: type(e).__name__)
def test_what_only_someones_action_fixes_is_not_transient(exc: Exception) -> None:
    error = backend_error(exc)
    assert not error.transient
    assert error.hint is None or "migrate" not in error.hint


@pytest.mark.parametrize(
    ("exc", "hint"),
    [
        (ConnectionRefusedError("connection refused"), "is PostgreSQL running"),
        (asyncpg.exceptions.InvalidCatalogNameError('database "x" does not exist'), "database"),
        (asyncpg.exceptions.InvalidPasswordError("password authentication failed"), "password"),
        (asyncpg.exceptions.DeadlockDetectedError("deadlock detected"), None),
        (TimeoutError(), None),
    ],
    ids=lambda value: type(value).__name__,
)
def test_errors_of_connecting_hint_at_the_dsn_not_at_migrating(
    exc: Exception, hint: str | None
) -> None:
    given = backend_error(exc).hint
    if hint is None:
        assert given is None
    else:
        assert given is not None and hint in given and "migrate" not in given


@pytest.mark.parametrize("exc", UNMIGRATED, ids=lambda e: type(e).__name__)
def test_a_missing_table_schema_or_column_hints_at_migrate(exc: Exception) -> None:
    error = backend_error(exc)
    assert (error.transient, error.hint) == (False, MIGRATE_HINT)
    assert "trioqueue migrate" in MIGRATE_HINT


def test_a_backend_error_is_transient_unless_told() -> None:
    error = BackendError("injected")
    assert (error.transient, error.hint) == (True, None)


# -- a pool on a schema that was never migrated -------------------------------------------


@pytest.mark.postgres
async def test_a_pool_on_an_unmigrated_schema_stops_at_once_with_the_hint(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        raise AssertionError("nothing to run")

    config = trioqueue.WorkerConfig(handler=handler, queue="q", poll_interval=0.1)
    async with trioqueue.open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        # A guard against hanging, not a timed assert: before, the pool warned forever.
        with trio.fail_after(30), pytest.raises(BackendError) as info:
            await trioqueue.run_worker_pool(backend, config)
        calls = backend.statistics()["calls"]["claim"]
    message = str(info.value)
    assert info.value.transient is False
    assert "claiming from queue 'q' failed, and trying again cannot help" in message
    assert "UndefinedTableError" in message
    assert message.endswith(f"({MIGRATE_HINT})")
    assert calls == 1  # stopped at the first failure, not after a round of retries


# -- schemas trioqueue must not use (issue 22, item 11) ----------------------------------

RESERVED_SCHEMAS = {
    "": "schema must not be empty (leave it out for the default, trioqueue)",
    "information_schema": "schema information_schema is PostgreSQL's own: choose a schema of your own",
    "pg_catalog": "schema names starting with 'pg_' are reserved (PostgreSQL's own), not 'pg_catalog'",
    "pg_temp": "schema names starting with 'pg_' are reserved (PostgreSQL's own), not 'pg_temp'",
}


@pytest.mark.parametrize(("schema", "message"), RESERVED_SCHEMAS.items())
async def test_open_postgres_refuses_a_reserved_or_empty_schema(schema: str, message: str) -> None:
    """Refused before connecting (this DSN would refuse a connection)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        async with trioqueue.open_postgres("postgresql://127.0.0.1:1/x", schema=schema):
            pass


@pytest.mark.parametrize(("schema", "message"), RESERVED_SCHEMAS.items())
def test_cli_refuses_a_reserved_or_empty_schema_before_connecting(
    schema: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--schema information_schema migrate`` made trioqueue's tables in PostgreSQL's own
    schema, and ``--schema ''`` silently used the default one. Now both are refused before
    connecting (this DSN would refuse a connection: exit 1), so nothing can be written."""
    nowhere = "postgresql://127.0.0.1:1/x"
    code = main(["--dsn", nowhere, "--schema", schema, "migrate"])
    assert (code, capsys.readouterr().err) == (2, f"trioqueue migrate: error: {message}\n")
    code = main(["jobs", "--dsn", nowhere, "--schema", schema])
    assert (code, capsys.readouterr().err) == (2, f"trioqueue jobs: error: {message}\n")


@pytest.mark.postgres
def test_cli_enqueue_refuses_a_cr_in_the_queue_name_in_one_line(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``trioqueue enqueue $'a\\rb' '{}'`` put the overview into an endless reload loop."""
    database = ["--dsn", postgres_dsn, "--schema", postgres_schema]
    assert main([*database, "migrate"]) == 0
    capsys.readouterr()
    code = main([*database, "enqueue", "a\rb", "{}"])
    assert (code, capsys.readouterr().err) == (
        2,
        "trioqueue enqueue: error: queue must not contain control, bidirectional formatting "
        "or invisible characters (U+000D at position 1): they show differently, or not at "
        "all, in terminals, logs and the dashboard\n",
    )
    assert main([*database, "jobs"]) == 0
    assert capsys.readouterr().out == "no jobs\n"  # nothing written
