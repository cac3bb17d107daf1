"""Benchmarks of the worker runtime on the memory backend (numbers, never asserts).

    python bench/bench_memory.py                 # everything, default sizes
    python bench/bench_memory.py throughput --jobs 50000
    python bench/bench_memory.py inflight --jobs 10000 --beats 10 --batch 50

throughput: no-op jobs per second through one pool (framework overhead: claim, guard
            registration and first beat, the handler's scope, ack, hook), at batch 1, 10
            and 50 with 100 job slots each (batch x concurrency = 1 x 100, 10 x 10,
            50 x 2), then the same with one batch at a time (concurrency 1); with the
            process's CPU per job, steadier than the rate on a shared machine, and the
            part of it spent collecting garbage (gc.callbacks). Last, the
            memory backend's own claim + ack of the same jobs with no pool at all: what
            is left of a pool's time per job is the runtime's.
inflight:   N sleeping jobs in flight (batches of --batch): renewal statements per beat
            (should be 1), CPU per beat (guard + the memory backend's renewal), memory per
            in-flight job (tracemalloc and RSS growth from before the claims to all
            handlers running), and the traced bytes per job by what they are and by
            where they were allocated (--top sites).
"""

from __future__ import annotations

import argparse
import gc
import linecache
import logging
import resource
import time
import tracemalloc
from typing import Any

import trio
from _jobs import Countdown, noop

import trioqueue
from trioqueue._types import Ack

#: (batch size, concurrency) of the throughput runs: 100 job slots in each of the first
#: three, so that only the batching differs; then one batch at a time.
THROUGHPUT_RUNS = ((1, 100), (10, 10), (50, 2), (1, 1), (10, 1), (50, 1))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


class GcTimer:
    """Wall time spent in the garbage collector while installed (``gc.callbacks``): part of
    a job's cost in any Python program, and here partly the memory backend's, whose stored
    rows every full collection walks (a worker on PostgreSQL holds none)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)


async def throughput(jobs: int, batch_size: int, concurrency: int) -> tuple[float, float, float]:
    """Jobs per second, CPU seconds per job (steadier than the rate on a busy machine), and
    the seconds per job spent collecting garbage."""
    finished = Countdown(jobs)
    async with trioqueue.open_memory(connections=concurrency + 4) as backend:
        await _enqueue(backend, jobs)
        config = trioqueue.WorkerConfig(
            handler=noop,
            queue="bench",
            concurrency=concurrency,
            batch_size=batch_size,
            on_job_succeeded=finished.on_job,
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            with GcTimer() as collecting:
                began, cpu_began = time.perf_counter(), time.process_time()
                await nursery.start(trioqueue.run_worker_pool, backend, config)
                await finished.done.wait()
                elapsed = time.perf_counter() - began
                cpu = time.process_time() - cpu_began
            nursery.cancel_scope.cancel()
    return jobs / elapsed, cpu / jobs, collecting.seconds / jobs


async def backend_alone(jobs: int, batch_size: int) -> tuple[float, float]:
    """The memory backend's own claim and ack of ``jobs`` jobs, ``batch_size`` at a time."""
    async with trioqueue.open_memory(connections=4) as backend:
        await _enqueue(backend, jobs)
        began, cpu_began = time.perf_counter(), time.process_time()
        while True:
            claimed = await backend.claim(
                "bench", limit=batch_size, worker_id="bench", visibility_timeout=60
            )
            if not claimed:
                break
            await backend.ack([Ack(c.job.id, c.job.claim_seq, None, None) for c in claimed])
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu_began
    return jobs / elapsed, cpu / jobs


async def _enqueue(backend: trioqueue.MemoryBackend, jobs: int) -> None:
    for start in range(0, jobs, 1000):
        await backend.enqueue_many(
            "bench", [{"n": i} for i in range(start, min(jobs, start + 1000))]
        )


#: What traced bytes are, told by where they were allocated ("file:line text"; the first
#: rule with a matching needle names it). Per job at batch 1, per batch things are per job.
_WHAT = (
    (
        "the handler's own coroutines and its wait (the bench's trio.sleep_forever)",
        ("trio/_timeouts.py", "_core/_traps.py", "WaitTaskRescheduled", "bench/_jobs.py",
         "await self._config.handler("),
    ),
    (
        "task: trio's Task and its context, the attempt's coroutine, the frame object "
        "trio makes of it",
        ("trio/_util.py", "_run.py:1979 ", "_run.py:1959 ", "_run.Task>", "self.tasks.add",
         "nursery._children.add", "_child_nurseries"),
    ),
    (
        "cancel scope (the job's; in a batch of one the batch's): the scope, its "
        "CancelStatus and two sets, trio's deadline heap, the with's __exit__",
        ("CancelStatus", "CancelScope(", "job_scopes=", "with scope:", "_run.py:268 ",
         "_run.py:298 ", "_parent._children.add", "_cancel_status._tasks.add"),
    ),
    ("JobContext", ("JobContext(",)),
    (
        "the guard's records: JobLease; per batch BatchLease, its dict, due entry, "
        "deadlines, BatchHandle",
        ("_core/guard_rules.py", "_core/fence.py", "_runtime/guard.py"),
    ),
    ("the payload (decoded JSON) and the Job", ("json/", "Job(")),
    ("the memory backend (its waiting-heap entry, Claimed)", ("_backends/",)),
)  # fmt: skip


