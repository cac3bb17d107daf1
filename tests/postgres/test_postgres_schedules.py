"""Schedules on PostgreSQL: each tick enqueued once across processes, and what backs it.

The conformance suite (test_postgres_backend.py) covers the operations, and concurrent passes
of one backend. Here: several processes, each running two worker pools that make a
scheduling pass every 20 ms, start at the same instant while every schedule is due (a tick
missed while nothing ran), and then race for further ticks, round after round; each tick must
give exactly one job. Then the unique key per (schedule, tick) on its own, and the pass's
statements.

Real time, a real server. The parent waits for the passes by reading the schedules table (a
condition, bounded by a deadline), never by sleeping a guessed time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend

from .._postgres_harness import read_until

pytestmark = pytest.mark.postgres

#: A cron whose real ticks (new year's midnight) never fall inside a test.
YEARLY = "0 0 1 1 *"
PROCESSES = 4
SCHEDULES = 20
ROUNDS = 5
#: Where round r moves every schedule: in the past, one second further each round.
DUE_FROM = datetime(2020, 1, 1, tzinfo=UTC)

CHILD = textwrap.dedent(
    """
    import sys

    import trio

    import trioqueue
    from trioqueue._backends.postgres import sql
    from trioqueue._runtime import scheduler

    scheduler.SHARE_PASSES = False  # the two pools of this process race as well
    if sys.argv[3] == "without-unique-key":
        # The compare-and-set alone: the pass's statement without its ON CONFLICT clause
        # (the parent dropped the index it names).
        text = sql.QUERIES["advance_schedules"]
        clause = "ON CONFLICT (schedule_name, schedule_tick) WHERE schedule_name IS NOT NULL DO NOTHING"
        assert clause in text
        sql.QUERIES["advance_schedules"] = text.replace(clause, "")

    async def noop(payload, ctx):
        pass

    async def main():
        dsn, schema = sys.argv[1:3]
        async with trioqueue.open_postgres(dsn, schema=schema) as backend:
            configs = [
                trioqueue.WorkerConfig(
                    handler=noop, queue=queue, schedule_interval=0.02, max_job_duration=10
                )
                for queue in ("idle-a", "idle-b")  # not the scheduled jobs' queue
            ]
            print("ready", flush=True)
            await trio.to_thread.run_sync(sys.stdin.readline)  # "go"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trioqueue.run_workers, backend, configs)
                # Stop when the parent closes stdin.
                await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                nursery.cancel_scope.cancel()

    trio.run(main)
    """
)


def table(backend: PostgresBackend, name: str) -> str:
    return f'"{backend.schema}".{name}'


async def move_all(backend: PostgresBackend, at: datetime) -> None:
    async with backend.acquire() as connection:
        await connection.execute(f"UPDATE {table(backend, 'schedules')} SET next_run_at = $1", at)


async def wait_none_due(backend: PostgresBackend) -> None:
    """Until every schedule's next run is in the future (some pass advanced each)."""
    with trio.fail_after(30):
        while True:
            async with backend.acquire() as connection:
                due = await connection.fetchval(
                    f"SELECT count(*) FROM {table(backend, 'schedules')} WHERE next_run_at <= now()"
                )
            if due == 0:
                return
            await trio.sleep(0.02)


async def start_child(
    script: Path, dsn: str, schema: str, variant: str, nursery: trio.Nursery
) -> trio.Process:
    command = [sys.executable, str(script), dsn, schema, variant]
    process: trio.Process = await nursery.start(
        partial(
            trio.run_process,
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # stderr: the test's own. A pipe nobody reads fills up once a busy machine
            # makes the children log (warnings go to stderr), and then they never exit.
            check=False,
        )
    )
    return process


@pytest.mark.parametrize("variant", ["as-migrated", "without-unique-key"])
async def test_processes_starting_at_once_enqueue_each_tick_once(
    backend: PostgresBackend, postgres_dsn: str, tmp_path: Path, variant: str
) -> None:
    """Without the unique key per (schedule, tick) too: the compare-and-set alone keeps
    every tick to one job (the key is the second line of defence, tested below)."""
    if variant == "without-unique-key":
        async with backend.acquire() as connection:
            await connection.execute(f'DROP INDEX "{backend.schema}".jobs_schedule_tick_idx')
    for n in range(SCHEDULES):
        await backend.set_schedule(f"s{n:02}", "ticks", YEARLY, {"n": n})
    await move_all(backend, DUE_FROM)  # due before any process runs: missed ticks
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    async with trio.open_nursery() as nursery:
        processes = [
            await start_child(script, postgres_dsn, backend.schema, variant, nursery)
            for _ in range(PROCESSES)
        ]
        with trio.fail_after(60):
            for process in processes:
                assert process.stdout is not None
                await read_until(process.stdout, b"ready")
        for process in processes:  # as close to one instant as the pipes allow
            assert process.stdin is not None
            await process.stdin.send_all(b"go\n")
        await wait_none_due(backend)
        for round_ in range(1, ROUNDS):
            await move_all(backend, DUE_FROM + timedelta(seconds=round_))
            await wait_none_due(backend)
        for process in processes:
            assert process.stdin is not None
            await process.stdin.aclose()
        with trio.fail_after(60):
            for process in processes:
                assert await process.wait() == 0
    async with backend.acquire() as connection:
        per_schedule = await connection.fetch(
            f"SELECT schedule_name, count(*) AS jobs, count(DISTINCT schedule_tick) AS ticks "
            f"FROM {table(backend, 'jobs')} WHERE queue = 'ticks' GROUP BY 1 ORDER BY 1"
        )
    assert [(r["schedule_name"], r["jobs"], r["ticks"]) for r in per_schedule] == [
        (f"s{n:02}", ROUNDS, ROUNDS) for n in range(SCHEDULES)
    ]


async def test_a_tick_that_has_its_job_is_not_enqueued_again(backend: PostgresBackend) -> None:
    """The unique key per (schedule, tick) holds on its own: a schedule moved back onto a
    tick whose job exists advances without a second job."""
    await backend.set_schedule("s", "q", YEARLY)
    await move_all(backend, DUE_FROM)
    [job_id] = await backend.enqueue_due()
    await move_all(backend, DUE_FROM)  # the same tick again
    assert await backend.enqueue_due() == []
    [schedule] = await backend.list_schedules()
    assert schedule.next_run_at > datetime.now(UTC)  # advanced all the same
    async with backend.acquire() as connection:
        row = await connection.fetchrow(
            f"SELECT schedule_name, schedule_tick FROM {table(backend, 'jobs')} WHERE id = $1",
            job_id,
        )
    assert (row["schedule_name"], row["schedule_tick"]) == ("s", DUE_FROM)


async def test_replacing_a_due_schedule_drops_its_pending_tick(backend: PostgresBackend) -> None:
    await backend.set_schedule("s", "q", YEARLY, "old")
    await move_all(backend, DUE_FROM)
    await backend.set_schedule("s", "q", YEARLY, "new")
    assert await backend.enqueue_due() == []  # its next run was computed afresh
