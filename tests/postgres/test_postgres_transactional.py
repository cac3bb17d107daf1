"""Transactional mode on PostgreSQL: a handler's writes commit exactly once, with its ack (I13).

Every handler here inserts one row into a table of the test schema through
``ctx.connection``. Whatever happens to an attempt (its lease lost and the job reclaimed,
the ack's fence failing, the handler raising), the table ends with exactly one row per
succeeded job and none for a failed one: the writes of an attempt that did not ack are
rolled back, and the retry writes them once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.interface import JobTransaction
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.driver import PgConnection
from trioqueue._backends.postgres.transactions import RUNTIME_RESERVE
from trioqueue._errors import BackendError
from trioqueue._runtime.batch import NOT_RECORDED
from trioqueue._types import Ack

from .._pool_harness import Recorder
from .._postgres_harness import intercepted_acks, wait_until_finished

pytestmark = pytest.mark.postgres

Q = "tx"
FOLLOW_UPS = "tx-follow-ups"
LEASE_EXPIRED = "lease expired without renewal"


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    # Room for every handler's transaction, the pool's own work and the test's sessions.
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=16) as backend:
        await backend.migrate()
        async with backend.acquire() as connection:
            await connection.execute(
                f'CREATE TABLE "{backend.schema}".effects (job_id bigint NOT NULL, attempt int)'
            )
        yield backend


def effects(backend: PostgresBackend) -> str:
    return f'"{backend.schema}".effects'


async def effect_counts(backend: PostgresBackend) -> dict[int, int]:
    async with backend.acquire() as connection:
        rows = await connection.fetch(
            f"SELECT job_id, count(*) AS n FROM {effects(backend)} GROUP BY job_id"
        )
    return {row["job_id"]: row["n"] for row in rows}


def config(handler: Any, recorder: Recorder, **overrides: Any) -> trioqueue.WorkerConfig:
    options: dict[str, Any] = {
        "queue": Q,
        "visibility_timeout": 1.5,
        "heartbeat_interval": 0.3,
        "poll_interval": 0.2,  # an expired lease sends no notice: polling finds it
        "shutdown_grace": 0.5,
        "backoff": lambda attempt: 0.0,
        **recorder.hooks(),
        **overrides,
    }
    return trioqueue.transactional_worker_config(options.pop("concurrency", 4), handler, **options)


def bumping_transactions(
    backend: PostgresBackend, victims: set[int]
) -> Any:  # a replacement for backend.job_transaction
    """Transactions whose first ack of a victim job finds its claim_seq moved on.

    Right before the ack, another session does what a competing worker's claim does after
    the lease expired (bump claim_seq), and expires the row again as if that worker had
    died, so this pool can claim the job once more.
    """

    async def bumping(tx: JobTransaction, item: Ack) -> bool:
        async with backend.acquire() as other:
            await other.execute(
                f'UPDATE "{backend.schema}".jobs '
                "SET claim_seq = claim_seq + 1, not_visible_until = now(), "
                "lease_floor = now() WHERE id = $1",
                item.job_id,
            )
        return await tx.commit_with_ack(item)

    return intercepted_acks(backend, victims, bumping)


async def test_effects_commit_exactly_once_despite_lost_leases_and_retries(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I13 in transactional mode, through every way an attempt can end without its ack.

    - ``plain``: succeeds at once.
    - ``bumped``: its first ack's fence fails (claim_seq moved on): rolled back, reclaimed,
      the second attempt commits.
    - ``locked``: its first attempt's renewals are blocked by a row lock held elsewhere, so
      its lease fence fires mid-handler: rolled back; after the lease expires, the retry
      commits.
    - ``raises_once``: raises after writing on its first attempt: rolled back, retried.
    - ``raises``: raises after writing on every attempt: ends failed with no row.

    Each successful attempt also enqueues a follow-up job on ``ctx.connection``: follow-ups
    commit exactly as often as the effects do.
    """
    recorder = Recorder()
    started: dict[int, trio.Event] = {}

    async def handler(payload: dict[str, str], ctx: JobContext) -> None:
        kind = payload["kind"]
        connection = ctx.connection
        await connection.execute(
            f"INSERT INTO {effects(backend)} VALUES ($1, $2)", ctx.job_id, ctx.attempt
        )
        await backend.enqueue(FOLLOW_UPS, {"after": ctx.job_id}, connection=connection)
        if ctx.attempt == 1 and kind == "locked":
            started[ctx.job_id].set()
            await trio.sleep_forever()  # until the lease fence stops it
        if kind == "raises" or (kind == "raises_once" and ctx.attempt == 1):
            raise RuntimeError(f"{kind} on attempt {ctx.attempt}")

    kinds = ["plain"] * 12 + ["bumped"] * 3 + ["locked"] * 2 + ["raises_once"] * 3 + ["raises"] * 2
    kind_of: dict[int, str] = {}
    for kind in kinds:  # enqueued before the pool starts, so every job has its event in time
        job_id = await backend.enqueue(
            Q, {"kind": kind}, max_attempts=2 if kind == "raises" else 10
        )
        kind_of[job_id] = kind
        started[job_id] = trio.Event()
    ids = list(kind_of)
    victims = {job_id for job_id, kind in kind_of.items() if kind == "bumped"}
    monkeypatch.setattr(backend, "job_transaction", bumping_transactions(backend, victims))

    async def hold_row_lock(job_id: int) -> None:
        """Block the job's renewals (SKIP LOCKED: unchanged) until its fence has fired."""
        await started[job_id].wait()
        async with backend.acquire() as other, other.transaction():
            await other.execute(
                f'SELECT 1 FROM "{backend.schema}".jobs WHERE id = $1 FOR UPDATE', job_id
            )
            await recorder.wait_for("unavailable", job_id)

    cfg = config(handler, recorder, batch_size=2)
    async with trio.open_nursery() as nursery:
        for job_id, kind in kind_of.items():
            if kind == "locked":
                nursery.start_soon(hold_row_lock, job_id)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = await wait_until_finished(backend, ids)
        nursery.cancel_scope.cancel()

    by_kind: dict[str, set[tuple[str, int]]] = {}
    for info in infos:
        by_kind.setdefault(kind_of[info.id], set()).add((info.status, info.attempts))
    assert by_kind == {
        "plain": {("succeeded", 1)},
        "bumped": {("succeeded", 2)},
        "locked": {("succeeded", 2)},
        "raises_once": {("succeeded", 2)},
        "raises": {("failed", 2)},
    }
    succeeded = {info.id for info in infos if info.status == "succeeded"}
    assert await effect_counts(backend) == dict.fromkeys(succeeded, 1)
    follow_ups = await backend.list_jobs(queue=FOLLOW_UPS, limit=1000)
    assert sorted(job.payload["after"] for job in follow_ups) == sorted(succeeded)
    # Why the first attempts of bumped and locked jobs wrote nothing:
    for job_id, kind in kind_of.items():
        reasons = [event.detail for event in recorder.of("unavailable", job_id)]
        if kind == "bumped":
            assert reasons == [NOT_RECORDED]
        elif kind == "locked":
            assert reasons == [LEASE_EXPIRED]
        else:
            assert reasons == []
    assert backend.statistics()["connections_in_use"] == 0


