"""Benchmarks of the worker runtime on the memory backend (numbers, never asserts).

    python bench/bench_memory.py                 # everything, default sizes
    python bench/bench_memory.py throughput --jobs 50000
    python bench/bench_memory.py inflight --jobs 10000 --beats 10

throughput: no-op jobs per second through one pool (framework overhead: claim, guard
            registration and first beat, handler task, ack), batch 1 and batch 10.
inflight:   N sleeping jobs in flight: renewal statements per beat (should be 1), CPU per
            beat (guard + the memory backend's renewal), and memory per in-flight job
            (tracemalloc and RSS growth from before the claims to all handlers running).
"""

from __future__ import annotations

import argparse
import gc
import logging
import resource
import time
import tracemalloc

import trio
from _jobs import Countdown, noop

import trioqueue


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


async def throughput(jobs: int, batch_size: int, concurrency: int) -> float:
    finished = Countdown(jobs)
    async with trioqueue.open_memory(connections=concurrency + 4) as backend:
        for start in range(0, jobs, 1000):
            await backend.enqueue_many(
                "bench", [{"n": i} for i in range(start, min(jobs, start + 1000))]
            )
        config = trioqueue.WorkerConfig(
            handler=noop,
            queue="bench",
            concurrency=concurrency,
            batch_size=batch_size,
            on_job_succeeded=finished.on_job,
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            began = time.perf_counter()
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await finished.done.wait()
            elapsed = time.perf_counter() - began
            nursery.cancel_scope.cancel()
    return jobs / elapsed


async def inflight(jobs: int, beats: int, heartbeat: float) -> dict[str, float]:
    running = Countdown(jobs)
    async with trioqueue.open_memory(connections=16) as backend:
        for start in range(0, jobs, 1000):
            await backend.enqueue_many(
                "bench", [{"n": i} for i in range(start, min(jobs, start + 1000))]
            )
        config = trioqueue.WorkerConfig(
            handler=running.sleeper,
            queue="bench",
            concurrency=jobs,
            visibility_timeout=heartbeat * 30,
            heartbeat_interval=heartbeat,
            shutdown_grace=0,
            max_job_duration=3600,
        )
        gc.collect()
        tracemalloc.start()
        traced_before = tracemalloc.get_traced_memory()[0]
        rss_before = _rss_bytes()
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await running.done.wait()
            await trio.sleep(heartbeat * 1.5)  # let every first beat settle into the pool beat
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] - traced_before
            rss = _rss_bytes() - rss_before
            tracemalloc.stop()
            renewals_before = backend.statistics()["calls"]["renew"]
            cpu_before = time.process_time()
            await trio.sleep(heartbeat * beats)
            cpu = time.process_time() - cpu_before
            renewals = backend.statistics()["calls"]["renew"] - renewals_before
            nursery.cancel_scope.cancel()
    return {
        "statements_per_beat": renewals / beats,
        "cpu_ms_per_beat": cpu * 1000 / beats,
        "traced_bytes_per_job": traced / jobs,
        "rss_bytes_per_job": rss / jobs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "which", nargs="?", default="all", choices=["all", "throughput", "inflight"]
    )
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--beats", type=int, default=10)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.which in ("all", "throughput"):
        jobs = args.jobs or 20_000
        for batch_size, concurrency in ((1, 1), (1, 10), (10, 1), (10, 10)):
            rate = trio.run(throughput, jobs, batch_size, concurrency)
            print(
                f"throughput  batch={batch_size:<3} concurrency={concurrency:<3} {rate:>9,.0f} jobs/s"
            )
    if args.which in ("all", "inflight"):
        jobs = args.jobs or 10_000
        result = trio.run(inflight, jobs, args.beats, args.heartbeat)
        print(f"inflight    jobs={jobs}")
        print(f"  renewal statements per beat   {result['statements_per_beat']:.2f}")
        print(f"  CPU per beat (guard+backend)  {result['cpu_ms_per_beat']:.1f} ms")
        print(
            f"  memory per in-flight job      {result['traced_bytes_per_job']:.0f} B traced, "
            f"{result['rss_bytes_per_job']:.0f} B RSS"
        )


if __name__ == "__main__":
    main()
