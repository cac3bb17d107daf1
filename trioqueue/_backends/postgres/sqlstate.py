"""asyncpg's errors, read by their SQLSTATE: transient or not, with a hint; refused or not.

The one place that decides whether a failed statement may succeed when tried again (the
worker pool's claim loop retries those and stops on the others; docs/usage.rst). PostgreSQL
says it by the error's SQLSTATE class: the connection (08), a transaction rolled back for
concurrency (40: serialization failures, deadlocks), resources (53: too many connections,
for the server or a role), an operator or the server stopping the statement or the
session (57: statement timeout, shutdown, starting up), the server's own system errors
(58), and a lock timeout (55P03) all pass. Everything else the server says (a missing table
or schema, a missing permission, a value it refuses, a failed login) stays until someone
acts. Errors of the connection itself, before the server said anything (asyncpg's
interface errors, a refused or reset socket, a timeout), are transient.

A narrower question has its own answer here too: was a *connection* refused
(:func:`connection_refused`)? A transactional handler that gets no connection has not failed;
its job is released without charging the attempt (docs/protocol.rst §4). And one more: did
asyncpg refuse to send a statement at all (:func:`never_sent`), as it does on a connection
the server has just ended? Then the statement never ran: a COMMIT refused so is not in
doubt.
"""

from __future__ import annotations

import asyncpg

from trioqueue._errors import BackendError, causes

__all__ = ["MIGRATE_HINT", "backend_error", "connection_refused", "never_sent"]

#: SQLSTATE classes (the first two characters) of errors that pass by themselves.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57", "58"})
#: Single SQLSTATEs that pass by themselves: lock_not_available (a lock_timeout).
TRANSIENT_STATES = frozenset({"55P03"})
#: undefined_table, invalid_schema_name, undefined_column, undefined_function,
#: undefined_object: a schema, table, column or function of ours is missing, so the schema
#: was never migrated, or by an older trioqueue.
UNMIGRATED_STATES = frozenset({"42P01", "3F000", "42703", "42883", "42704"})

MIGRATE_HINT = "has the schema been migrated? run `trioqueue migrate`, or backend.migrate()"

#: Hints for the errors of connecting that also say "does not exist" (or nearly), where
#: migrating would not help: an unknown database, an unknown role, a wrong password.
CONNECT_HINTS = {
    "3D000": "check the database name in the DSN (the path after the host)",
    "28000": "check the user name in the DSN, and that the server lets it connect",
    "28P01": "check the user name and password in the DSN",
}

REFUSED_HINT = "is PostgreSQL running and listening at the host and port in the DSN?"


def backend_error(exc: BaseException) -> BackendError:
    """The :class:`BackendError` that stands for ``exc``, an error of asyncpg or the socket,
    with a hint when there is one to give (docs/cli.rst lists them)."""
    sqlstate = getattr(exc, "sqlstate", None)
    message = f"PostgreSQL: {type(exc).__name__}: {exc}"
    if not isinstance(sqlstate, str):  # no answer from the server: the connection failed
        refused = isinstance(exc, ConnectionRefusedError)
        return BackendError(message, hint=REFUSED_HINT if refused else None)
    transient = sqlstate[:2] in TRANSIENT_CLASSES or sqlstate in TRANSIENT_STATES
    hint = MIGRATE_HINT if sqlstate in UNMIGRATED_STATES else CONNECT_HINTS.get(sqlstate)
    return BackendError(message, transient=transient, hint=hint)


#: SQLSTATEs that mean "no connection for you now", whoever asks: class 08 (connection
#: exception), class 53 (insufficient resources: too many clients, a role's or database's
#: connection limit, out of memory), 57P01 and 57P02 (the server ended the connection:
#: an administrator's terminate, a crash) and 57P03 (cannot_connect_now: starting up,
#: shutting down, in recovery).
_REFUSED_CLASSES = ("08", "53")
_REFUSED_STATES = ("57P01", "57P02", "57P03")


def connection_refused(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) says the server refused a
    connection or could not be reached: infrastructure trouble, which is not a handler's
    failure (docs/protocol.rst §4). So is a pooled connection that the server had ended
    before its first statement, which asyncpg refused to send (:func:`never_sent`).
    Anything else (a server error about a statement, a broken transaction, a bug) is
    False."""
    if never_sent(exc):
        return True
    for seen in causes(exc):
        if isinstance(seen, OSError):  # refused, reset or timed out at the network level
            return True
        state = getattr(seen, "sqlstate", None) if isinstance(seen, asyncpg.PostgresError) else None
        if isinstance(state, str) and (state[:2] in _REFUSED_CLASSES or state in _REFUSED_STATES):
            return True
    return False


#: How asyncpg says it refused to send a statement at all (asyncpg 0.32's
#: ``protocol/coreproto.pyx`` ``_set_state`` and ``_ensure_connected``, and
#: ``Connection._check_open`` and ``Protocol._check_state``). The first three are what a
#: session the server ended looks like: the server's FATAL error was read while the
#: connection was idle (``cannot switch to state N``: 11 prepare, 12 bind and execute, 15 a
#: simple query such as COMMIT), or its close was (``not connected``, ``connection is
#: closed``). tests/postgres/test_postgres_broken_connections.py pins them.
_REFUSED_TO_SEND = (
    "cannot switch to state",
    "not connected",
    "connection is closed",
    "cannot perform operation",
)


def never_sent(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) is asyncpg refusing to send a
    statement: it never reached the server. Its connection is broken and must not be
    reused; a COMMIT refused so committed nothing (docs/postgres.rst,
    "Transactional mode"). False for anything that says the statement was out: a connection lost
    in the middle of it (``ConnectionDoesNotExistError``), an answer of the server, a
    timeout."""
    for seen in causes(exc):
        if isinstance(seen, asyncpg.ConnectionDoesNotExistError):
            return False
        if isinstance(seen, asyncpg.InternalClientError | asyncpg.InterfaceError):
            return str(seen).startswith(_REFUSED_TO_SEND)
    return False
