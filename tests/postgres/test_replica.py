"""Reads on a real streaming replica (``open_postgres(..., read_dsn=...)``; docs/postgres.rst,
"Read replicas").

One private primary and its replica serve the whole module (``tests/_replica_harness.py``:
``initdb``, ``pg_basebackup -R``, free ports, stopped by pid); each test works in a schema
of its own on them. Where the server binaries are missing, or the pair cannot start here,
the module is skipped with the reason (under CI it fails instead). The tests that need no server (bad options, a
replica nobody listens for) run anyway.

What they show: the operators' reads run on the replica (which says so itself:
``pg_is_in_recovery()``), writes, claims, renewals, outcomes and ``wait_for`` never do; a
job written on the primary is read on the replica once replayed, and ``get_job`` never
calls a job just enqueued unknown; a stopped replica's reads go to the primary, and come
back to it when it answers again; a replica behind ``max_read_lag`` is not read.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres import replica as replica_module
from trioqueue._core.wire import RenewItem
from trioqueue._types import Ack
from trioqueue.cli import main

from .._replica_harness import (
    ReplicaError,
    Replicated,
    pause_replay,
    resume_replay,
    run_replicated,
    server_binaries,
    wait_for_receipt,
    wait_for_replay,
)

pytestmark = pytest.mark.postgres

Q = "replicated"

#: The calls that read the replica when there is one (docs/postgres.rst, "Read replicas").
REPLICA_READS = {
    "get_job",
    "get_jobs",
    "list_jobs",
    "count_jobs",
    "counts",
    "queue_stats",
    "finished_history",
    "list_attempts",
    "queue_timings",
    "attempt_history",
    "list_workers",
    "list_schedules",
    "list_audit",
}


def _cannot_run(reason: str) -> NoReturn:
    """Skip, or under CI (the ``CI`` variable set) fail: CI must run these, not skip them
    quietly (.ci/run installs the server binaries)."""
    if os.environ.get("CI"):
        pytest.fail(f"the replica tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def pair() -> Iterator[Replicated]:
    if server_binaries() is None:
        _cannot_run("PostgreSQL's server binaries (initdb, pg_basebackup) are not installed")
    try:
        with run_replicated() as started:
            yield started
    except ReplicaError as exc:
        _cannot_run(f"cannot start a primary and its replica here: {exc}")


@pytest.fixture
def replica_up(pair: Replicated) -> Iterator[Replicated]:
    """The pair with its replica running and replaying, also after a test that stopped or
    paused it."""
    pair.start_replica()
    yield pair
    pair.start_replica()
    resume_replay(pair)


@asynccontextmanager
async def replicated(pair: Replicated, **options: Any) -> AsyncIterator[PostgresBackend]:
    """A backend on a fresh schema of the primary, reading the replica; migrated, and the
    migration replayed."""
    schema = f"tq_replica_{secrets.token_hex(4)}"
    async with open_postgres(
        pair.primary_dsn, schema=schema, read_dsn=pair.replica_dsn, **options
    ) as backend:
        await backend.migrate()
        await wait_for_replay(pair)
        yield backend


def replica_calls(backend: PostgresBackend) -> dict[str, int]:
    calls: dict[str, int] = backend.statistics()["replica_calls"]
    return calls


async def _fetchval(connection: Any, sql: str) -> Any:
    return await connection.fetchval(sql)


async def test_the_operators_reads_run_on_the_replica(replica_up: Replicated) -> None:
    async with replicated(replica_up) as backend:
        job_id = await backend.enqueue(Q, {"n": 1})
        await backend.record_audit("test", "job", "session", {})
        await wait_for_replay(replica_up)
        # The route's own connection says where it is.
        assert await backend._reads.run("probe", _fetchval, "SELECT pg_is_in_recovery()")

        assert [j.id for j in await backend.list_jobs(queue=Q)] == [job_id]
        assert await backend.count_jobs(queue=Q) == 1
        assert (await backend.get_job(job_id)).payload == {"n": 1}
        assert set(await backend.get_jobs([job_id])) == {job_id}
        assert await backend.counts() == {Q: {"ready": 1}}
        assert (await backend.queue_stats())[Q].counts == {"ready": 1}
        assert len(await backend.finished_history(buckets=3)) == 3
        assert await backend.list_attempts(job_id) == []
        assert await backend.queue_timings() == {}
        assert len(await backend.attempt_history(buckets=2)) == 2
        assert await backend.list_workers() == []
        assert await backend.list_schedules() == []
        assert [e.action for e in await backend.list_audit()] == ["test"]

        stats = backend.statistics()
        assert set(replica_calls(backend)) == {*REPLICA_READS, "probe"}
        assert stats["replica_state"] == "up"
        assert stats["replica_reads"] == len(REPLICA_READS) + 1
        assert stats["replica_fallbacks"] == {"down": 0, "lagging": 0, "error": 0}
        # calls counts both servers: each read once, where it ran.
        assert stats["calls"]["list_jobs"] == 1


async def test_writes_claims_outcomes_and_waits_never_run_on_the_replica(
    replica_up: Replicated,
) -> None:
    async with replicated(replica_up) as backend:
        before = replica_calls(backend)
        job_id = await backend.enqueue(Q, {"n": 1})
        other = await backend.enqueue(Q, {"n": 2})
        [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
        seq = claimed.job.claim_seq
        await backend.renew([RenewItem(claimed.job.id, seq, 0.5)], visibility_timeout=60)
        assert await backend.ack([Ack(claimed.job.id, seq)]) == [True]
        assert (await backend.wait_for(job_id, timeout=0)).status == "succeeded"
        assert (await backend.wait_for(job_id)).status == "succeeded"
        assert await backend.cancel(other)
        assert await backend.retry(other)
        await backend.table_health()
        await backend.pause_queue(Q)
        await backend.resume_queue(Q)
        assert (await backend.get_job(job_id, fresh=True)).status == "succeeded"
        assert set(await backend.get_jobs([job_id], fresh=True)) == {job_id}
        # Not one statement of these reached the replica.
        assert replica_calls(backend) == before
        assert backend.statistics()["calls"]["claim"] == 1


async def test_a_job_written_on_the_primary_is_read_on_the_replica_once_replayed(
    replica_up: Replicated,
) -> None:
    async with replicated(replica_up) as backend:
        pause_replay(replica_up)
        job_id = await backend.enqueue(Q, {"n": 1})
        await wait_for_receipt(replica_up)
        # Received, not replayed: the replica lists nothing yet (the staleness documented
        # for list_jobs without max_read_lag) ...
        assert await backend.list_jobs(queue=Q) == []
        # ... and get_job (list_attempts too), finding no such job there, asks the primary.
        assert (await backend.get_job(job_id)).id == job_id
        assert set(await backend.get_jobs([job_id])) == {job_id}
        assert await backend.list_attempts(job_id) == []
        resume_replay(replica_up)
        await wait_for_replay(replica_up)
        assert [j.id for j in await backend.list_jobs(queue=Q)] == [job_id]
        assert backend.statistics()["replica_fallbacks"]["down"] == 0


async def test_a_stopped_replica_s_reads_go_to_the_primary_and_come_back(
    replica_up: Replicated, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="trioqueue.postgres")
    async with replicated(replica_up) as backend:
        job_id = await backend.enqueue(Q, {"n": 1})
        replica_up.stop_replica()
        for _ in range(3):  # the primary answers, with what was just written
            assert [j.id for j in await backend.list_jobs(queue=Q)] == [job_id]
        stats = backend.statistics()
        assert stats["replica_state"] == "down"
        assert stats["replica_fallbacks"]["down"] == 3
        outage = [r for r in caplog.records if "cannot be reached" in r.getMessage()]
        assert len(outage) == 1  # once per outage, not once per read

        replica_up.start_replica()
        await wait_for_replay(replica_up)
        monkeypatch.setattr(replica_module, "RETRY_AFTER", 0.0)
        reads = stats["replica_reads"]
        assert [j.id for j in await backend.list_jobs(queue=Q)] == [job_id]
        stats = backend.statistics()
        assert stats["replica_state"] == "up"
        assert stats["replica_reads"] == reads + 1
        assert any("answers again" in r.getMessage() for r in caplog.records)


async def test_reads_arriving_together_after_an_outage_open_one_replica_pool(
    replica_up: Replicated, monkeypatch: pytest.MonkeyPatch
) -> None:
    replica_up.stop_replica()
    schema = f"tq_replica_{secrets.token_hex(4)}"
    async with open_postgres(
        replica_up.primary_dsn,
        schema=schema,
        read_dsn=replica_up.replica_dsn,
        max_read_connections=2,
    ) as backend:
        await backend.migrate()
        assert backend.statistics()["replica_state"] == "down"  # not there at open
        replica_up.start_replica()
        await wait_for_replay(replica_up)
        monkeypatch.setattr(replica_module, "RETRY_AFTER", 0.0)
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(backend.list_jobs)
        assert backend.statistics()["replica_reads"] == 8
        # The replica itself counts this backend's connections: one pool's worth.
        sql = f"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'trioqueue:{schema}'"
        assert await backend._reads.run("probe", _fetchval, sql) <= 2


async def test_a_replica_behind_max_read_lag_is_not_read(replica_up: Replicated) -> None:
    async with replicated(replica_up, max_read_lag=0.0) as backend:
        await backend.enqueue(Q, {"n": 0})
        await wait_for_replay(replica_up)
        assert len(await backend.list_jobs(queue=Q)) == 1  # caught up: the replica answers
        assert backend.statistics()["replica_reads"] == 1
        assert backend.statistics()["replica_lag"] == 0.0

        pause_replay(replica_up)
        await backend.enqueue(Q, {"n": 1})
        await wait_for_receipt(replica_up)
        # Behind by one transaction: the primary answers, with it.
        assert len(await backend.list_jobs(queue=Q)) == 2
        stats = backend.statistics()
        assert stats["replica_state"] == "lagging"
        assert stats["replica_fallbacks"]["lagging"] == 1
        assert stats["replica_lag"] > 0

        resume_replay(replica_up)
        await wait_for_replay(replica_up)
        assert len(await backend.list_jobs(queue=Q)) == 2
        assert backend.statistics()["replica_state"] == "up"
        assert backend.statistics()["replica_reads"] == 2


async def test_the_replica_pool_is_its_own_and_smaller(replica_up: Replicated) -> None:
    async with replicated(replica_up, max_read_connections=2) as backend:
        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(backend.list_jobs)
        stats = backend.statistics()
        assert stats["replica_connections"] == 2
        assert stats["replica_connections_in_use"] == 0
        assert stats["replica_calls"]["list_jobs"] == 6


def ready_count(status: str) -> int:
    """The READY column of ``trioqueue status``'s row for queue Q."""
    header, *rows = status.splitlines()
    row = next(line.split() for line in rows if line.split()[:1] == [Q])
    return int(row[header.split().index("READY")])


