"""Infrastructure trouble is not the handler's failure (docs/protocol.rst §4; issue 7 item 4).

A transactional handler whose database connection the server refuses (too many clients, a
role's connection limit) is retried within its lease and, failing that, released without
charging the attempt. Here: which errors count as refused connections, how the one outcome
is decided, and whole pools on the memory backend under MockClock, through a transactional
fake whose connections can be refused. The same on real PostgreSQL, with a role's
connection limit, is in ``test_postgres_claims.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder
from trioqueue._backends.interface import ConnectionUnavailable
from trioqueue._backends.memory import MemoryBackend
from trioqueue._backends.postgres.sqlstate import connection_refused
from trioqueue._core.outcome import Outcome, decide, no_connection_message
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue._errors import BackendError
from trioqueue._types import Ack

# -- which errors are refused connections ---------------------------------------------------


def wrapped(exc: BaseException) -> BackendError:
    """``exc`` as the driver hands it on: a BackendError raised from it."""
    try:
        raise BackendError(f"PostgreSQL: {exc}") from exc
    except BackendError as error:
        return error


REFUSED = [
    pytest.param(asyncpg.TooManyConnectionsError("too many clients"), id="too-many-clients"),
    pytest.param(
        asyncpg.TooManyConnectionsError('too many connections for role "r"'), id="role-limit"
    ),
    pytest.param(asyncpg.CannotConnectNowError("the database system is starting up"), id="57P03"),
    pytest.param(asyncpg.ConnectionFailureError("connection failure"), id="08006"),
    pytest.param(asyncpg.AdminShutdownError("terminating connection"), id="57P01"),
    pytest.param(ConnectionRefusedError(111, "Connection refused"), id="tcp-refused"),
    pytest.param(TimeoutError(), id="connect-timeout"),
]

NOT_REFUSED = [
    pytest.param(asyncpg.UniqueViolationError("duplicate key"), id="unique-violation"),
    pytest.param(asyncpg.InsufficientPrivilegeError("permission denied"), id="privilege"),
    pytest.param(asyncpg.PostgresSyntaxError("syntax error"), id="syntax"),
    pytest.param(asyncpg.QueryCanceledError("canceling statement"), id="57014"),
    pytest.param(asyncpg.InvalidAuthorizationSpecificationError("no such role"), id="28000"),
    pytest.param(RuntimeError("a bug"), id="bug"),
    pytest.param(BackendError("injected error in claim"), id="bare-backend-error"),
]


@pytest.mark.parametrize("exc", REFUSED)
def test_refused_connections_are_infrastructure(exc: BaseException) -> None:
    assert connection_refused(exc)
    assert connection_refused(wrapped(exc))


@pytest.mark.parametrize("exc", NOT_REFUSED)
def test_other_errors_are_not(exc: BaseException) -> None:
    assert not connection_refused(exc)
    assert not connection_refused(wrapped(exc))


# -- the one outcome ------------------------------------------------------------------------


def outcome(stop: StopReason | None, *, attempt: int = 1, max_attempts: int = 1) -> Outcome:
    return decide(
        job_stop=None,
        batch_stop=stop,
        error=None,
        attempt=attempt,
        max_attempts=max_attempts,
        max_job_duration=1.0,
        no_connection="too many clients",
    )


def test_no_connection_releases_uncharged_even_on_the_final_attempt() -> None:
    released = Outcome(OutcomeKind.RELEASE, no_connection_message("too many clients"))
    assert outcome(None) == released
    assert outcome(StopReason.DURATION) == released  # D passed while it waited: still ours
    assert outcome(None, attempt=3, max_attempts=3) == released


def test_no_connection_leaves_cancel_and_lease_loss_alone() -> None:
    assert outcome(StopReason.CANCELLED).kind is OutcomeKind.FAILED
    assert outcome(StopReason.LEASE_EXPIRED).kind is OutcomeKind.UNAVAILABLE
    assert outcome(StopReason.SHUTDOWN).message == StopReason.SHUTDOWN.value


# -- whole pools, memory backend, MockClock -------------------------------------------------


class _Transaction:
    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend

    @property
    def connection(self) -> Any:
        return None

    @property
    def commit_sent(self) -> bool:
        return False

    async def commit_with_ack(self, item: Ack) -> bool:
        [applied] = await self._backend.ack([item])
        return applied


class RefusingBackend(MemoryBackend):
    """A memory backend with "transactions" whose first ``refusals`` connections the
    server refuses (``None``: every one)."""

    supports_transactions = True

    def __init__(self, refusals: int | None) -> None:
        super().__init__()
        self.refusals = refusals
        self.refused = 0

    @asynccontextmanager
    async def job_transaction(self) -> AsyncIterator[_Transaction]:
        await trio.lowlevel.checkpoint()
        if self.refusals is None or self.refused < self.refusals:
            self.refused += 1
            raise ConnectionUnavailable("PostgreSQL: TooManyConnectionsError: too many clients")
        yield _Transaction(self)


@asynccontextmanager
async def refusing(refusals: int | None) -> AsyncIterator[RefusingBackend]:
    backend = RefusingBackend(refusals)
    try:
        yield backend
    finally:
        backend._close()


def config(rec: Recorder, **overrides: Any) -> trioqueue.WorkerConfig:
    options: dict[str, Any] = {
        "queue": "q",
        "visibility_timeout": 10,
        "heartbeat_interval": 2,
        "poll_interval": 1,
        **rec.hooks(),
        **overrides,
    }
    return trioqueue.transactional_worker_config(1, rec.sleeper(), **options)


async def test_refused_connections_are_waited_out_within_the_lease(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with refusing(3) as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {"sleep": 1}, max_attempts=1)]
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        with trio.move_on_after(60):
            await rec.wait_for("succeeded", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert rec.kinds(job_id) == ["claimed", "started", "returned", "succeeded"]
    assert (info.status, info.attempts) == ("succeeded", 1)
    # Refused at 0, retried after 0.05, 0.1 and 0.2 s: the handler started at 0.35.
    assert rec.of("started", job_id)[0].at == pytest.approx(0.35)


async def test_connection_refused_for_the_whole_lease_releases_the_job_uncharged(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with refusing(None) as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {"sleep": 1}, max_attempts=1)]
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        with trio.move_on_after(60):
            await rec.wait_for("claimed", job_id, count=3)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert rec.of("failed") == [] and rec.of("retry") == [] and rec.of("started") == []
    first, second = rec.of("unavailable", job_id)[:2]
    assert first.detail.startswith("released uncharged: no database connection")
    assert 9.0 <= first.at <= 10.0  # waited within the lease (V = 10), then released
    assert 9.0 <= second.at - first.at <= 10.0
    assert [c.attempt for c in rec.of("claimed", job_id)] == [1, 1, 1]  # never charged
    assert (info.status, info.attempts) == ("running", 1)


async def test_duration_passing_while_connections_are_refused_releases_the_job(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with refusing(None) as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {"sleep": 1}, max_attempts=1)]
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, max_job_duration=1))
        with trio.move_on_after(60):
            await rec.wait_for("claimed", job_id, count=2)
        nursery.cancel_scope.cancel()
    assert rec.of("failed") == [] and rec.of("retry") == []
    [released] = rec.of("unavailable", job_id)[:1]
    assert released.at == pytest.approx(1.0)
    assert released.detail.startswith("released uncharged: no database connection")
    assert [c.attempt for c in rec.of("claimed", job_id)] == [1, 1]
