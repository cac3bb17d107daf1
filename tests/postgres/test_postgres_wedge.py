"""A wedged or killed database under a running pool (docs/protocol.rst §6, invariants I2, I5, I13).

The wedge is a trigger on the test schema's jobs table that loops in ``pg_sleep`` for as long
as a flag row says so, for renewals only (a running row's lease moving within one attempt:
claims change ``claim_seq``, outcomes change ``status``). It also swallows the query-cancel
that asyncpg sends when the guard gives up on the statement, as a server stuck in I/O would
not answer it either, so the driver call really stays stuck and the guard must abandon it.

While wedged, a sampler reads ``pg_stat_activity`` for the pool's renewal statements (the
pool's connections say ``application_name = 'trioqueue:<schema>'``). These tests run a few
seconds of real time: leases are short (V = 1.5 s) and every wait is bounded.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.driver import PgConnection

from .._pool_harness import Recorder
from .._postgres_harness import wait_until_finished

pytestmark = pytest.mark.postgres

Q = "wedge"
V = 1.5
H = 0.4
LEASE_EXPIRED = "lease expired without renewal"

WEDGE_SQL = """
CREATE TABLE {schema}.wedge (wedged boolean NOT NULL);
INSERT INTO {schema}.wedge VALUES (false);
CREATE FUNCTION {schema}.wedge_renewals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        BEGIN
            EXIT WHEN NOT (SELECT wedged FROM {schema}.wedge);
            PERFORM pg_sleep(0.02);
        EXCEPTION WHEN query_canceled THEN
            NULL;  -- a wedged server does not answer cancel requests either
        END;
    END LOOP;
    RETURN NEW;
END
$$;
CREATE TRIGGER wedge_renewals BEFORE UPDATE ON {schema}.jobs FOR EACH ROW
WHEN (OLD.status = 'running' AND NEW.status = 'running' AND NEW.claim_seq = OLD.claim_seq
      AND NEW.not_visible_until IS DISTINCT FROM OLD.not_visible_until)
EXECUTE FUNCTION {schema}.wedge_renewals();
"""


def config(recorder: Recorder, handler: Any, **overrides: Any) -> trioqueue.WorkerConfig:
    options: dict[str, Any] = {
        "handler": handler,
        "queue": Q,
        "concurrency": 3,
        "visibility_timeout": V,
        "heartbeat_interval": H,
        "poll_interval": 0.2,  # expired leases send no notice: polling finds them
        "shutdown_grace": 0.2,
        "backoff": lambda attempt: 0.0,
        **recorder.hooks(),
        **overrides,
    }
    return trioqueue.WorkerConfig(**options)


def first_attempt_hangs(recorder: Recorder) -> Any:
    """A handler whose first attempt runs until stopped; later attempts succeed at once."""

    async def handler(payload: Any, ctx: JobContext) -> None:
        recorder.add("started", ctx.job_id, None, ctx.attempt)
        if ctx.attempt == 1 and payload == "long":
            await trio.sleep_forever()

    return handler


async def set_wedged(backend: PostgresBackend, wedged: bool) -> None:
    async with backend.acquire() as connection:
        await connection.execute(f'UPDATE "{backend.schema}".wedge SET wedged = $1', wedged)


class RenewalSampler:
    """Counts the pool's renewal statements running in the server, every 20 ms."""

    def __init__(self, backend: PostgresBackend, connection: PgConnection) -> None:
        self._connection = connection
        self._application = f"trioqueue:{backend.schema}"
        # pg_stat_activity keeps the first track_activity_query_size bytes: a prefix will do.
        self._renew_prefix = backend._sql["renew"][:120]
        self.counts: list[int] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            count = await self._connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
                "AND state = 'active' AND starts_with(query, $2)",
                self._application,
                self._renew_prefix,
            )
            self.counts.append(count)
            await trio.sleep(0.02)


