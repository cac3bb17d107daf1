"""asyncpg's errors as :class:`~trioqueue.BackendError`: transient or not, with a hint.

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
"""

from __future__ import annotations

from trioqueue._errors import BackendError

__all__ = ["MIGRATE_HINT", "backend_error"]

#: SQLSTATE classes (the first two characters) of errors that pass by themselves.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57", "58"})
#: Single SQLSTATEs that pass by themselves: lock_not_available (a lock_timeout).
TRANSIENT_STATES = frozenset({"55P03"})
#: undefined_table, invalid_schema_name, undefined_column: the schema was never migrated,
#: or by an older trioqueue.
UNMIGRATED_STATES = frozenset({"42P01", "3F000", "42703"})

MIGRATE_HINT = "has the schema been migrated? run `trioqueue migrate`, or backend.migrate()"


def backend_error(exc: BaseException) -> BackendError:
    """The :class:`BackendError` that stands for ``exc``, an error of asyncpg or the socket."""
    sqlstate = getattr(exc, "sqlstate", None)
    message = f"PostgreSQL: {type(exc).__name__}: {exc}"
    if not isinstance(sqlstate, str):  # no answer from the server: the connection failed
        return BackendError(message)
    transient = sqlstate[:2] in TRANSIENT_CLASSES or sqlstate in TRANSIENT_STATES
    hint = MIGRATE_HINT if sqlstate in UNMIGRATED_STATES else None
    return BackendError(message, transient=transient, hint=hint)
