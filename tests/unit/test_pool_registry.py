"""Worker pools register themselves, beat with their guard and unregister on shutdown
(docs/api.rst, "Worker pools"): whole pools on the memory backend, on trio's MockClock."""

from __future__ import annotations

import os
import socket

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._runtime.pool import POOL_ROW_TIMEOUT
from trioqueue.testing import error, hang

pytestmark = pytest.mark.trio


async def workers(backend: trioqueue.MemoryBackend) -> list[trioqueue.WorkerInfo]:
    return await backend.list_workers()


async def test_a_running_pool_is_listed_with_its_jobs_in_flight(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        cfg = config(rec, concurrency=3, heartbeat_interval=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        [idle] = await workers(backend)
        assert (idle.host, idle.pid, idle.queue, idle.concurrency) == (
            socket.gethostname(),
            os.getpid(),
            "q",
            3,
        )
        assert idle.worker_id.startswith(f"{socket.gethostname()}:{os.getpid()}:")
        assert (idle.in_flight, idle.abandoned_renewals, idle.stale) == (0, 0, False)

        await trio.sleep(0.5)
        await backend.enqueue_many("q", [{"sleep": 10}, {"sleep": 10}])
        await rec.wait_for("started", count=2)
        await trio.sleep(0.001)  # the first beat rides on the batches' first renewal
        [busy] = await workers(backend)
        assert busy.in_flight == 2
        assert busy.last_beat_at > idle.last_beat_at
        assert busy.started_at == idle.started_at

        await rec.wait_for("succeeded", count=2)
        await trio.sleep(2.5)  # one heartbeat later, a beat went alone
        [done] = await workers(backend)
        assert done.in_flight == 0
        assert done.stale is False
        job = (await backend.list_jobs(status="succeeded"))[0]
        assert job.last_renewed_at is not None
        nursery.cancel_scope.cancel()


async def test_an_idle_pool_beats_every_heartbeat_interval(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, heartbeat_interval=2))
        [registered] = await workers(backend)
        await trio.sleep(20.5)
        [later] = await workers(backend)
        calls = backend.statistics().calls
        nursery.cancel_scope.cancel()
    assert (later.last_beat_at - registered.last_beat_at).total_seconds() == pytest.approx(20)
    assert calls["beat"] == 10  # one lone statement per interval
    assert calls["renew"] == 0  # no job: no renewal


async def test_a_pool_whose_beats_stop_turns_stale_after_three_intervals(
    autojump_clock: object,
) -> None:
    """As if its process froze: every beat from t=0 on wedges (the database never answers
    it), so the last beat is the registration at t=0."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("beat", hang())
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, heartbeat_interval=2))
        await trio.sleep(5.9)
        assert [w.stale for w in await workers(backend)] == [False]
        await trio.sleep(0.2)  # past 3 x 2 s without a beat
        assert [w.stale for w in await workers(backend)] == [True]
        backend.inject("beat", None)  # the database answers again
        await trio.sleep(2.1)
        assert [w.stale for w in await workers(backend)] == [False]
        nursery.cancel_scope.cancel()


async def test_a_pool_with_jobs_whose_renewals_fail_turns_stale(autojump_clock: object) -> None:
    """The beat rides in the renewal: when the renewals fail, so do the beats."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(
            trioqueue.run_worker_pool,
            backend,
            config(rec, heartbeat_interval=1, visibility_timeout=100),
        )
        await backend.enqueue("q", {"sleep": 50})
        await rec.wait_for("started")
        await trio.sleep(0.5)
        backend.inject("renew", error())
        await trio.sleep(3.6)  # the last beat was at t=0 (+ the claim); 3 x 1 s have passed
        [worker] = await workers(backend)
        assert worker.stale is True
        assert worker.in_flight == 1
        nursery.cancel_scope.cancel()


async def test_graceful_shutdown_removes_the_pool(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec, queue="other"))
            assert [w.queue for w in await workers(backend)] == ["other", "q"]
            nursery.cancel_scope.cancel()
        assert await workers(backend) == []
        assert backend.statistics().calls["unregister_pool"] == 2


