"""``wait_for`` on PostgreSQL, driven by NOTIFY (trioqueue/_backends/postgres/finishes.py).

Most tests make the slow poll never fire (``WAIT_POLL_SLOW`` = inf): a waiter that returns
was woken by the ``f:`` notice, since nothing else would wake it. The lost-notice tests
do the opposite: the notice cannot come, and the poll must finish the wait.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio

from trioqueue import UnknownJobError
from trioqueue._backends.postgres import PostgresBackend, finishes, open_postgres
from trioqueue._backends.postgres.sql import QUERIES
from trioqueue._types import Ack, Failure, JobInfo, NoticeKind, Release

pytestmark = [pytest.mark.trio, pytest.mark.postgres]

Q = "waits"
LEASE = 30.0


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=8) as backend:
        await backend.migrate()
        yield backend


@pytest.fixture
def notices_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No slow poll: only a notice (or a lost listener) wakes a waiter."""
    monkeypatch.setattr(finishes, "WAIT_POLL_SLOW", math.inf)


async def awaited(backend: PostgresBackend, job_id: int) -> bool | None:
    async with backend.acquire() as connection:
        value: bool | None = await connection.fetchval(
            f'SELECT awaited FROM "{backend.schema}".jobs WHERE id = $1', job_id
        )
    return value


async def until_awaited(backend: PostgresBackend, *job_ids: int) -> None:
    """Until every job's row is marked: from then on, its finish sends a notice."""
    with trio.fail_after(10):
        for job_id in job_ids:
            while not await awaited(backend, job_id):
                await trio.sleep(0.01)


async def claim(backend: PostgresBackend, limit: int = 1) -> list[Any]:
    return [
        c.job for c in await backend.claim(Q, limit=limit, worker_id="w", visibility_timeout=LEASE)
    ]


async def wait_while(
    backend: PostgresBackend,
    job_ids: list[int],
    finish: Callable[[], Awaitable[object]],
) -> list[JobInfo | BaseException]:
    """Wait for ``job_ids`` (one waiter each), ``finish`` once all are marked; the answers."""
    got: dict[int, JobInfo | BaseException] = {}

    async def waiter(n: int, job_id: int) -> None:
        try:
            got[n] = await backend.wait_for(job_id)
        except UnknownJobError as exc:
            got[n] = exc

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for n, job_id in enumerate(job_ids):
                nursery.start_soon(waiter, n, job_id)
            await until_awaited(backend, *set(job_ids))
            assert got == {}
            await finish()
    return [got[n] for n in range(len(job_ids))]