def test_the_read_commands_read_the_replica_given_by_option_or_environment(
    replica_up: Replicated, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(*argv: str) -> str:
        schema = ["--dsn", replica_up.primary_dsn, "--schema", "tq_replica_cli"]
        assert main([*schema, *argv]) == 0
        return capsys.readouterr().out

    run("migrate")
    run("enqueue", Q, '{"n": 1}')
    trio.run(wait_for_replay, replica_up)
    pause_replay(replica_up)
    second = int(run("enqueue", Q, '{"n": 2}'))
    trio.run(wait_for_receipt, replica_up)
    # The replica has not replayed the second job: what reads it lists one job.
    read = ("--read-dsn", replica_up.replica_dsn)
    assert len(run("jobs", "--queue", Q).splitlines()) == 3  # a header and two jobs
    assert len(run("jobs", "--queue", Q, *read).splitlines()) == 2
    assert ready_count(run("status")) == 2
    assert ready_count(run("status", *read)) == 1
    monkeypatch.setenv("TRIOQUEUE_READ_DSN", replica_up.replica_dsn)
    assert len(run("jobs", "--queue", Q).splitlines()) == 2
    assert ready_count(run("status")) == 1
    # show finds the job the replica does not know yet, on the primary.
    assert f"job {second} in queue {Q}: ready" in run("show", str(second))


# -- without the pair -----------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # closed again when this returns: nobody listens there


async def test_bad_replica_options_are_refused_together_before_connecting() -> None:
    # The primary's DSN names a port nobody listens on: connecting would raise BackendError.
    nowhere = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    with pytest.raises(ValueError) as caught:
        async with open_postgres(
            nowhere,
            read_dsn="postgresql://u:secret@host:99999/db",
            max_read_connections=0,
            max_read_lag=-1,
        ):
            pass
    message = str(caught.value)
    assert "read_dsn" in message
    assert "port 99999 is out of range" in message
    assert "secret" not in message
    assert "max_read_connections must be at least 1" in message
    assert "max_read_lag must be >= 0" in message

    with pytest.raises(TypeError, match="read_dsn must be a str or None, not int"):
        async with open_postgres(nowhere, read_dsn=5432):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValueError, match="need a read_dsn"):
        async with open_postgres(nowhere, max_read_lag=5):
            pass
    with pytest.raises(ValueError, match="max_read_lag must be >= 0"):
        async with open_postgres(nowhere, read_dsn=nowhere, max_read_lag=float("nan")):
            pass


async def test_a_replica_nobody_answers_for_does_not_stop_the_backend(
    postgres_dsn: str, postgres_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trioqueue.postgres")
    nowhere = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    async with open_postgres(postgres_dsn, schema=postgres_schema, read_dsn=nowhere) as backend:
        await backend.migrate()
        job_id = await backend.enqueue(Q, None)
        assert [j.id for j in await backend.list_jobs()] == [job_id]
        stats = backend.statistics()
        assert stats["replica_state"] == "down"
        assert stats["replica_fallbacks"]["down"] == 1
        assert stats["replica_reads"] == 0
    assert sum("cannot be reached" in r.getMessage() for r in caplog.records) == 1


async def test_without_read_dsn_statistics_have_no_replica_entries(
    backend: PostgresBackend,
) -> None:
    await backend.list_jobs()
    assert not any(key.startswith("replica_") for key in backend.statistics())