async def test_shutdown_never_waits_long_for_a_database_that_is_gone(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
            backend.inject("unregister_pool", hang())
            nursery.cancel_scope.cancel()
            cancelled_at = trio.current_time()
        assert trio.current_time() - cancelled_at == pytest.approx(POOL_ROW_TIMEOUT)
        [left] = await workers(backend)  # its row stays, and turns stale
        assert left.queue == "q"


async def test_a_pool_runs_even_when_registering_fails(autojump_clock: object) -> None:
    """A failed registration is only logged; the first beat that gets through adds the pool."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("register_pool", error())
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, heartbeat_interval=2))
        assert await workers(backend) == []
        [job_id] = await backend.enqueue_many("q", [{"sleep": 1}])
        await rec.wait_for("succeeded", job_id)
        [worker] = await workers(backend)  # added by the beat on the job's renewal
        assert worker.queue == "q"
        nursery.cancel_scope.cancel()


async def test_beats_report_abandoned_renewals(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", hang(interruptible=False, times=1))  # the first renewal wedges
        await backend.enqueue("q", {"sleep": 30})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        await rec.wait_for("started")
        await trio.sleep(15)  # abandoned, then renewed on another connection
        [worker] = await workers(backend)
        assert (worker.abandoned_renewals, worker.in_flight, worker.stale) == (1, 1, False)
        backend.inject("renew", None)  # release the wedged call so the pool can exit
        nursery.cancel_scope.cancel()


async def test_each_pool_of_run_workers_registers_on_its_own(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        async with trio.open_nursery() as nursery:
            configs = [config(rec, queue="b"), config(rec, queue="a", concurrency=2)]
            await nursery.start(trioqueue.run_workers, backend, configs)
            listed = await workers(backend)
            assert [(w.queue, w.concurrency) for w in listed] == [("a", 2), ("b", 1)]
            assert len({w.worker_id for w in listed}) == 2
            nursery.cancel_scope.cancel()
        assert await workers(backend) == []


async def test_a_wedged_lone_beat_and_a_wedged_renewal_hold_two_connections(
    autojump_clock: object,
) -> None:
    """docs/protocol.rst §6 (I5): a lone beat that ignores its timeout counts as the one
    abandoned statement. The renewal that wedges after it is never abandoned, so a batch
    that comes later finds the slot held and is fenced, rather than renewed on a third
    connection."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, concurrency=2))
        backend.inject("beat", hang(interruptible=False))
        await trio.sleep(2.5)  # an idle heartbeat later, the lone beat goes and wedges
        backend.inject("renew", hang(interruptible=False))
        first = await backend.enqueue("q", {"sleep": 60})
        await rec.wait_for("started", first)  # its first renewal wedges
        await trio.sleep(5)
        second = await backend.enqueue("q", {"sleep": 60})
        with trio.fail_after(30):
            await rec.wait_for("unavailable", second)  # V = 10 s without a renewal: fenced
        stats = backend.statistics()
        assert (stats.calls["beat"], stats.calls["renew"]) == (1, 1)
        assert stats.connections_in_use == 2
        backend.inject("beat", None)  # release the wedged calls so the pool can exit
        backend.inject("renew", None)
        nursery.cancel_scope.cancel()


async def test_in_flight_follows_the_jobs_within_a_second_or_two(autojump_clock: object) -> None:
    """At the default heartbeat (30 s) the registry kept ``in flight 1`` for about 25 s
    after the pool's only job finished (issue 22, item 20): the pool beats once its count
    moved, at most one beat a second, however long its heartbeat interval."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        cfg = config(
            rec, concurrency=2, visibility_timeout=90, heartbeat_interval=30, poll_interval=5
        )
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        short, long = await backend.enqueue_many("q", [{"sleep": 3}, {"sleep": 100}])
        await rec.wait_for("started", count=2)
        await trio.sleep(2)
        assert [w.in_flight for w in await workers(backend)] == [2]
        await rec.wait_for("succeeded", short)
        await trio.sleep(2)
        assert [w.in_flight for w in await workers(backend)] == [1]
        beats = backend.statistics().calls["beat"]
        await trio.sleep(20)  # the count stays 1: no beat goes alone for it
        assert backend.statistics().calls["beat"] == beats
        await rec.wait_for("succeeded", long)
        await trio.sleep(2)
        assert [w.in_flight for w in await workers(backend)] == [0]
        nursery.cancel_scope.cancel()