def _what(frame: tracemalloc.Frame) -> str:
    site = f"{frame.filename}:{frame.lineno} " + linecache.getline(frame.filename, frame.lineno)
    site = site.replace("\\", "/")
    for what, needles in _WHAT:
        if any(needle in site for needle in needles):
            return what
    return "other (per batch: its task, nursery, inbox; the claim's lists)"


async def inflight(
    jobs: int, beats: int, heartbeat: float, batch_size: int, top: int
) -> dict[str, Any]:
    running = Countdown(jobs)
    async with trioqueue.open_memory(connections=16) as backend:
        await _enqueue(backend, jobs)
        config = trioqueue.WorkerConfig(
            handler=running.sleeper,
            queue="bench",
            concurrency=-(-jobs // batch_size),
            batch_size=batch_size,
            visibility_timeout=heartbeat * 30,
            heartbeat_interval=heartbeat,
            shutdown_grace=0,
            max_job_duration=3600,
        )
        gc.collect()
        tracemalloc.start()
        snapshot_before = tracemalloc.take_snapshot()
        traced_before = tracemalloc.get_traced_memory()[0]
        rss_before = _rss_bytes()
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await running.done.wait()
            await trio.sleep(heartbeat * 1.5)  # let every first beat settle into the pool beat
            await _between_renewals(backend, heartbeat)
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] - traced_before
            rss = _rss_bytes() - rss_before
            snapshot = tracemalloc.take_snapshot()
            tracemalloc.stop()
            renewals_before = backend.statistics()["calls"]["renew"]
            cpu_before = time.process_time()
            await trio.sleep(heartbeat * beats)
            cpu = time.process_time() - cpu_before
            renewals = backend.statistics()["calls"]["renew"] - renewals_before
            nursery.cancel_scope.cancel()
    ignore = tracemalloc.Filter(False, tracemalloc.__file__)
    diffs = snapshot.filter_traces([ignore]).compare_to(
        snapshot_before.filter_traces([ignore]), "lineno"
    )
    by_line = [
        (d.size_diff / jobs, d.count_diff / jobs, d.traceback[0]) for d in diffs if d.size_diff
    ]
    by_what: dict[str, float] = {}
    for size, _, frame in by_line:
        by_what[_what(frame)] = by_what.get(_what(frame), 0) + size
    return {
        "statements_per_beat": renewals / beats,
        "cpu_ms_per_beat": cpu * 1000 / beats,
        "traced_bytes_per_job": traced / jobs,
        "rss_bytes_per_job": rss / jobs,
        "by_what": sorted(by_what.items(), key=lambda kv: -kv[1]),
        "by_line": sorted(by_line, key=lambda row: -row[0])[:top],
    }


async def _between_renewals(backend: trioqueue.MemoryBackend, heartbeat: float) -> None:
    """Wait until a renewal has just been answered, then half a heartbeat more: the
    pool's quiet point, with no renewal's items or answer held (they live for a moment
    every beat, and counting them depended on when the snapshot happened to fall)."""
    answered = trio.Event()
    renew = backend.renew

    async def renew_and_tell(*args: Any, **kwargs: Any) -> Any:
        try:
            return await renew(*args, **kwargs)
        finally:
            answered.set()

    backend.renew = renew_and_tell  # type: ignore[method-assign]
    try:
        await answered.wait()
    finally:
        del backend.renew  # the class's own again
    await trio.sleep(heartbeat / 2)


def _site(frame: tracemalloc.Frame) -> str:
    """``package/file.py:line`` and the line's text."""
    parts = frame.filename.replace("\\", "/").split("/")
    text = linecache.getline(frame.filename, frame.lineno).strip()
    return f"{'/'.join(parts[-2:])}:{frame.lineno}  {text[:60]}"


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
    parser.add_argument("--batch", type=int, default=1, help="inflight: jobs per batch")
    parser.add_argument("--top", type=int, default=25, help="inflight: allocation sites shown")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.which in ("all", "throughput"):
        jobs = args.jobs or 20_000
        for batch_size, concurrency in THROUGHPUT_RUNS:
            rate, cpu, collecting = trio.run(throughput, jobs, batch_size, concurrency)
            print(
                f"throughput  batch={batch_size:<3} concurrency={concurrency:<3} "
                f"{rate:>9,.0f} jobs/s  {cpu * 1e6:6.1f} us CPU/job "
                f"(garbage collection {collecting * 1e6:4.1f} us)"
            )
        for batch_size in (1, 10, 50):
            rate, cpu = trio.run(backend_alone, jobs, batch_size)
            print(
                f"backend     batch={batch_size:<3} claim+ack alone  {rate:>9,.0f} jobs/s  "
                f"{cpu * 1e6:6.1f} us CPU/job"
            )
    if args.which in ("all", "inflight"):
        jobs = args.jobs or 10_000
        result = trio.run(inflight, jobs, args.beats, args.heartbeat, args.batch, args.top)
        print(f"inflight    jobs={jobs} batch={args.batch}")
        print(f"  renewal statements per beat   {result['statements_per_beat']:.2f}")
        print(f"  CPU per beat (guard+backend)  {result['cpu_ms_per_beat']:.1f} ms")
        print(
            f"  memory per in-flight job      {result['traced_bytes_per_job']:.0f} B traced, "
            f"{result['rss_bytes_per_job']:.0f} B RSS"
        )
        print("  traced bytes per job, by what they are:")
        for what, size in result["by_what"]:
            print(f"    {size:7.0f} B  {what}")
        print("  traced bytes per job, by allocation site (blocks per job):")
        for size, count, frame in result["by_line"]:
            print(f"    {size:7.0f} B  {count:5.2f}  {_site(frame)}")


if __name__ == "__main__":
    main()