@pytest.mark.usefixtures("notices_only")
async def test_a_waiter_wakes_from_the_notice_of_an_ack(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    [job] = await claim(backend)
    [info] = await wait_while(
        backend, [job_id], lambda: backend.ack([Ack(job_id, job.claim_seq, result="7")])
    )
    assert isinstance(info, JobInfo)
    assert (info.status, info.result) == ("succeeded", 7)


@pytest.mark.usefixtures("notices_only")
async def test_many_waiters_share_one_listen_connection(backend: PostgresBackend) -> None:
    """Twenty waiters (two of them on one job) hold one LISTEN connection; one batch ack
    wakes them all."""
    ids = await backend.enqueue_many(Q, list(range(19)))
    jobs = await claim(backend, limit=19)
    acks = [Ack(job.id, job.claim_seq) for job in jobs]
    seen: list[tuple[int, int]] = []

    async def finish() -> None:
        stats = backend.statistics()
        seen.append((stats["listeners"], stats["finish_waiters"]))
        await backend.ack(acks)

    infos = await wait_while(backend, [*ids, ids[0]], finish)
    assert seen == [(1, 20)]
    assert [info.status for info in infos if isinstance(info, JobInfo)] == ["succeeded"] * 20
    assert backend.statistics()["finish_waiters"] == 0
    assert backend.statistics()["listeners"] == 1  # kept for the next wait_for


@pytest.mark.usefixtures("notices_only")
async def test_a_final_failure_wakes_its_waiter(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", max_attempts=1)
    [job] = await claim(backend)
    [info] = await wait_while(
        backend, [job_id], lambda: backend.fail([Failure(job_id, job.claim_seq, "boom", 1.0)])
    )
    assert isinstance(info, JobInfo)
    assert (info.status, info.last_error) == ("failed", "boom")


@pytest.mark.usefixtures("notices_only")
async def test_cancelling_a_waiting_job_wakes_its_waiter(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", delay=3600)
    [info] = await wait_while(backend, [job_id], lambda: backend.cancel(job_id))
    assert isinstance(info, JobInfo)
    assert (info.status, info.last_error) == ("failed", "cancelled before it ran")


@pytest.mark.usefixtures("notices_only")
async def test_releasing_a_cancelled_job_wakes_its_waiter(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    [job] = await claim(backend)
    assert await backend.cancel(job_id) is True  # flagged only: it is running

    [info] = await wait_while(
        backend, [job_id], lambda: backend.release([Release(job_id, job.claim_seq)])
    )
    assert isinstance(info, JobInfo)
    assert (info.status, info.last_error) == ("failed", "cancelled: cancel requested")


@pytest.mark.usefixtures("notices_only")
async def test_a_transactional_ack_wakes_its_waiter_at_commit(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    [job] = await claim(backend)

    async def commit() -> None:
        async with backend.job_transaction() as transaction:
            assert await transaction.commit_with_ack(Ack(job_id, job.claim_seq)) is True

    [info] = await wait_while(backend, [job_id], commit)
    assert isinstance(info, JobInfo)
    assert info.status == "succeeded"


@pytest.mark.usefixtures("notices_only")
async def test_a_job_deleted_while_waited_for_raises(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", delay=3600)
    [raised] = await wait_while(backend, [job_id], lambda: backend.delete_job(job_id))
    assert isinstance(raised, UnknownJobError)


async def test_a_wait_times_out(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", delay=3600)
    with pytest.raises(TimeoutError, match=f"job {job_id} did not finish within 0.2s"):
        await backend.wait_for(job_id, timeout=0.2)
    assert await awaited(backend, job_id) is True  # marked: a finish would have been heard
    assert backend.statistics()["finish_waiters"] == 0


async def test_a_lost_notice_is_made_up_by_the_poll(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark is cleared behind the waiter's back, so the ack sends no notice: the slow
    poll reads the job again and finds it finished."""
    monkeypatch.setattr(finishes, "WAIT_POLL_SLOW", 0.05)
    job_id = await backend.enqueue(Q, "x")
    [job] = await claim(backend)

    async def finish_unheard() -> None:
        async with backend.acquire() as connection:
            await connection.execute(
                f'UPDATE "{backend.schema}".jobs SET awaited = false WHERE id = $1', job_id
            )
        assert await backend.ack([Ack(job_id, job.claim_seq)]) == [True]

    [info] = await wait_while(backend, [job_id], finish_unheard)
    assert isinstance(info, JobInfo)
    assert info.status == "succeeded"


@pytest.mark.usefixtures("notices_only")
async def test_a_waiter_listens_again_after_the_listen_connection_is_lost(
    backend: PostgresBackend,
) -> None:
    """Notices sent while nobody listened are gone: the waiter reads again at once, LISTENs
    again, and then hears the finish."""
    job_id = await backend.enqueue(Q, "x")
    [job] = await claim(backend)

    async def lose_then_ack() -> None:
        async with backend.acquire() as connection:
            killed = await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = $1 AND query LIKE 'LISTEN%'",
                f"trioqueue:{backend.schema}",
            )
        assert killed == 1
        with trio.fail_after(10):
            while backend.statistics()["listeners"] != 1 or not backend._finishes.listening:
                await trio.sleep(0.01)
        await backend.ack([Ack(job_id, job.claim_seq)])

    [info] = await wait_while(backend, [job_id], lose_then_ack)
    assert isinstance(info, JobInfo)
    assert info.status == "succeeded"


async def test_only_finishes_someone_waits_for_send_a_notice(backend: PostgresBackend) -> None:
    """An ack of an unawaited job sends nothing (a marker NOTIFY sent after it arrives
    first); an awaited one sends ``f:<id>:<queue>``, which a watcher sees as FINISHED."""
    first, second = await backend.enqueue_many(Q, ["quiet", "awaited"])
    jobs = {job.id: job for job in await claim(backend, limit=2)}
    async with backend.watch() as notices:
        assert await backend.ack([Ack(first, jobs[first].claim_seq)]) == [True]
        async with backend.acquire() as connection:
            await connection.execute("SELECT pg_notify($1, 'a:marker')", backend.channel)
        with trio.fail_after(10):
            marker = await notices.receive()
        assert (marker.kind, marker.queue) == (NoticeKind.AVAILABLE, "marker")

        with pytest.raises(TimeoutError):  # marks the row, then times out
            await backend.wait_for(second, timeout=0.01)
        assert await awaited(backend, second) is True
        assert await backend.ack([Ack(second, jobs[second].claim_seq)]) == [True]
        with trio.fail_after(10):
            finished = await notices.receive()
    assert (finished.kind, finished.queue, finished.job_id) == (NoticeKind.FINISHED, Q, second)


async def test_retry_clears_the_mark(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", max_attempts=1)
    [job] = await claim(backend)
    with pytest.raises(TimeoutError):
        await backend.wait_for(job_id, timeout=0.01)
    await backend.fail([Failure(job_id, job.claim_seq, "boom", None)])
    assert await backend.retry(job_id) is True
    assert await awaited(backend, job_id) is False  # its next finish sends nothing unasked


async def test_a_look_neither_listens_nor_marks(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    with pytest.raises(TimeoutError):
        await backend.wait_for(job_id, timeout=0)
    assert await awaited(backend, job_id) is False
    assert backend.statistics()["listeners"] == 0


async def test_closing_the_backend_closes_the_shared_listener(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        job_id = await backend.enqueue(Q, "x", delay=3600)
        with pytest.raises(TimeoutError):
            await backend.wait_for(job_id, timeout=0.01)
        assert backend.statistics()["listeners"] == 1
    assert backend.statistics()["listeners"] == 0


@pytest.mark.skipif(
    "'f:'" not in QUERIES["claim"], reason="the claim statement does not send f: yet"
)
@pytest.mark.usefixtures("notices_only")
async def test_a_claim_that_dead_letters_a_job_wakes_its_waiter(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", max_attempts=1)
    await claim(backend)
    async with backend.acquire() as connection:  # its worker died: the lease ran out
        await connection.execute(
            f"UPDATE \"{backend.schema}\".jobs SET not_visible_until = now() - interval '1 second', "
            "lease_floor = now() - interval '1 second' WHERE id = $1",
            job_id,
        )
    [info] = await wait_while(backend, [job_id], lambda: claim(backend))
    assert isinstance(info, JobInfo)
    assert (info.status, info.last_error) == (
        "failed",
        "lease expired on the final attempt (1 of 1): "
        "the worker running it stopped without recording an outcome",
    )


@pytest.mark.usefixtures("notices_only")
async def test_a_locked_row_is_marked_once_its_lock_is_released(backend: PostgresBackend) -> None:
    """Marking never queues behind a row lock: while another transaction holds it the
    waiter reads again every WAIT_MARK_RETRY seconds, marks it once free, then hears the
    finish (the slow poll never fires here)."""
    job_id = await backend.enqueue(Q, "x")
    [job] = await claim(backend)
    got: list[JobInfo] = []

    async def waiter() -> None:
        got.append(await backend.wait_for(job_id, timeout=30))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            async with backend.acquire() as connection, connection.transaction():
                await connection.execute(
                    f'SELECT 1 FROM "{backend.schema}".jobs WHERE id = $1 FOR UPDATE', job_id
                )
                nursery.start_soon(waiter)
                reads = backend.statistics()["calls"]["get_job"]
                while backend.statistics()["calls"]["get_job"] < reads + 4:  # read, skipped
                    await trio.sleep(0.01)
                assert not await awaited(backend, job_id)
            await until_awaited(backend, job_id)
            await backend.ack([Ack(job_id, job.claim_seq)])
    assert [info.status for info in got] == ["succeeded"]


async def test_a_wait_on_a_locked_row_still_times_out(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    async with backend.acquire() as connection, connection.transaction():
        await connection.execute(
            f'SELECT 1 FROM "{backend.schema}".jobs WHERE id = $1 FOR UPDATE', job_id
        )
        with trio.fail_after(10), pytest.raises(TimeoutError):
            await backend.wait_for(job_id, timeout=0.3)