async def test_cancelled_handler_leaves_no_row(backend: PostgresBackend) -> None:
    """A cancel directive stops the handler; its transaction rolls back; the job fails."""
    recorder = Recorder()
    started = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        await ctx.connection.execute(f"INSERT INTO {effects(backend)} VALUES ($1, 1)", ctx.job_id)
        started.set()
        await trio.sleep_forever()

    cfg = config(handler, recorder, visibility_timeout=30, heartbeat_interval=10)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job_id = await backend.enqueue(Q, "forever")
        with trio.fail_after(5):
            await started.wait()
        assert await backend.cancel(job_id) is True
        [info] = await wait_until_finished(backend, [job_id])
        nursery.cancel_scope.cancel()
    assert info.status == "failed"
    assert info.last_error is not None
    assert info.last_error.startswith("cancelled")
    assert await effect_counts(backend) == {}


@pytest.mark.parametrize("batch_size", [1, 2])
async def test_an_exiting_handler_and_the_jobs_beside_it_commit_nothing(
    backend: PostgresBackend, batch_size: int
) -> None:
    """A handler inserts its row, then raises ``SystemExit`` while another job, beside it
    (another batch, or the same one), holds its inserted row uncommitted: neither row is
    committed, the exiting job fails, the other is released uncharged, and the pool raises
    the ``SystemExit`` itself (docs/protocol.rst §4.1)."""
    recorder = Recorder()
    inserted: list[int] = []
    both_inserted = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        await ctx.connection.execute(f"INSERT INTO {effects(backend)} VALUES ($1, 1)", ctx.job_id)
        inserted.append(ctx.job_id)
        if len(inserted) == 2:
            both_inserted.set()
        await both_inserted.wait()
        if payload == "exits":
            raise SystemExit(3)
        await trio.sleep_forever()

    bystander = await backend.enqueue(Q, "waits", max_attempts=1)
    exiting = await backend.enqueue(Q, "exits", max_attempts=1)
    cfg = config(handler, recorder, concurrency=4 // batch_size, batch_size=batch_size)
    with trio.fail_after(20), pytest.raises(SystemExit) as raised:
        await trioqueue.run_worker_pool(backend, cfg)
    assert raised.value.code == 3
    exited, released = await backend.get_job(exiting), await backend.get_job(bystander)
    assert (exited.status, exited.attempts) == ("failed", 1)
    assert exited.last_error == "SystemExit: 3 (raised by the handler; the worker process exits)"
    assert (released.status, released.attempts, released.last_error) == ("ready", 0, None)
    assert await effect_counts(backend) == {}
    assert backend.statistics()["connections_in_use"] == 0


async def test_handler_that_ends_the_transaction_itself_fails_its_attempt(
    backend: PostgresBackend,
) -> None:
    """A handler that runs COMMIT itself cannot have its ack made as if it had not."""
    recorder = Recorder()

    async def handler(payload: Any, ctx: JobContext) -> None:
        await ctx.connection.execute("COMMIT")

    cfg = config(handler, recorder)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job_id = await backend.enqueue(Q, "commits", max_attempts=1)
        [info] = await wait_until_finished(backend, [job_id])
        nursery.cancel_scope.cancel()
    assert info.status == "failed"
    assert info.last_error is not None
    assert "transaction failed before commit" in info.last_error
    assert "ended ctx.connection's transaction itself" in info.last_error


async def test_connection_is_unusable_after_its_transaction(backend: PostgresBackend) -> None:
    """A handler that leaks ``ctx.connection`` cannot run SQL on a connection now pooled."""
    recorder = Recorder()
    leaked: list[PgConnection] = []

    async def handler(payload: Any, ctx: JobContext) -> None:
        leaked.append(ctx.connection)

    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler, recorder))
        [info] = await wait_until_finished(backend, [await backend.enqueue(Q, "leak")])
        nursery.cancel_scope.cancel()
    assert info.status == "succeeded"
    with pytest.raises(BackendError, match="returned to the pool"):
        await leaked[0].fetchval("SELECT 1")


