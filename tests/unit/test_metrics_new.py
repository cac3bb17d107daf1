"""The worker metrics fed by a pool's observer (docs/metrics.rst): each job's wait before
its claim, the build's version, the process collector, and each pool's jobs in flight.
Whole pools on the memory backend, driven by trio's MockClock."""

from __future__ import annotations

import functools
import sys
from typing import Any

import pytest
import trio
from prometheus_client import generate_latest

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import JobContext
from trioqueue._runtime.observer import ShieldedObserver
from trioqueue.metrics import WAIT_BUCKETS, PrometheusObserver


def value(observer: PrometheusObserver, name: str, **labels: str) -> float | None:
    return observer.registry.get_sample_value(name, labels)


async def test_each_claim_observes_the_jobs_wait_by_the_databases_clock(
    autojump_clock: object,
) -> None:
    observer = PrometheusObserver()
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        start = trio.current_time()
        first = await backend.enqueue("q", {})
        second = await backend.enqueue("q", {}, delay=2)  # claimable from 2
        await trio.sleep_until(start + 7)
        cfg = config(rec)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("succeeded", first)
        await rec.wait_for("succeeded", second)
        nursery.cancel_scope.cancel()
    assert value(observer, "trioqueue_job_wait_seconds_count", queue="q") == 2
    assert value(observer, "trioqueue_job_wait_seconds_sum", queue="q") == pytest.approx(
        7 + 5, abs=0.01
    )
    assert value(observer, "trioqueue_job_wait_seconds_bucket", queue="q", le="5.0") == 1
    assert value(observer, "trioqueue_job_wait_seconds_bucket", queue="q", le="10.0") == 2
    assert WAIT_BUCKETS[-1] == float("inf") and list(WAIT_BUCKETS) == sorted(WAIT_BUCKETS)


def test_a_claim_whose_wait_is_unknown_observes_nothing() -> None:
    observer = PrometheusObserver()
    observer.job_claimed("q", None)
    assert value(observer, "trioqueue_job_wait_seconds_count", queue="q") is None


def test_the_build_info_names_the_version() -> None:
    observer = PrometheusObserver()
    assert value(observer, "trioqueue_build_info", version=trioqueue.__version__) == 1


@pytest.mark.skipif(sys.platform != "linux", reason="prometheus-client reads /proc")
def test_the_process_collector_is_on_the_registry_unless_left_out() -> None:
    with_it, without = PrometheusObserver(), PrometheusObserver(process=False)
    cpu = value(with_it, "process_cpu_seconds_total")
    assert cpu is not None and cpu > 0
    assert (value(with_it, "process_resident_memory_bytes") or 0) > 0
    assert b"process_" not in generate_latest(without.registry)


async def test_each_pool_has_its_in_flight_gauge_read_at_scrape_until_it_stops(
    autojump_clock: object,
) -> None:
    """Two pools of one observer, each its own series; the number is the pool's own
    count, read when scraped, and the series goes when the pool stops."""
    observer = PrometheusObserver()
    release = trio.Event()
    started = Recorder()

    async def handler(payload: Any, ctx: JobContext) -> None:
        started.add("started", ctx.job_id)
        await release.wait()

    def series() -> dict[tuple[str, str], float]:
        family = next(f for f in observer.registry.collect() if f.name == "trioqueue_in_flight")
        return {(s.labels["queue"], s.labels["worker_id"]): s.value for s in family.samples}

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        for _ in range(3):
            await backend.enqueue("a", None)
        await backend.enqueue("b", None)
        for queue in ("a", "b"):
            cfg = config(Recorder(), queue=queue, handler=handler, concurrency=5)
            await nursery.start(
                functools.partial(trioqueue.run_worker_pool, backend, cfg, observer=observer)
            )
        await started.wait_for("started", count=4)
        pools = {p.queue: p.worker_id for p in await backend.list_workers()}
        assert series() == {("a", pools["a"]): 3, ("b", pools["b"]): 1}
        release.set()
        await trio.sleep(1)
        assert series() == {("a", pools["a"]): 0, ("b", pools["b"]): 0}
        nursery.cancel_scope.cancel()
    assert series() == {}


def test_the_shielded_observer_passes_the_new_events_on_and_swallows_their_errors() -> None:
    seen: list[tuple[Any, ...]] = []

    class Recording(trioqueue.PoolObserver):
        def pool_started(self, queue: str, worker_id: str, in_flight: Any) -> None:
            seen.append(("started", queue, worker_id, in_flight()))

        def pool_stopped(self, queue: str, worker_id: str) -> None:
            seen.append(("stopped", queue, worker_id))

        def job_claimed(self, queue: str, waited: float | None) -> None:
            raise RuntimeError("a broken observer")

    shielded = ShieldedObserver(Recording())
    shielded.pool_started("q", "w", lambda: 4)
    shielded.job_claimed("q", 1.0)
    shielded.job_claimed("q", 2.0)
    shielded.pool_stopped("q", "w")
    assert seen == [("started", "q", "w", 4), ("stopped", "q", "w")]
    assert shielded.failures == {"job_claimed": 2}