async def test_wedged_renewals_hold_at_most_two_connections_and_the_pool_recovers(
    backend: PostgresBackend,
) -> None:
    """I5 and I2 against a real server, then recovery once the wedge lifts.

    Wave 1 runs when the wedge starts: its renewal gets stuck, is abandoned, and wave 1 is
    fenced at its leases. Wave 2 arrives while wedged: its first beat needs a second renewal,
    which gets stuck too and is not abandoned. Wave 3 then finds no renewal slot at all
    (the guard waits for the abandoned call), so it is fenced at its leases as well. Through
    all of it the server never runs more than two of the pool's renewals. When the wedge
    lifts, the stuck statements finish (their late answers change nothing), and every job
    runs again and succeeds, as do new ones.
    """
    async with backend.acquire() as connection:
        await connection.execute(WEDGE_SQL.replace("{schema}", f'"{backend.schema}"'))
    recorder = Recorder()
    cfg = config(recorder, first_attempt_hangs(recorder))

    async def wave(count: int) -> list[int]:
        ids = await backend.enqueue_many(Q, ["long"] * count)
        with trio.fail_after(5):
            for job_id in ids:
                await recorder.wait_for("started", job_id)
        return ids

    async def fenced(ids: list[int]) -> None:
        with trio.fail_after(2 * V + 1):
            for job_id in ids:
                await recorder.wait_for("unavailable", job_id)

    async with backend.acquire() as sampling, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        wave_1 = await wave(3)
        sampler = RenewalSampler(backend, sampling)
        await nursery.start(sampler.run)
        await set_wedged(backend, True)
        await fenced(wave_1)
        wave_2 = await wave(2)
        await fenced(wave_2)
        wave_3 = await wave(2)
        await fenced(wave_3)
        stuck = max(sampler.counts)
        await set_wedged(backend, False)
        fresh = await backend.enqueue_many(Q, ["short"] * 3)
        infos = await wait_until_finished(backend, [*wave_1, *wave_2, *wave_3, *fresh])
        nursery.cancel_scope.cancel()

    assert stuck == 2  # the ceiling was reached, and held
    assert max(sampler.counts) <= 2
    assert {i.status for i in infos} == {"succeeded"}
    for job_id in [*wave_1, *wave_2, *wave_3]:
        [unavailable] = recorder.of("unavailable", job_id)
        assert (unavailable.detail, unavailable.attempt) == (LEASE_EXPIRED, 1)
    assert all(not recorder.of("unavailable", job_id) for job_id in fresh)
    assert backend.statistics()["connections_in_use"] == 0


async def pool_pids(connection: PgConnection, schema: str) -> set[int]:
    rows = await connection.fetch(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
        f"trioqueue:{schema}",
    )
    return {row["pid"] for row in rows}


async def test_killed_connections_lose_no_job_and_listening_resumes(
    backend: PostgresBackend,
) -> None:
    """I13 through ``pg_terminate_backend`` of every pool connection mid-run.

    Every job still ends succeeded or failed, the pool reconnects by itself, and the
    listener LISTENs again: a cancel sent after the kill stops a handler at once, which with
    H = 3 s only the NOTIFY can do.
    """
    recorder = Recorder()
    cancelled = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        recorder.add("started", ctx.job_id, None, ctx.attempt)
        if payload == "forever":
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()
        await trio.sleep(payload)

    cfg = config(
        recorder, handler, concurrency=4, batch_size=2, visibility_timeout=9, heartbeat_interval=3
    )
    async with backend.acquire() as killer, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        ids = await backend.enqueue_many(Q, [0.02 * (n % 5) for n in range(60)])
        with trio.fail_after(10):
            await recorder.wait_for("succeeded", None, count=10)
        victims = await pool_pids(killer, backend.schema)
        killed = await killer.fetchval(
            "SELECT count(*) FROM pg_stat_activity, pg_terminate_backend(pid) "
            "WHERE pid = ANY($1::int[])",
            list(victims),
        )
        assert killed >= 2  # at least a pooled connection and the listener
        infos = await wait_until_finished(backend, ids)

        with trio.fail_after(5):  # the listener is back on a new connection
            while True:
                relisten = await killer.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
                    "AND starts_with(query, 'LISTEN') AND NOT pid = ANY($2::int[])",
                    f"trioqueue:{backend.schema}",
                    list(victims),
                )
                if relisten:
                    break
                await trio.sleep(0.05)
        forever = await backend.enqueue(Q, "forever")
        with trio.fail_after(5):
            await recorder.wait_for("started", forever)
        cancel_sent = trio.current_time()
        assert await backend.cancel(forever) is True
        with trio.fail_after(5):
            await cancelled.wait()
        cancel_latency = trio.current_time() - cancel_sent
        [forever_info] = await wait_until_finished(backend, [forever])
        nursery.cancel_scope.cancel()

    assert {i.status for i in infos} <= {"succeeded", "failed"}
    assert len(infos) == len(ids)
    assert cancel_latency < 1.0  # the NOTIFY, not the heartbeat (H = 3 s)
    assert forever_info.status == "failed"