async def test_transactional_enqueue_follows_the_callers_transaction(
    backend: PostgresBackend,
) -> None:
    """``enqueue(..., connection=conn)``: rolled back → no job; committed → the job exists."""

    class Abort(Exception):
        pass

    rolled_back = 0
    try:
        async with backend.acquire() as conn, conn.transaction():
            rolled_back = await backend.enqueue(Q, "never", connection=conn)
            raise Abort
    except Abort:
        pass  # the caller's transaction rolled back, and the job with it
    with pytest.raises(LookupError):
        await backend.get_job(rolled_back)

    async with backend.acquire() as conn, conn.transaction():
        [committed] = await backend.enqueue_many(Q, ["kept"], connection=conn)
        with pytest.raises(LookupError):  # not visible to other sessions before the commit
            await backend.get_job(committed)
    assert (await backend.get_job(committed)).payload == "kept"

    with pytest.raises(TypeError, match="connection must come from"):
        await backend.enqueue(Q, "x", connection=object())  # type: ignore[arg-type]
    assert [job.payload for job in await backend.list_jobs(queue=Q)] == ["kept"]


async def test_transactional_mode_refuses_a_backend_without_transactions() -> None:
    async with trioqueue.open_memory() as memory:
        cfg = trioqueue.transactional_worker_config(1, lambda payload, ctx: None)
        with pytest.raises(trioqueue.ConfigError, match="transactional mode needs"):
            await trioqueue.run_worker_pool(memory, cfg)


