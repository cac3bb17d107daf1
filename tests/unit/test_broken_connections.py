"""A connection whose protocol state asyncpg finds broken is terminated at once.

The server ended its session a moment ago, and asyncpg read its FATAL error while the
connection was idle: the next statement raises ``InternalClientError`` without being
sent. The driver terminates that connection in the same step, so that no reset puts it
back in the pool (behind a transaction pooler the reset sends nothing and would not
notice). The real server's side: tests/postgres/test_postgres_broken_connections.py.
"""

from __future__ import annotations

import asyncpg
import pytest

from trioqueue._backends.postgres.driver import _terminated_if_broken


class _Connection:
    def __init__(self) -> None:
        self.terminated = False

    def terminate(self) -> None:
        self.terminated = True


async def _refused() -> None:
    raise asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )


async def _fails() -> None:
    raise asyncpg.exceptions.UniqueViolationError("duplicate key value")


async def _answers() -> int:
    return 7


async def test_a_broken_connection_is_terminated_and_the_error_goes_on() -> None:
    connection = _Connection()
    with pytest.raises(asyncpg.InternalClientError):
        await _terminated_if_broken(connection, _refused())
    assert connection.terminated


async def test_other_outcomes_leave_the_connection_alone() -> None:
    connection = _Connection()
    assert await _terminated_if_broken(connection, _answers()) == 7
    with pytest.raises(asyncpg.exceptions.UniqueViolationError):
        await _terminated_if_broken(connection, _fails())
    assert not connection.terminated