async def test_effects_commit_exactly_once_when_connections_are_killed(
    backend: PostgresBackend,
) -> None:
    """I13 through ``pg_terminate_backend`` of every pool connection, twice, mid-run.

    Kills land on handlers' transactions (the attempt fails before commit and is retried),
    on acks and commits (a commit in doubt writes nothing: the row's lease settles it), on
    renewals and claims. Every job still ends succeeded, with exactly one row each.
    """
    recorder = Recorder()

    async def handler(payload: float, ctx: JobContext) -> None:
        await ctx.connection.execute(
            f"INSERT INTO {effects(backend)} VALUES ($1, $2)", ctx.job_id, ctx.attempt
        )
        await trio.sleep(payload)

    ids = await backend.enqueue_many(Q, [0.01 * (n % 7) for n in range(60)])
    cfg = config(handler, recorder, batch_size=2, heartbeat_interval=0.5)
    async with backend.acquire() as killer, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        for round_ in (1, 2):
            with trio.fail_after(10):
                await recorder.wait_for("succeeded", None, count=15 * round_)
            await killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = $1 AND pid <> pg_backend_pid()",
                f"trioqueue:{backend.schema}",
            )
        infos = await wait_until_finished(backend, ids)
        nursery.cancel_scope.cancel()

    assert {i.status for i in infos} == {"succeeded"}
    assert await effect_counts(backend) == dict.fromkeys(ids, 1)


async def test_transactional_handlers_leave_the_runtime_its_connections(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """The connection budget: handlers never hold the connections renewals need.

    With ``max_connections = RUNTIME_RESERVE + 1`` only one handler at a time holds a
    transaction; the others wait for it inside their scopes, while every lease keeps being
    renewed (no attempt is lost) and every job commits.
    """
    async with open_postgres(
        postgres_dsn, schema=postgres_schema, max_connections=RUNTIME_RESERVE + 1
    ) as backend:
        await backend.migrate()
        async with backend.acquire() as connection:
            await connection.execute(
                f'CREATE TABLE "{backend.schema}".effects (job_id bigint NOT NULL, attempt int)'
            )
        recorder = Recorder()
        holding = 0
        most_holding = 0

        async def handler(payload: Any, ctx: JobContext) -> None:
            nonlocal holding, most_holding
            holding += 1
            most_holding = max(most_holding, holding)
            try:
                await ctx.connection.execute(
                    f"INSERT INTO {effects(backend)} VALUES ($1, $2)", ctx.job_id, ctx.attempt
                )
                await trio.sleep(0.4)  # longer than H: renewals must get through meanwhile
            finally:
                holding -= 1

        ids = await backend.enqueue_many(Q, list(range(6)))
        cfg = config(handler, recorder, concurrency=3, visibility_timeout=2, heartbeat_interval=0.3)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            infos = await wait_until_finished(backend, ids)
            nursery.cancel_scope.cancel()
        assert {i.status for i in infos} == {"succeeded"}
        assert most_holding == 1
        assert recorder.of("unavailable") == []
        assert await effect_counts(backend) == dict.fromkeys(ids, 1)


async def test_a_snooze_rolls_the_handlers_writes_back(backend: PostgresBackend) -> None:
    """A snooze is not a success: the handler's writes of the snoozed run are rolled back,
    and the run that succeeds commits its own once (docs/protocol.rst §17)."""
    runs = 0

    async def handler(payload: Any, ctx: JobContext) -> None:
        nonlocal runs
        runs += 1
        assert ctx.connection is not None
        await ctx.connection.execute(
            f"INSERT INTO {effects(backend)} VALUES ($1, $2)", ctx.job_id, runs
        )
        if runs == 1:
            raise trioqueue.Snooze(0.05)

    cfg = config(handler, Recorder(), concurrency=1)
    async with trio.open_nursery() as nursery:
        job_id = await backend.enqueue(Q, {})
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        [info] = await wait_until_finished(backend, [job_id])
        nursery.cancel_scope.cancel()
    async with backend.acquire() as connection:
        rows = await connection.fetch(f"SELECT job_id, attempt FROM {effects(backend)}")
    assert [(r["job_id"], r["attempt"]) for r in rows] == [(job_id, 2)]
    assert (info.status, info.attempts, info.snoozes) == ("succeeded", 1, 1)
